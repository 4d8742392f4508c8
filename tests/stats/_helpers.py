"""Runs made from columns of values, and the reference figures the statistics are checked against."""

from __future__ import annotations

import math
from pathlib import Path
from unittest.mock import patch

import numpy as np
from scipy import stats as sps
from statsmodels.stats.multitest import multipletests
from statsmodels.stats.power import TTestPower

from turneval import MetricResult, SampleResult
from turneval.results import EvaluationResult, Trial

DRAWS = 10_000


def run(columns: dict[str, list[float]], ids: list[str] | None = None) -> EvaluationResult:
    names = list(columns)
    rows = []
    for index in range(len(columns[names[0]])):
        row = SampleResult(index, None, stored_id=None if ids is None else ids[index])
        for name in names:
            row.results[name] = MetricResult(name, columns[name][index], "r")
        rows.append(row)
    return EvaluationResult(rows, names)


def trials_run(grid: dict[str, list[bool]]) -> EvaluationResult:
    """A simulated run read back from a file: per scenario, each trial's success (m = 1 or 0)."""
    rows: list[SampleResult] = []
    for scenario, outcomes in grid.items():
        for trial, ok in enumerate(outcomes):
            row = SampleResult(
                len(rows),
                None,
                trial=Trial(scenario, trial, "user_done"),
            )
            row.results["m"] = MetricResult("m", float(ok), "r")
            rows.append(row)
    return EvaluationResult(rows, ["m"])


def t_test_rejections(diffs: np.ndarray, alpha: float) -> float:
    """Share of rows of ``diffs`` (draws x pairs) whose two-sided paired t-test rejects."""
    n = diffs.shape[1]
    t = diffs.mean(axis=1) / (diffs.std(axis=1, ddof=1) / math.sqrt(n))
    return float(np.mean(2 * sps.t.sf(np.abs(t), n - 1) < alpha))


def write_runs(tmp_path: Path, base: list[float], cand: list[float]) -> tuple[str, str]:
    paths = (tmp_path / "base.jsonl", tmp_path / "cand.jsonl")
    run({"m": base}).to_jsonl(paths[0])
    run({"m": cand}).to_jsonl(paths[1])
    return str(paths[0]), str(paths[1])


# -- the solvers at every row count (issue 43, item 8) -----------------------------------------
#
# statsmodels' solve_power answers a float for most row counts, a one-element array for others
# (73, 87, 92, 109, 117, 120, ... rows at alpha 0.05 and power 0.8), NaN with a
# ConvergenceWarning for large effects, a negative root (73 rows), a wrong root (a bracket's
# end) or a ValueError at the edges; and its power() is NaN where SciPy's noncentral t CDF fails deep in the lower tail.
# The reference below is the paired t-test's power written from its definition with SciPy:
# P(T' > t) + P(T' < -t), T' noncentral t with n - 1 degrees of freedom and noncentrality
# d * sqrt(n), t the two-sided critical value; P(T' < -t) = P(-T' > t) is the upper tail of
# the noncentral t with -d * sqrt(n).


def reference_power(effect: float, n: float, alpha: float) -> float:
    critical = sps.t.isf(alpha / 2, n - 1)
    nc = effect * math.sqrt(n)
    return float(sps.nct.sf(critical, n - 1, nc) + sps.nct.sf(critical, n - 1, -nc))


def statsmodels_answer(**arguments: float | None) -> float | None:
    """solve_power's answer as a float where it gives one (a scalar or a one-element array)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            answer = np.asarray(TTestPower().solve_power(alternative="two-sided", **arguments))
        except ValueError:
            return None
    return float(answer.reshape(-1)[0]) if answer.size == 1 and np.isfinite(answer).all() else None


def statsmodels_holm(p: list[float]) -> list[float]:
    """statsmodels' ``multipletests(p, method="holm")`` p-values.

    Its Holm branch calls ``gc.collect()`` (about 40 ms in a test process): skipped here.
    """
    with patch("gc.collect", return_value=0):
        return [float(value) for value in multipletests(p, method="holm")[1]]

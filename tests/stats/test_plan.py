"""Planning a run's size from its own values, with or without a baseline, and `turneval plan`."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps
from statsmodels.stats.power import TTestPower

from turneval import ConfigError, MetricResult, SampleResult
from turneval.cli import main
from turneval.results import EvaluationResult, Trial
from turneval.stats import plan

from ._helpers import (
    reference_power,
    run,
    trials_run,
    write_runs,
)


def test_plan_without_baseline_uses_the_runs_spread_times_sqrt2() -> None:
    values = [1.0, 0.0, 1.0, 1.0, 0.5, 0.0, 1.0, 1.0, 0.25, 1.0]
    result = plan(run({"m": values}), mde=0.1, alpha=0.05, power=0.8).metrics["m"]
    sd = float(np.std(values, ddof=1)) * math.sqrt(2)
    effect = 0.1 / sd
    reference = TTestPower()
    assert result.sd == pytest.approx(sd)
    assert result.samples_needed == math.ceil(
        reference.solve_power(effect_size=effect, alpha=0.05, power=0.8)
    )
    assert result.achieved_power == pytest.approx(
        reference.power(effect_size=effect, nobs=10, alpha=0.05)
    )
    assert result.min_detectable_drop == pytest.approx(
        sd * reference.solve_power(nobs=10, alpha=0.05, power=0.8)
    )
    assert result.correlation is None and result.trials is None


def test_a_baseline_uses_the_paired_rows_correlation() -> None:
    rng = np.random.default_rng(1)
    base = rng.uniform(0, 1, 60)
    cand = np.clip(base + rng.normal(0, 0.1, 60), 0, 1)  # strongly correlated rows
    alone = plan(run({"m": list(cand)}), mde=0.05).metrics["m"]
    paired = plan(run({"m": list(cand)}), mde=0.05, baseline=run({"m": list(base)})).metrics["m"]
    assert paired.correlation == pytest.approx(sps.pearsonr(base, cand).statistic)
    assert paired.sd == pytest.approx(float(np.std(cand - base, ddof=1)))
    assert paired.samples_needed is not None and alone.samples_needed is not None
    assert paired.samples_needed < alone.samples_needed / 5  # correlation buys rows


def test_plan_of_a_trials_grid_counts_scenarios_times_trials() -> None:
    grid = {
        "a": [True, True, True],
        "b": [True, False, True],
        "c": [False, False, False],
        "d": [True, True, True],
    }
    trials = plan(trials_run(grid), mde=0.2).metrics["m"].trials
    assert trials is not None
    indicators = [1.0, 0.0, 0.0, 1.0]  # pass^3 of each scenario: all three trials passed
    sd = float(np.std(indicators, ddof=1)) * math.sqrt(2)
    needed = math.ceil(TTestPower().solve_power(effect_size=0.2 / sd, alpha=0.05, power=0.8))
    assert (trials.k, trials.scenarios, trials.pass_hat_k) == (3, 4, 0.5)
    assert trials.scenarios_needed == needed and trials.conversations_needed == 3 * needed
    # with a baseline, scenarios pair by id: the spread of the per-scenario differences
    before = {"a": [True] * 3, "b": [True] * 3, "c": [True, True, False], "d": [True] * 3}
    paired = plan(trials_run(grid), mde=0.2, baseline=trials_run(before)).metrics["m"].trials
    assert paired is not None
    assert paired.sd == pytest.approx(float(np.std([0.0, -1.0, 0.0, 0.0], ddof=1)))


def test_plan_refuses_bad_levels_and_unknown_metrics() -> None:
    result = run({"m": [1.0, 0.0]})
    with pytest.raises(ConfigError, match="mde"):
        plan(result, mde=0)
    with pytest.raises(ConfigError, match="power"):
        plan(result, mde=0.1, power=1.5)
    with pytest.raises(ConfigError, match=r"no metric named 'x' in the run; its metrics: \['m'\]"):
        plan(result, mde=0.1, metric="x")


def test_plan_command_prints_the_rows_needed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    path = tmp_path / "r.jsonl"
    run({"m": values}).to_jsonl(path)
    assert main(["plan", str(path), "--mde", "0.1"]) == 0
    sd = float(np.std(values, ddof=1)) * math.sqrt(2)
    needed = math.ceil(TTestPower().solve_power(effect_size=0.1 / sd, alpha=0.05, power=0.8))
    assert f"| m | 6 | 0.6667 | {sd:.4f} | n/a | {needed} |" in capsys.readouterr().out
    assert main(["plan", str(tmp_path / "nope.jsonl"), "--mde", "0.1"]) == 2
    assert main(["plan", str(path), "--mde", "0.1", "--metric", "x"]) == 2


def test_a_drop_wider_than_the_scale_is_not_detectable() -> None:
    def run(name: str, values: list[float], trials: int = 1) -> EvaluationResult:
        rows = []
        for index, value in enumerate(values):
            row = SampleResult(index, None)
            if trials > 1:
                row.trial = Trial(str(index // trials), index % trials)
            row.results[name] = MetricResult(name, value)
            rows.append(row)
        return EvaluationResult(rows, [name])

    # 3 rows of a [0, 1] metric: the drop the test would find (sd 0.816 x effect) is over 1
    small = plan(run("m", [0.0, 1.0, 0.0]), mde=0.1)
    drop = small.metrics["m"].min_detectable_drop
    sd = np.std([0.0, 1.0, 0.0], ddof=1) * math.sqrt(2)
    effect = TTestPower().solve_power(nobs=3, alpha=0.05, power=0.8, alternative="two-sided")
    assert drop is not None and drop == pytest.approx(effect * sd) and drop > 1
    assert f"| not detectable with these rows ({drop:.4f} > the scale's 1) |" in str(small)
    # the same spread on a 1-5 rubric (span 4) is a drop it can show
    rubric = plan(run("fluency", [1.0, 2.0, 1.0]), mde=0.1)
    assert f"| {rubric.metrics['fluency'].min_detectable_drop:.4f} |" in str(rubric)
    # pass^4 over 3 scenarios (one fails a trial): a probability, at most 1
    trials = plan(run("m", [1.0] * 4 + [0.0] + [1.0] * 7, trials=4), mde=0.1)
    pass_k = trials.metrics["m"].trials
    assert pass_k is not None and pass_k.min_detectable_drop is not None
    assert pass_k.min_detectable_drop > 1
    assert (
        f"min. detectable drop not detectable with these scenarios "
        f"({pass_k.min_detectable_drop:.4f} > the scale's 1)" in str(trials)
    )


def test_plan_of_120_rows_gives_every_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """120 rows: statsmodels answers the smallest drop as a one-element array (a TypeError)."""
    rng = np.random.default_rng(120)
    values = list(rng.uniform(0, 1, 120))
    raw = np.asarray(TTestPower().solve_power(nobs=120, alpha=0.05, power=0.8))
    assert raw.shape == (1,)  # the shape that broke float(); if statsmodels changes, still fine
    result = plan(run({"m": values}), mde=0.05).metrics["m"]
    sd = float(np.std(values, ddof=1)) * math.sqrt(2)
    assert result.min_detectable_drop == pytest.approx(float(raw[0]) * sd, rel=1e-6)
    assert result.achieved_power == pytest.approx(reference_power(0.05 / sd, 120, 0.05))
    path = tmp_path / "r.jsonl"
    run({"m": values}).to_jsonl(path)
    capsys.readouterr()
    assert main(["plan", str(path), "--mde", "0.05"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and f"| {float(raw[0]) * sd:.4f} |" in out


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(2, 10_000),
    low=st.sampled_from([0.0, 1.0]),
    spread=st.floats(0.0, 1.0),
    paired=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_plan_answers_for_any_run_size_and_spread(
    n: int, low: float, spread: float, paired: bool, seed: int
) -> None:
    """A [0, 1] metric or a 1-5 rubric, any spread, 2 to 10,000 rows: a plan, never a crash."""
    width = 1.0 if low == 0 else 4.0
    rng = np.random.default_rng(seed)
    values = low + width * np.clip(0.5 + spread * rng.normal(0, 0.5, n), 0, 1)
    base = low + width * np.clip(0.5 + spread * rng.normal(0, 0.5, n), 0, 1)
    result = plan(
        run({"m": list(values)}),
        mde=0.05 * width,
        baseline=run({"m": list(base)}) if paired else None,
    ).metrics["m"]
    assert result.rows == n
    if result.sd > 0:
        assert result.samples_needed is not None and result.samples_needed >= 2
        assert result.achieved_power is not None and 0 < result.achieved_power <= 1
        drop = result.min_detectable_drop
        assert drop is not None and math.isfinite(drop) and drop > 0
    else:
        assert result.samples_needed is result.achieved_power is result.min_detectable_drop is None


def test_impossible_plans_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "r.jsonl"
    run({"m": [1.0, 0.0, 1.0, 1.0, 0.0, 1.0]}).to_jsonl(path)
    base, cand = write_runs(tmp_path, [1.0, 0.0, 1.0, 0.5], [1.0, 0.0, 0.5, 0.5])
    capsys.readouterr()
    for command, message in (
        # a power at or under alpha: the test has it with no drop at all
        (["plan", str(path), "--mde", "0.1", "--power", "0.01"], "power 0.01 must be above"),
        (["compare", base, cand, "--power", "0.05"], "power 0.05 must be above alpha 0.05"),
        # a drop no run could be large enough to find
        (["plan", str(path), "--mde", "1e-9"], "m: a drop of 1e-09 against a spread of"),
    ):
        assert main(command) == 2, command
        err = capsys.readouterr().err
        assert err.startswith("turneval: error: ") and err.count("\n") == 1, err
        assert message in err and "Traceback" not in err and "Error:" not in err, err

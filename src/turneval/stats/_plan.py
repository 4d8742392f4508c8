"""Planning a run's size: the rows (or scenarios x trials) that find a drop, from a run's values.

:func:`plan` answers "how many rows must a run have to catch a drop of ``mde``?" from a run's
own per-row values, or from its paired differences with a baseline; :func:`plan_files` reads
the runs from disk (``turneval plan``).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from os import PathLike
from typing import TYPE_CHECKING

import numpy as np

from turneval.compare import match_rows, metric_directions
from turneval.errors import ConfigError
from turneval.results import EvaluationResult

from ._power import (
    achieved_power,
    check_levels,
    detectable_drop,
    fmt,
    rise_notes,
    samples_needed,
    sd_of,
)

if TYPE_CHECKING:
    from turneval.store import RunStore

__all__ = ["MetricPlan", "Plan", "TrialPlan", "plan", "plan_files", "read_run"]


@dataclass(frozen=True, slots=True)
class TrialPlan:
    """The pass^k plan of a run whose scenarios were tried several times.

    Attributes:
        k: Trials per scenario (pass^k is the chance that all k succeed).
        scenarios: Scenarios with at least k known outcomes (or, stopped early under
            pass^k, a known failure).
        pass_hat_k: pass^k over those scenarios.
        sd: Standard deviation of the paired per-scenario pass^k differences (as for rows).
        scenarios_needed: Scenarios that find a drop of ``mde`` in pass^k (None: no spread).
        conversations_needed: ``scenarios_needed * k``: the conversations to simulate.
        achieved_power: The power of a comparison over ``scenarios``.
        min_detectable_drop: The smallest drop in pass^k ``scenarios`` find with the power.
    """

    k: int
    scenarios: int
    pass_hat_k: float
    sd: float
    scenarios_needed: int | None
    conversations_needed: int | None
    achieved_power: float | None
    min_detectable_drop: float | None


@dataclass(frozen=True, slots=True)
class MetricPlan:
    """The plan of one metric.

    Attributes:
        name: The metric.
        rows: Rows scored (with a baseline: rows both runs scored, paired).
        mean: The metric's mean over those rows.
        sd: Standard deviation of the paired differences: measured against the baseline, or
            the run's own spread times sqrt(2) without one (uncorrelated runs).
        correlation: Pearson correlation of the paired rows (None without a baseline).
        samples_needed: Rows that find a drop of ``mde`` with the power (None: no spread).
        achieved_power: The power a comparison over ``rows`` rows has against ``mde``.
        min_detectable_drop: The smallest drop ``rows`` rows find with the power.
        trials: The pass^k plan when the run holds trials of scenarios, else None.
        span: The width of the metric's scale (4 for a 1-5 rubric, 1 for a value in [0, 1]),
            None when unknown: a minimum detectable drop wider than it is printed as not
            detectable with these rows.
        higher_is_better: The metric's direction; where lower is better (latency, cost) the
            figures are for a rise of ``mde`` (the test is two-sided: the same figures).
    """

    name: str
    rows: int
    mean: float | None
    sd: float
    correlation: float | None
    samples_needed: int | None
    achieved_power: float | None
    min_detectable_drop: float | None
    trials: TrialPlan | None = None
    span: float | None = None
    higher_is_better: bool = True


@dataclass(frozen=True, slots=True)
class Plan:
    """What :func:`plan` found: per metric, the rows needed and the power the run has.

    Attributes:
        mde: The drop to detect (minimum detectable effect), on the metric's scale.
        alpha: The test's level (two-sided).
        power: The power wanted.
        metrics: One :class:`MetricPlan` per metric, by name.
        paired: Whether a baseline gave the paired rows' spread.
        rows_only_baseline: Labels (id, or ``scenario#trial``) of the baseline rows the run
            has no row for, left out (rows pair by id: :func:`~turneval.compare.match_rows`).
        rows_only_run: Labels of the run's rows the baseline has no row for, left out.
    """

    mde: float
    alpha: float
    power: float
    metrics: dict[str, MetricPlan]
    paired: bool
    rows_only_baseline: list[str] = field(default_factory=list)
    rows_only_run: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        """A Markdown table, then the pass^k plan of a run with trials."""
        spread = "paired rows" if self.paired else "no baseline: runs assumed uncorrelated"
        lines = [
            f"plan: find a drop of {self.mde:g} with power {self.power:g} at alpha "
            f"{self.alpha:g} (paired two-sided test; sd of the differences from {spread})",
            "| metric | rows | mean | sd diff | corr | rows needed | power now | "
            "min. detectable drop |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for m in self.metrics.values():
            cells = [
                m.name,
                str(m.rows),
                fmt(m.mean),
                f"{m.sd:.4f}",
                fmt(m.correlation, ".3f"),
                "n/a" if m.samples_needed is None else str(m.samples_needed),
                fmt(m.achieved_power, ".3f"),
                _drop(m.min_detectable_drop, m.span, "rows"),
            ]
            lines.append("| " + " | ".join(cells) + " |")
        for m in self.metrics.values():
            t = m.trials
            if t is None:
                continue
            needed = (
                "n/a (no spread)"
                if t.scenarios_needed is None
                else f"{t.scenarios_needed} scenarios x {t.k} trials = "
                f"{t.conversations_needed} conversations"
            )
            lines.append(
                f"pass^{t.k} of {m.name}: {t.pass_hat_k:.4f} over {t.scenarios} scenarios; "
                f"needed: {needed}; power now {fmt(t.achieved_power, '.3f')}, "
                f"min. detectable drop {_drop(t.min_detectable_drop, 1.0, 'scenarios')}"
            )
        lines += rise_notes(self.metrics.values(), self.mde)
        lines += [
            f"note: {m.name} has no spread: every paired difference is equal, nothing to plan from"
            for m in self.metrics.values()
            if m.samples_needed is None and m.rows >= 2
        ]
        for side, other, labels in (
            ("baseline", "run", self.rows_only_baseline),
            ("run", "baseline", self.rows_only_run),
        ):
            if labels:
                shown = ", ".join(labels[:10]) + (
                    f" (+{len(labels) - 10} more)" if len(labels) > 10 else ""
                )
                lines.append(
                    f"note: {len(labels)} {side} row{'s' if len(labels) != 1 else ''} with no "
                    f"row in the {other} (trials stopped early, or other samples), left out: "
                    f"{shown}"
                )
        return "\n".join(lines)


def _beyond(drop: float | None, span: float | None) -> bool:
    """Whether a minimum detectable drop is wider than the metric's scale (cannot happen)."""
    return drop is not None and span is not None and drop > span


def _drop(drop: float | None, span: float | None, units: str) -> str:
    """A minimum detectable drop, or why none is (``units``: "rows", "scenarios")."""
    if _beyond(drop, span):
        return f"not detectable with these {units} ({drop:.4f} > the scale's {span:g})"
    return fmt(drop)


def _span(name: str, values: np.ndarray) -> float | None:
    """The width of metric ``name``'s scale: its own, else 1 for values in [0, 1], or None."""
    from turneval.calibration._scales import metric_class, scale_of

    scale = scale_of(metric_class(name))
    if scale:
        return scale[-1] - scale[0]
    known = values[~np.isnan(values)]
    if known.size and known.min() >= 0 and known.max() <= 1:
        return 1.0
    return None


def plan(
    run: EvaluationResult,
    *,
    mde: float,
    metric: str | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
    baseline: EvaluationResult | None = None,
) -> Plan:
    """How many rows (or scenarios x trials) find a drop of ``mde``, and the power ``run`` has.

    For each metric (or only ``metric``), from the run's per-row values: the rows a paired
    two-sided test at ``alpha`` needs to find a true drop of ``mde`` with probability
    ``power`` (statsmodels ``TTestPower.solve_power``), the power a comparison over the run's
    own rows has, and the smallest drop it finds with ``power``. With ``baseline`` (an earlier
    run of the same samples, paired as :func:`~turneval.compare.compare` pairs them) the
    spread is that of the real paired differences, which the rows' correlation shrinks;
    without one, the runs are taken as uncorrelated (the cautious case).

    A run with trials of scenarios (``EvalTask.evaluate(user=..., trials=k)``) also gets a
    :class:`TrialPlan`: the same figures for pass^k, each scenario's pass^k estimate taking
    the place of a row (scenarios paired by id with a baseline).

    Raises:
        ConfigError: ``mde``, ``alpha`` or ``power`` is out of range, ``metric`` is not in the
            run (or the baseline), or the runs cannot be paired.
    """
    check_levels(mde, alpha, power)
    names = run.metric_names if metric is None else [metric]
    if metric is not None and metric not in run.metric_names:
        raise ConfigError(f"no metric named {metric!r} in the run; its metrics: {run.metric_names}")
    pairing = None
    if baseline is not None:
        pairing = match_rows(baseline, run)
        missing = [name for name in names if name not in baseline.metric_names]
        if metric is not None and missing:
            raise ConfigError(
                f"the baseline has no metric {metric!r}; its metrics: {baseline.metric_names}"
            )
        names = [name for name in names if name not in missing]
    metrics = {}
    directions = metric_directions(names, run, *([] if baseline is None else [baseline]))
    for name in names:
        values = np.asarray(run.scores(name), dtype=float)
        correlation = None
        if baseline is not None and pairing is not None:
            base = np.asarray(baseline.scores(name), dtype=float)
            cand = pairing.take(values)
            both = ~(np.isnan(base) | np.isnan(cand))
            scored, rows = cand[both], int(both.sum())
            sd = sd_of(scored - base[both])
            if rows >= 2 and sd_of(scored) > 0 and sd_of(base[both]) > 0:
                from scipy.stats import pearsonr

                with warnings.catch_warnings():  # nearly constant rows: the figure is shown
                    warnings.simplefilter("ignore")
                    found = float(pearsonr(base[both], scored).statistic)
                correlation = found if math.isfinite(found) else None
        else:
            scored = values[~np.isnan(values)]
            rows = int(scored.size)
            sd = sd_of(scored) * math.sqrt(2)
        try:
            metrics[name] = MetricPlan(
                name,
                rows,
                float(scored.mean()) if rows else None,
                sd,
                correlation,
                samples_needed(sd, mde, alpha=alpha, power=power),
                achieved_power(sd, mde, rows, alpha=alpha),
                detectable_drop(sd, rows, alpha=alpha, power=power),
                _trial_plan(run, baseline, name, mde=mde, alpha=alpha, power=power),
                _span(name, values),
                directions[name],
            )
        except ConfigError as exc:  # say which metric could not be planned
            raise ConfigError(f"{name}: {exc}") from exc
    if pairing is None:
        return Plan(mde, alpha, power, metrics, False)
    return Plan(
        mde,
        alpha,
        power,
        metrics,
        True,
        [pairing.labels[0][i] for i in pairing.only_baseline],
        [pairing.labels[1][j] for j in pairing.only_candidate],
    )


def _per_scenario_pass_hat(run: EvaluationResult, name: str, k: int) -> dict[str, float]:
    """Each scenario's unbiased pass^k estimate C(c, k) / C(n, k) (n >= k known outcomes).

    A scenario whose trials stopped early under pass^k (``stop_early``, all k needed) failed
    for sure: its estimate is 0, as the full run's would be.
    """
    stops = run.early_stops
    settled = stops is not None and stops.needed == stops.trials == k
    estimates = {}
    for scenario, outcomes in run.trial_outcomes(name).items():
        known = [o for o in outcomes if o is not None]
        if len(known) >= k:
            estimates[scenario] = math.comb(sum(known), k) / math.comb(len(known), k)
        elif settled and known and None not in outcomes and not all(known):
            estimates[scenario] = 0.0
    return estimates


def _trial_plan(
    run: EvaluationResult,
    baseline: EvaluationResult | None,
    name: str,
    *,
    mde: float,
    alpha: float,
    power: float,
) -> TrialPlan | None:
    outcomes = run.trial_outcomes(name)
    k = max((len([o for o in trials if o is not None]) for trials in outcomes.values()), default=0)
    if run.early_stops is not None:  # trials asked for, though a stopped scenario ran fewer
        k = max(k, run.early_stops.trials)
    if k < 2:  # one trial per scenario: the rows' plan says it all
        return None
    estimates = _per_scenario_pass_hat(run, name, k)
    if not estimates:
        return None
    values = np.asarray(list(estimates.values()))
    if baseline is not None and name in baseline.metric_names:
        before = _per_scenario_pass_hat(baseline, name, k)
        shared = [s for s in estimates if s in before]
        diffs = np.asarray([estimates[s] - before[s] for s in shared])
        sd, scenarios = sd_of(diffs), len(shared)
    else:
        sd, scenarios = sd_of(values) * math.sqrt(2), len(estimates)
    needed = samples_needed(sd, mde, alpha=alpha, power=power)
    return TrialPlan(
        k,
        scenarios,
        float(values.mean()),
        sd,
        needed,
        None if needed is None else needed * k,
        achieved_power(sd, mde, scenarios, alpha=alpha),
        detectable_drop(sd, scenarios, alpha=alpha, power=power),
    )


def read_run(
    path: str | PathLike[str], store: RunStore | str | PathLike[str] | None = None
) -> EvaluationResult:
    """A run's rows, as :func:`plan_files` reads them (:func:`turneval.runs.open_run`).

    A ``--out`` folder, a results.jsonl (or a summary.json with its rows beside it), or a run
    kept in ``store`` (its id).

    Raises:
        ConfigError: ``path`` is no run, a summary.json without rows, or holds no rows
            (naming it).
    """
    from turneval.runs import open_run

    with open_run(path, store) as run:
        if not run.has_rows:
            raise ConfigError(f"{run.label}: a summary.json alone has no rows to plan from")
        result = run.result
        if not result.rows:
            raise ConfigError(f"{run.label} holds no rows: nothing to plan from")
        return result


def plan_files(
    run: str | PathLike[str],
    *,
    mde: float,
    metric: str | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
    baseline: str | PathLike[str] | None = None,
    store: RunStore | str | PathLike[str] | None = None,
) -> Plan:
    """:func:`plan` over runs on disk or in a store (as ``turneval plan``).

    Each run is a ``--out`` folder, a results.jsonl or a run kept in ``store`` (its id).

    Raises:
        ConfigError: a run cannot be read, or as :func:`plan`.
    """
    return plan(
        read_run(run, store),
        mde=mde,
        metric=metric,
        alpha=alpha,
        power=power,
        baseline=None if baseline is None else read_run(baseline, store),
    )

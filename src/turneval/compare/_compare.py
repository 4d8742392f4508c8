"""Two runs compared: the paired test per metric, each metric's direction, flipped rows."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from turneval.aggregate import FlakyScenario, flaky_scenarios, unstable
from turneval.compare._configs import check_metric_configs
from turneval.compare._pairing import match_rows
from turneval.compare._result import Comparison, MetricComparison
from turneval.errors import ConfigError
from turneval.manifest import MetricSpec
from turneval.results import EvaluationResult, SampleResult
from turneval.stats._inference import paired_permutation_test

if TYPE_CHECKING:
    from turneval.compare._pairing import RowPairing

__all__ = ["compare", "metric_directions", "thresholds_for"]


def compare(
    baseline: EvaluationResult,
    candidate: EvaluationResult,
    *,
    pass_threshold: float = 0.5,
    pass_thresholds: Mapping[str, float] | None = None,
    resamples: int = 10_000,
    seed: int = 0,
    lines: Sequence[int] | None = None,
    allow_config_change: bool = False,
) -> Comparison:
    """Compare two runs of the same samples (rows paired by id, else by position).

    For each metric both runs have: means over the rows both scored, their difference, a paired
    permutation test (sign flips of the per-row differences: exact for few rows, else random and
    seeded; see :func:`~turneval.stats.paired_permutation_test`) and the rows whose
    score crossed ``pass_threshold`` (value >= threshold passes) in either direction;
    ``pass_thresholds`` (``{metric name: number}``) sets a metric's own, for metrics on another
    scale than [0, 1] such as the 1-5 rubric judges. ``lines`` gives each row's 1-based input
    line, to name rows by line.

    Rows pair by id (:func:`match_rows`): ``metadata["id"]`` (a results file's ``id``), or
    scenario and trial for a simulated conversation, when every row of both runs has a
    distinct one, so a candidate run over the same samples in another order pairs right, and
    a run whose trials stopped early (``stop_early``) pairs with a full run trial by trial.
    Rows only one run has are left out of every figure and listed
    (:attr:`Comparison.rows_only_baseline`, :attr:`Comparison.rows_only_candidate`, noted
    under the table). Without ids, rows pair by position, and two rows paired there whose
    ids differ are refused. Row indices in the comparison are the baseline's.

    Runs whose metric objects are known (``result.metrics``: they ran here, or were read back
    with their manifest) whose metrics of one name are configured differently are refused
    (:func:`check_metric_configs`) unless ``allow_config_change``; :func:`compare_files`
    checks the manifests of runs on disk or in a store.

    Raises:
        ConfigError: the runs hold different samples (no id in common, or, without ids,
            another number of rows), share no metric, configure a shared metric differently,
            or ``pass_thresholds`` names a metric they do not share.
    """
    if not allow_config_change and baseline.metrics and candidate.metrics:
        check_metric_configs(
            [MetricSpec.of(metric) for metric in baseline.metrics],
            [MetricSpec.of(metric) for metric in candidate.metrics],
        )
    pairing = match_rows(baseline, candidate)
    order = pairing.order
    shared = [name for name in baseline.metric_names if name in candidate.metric_names]
    if not shared:
        raise ConfigError(
            f"the two runs share no metric (baseline: {baseline.metric_names}, candidate: "
            f"{candidate.metric_names})"
        )
    thresholds = thresholds_for(pass_thresholds, shared)
    directions = metric_directions(shared, baseline, candidate)
    lines = None if lines is None else list(lines)
    metrics = {}
    for name in shared:
        if not directions[name]:  # lower is better: latency, cost (issue 49)
            metrics[name] = _lower_is_better(
                name, baseline, candidate, pairing, lines, thresholds.get(name), resamples, seed
            )
            continue
        base = np.asarray(baseline.scores(name), dtype=float)
        cand = pairing.take(np.asarray(candidate.scores(name), dtype=float))
        both = ~(np.isnan(base) | np.isnan(cand))
        pairs = int(both.sum())
        newly_failed = [
            i
            for i, j in enumerate(order)
            if j >= 0 and not np.isnan(base[i]) and name in candidate.rows[int(j)].failures
        ]
        threshold = thresholds.get(name, pass_threshold)
        if not pairs:
            metrics[name] = MetricComparison(
                name,
                None,
                None,
                None,
                None,
                0,
                lines=lines,
                newly_failed=newly_failed,
                pass_threshold=threshold,
            )
            continue
        b, c = base[both], cand[both]
        indices = np.flatnonzero(both)
        passed_before, passed_after = b >= threshold, c >= threshold
        scored = np.concatenate([b, c])
        off_scale = name not in thresholds and bool(((scored < 0) | (scored > 1)).any())
        p_value = paired_permutation_test(c - b, resamples=resamples, seed=seed)
        regressed = [int(i) for i in indices[passed_before & ~passed_after]]
        shaky = [
            i
            for i in regressed
            if any(
                name in row.results and unstable(row.results[name], threshold)
                for row in (baseline.rows[i], candidate.rows[int(order[i])])
            )
        ]
        flaky = _flaky(baseline, candidate, name, threshold)
        scenario = [row.trial.scenario_id if row.trial is not None else "" for row in baseline.rows]
        flaky_regressions = [i for i in regressed if scenario[i] in flaky]
        apart = {*shaky, *flaky_regressions}  # listed on their own, not as regressions
        metrics[name] = MetricComparison(
            name,
            float(b.mean()),
            float(c.mean()),
            float(c.mean() - b.mean()),
            None if math.isnan(p_value) else p_value,
            pairs,
            [i for i in regressed if i not in apart],
            [int(i) for i in indices[~passed_before & passed_after]],
            [int(i) for i in indices[c < b]],
            lines,
            newly_failed,
            threshold,
            off_scale,
            shaky,
            paired_values=(b, c),
            flaky=flaky,
            flaky_regressions=flaky_regressions,
        )
    only_baseline = [pairing.labels[0][i] for i in pairing.only_baseline]
    only_candidate = [pairing.labels[1][j] for j in pairing.only_candidate]
    not_run = [
        pairing.labels[0][i] for i in pairing.only_baseline if _stopped(candidate, baseline.rows[i])
    ] + [
        pairing.labels[1][j]
        for j in pairing.only_candidate
        if _stopped(baseline, candidate.rows[j])
    ]
    return Comparison(
        metrics,
        pass_threshold,
        [name for name in baseline.metric_names if name not in shared],
        [name for name in candidate.metric_names if name not in shared],
        paired_by=pairing.by,
        rows_only_baseline=only_baseline,
        rows_only_candidate=only_candidate,
        rows_not_run=not_run,
        stopped_early=[
            which
            for which, run in (("baseline", baseline), ("candidate", candidate))
            if run.early_stops is not None and run.early_stops.skipped
        ],
    )


def metric_directions(names: Sequence[str], *runs: EvaluationResult) -> dict[str, bool]:
    """Each metric's direction: True when higher is better, False for a cost to keep down.

    Read from the metric's :attr:`~turneval.metrics.Evaluator.higher_is_better`: the runs'
    metric objects where they have them (a run that ran here), else the built-in metric of
    that name (a run read back from a file); a metric neither knows is taken as a score
    (higher is better).
    """
    from turneval.metrics import builtin_metrics

    objects = {metric.name: metric for run in runs for metric in run.metrics}
    builtin = builtin_metrics()
    found = {}
    for name in names:
        metric: Any = objects.get(name) or builtin.get(name)
        found[name] = True if metric is None else bool(metric.higher_is_better)
    return found


def _lower_is_better(
    name: str,
    baseline: EvaluationResult,
    candidate: EvaluationResult,
    pairing: RowPairing,
    lines: list[int] | None,
    threshold: float | None,
    resamples: int,
    seed: int,
) -> MetricComparison:
    """A metric where lower is better, compared: rows pass at or below their own threshold."""
    base = np.asarray(baseline.scores(name), dtype=float)
    cand = pairing.take(np.asarray(candidate.scores(name), dtype=float))
    both = ~(np.isnan(base) | np.isnan(cand))
    newly_failed = [
        i
        for i, j in enumerate(pairing.order)
        if j >= 0 and not np.isnan(base[i]) and name in candidate.rows[int(j)].failures
    ]
    shown = math.inf if threshold is None else threshold  # no threshold: every row passes
    if not both.any():
        return MetricComparison(
            name, None, None, None, None, 0, lines=lines, newly_failed=newly_failed,
            pass_threshold=shown, higher_is_better=False,
        )  # fmt: skip
    b, c = base[both], cand[both]
    indices = np.flatnonzero(both)
    passed_before, passed_after = b <= shown, c <= shown
    p_value = paired_permutation_test(c - b, resamples=resamples, seed=seed)
    return MetricComparison(
        name,
        float(b.mean()),
        float(c.mean()),
        float(c.mean() - b.mean()),
        None if math.isnan(p_value) else p_value,
        int(both.sum()),
        [int(i) for i in indices[passed_before & ~passed_after]],
        [int(i) for i in indices[~passed_before & passed_after]],
        [int(i) for i in indices[c > b]],
        lines,
        newly_failed,
        shown,
        paired_values=(b, c),
        higher_is_better=False,
    )


def _stopped(run: EvaluationResult, row: SampleResult) -> bool:
    """Whether ``run`` lacks ``row``'s trial because it stopped its scenario early."""
    stops = run.early_stops
    return row.trial is not None and stops is not None and row.trial.scenario_id in stops.skipped


def _flaky(
    baseline: EvaluationResult,
    candidate: EvaluationResult,
    name: str,
    threshold: float,
) -> dict[str, FlakyScenario]:
    """Scenarios whose trials of ``name`` disagree about ``threshold``, in either run."""
    found: dict[str, FlakyScenario] = {}
    for run in (baseline, candidate):  # the candidate's figures win
        outcomes: dict[str, list[bool | None]] = {}
        for row in run.rows:
            if row.trial is not None:
                result = row.results.get(name)
                outcome = None if result is None else result.value >= threshold
                outcomes.setdefault(row.trial.scenario_id, []).append(outcome)
        found.update({s.scenario_id: s for s in flaky_scenarios(outcomes)})
    return found


def thresholds_for(
    pass_thresholds: Mapping[str, float] | None, shared: list[str]
) -> dict[str, float]:
    """The metrics' own pass thresholds, checked against the shared metrics."""
    unknown = sorted(set(pass_thresholds or {}) - set(shared))
    if unknown:
        raise ConfigError(
            f"pass_thresholds names metrics that are not in both runs: {unknown}; shared: {shared}"
        )
    return {name: float(value) for name, value in (pass_thresholds or {}).items()}

"""Compare two runs of the same dataset: mean differences, significance, flipped samples.

A run is read by :func:`turneval.runs.open_run`: a ``--out`` folder, its ``results.jsonl``,
its ``summary.json`` (the rows beside it when they are there, else the summary's means
alone) or a stored run's id. Two runs whose metrics of one name are configured differently
(``arg_rules``, a rubric, ...: their :class:`~turneval.manifest.RunManifest` says) are
refused unless told ``allow_config_change`` (see :func:`check_metric_configs`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from os import PathLike
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from turneval.aggregate import FlakyScenario, flaky_scenarios, unstable
from turneval.errors import ConfigError
from turneval.manifest import RUN_FILE, MetricSpec, metric_changes
from turneval.results import EvaluationResult, SampleResult
from turneval.runs import OpenedRun, open_run
from turneval.stats._inference import holm, paired_permutation_test

if TYPE_CHECKING:
    from turneval.store import RunStore

__all__ = [
    "Comparison",
    "JUDGE_FIELDS",
    "MetricComparison",
    "RegressionCheck",
    "RegressionGates",
    "RowPairing",
    "TEST",
    "check_metric_configs",
    "compare",
    "compare_files",
    "match_keys",
    "match_rows",
    "metric_config_changes",
    "metric_directions",
    "pair_rows",
    "pairing_notes",
    "regression_gates",
    "row_key",
    "trial_key",
]

_LISTED = 10  # rows (or ids) named in a note or an error before "(+N more)"

JUDGE_FIELDS = frozenset({"llm"})
"""Fields of a metric's configuration that :func:`check_metric_configs` leaves out besides
those that change no score (pass thresholds, timeouts, retries): the judge model a metric
asks. Comparing two judges is a comparison made on purpose, as comparing two runs with
another ``--judge-model`` is."""


MetricRecords = Sequence[MetricSpec | Mapping[str, Any]]
"""A run's metrics as recorded: :class:`~turneval.manifest.MetricSpec` objects, or their
``{"name", "class", "config"}`` records (run.json's ``metrics``, a stored run's
:attr:`~turneval.store.StoredRun.metrics`)."""


def _specs(records: MetricRecords) -> list[MetricSpec]:
    return [
        record if isinstance(record, MetricSpec) else MetricSpec.from_dict(record)
        for record in records
        if isinstance(record, (MetricSpec, Mapping))
    ]


def check_metric_configs(baseline: MetricRecords, candidate: MetricRecords) -> None:
    """Refuse two runs whose metrics of one name are configured differently.

    Each run is given as its metrics' records (:data:`MetricRecords`: run.json's
    ``metrics``, a stored run's, or ``MetricSpec.of(metric)`` of the metric objects). Fields
    that change no score (a pass threshold, timeouts, retries) and :data:`JUDGE_FIELDS` do
    not count; metrics only one run has are not compared anyway.

    Raises:
        ConfigError: one line naming each metric configured differently and its differing
            fields with both values, and how to compare anyway.
    """
    differing = metric_config_changes(baseline, candidate)
    if differing:
        noun = "metric" if len(differing) == 1 else "metrics"
        verb = "is" if len(differing) == 1 else "are"
        raise ConfigError(
            f"{noun} {', '.join(differing)} {verb} configured differently in the two runs, so "
            "their scores do not compare; compare anyway with --allow-config-change "
            "(allow_config_change=True)"
        )


def metric_config_changes(baseline: MetricRecords, candidate: MetricRecords) -> list[str]:
    """Each metric of one name configured differently in the two runs, with its changes.

    ``name (field old -> new; ...)`` per metric, as :func:`check_metric_configs` names them
    (empty when every shared metric scores alike): :meth:`MetricSpec.changes
    <turneval.manifest.MetricSpec.changes>` without :data:`JUDGE_FIELDS`.
    """
    return metric_changes(_specs(baseline), _specs(candidate), ignored=JUDGE_FIELDS)


@dataclass(frozen=True, slots=True)
class MetricComparison:
    """One metric across two runs, paired row by row.

    Attributes:
        name: The metric.
        baseline_mean: Mean over the rows both runs scored.
        candidate_mean: Mean over the same rows.
        difference: ``candidate_mean - baseline_mean``.
        p_value: Two-sided paired permutation test of a zero mean difference.
        pairs: Rows both runs scored.
        regressions: Row indices that passed in the baseline and fail in the candidate (but
            those in ``unstable_regressions``).
        improvements: Row indices that failed in the baseline and pass in the candidate.
        worse: Row indices whose score is lower in the candidate.
        lines: The 1-based input line of each row, when the runs recorded it (CLI runs do).
        newly_failed: Row indices the baseline scored and the candidate failed on (an error
            instead of a score): left out of the means, so listed here.
        pass_threshold: The value at or above which a row passes, for ``regressions`` and
            ``improvements``.
        off_scale: Scores lie outside [0, 1] while ``pass_threshold`` is the default, made for
            [0, 1] metrics (a 1-5 rubric score always "passes" 0.5): the table notes it.
        unstable_regressions: Regressions on unstable rows, listed apart (and left out of
            ``regressions``): rows whose repeated judge votes (``repeats`` > 1) fall on both
            sides of ``pass_threshold`` in either run, so that the flip may be the judge's noise.
        paired_values: The baseline's and the candidate's values of the rows both scored, in
            the baseline's order (for :func:`turneval.stats.gate_report`).
        flaky: Simulated runs: the scenarios whose trials disagree (some pass
            ``pass_threshold``, some not) in the candidate, else in the baseline, by id.
        flaky_regressions: Regressions on those scenarios, listed apart from
            ``regressions``: one trial's flip there is as likely noise as a change.
        higher_is_better: The metric's direction (:func:`metric_directions`). Where lower is
            better (latency, cost), a row passes at or below ``pass_threshold`` (only when the
            metric is given its own: no default suits seconds or money), ``worse`` rows rose,
            and a rise of the mean is its regression.
    """

    name: str
    baseline_mean: float | None
    candidate_mean: float | None
    difference: float | None
    p_value: float | None
    pairs: int
    regressions: list[int] = field(default_factory=list)
    improvements: list[int] = field(default_factory=list)
    worse: list[int] = field(default_factory=list)
    lines: list[int] | None = None
    newly_failed: list[int] = field(default_factory=list)
    pass_threshold: float = 0.5
    off_scale: bool = False
    unstable_regressions: list[int] = field(default_factory=list)
    paired_values: tuple[np.ndarray, np.ndarray] = field(
        default_factory=lambda: (np.empty(0), np.empty(0)), repr=False, compare=False
    )
    flaky: dict[str, FlakyScenario] = field(default_factory=dict)
    flaky_regressions: list[int] = field(default_factory=list)
    higher_is_better: bool = True

    def row_label(self, index: int) -> str:
        """``line N`` (1-based) where the input line is known, else ``row i`` (0-based)."""
        if self.lines is not None and index < len(self.lines):
            return f"line {self.lines[index]}"
        return f"row {index}"

    def failed_note(self) -> str:
        """What :attr:`newly_failed` says, naming the first rows (empty when there are none)."""
        if not self.newly_failed:
            return ""
        count = len(self.newly_failed)
        rows = ", ".join(self.row_label(i) for i in self.newly_failed[:_LISTED])
        more = f" (+{count - _LISTED} more)" if count > _LISTED else ""
        return (
            f"{self.name} failed in the candidate on {count} row{'s' if count != 1 else ''} "
            f"the baseline scored: {rows}{more}"
        )

    def flaky_note(self) -> str:
        """The regressions on flaky scenarios, listed apart (empty when there are none)."""
        if not self.flaky_regressions:
            return ""
        count = len(self.flaky_regressions)
        rows = ", ".join(self.row_label(i) for i in self.flaky_regressions[:_LISTED])
        more = f" (+{count - _LISTED} more)" if count > _LISTED else ""
        scenarios = "; ".join(str(scenario) for scenario in self.flaky.values())
        return (
            f"{self.name}: {count} regression{'s' if count != 1 else ''} on flaky scenarios "
            f"(mixed outcomes across trials), not counted above: {rows}{more}; flaky: {scenarios}"
        )

    def significant(self, alpha: float = 0.05) -> bool:
        """Whether the difference is significant at ``alpha``."""
        return self.p_value is not None and self.p_value < alpha


@dataclass(frozen=True, slots=True)
class Comparison:
    """Every shared metric of two runs, and the metrics only one run has.

    ``pass_threshold`` is the default threshold; each metric's own is on its
    :class:`MetricComparison`.

    Attributes:
        metrics: Each shared metric's comparison, by name.
        pass_threshold: The default pass threshold.
        only_baseline: Metrics only the baseline has.
        only_candidate: Metrics only the candidate has.
        config_notes: What :func:`compare_files` could say of the metrics' configurations:
            unchecked (no run.json), or compared although different (``allow_config_change``).
        paired_by: How rows paired: ``"id"`` or ``"position"`` (see :func:`match_rows`).
        rows_only_baseline: Labels (id, or ``scenario#trial``) of the baseline rows the
            candidate has no row for: left out of every figure.
        rows_only_candidate: Labels of the candidate rows the baseline has no row for.
        rows_not_run: Of those, the trials the other run did not run because it stopped
            their scenario early (``stop_early``).
        stopped_early: Which runs (``"baseline"``, ``"candidate"``) stopped trials early.
    """

    metrics: dict[str, MetricComparison]
    pass_threshold: float
    only_baseline: list[str] = field(default_factory=list)
    only_candidate: list[str] = field(default_factory=list)
    config_notes: list[str] = field(default_factory=list)
    paired_by: str = "position"
    rows_only_baseline: list[str] = field(default_factory=list)
    rows_only_candidate: list[str] = field(default_factory=list)
    rows_not_run: list[str] = field(default_factory=list)
    stopped_early: list[str] = field(default_factory=list)

    @property
    def rows_missing(self) -> list[str]:
        """Baseline rows the candidate lacks that no early stop explains (a run cut short?)."""
        not_run = set(self.rows_not_run)
        return [label for label in self.rows_only_baseline if label not in not_run]

    def pairing_notes(self) -> list[str]:
        """What the table leaves out: rows only one run has (counted, the first named)."""
        return pairing_notes(
            self.rows_only_baseline,
            self.rows_only_candidate,
            self.rows_not_run,
            stopped_early=bool(self.stopped_early),
        )

    def __str__(self) -> str:
        """A Markdown table of the comparison, then its notes."""
        lines = [
            "| metric | baseline | candidate | diff | p | regressions | improvements |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for m in self.metrics.values():
            cells = [
                "n/a" if v is None else f"{v:+.4f}" if key == "diff" else f"{v:.4f}"
                for key, v in (
                    ("base", m.baseline_mean),
                    ("cand", m.candidate_mean),
                    ("diff", m.difference),
                    ("p", m.p_value),
                )
            ]
            lines.append(
                f"| {m.name} | {' | '.join(cells)} | {len(m.regressions)} | {len(m.improvements)} |"
            )
        lines += [f"note: {note}" for note in self.config_notes]
        lines += [f"note: {note}" for note in self.pairing_notes()]
        lines += [f"note: {m.failed_note()}" for m in self.metrics.values() if m.newly_failed]
        lines += [f"note: {m.flaky_note()}" for m in self.metrics.values() if m.flaky_regressions]
        lines += [
            f"note: {m.name} also regressed on {len(m.unstable_regressions)} unstable "
            f"row{'s' if len(m.unstable_regressions) != 1 else ''} (votes on both sides of "
            f"{m.pass_threshold:g}), not counted above: "
            + ", ".join(m.row_label(i) for i in m.unstable_regressions[:_LISTED])
            + (
                f" (+{len(m.unstable_regressions) - _LISTED} more)"
                if len(m.unstable_regressions) > _LISTED
                else ""
            )
            for m in self.metrics.values()
            if m.unstable_regressions
        ]
        lines += [
            f"note: {m.name} is scored outside [0, 1]: no row can cross the pass threshold "
            f"{m.pass_threshold:g}; give it one on its scale (pass_thresholds={{{m.name!r}: "
            f"VALUE}}, --pass-threshold {m.name}=VALUE)"
            for m in self.metrics.values()
            if m.off_scale
        ]
        lines += [
            f"note: {m.name}: lower is better, so a rise is its regression"
            for m in self.metrics.values()
            if not m.higher_is_better
        ]
        lines += [f"note: {name} is only in the baseline" for name in self.only_baseline]
        lines += [f"note: {name} is only in the candidate" for name in self.only_candidate]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "pass_threshold": self.pass_threshold,
            "metrics": {
                name: {
                    "baseline_mean": m.baseline_mean,
                    "candidate_mean": m.candidate_mean,
                    "difference": m.difference,
                    "p_value": m.p_value,
                    "pairs": m.pairs,
                    "regressions": m.regressions,
                    "improvements": m.improvements,
                    "worse": m.worse,
                    "newly_failed": m.newly_failed,
                    "pass_threshold": None if math.isinf(m.pass_threshold) else m.pass_threshold,
                    "unstable_regressions": m.unstable_regressions,
                    "flaky_regressions": m.flaky_regressions,
                    "flaky": {key: asdict(value) for key, value in m.flaky.items()},
                    "higher_is_better": m.higher_is_better,
                }
                for name, m in self.metrics.items()
            },
            "only_baseline": self.only_baseline,
            "only_candidate": self.only_candidate,
            "paired_by": self.paired_by,
            "rows_only_baseline": self.rows_only_baseline,
            "rows_only_candidate": self.rows_only_candidate,
            "rows_not_run": self.rows_not_run,
            "stopped_early": self.stopped_early,
        }


def pairing_notes(
    only_baseline: Sequence[str],
    only_candidate: Sequence[str],
    not_run: Sequence[str] = (),
    *,
    stopped_early: bool = False,
) -> list[str]:
    """The notes on rows only one run has (:meth:`Comparison.pairing_notes`).

    Args:
        only_baseline: Labels of the baseline rows the candidate has no row for.
        only_candidate: Labels of the candidate rows the baseline has no row for.
        not_run: Of those, the trials the other run did not run (``stop_early``).
        stopped_early: Whether either run stopped trials early.
    """
    notes = []
    skipped = set(not_run)
    for side, other, rows in (
        ("baseline", "candidate", only_baseline),
        ("candidate", "baseline", only_candidate),
    ):
        stopped = [label for label in rows if label in skipped]
        rest = [label for label in rows if label not in skipped]
        if stopped:
            notes.append(
                f"{_count(len(stopped), f'{side} row')} left out: trials the {other} did "
                f"not run, their scenario settled early (stop_early): {_names(stopped)}"
            )
        if rest:
            notes.append(
                f"{_count(len(rest), f'{side} row')} with no row in the {other}, left out: "
                f"{_names(rest)}"
            )
    if stopped_early and (only_baseline or only_candidate):
        notes.append(
            "the figures above cover the trials both runs ran; trials that stop early are "
            "no fixed-size sample (a stopped scenario's trials lean to its settled "
            "outcome): each run's pass^k counts stopped scenarios without bias"
        )
    return notes


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
    thresholds = _thresholds(pass_thresholds, shared)
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


def _count(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' if count != 1 else ''}"


def _names(labels: Sequence[str | None], *, quoted: bool = False) -> str:
    """The first labels (``repr`` when ``quoted``), then ``(+N more)``."""
    shown = ", ".join(repr(label) if quoted else str(label) for label in labels[:_LISTED])
    return shown + (f" (+{len(labels) - _LISTED} more)" if len(labels) > _LISTED else "")


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


def _thresholds(pass_thresholds: Mapping[str, float] | None, shared: list[str]) -> dict[str, float]:
    """The metrics' own pass thresholds, checked against the shared metrics."""
    unknown = sorted(set(pass_thresholds or {}) - set(shared))
    if unknown:
        raise ConfigError(
            f"pass_thresholds names metrics that are not in both runs: {unknown}; shared: {shared}"
        )
    return {name: float(value) for name, value in (pass_thresholds or {}).items()}


@dataclass(frozen=True, slots=True)
class RowPairing:
    """How the rows of two runs pair (:func:`match_rows`).

    Attributes:
        order: For each baseline row, the position of its candidate row; -1 where the
            candidate has none.
        by: ``"id"`` (sample ids, or scenario and trial for simulated conversations) or
            ``"position"``.
        only_baseline: Positions of the baseline rows the candidate has no row for.
        only_candidate: Positions of the candidate rows the baseline has no row for.
        labels: Per run (baseline, candidate), each row's label: its id, ``scenario#trial``
            for a simulated conversation, else ``row i``.
    """

    order: np.ndarray
    by: str
    only_baseline: list[int] = field(default_factory=list)
    only_candidate: list[int] = field(default_factory=list)
    labels: tuple[list[str], list[str]] = field(default_factory=lambda: ([], []))

    @property
    def paired(self) -> np.ndarray:
        """Whether each baseline row has a candidate row."""
        return np.asarray(self.order >= 0, dtype=bool)

    def take(self, values: np.ndarray) -> np.ndarray:
        """The candidate's ``values`` (one per candidate row) in the baseline's row order.

        NaN where a baseline row has no candidate row.
        """
        taken = np.full(len(self.order), np.nan)
        paired = self.paired
        taken[paired] = np.asarray(values, dtype=float)[self.order[paired]]
        return taken


def trial_key(scenario_id: str, trial: int) -> str:
    """The pairing key of a simulated conversation's row: ``scenario#trial``."""
    return f"{scenario_id}#{trial}"


def row_key(row: SampleResult) -> str | None:
    """What pairs ``row`` with its counterpart in another run (None: nothing).

    ``scenario#trial`` for a simulated conversation (:func:`trial_key`), else its sample id.
    """
    if row.trial is not None:
        return trial_key(row.trial.scenario_id, row.trial.index)
    return row.sample_id


def match_rows(baseline: EvaluationResult, candidate: EvaluationResult) -> RowPairing:
    """Pair the rows of two runs: by id where both runs name every row once, else by position.

    A row's id is its scenario and trial for a simulated conversation (so a run whose
    trials stopped early, ``stop_early``, pairs with a full run trial by trial), else its
    sample id (``metadata["id"]``, a results file's ``id``). When every row of both runs has
    one and no run repeats one, rows pair by it, in any order; rows only one run has are
    left unpaired (:attr:`RowPairing.only_baseline`, :attr:`RowPairing.only_candidate`).
    Otherwise rows pair by position. The rule itself is :func:`match_keys`'s.

    Raises:
        ConfigError: paired by id, the runs share no row; paired by position, they differ in
            length or name different ids at one position.
    """
    return match_keys(
        ([row_key(row) for row in baseline.rows], [row_key(row) for row in candidate.rows]),
        ([row.sample_id for row in baseline.rows], [row.sample_id for row in candidate.rows]),
    )


def match_keys(
    keys: tuple[Sequence[str | None], Sequence[str | None]],
    ids: tuple[Sequence[str | None], Sequence[str | None]],
) -> RowPairing:
    """Pair two runs' rows from each row's pairing key and sample id (:func:`match_rows`'s rule).

    What :func:`match_rows` does with two runs' rows, on what pairs them alone, for callers
    that hold columns rather than rows (the viewer compares a store's narrow columns).

    Args:
        keys: Per run (baseline, candidate), each row's key in row order (:func:`row_key`:
            ``scenario#trial`` for a simulated conversation, else the sample id; None
            without one).
        ids: Per run, each row's sample id (what rows paired by position must not contradict).

    Raises:
        ConfigError: as :func:`match_rows`.
    """
    keys = (list(keys[0]), list(keys[1]))
    labels = (
        [key if key is not None else f"row {i}" for i, key in enumerate(keys[0])],
        [key if key is not None else f"row {i}" for i, key in enumerate(keys[1])],
    )
    if all(None not in run and len(set(run)) == len(run) for run in keys):
        first, second = keys
        position = {key: index for index, key in enumerate(second)}
        order = np.asarray([position.get(key, -1) for key in first], dtype=int)
        in_first = set(first)
        only_candidate = [j for j, key in enumerate(second) if key not in in_first]
        if first and second and not (order >= 0).any():
            raise ConfigError(
                f"the runs share no sample: ids of the baseline {_names(first, quoted=True)}, "
                f"of the candidate {_names(second, quoted=True)}; compare runs of the same dataset"
            )
        only_baseline = [int(i) for i in np.flatnonzero(order < 0)]
        return RowPairing(order, "id", only_baseline, only_candidate, labels)
    if len(keys[0]) != len(keys[1]):
        raise ConfigError(
            f"runs differ in length ({len(keys[0])} vs {len(keys[1])} rows) and "
            "their rows cannot pair by id (a row without an id, or an id repeated); compare "
            "runs of the same dataset"
        )
    for index, (first_id, second_id) in enumerate(zip(*ids, strict=True)):
        if first_id is not None and second_id is not None and first_id != second_id:
            raise ConfigError(
                f"row {index}: id {first_id!r} in the baseline, {second_id!r} in the candidate; "
                "rows pair by position when ids are missing or repeated: compare runs of the "
                "same dataset, in the same order"
            )
    return RowPairing(np.arange(len(keys[0])), "position", labels=labels)


def pair_rows(baseline: EvaluationResult, candidate: EvaluationResult) -> np.ndarray:
    """For each baseline row, the position of its candidate row (-1 where there is none).

    :attr:`RowPairing.order` of :func:`match_rows`: rows pair by id (scenario and trial for a
    simulated conversation, else ``metadata["id"]``) when every row of both runs has a
    distinct one, so runs in different orders compare and a run whose trials stopped early
    pairs with a full one; otherwise by position.

    Raises:
        ConfigError: as :func:`match_rows`.
    """
    return match_rows(baseline, candidate).order


@dataclass(frozen=True, slots=True)
class RegressionCheck:
    """One metric's regression gate (:func:`regression_gates`).

    Attributes:
        name: The metric.
        max_drop: The fall of the mean the gate lets through.
        baseline_mean: The baseline's mean over the paired rows.
        candidate_mean: The candidate's mean over the same rows.
        difference: ``candidate_mean - baseline_mean`` (None: no row scored by both runs).
        p_value: The paired permutation test's two-sided p-value (None: nothing to test, as
            for two lone summary.json files, whose means alone are compared).
        p_holm: ``p_value`` after Holm's correction over the gated metrics that have one
            (``p_value`` itself when one metric is gated).
        dropped: Whether the mean fell by more than ``max_drop``.
        significant: Whether ``p_holm`` is below the level (None: untested).
        failures: Why the gate fails, one message each (empty: it passes).
        notes: What the gate let through and why (a drop that is not significant).
        higher_is_better: The metric's direction: where lower is better (latency, cost),
            ``max_drop`` is the rise the gate lets through and ``dropped`` says the mean rose
            by more.
    """

    name: str
    max_drop: float
    baseline_mean: float | None
    candidate_mean: float | None
    difference: float | None
    p_value: float | None
    p_holm: float | None
    dropped: bool
    significant: bool | None
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    higher_is_better: bool = True

    @property
    def failed(self) -> bool:
        """Whether the gate fails."""
        return bool(self.failures)


@dataclass(frozen=True, slots=True)
class RegressionGates:
    """What :func:`regression_gates` decided: each gated metric, and the run-level checks.

    Attributes:
        checks: One :class:`RegressionCheck` per gated metric, by name.
        alpha: The family-wise level the drops are tested at.
        correction: ``"holm"`` when several gated metrics have a p-value, else ``"none"``.
        tested: The gated metrics with a p-value: the family Holm's correction runs over.
        failures: Failures of the comparison as a whole (baseline rows the candidate lacks).
    """

    checks: dict[str, RegressionCheck]
    alpha: float
    correction: str
    tested: list[str]
    failures: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """Whether any gate fails."""
        return bool(self.failures) or any(check.failed for check in self.checks.values())

    def messages(self) -> list[str]:
        """Every failure, in order: each metric's, then the comparison's."""
        return [m for check in self.checks.values() for m in check.failures] + self.failures

    def rule(self) -> str:
        """The rule the gates apply, with the correction and the family it ran over."""
        if self.correction == "holm":
            correction = (
                f"Holm's correction over the {len(self.tested)} gated metrics with a p-value "
                f"({', '.join(self.tested)})"
            )
        else:
            correction = "no correction (one gated metric with a p-value)"
        rising = [c.name for c in self.checks.values() if not c.higher_is_better]
        worse = (
            f"falls (rises, for {', '.join(rising)}: lower is better) by more than MAX_DROP "
            "and the change"
            if rising
            else "falls by more than MAX_DROP and the drop"
        )
        return (
            f"gates: a gate fails when its mean {worse} is significant: {TEST}, alpha "
            f"{self.alpha:g}, {correction}"
        )

    def __str__(self) -> str:
        """The rule, a Markdown table of the gates, and what they let through."""
        lines = [
            self.rule(),
            "| gate | max drop | diff | p | p Holm | verdict |",
            "|---|---:|---:|---:|---:|---|",
        ]
        for check in self.checks.values():
            change = "drop" if check.higher_is_better else "rise"
            verdict = (
                "FAIL"
                if check.failed
                else f"pass ({change} not significant)"
                if check.dropped
                else "pass"
            )
            cells = [
                check.name,
                f"{check.max_drop:g}",
                "n/a" if check.difference is None else f"{check.difference:+.4f}",
                "n/a" if check.p_value is None else f"{check.p_value:.4f}",
                "n/a" if check.p_holm is None else f"{check.p_holm:.4f}",
                verdict,
            ]
            lines.append("| " + " | ".join(cells) + " |")
        lines += [f"note: {note}" for check in self.checks.values() for note in check.notes]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "test": TEST,
            "alpha": self.alpha,
            "correction": self.correction,
            "tested": self.tested,
            "failed": self.failed,
            "failures": self.failures,
            "metrics": {
                name: {**asdict(check), "failed": check.failed}
                for name, check in self.checks.items()
            },
        }


TEST = "paired permutation test (sign flips), two-sided"
"""The test :func:`compare` decides with (:func:`~turneval.stats.paired_permutation_test`)."""


def regression_gates(
    comparison: Comparison, max_drops: Mapping[str, float], *, alpha: float = 0.05
) -> RegressionGates:
    """Check ``--fail-on-regression`` gates: ``{metric: MAX_DROP}`` over a comparison.

    A gate fails when the metric's mean worsens by more than its MAX_DROP **and** the change
    is significant. Worse is lower for a score and higher for a metric where lower is better
    (:attr:`MetricComparison.higher_is_better`: latency, cost, tokens), whose MAX_DROP is
    the rise it lets through. Significant means the paired permutation test's p-value, after
    Holm's correction over the gated metrics that have one (:func:`~turneval.stats.holm`),
    is below ``alpha``. A change the test cannot tell from noise passes, with a note
    (``--min-power`` in
    ``turneval compare`` refuses a comparison too small to see the drops that matter). A
    gate also fails when it cannot be checked (no row scored by both runs), when the
    candidate failed on rows the baseline scored (left out of the means), and, for the
    comparison as a whole, when the candidate lacks rows of the baseline that no early stop
    explains (a run cut short). Two lone summary.json files have means only: their gates
    compare the means, untested.

    Raises:
        ConfigError: a gate names a metric not in both runs, a MAX_DROP is negative or not a
            number, or ``alpha`` is not between 0 and 1.
    """
    if not 0 < alpha < 1:
        raise ConfigError(f"alpha must be between 0 and 1, got {alpha}")
    unknown = [name for name in max_drops if name not in comparison.metrics]
    if unknown:
        raise ConfigError(
            f"gates name metrics that are not in both runs: {unknown}; shared: "
            f"{list(comparison.metrics)}"
        )
    bad = {
        name: drop for name, drop in max_drops.items() if not (math.isfinite(drop) and drop >= 0)
    }
    if bad:
        raise ConfigError(f"MAX_DROP must be a number >= 0, got {bad}")
    tested = [name for name in max_drops if comparison.metrics[name].p_value is not None]
    adjusted = holm([comparison.metrics[name].p_value or 0.0 for name in tested])
    p_holm = dict(zip(tested, adjusted, strict=True))
    correction = "holm" if len(tested) > 1 else "none"
    checks = {}
    for name, max_drop in max_drops.items():
        m = comparison.metrics[name]
        failures, notes = [], []
        if m.difference is None:
            failures.append(f"{name}: no row scored by both runs")
        if m.newly_failed:
            failures.append(m.failed_note())
        worsened = (
            None
            if m.difference is None
            else m.difference
            if not m.higher_is_better
            else -m.difference
        )
        dropped = worsened is not None and worsened > max_drop
        p = p_holm.get(name)
        significant = None if p is None else p < alpha
        if dropped:
            fell = (
                f"{name} mean {'fell' if m.higher_is_better else 'rose'} "
                f"{m.baseline_mean:.4f} -> {m.candidate_mean:.4f} "
                f"({m.difference:+.4f}, more than {max_drop:g}"
            )
            test = (
                ""
                if p is None
                else f"p {m.p_value:.4f}"
                + (
                    f", Holm's p {p:.4f} over {len(tested)} gated metrics"
                    if len(tested) > 1
                    else ""
                )
            )
            if p is None:
                failures.append(f"{fell}; means alone: no paired rows to test){_worse(m)}")
            elif significant:
                failures.append(f"{fell}; {test} < alpha {alpha:g}){_worse(m)}")
            else:
                notes.append(
                    f"{fell}) but not significantly ({test}, not below alpha {alpha:g}): its "
                    "gate passes; --min-power tells whether the comparison could see the drop"
                )
        checks[name] = RegressionCheck(
            name,
            max_drop,
            m.baseline_mean,
            m.candidate_mean,
            m.difference,
            m.p_value,
            p,
            dropped,
            significant,
            failures,
            notes,
            m.higher_is_better,
        )
    missing = comparison.rows_missing if max_drops else []
    overall = (
        [
            f"the candidate has no row for {_count(len(missing), 'baseline row')} (a run cut "
            f"short?), left out of the gates: {_names(missing)}"
        ]
        if missing
        else []
    )
    return RegressionGates(checks, alpha, correction, tested, overall)


def _worse(m: MetricComparison) -> str:
    """``; regressed rows: line 2, ...``: the rows whose score fell (empty when none did)."""
    if not m.worse:
        return ""
    rows = ", ".join(m.row_label(i) for i in m.worse[:_LISTED])
    more = f" (+{len(m.worse) - _LISTED} more)" if len(m.worse) > _LISTED else ""
    return f"; regressed rows: {rows}{more}"


def compare_files(
    baseline: str | PathLike[str],
    candidate: str | PathLike[str],
    *,
    pass_threshold: float = 0.5,
    pass_thresholds: Mapping[str, float] | None = None,
    allow_config_change: bool = False,
    allow_dataset_change: bool = False,
    store: RunStore | str | PathLike[str] | None = None,
) -> Comparison:
    """:func:`compare` two runs of one dataset (as ``turneval compare``).

    Each run is what :func:`turneval.runs.open_run` reads: a ``--out`` folder, a
    results.jsonl or a summary.json file, or a run kept in ``store`` (its id); with a summary
    and no rows beside it, only the means are compared. When both runs have their manifest
    (a run folder's ``run.json``, a stored run's record), a metric of one name configured
    differently in the two is refused unless ``allow_config_change``
    (:func:`check_metric_configs`); a folder without one (a run from before run.json) is
    compared unchecked.

    Two runs over different versions of kept datasets are refused unless
    ``allow_dataset_change``, naming both versions and the rows added, removed and changed. A
    run's input is a version when its content is kept as one (``turneval datasets add``): its
    run.json names it, or ``store`` (a :class:`~turneval.store.RunStore`) finds its digest.
    The rows come from ``store`` when it keeps both, else from the input files when they are
    still as the runs read them, else (added and removed only) from the runs' row ids. Inputs
    kept as no version (two agents' conversation files) are not checked.

    Raises:
        ConfigError: a path is missing or not a run, a run.json is not a run record, a shared
            metric is configured differently, the runs read different dataset versions, or
            the runs cannot be paired.
    """
    runs: list[OpenedRun] = []
    try:
        for ref in (baseline, candidate):
            runs.append(open_run(ref, store))
        # where dataset versions are looked up: the store given (opened), else a stored run's
        kept = cast("RunStore | None", store if hasattr(store, "dataset_of") else None)
        kept = kept or next((run.store for run in runs if run.store is not None), None)
        return _compare_runs(
            runs,
            pass_threshold,
            pass_thresholds,
            allow_config_change,
            allow_dataset_change,
            kept,
        )
    finally:
        for run in runs:
            run.close()


def _compare_runs(
    runs: Sequence[OpenedRun],
    pass_threshold: float,
    pass_thresholds: Mapping[str, float] | None,
    allow_config_change: bool,
    allow_dataset_change: bool,
    store: RunStore | None,
) -> Comparison:
    first, second = runs
    notes: list[str] = []
    for run in (first, second):
        if run.manifest_error is not None and not allow_config_change:
            raise ConfigError(
                f"{run.manifest_error}; compare with --allow-config-change to skip the "
                "configuration check"
            )
    manifests = [first.manifest, second.manifest]
    if manifests[0] is None or manifests[1] is None:
        without = [
            run.ref
            for run, manifest in zip((first, second), manifests, strict=True)
            if manifest is None
        ]
        notes.append(
            f"metric configurations not checked: no {RUN_FILE} for {' and '.join(without)}"
        )
    elif not allow_config_change:
        check_metric_configs(manifests[0].metrics, manifests[1].metrics)
    else:
        notes += [
            f"compared although configured differently: {change}"
            for change in metric_config_changes(manifests[0].metrics, manifests[1].metrics)
        ]
    notes += _dataset_notes(runs, allow_dataset_change, store)
    if first.has_rows and second.has_rows:
        results = [_rows(first), _rows(second)]
        lines = [
            row.line if row.line is not None else n for n, row in enumerate(results[0].rows, 1)
        ]
        paired = compare(
            results[0],
            results[1],
            pass_threshold=pass_threshold,
            pass_thresholds=pass_thresholds,
            lines=lines,
            allow_config_change=True,  # the manifests were checked above
        )
        paired.config_notes.extend(notes)
        return paired
    means = [first.means(), second.means()]
    shared = [name for name in means[0] if name in means[1]]
    if not shared:
        raise ConfigError("the two runs share no metric")
    thresholds = _thresholds(pass_thresholds, shared)
    directions = metric_directions(shared)
    metrics = {}
    for name in shared:
        base, cand = means[0][name], means[1][name]
        diff = None if base is None or cand is None else cand - base
        metrics[name] = MetricComparison(
            name,
            base,
            cand,
            diff,
            None,
            0,
            pass_threshold=thresholds.get(name, pass_threshold),
            higher_is_better=directions[name],
        )
    return Comparison(
        metrics,
        pass_threshold,
        [name for name in means[0] if name not in shared],
        [name for name in means[1] if name not in shared],
        notes,
    )


def _rows(run: OpenedRun) -> EvaluationResult:
    """A run's rows; refused when it has none (an empty input file's run)."""
    result = run.result
    if not result.rows:
        raise ConfigError(f"{run.label} holds no rows: nothing to compare")
    return result


# -- dataset versions (issue 49): the runs' manifests name the input they read ---------------


def _run_dataset(run: OpenedRun) -> dict[str, Any] | None:
    """The dataset version a run read, with its input's path (None: none recorded)."""
    dataset = None if run.manifest is None else run.manifest.dataset
    version = None if dataset is None else dataset.version
    if dataset is None or version is None or not version.get("digest"):
        return None
    return {**version, "path": dataset.path}


def _dataset_label(record: Mapping[str, Any]) -> str:
    digest = f"sha256 {str(record['digest'])[:12]}"
    if record.get("name") and record.get("version"):
        return f"{record['name']}@{record['version']} ({digest})"
    return digest


def _dataset_notes(runs: Sequence[OpenedRun], allow: bool, store: RunStore | None) -> list[str]:
    """Refuse runs over two versions of kept datasets (unless ``allow``: a note says so).

    A run's input is a dataset version when its content is kept as one (``turneval datasets
    add``): named in its manifest, or found by its digest in ``store``. Inputs that are not
    (conversation files of two agents, say) are not checked.
    """
    old, new = (_run_dataset(run) for run in runs)
    if old is None or new is None or old["digest"] == new["digest"]:
        return []
    for record in (old, new):
        found = store.dataset_of(record["digest"]) if store is not None else None
        if not record.get("name") and found is not None:
            record.update(name=found.name, version=found.version)
    named = [bool(record.get("name")) for record in (old, new)]
    if not any(named):
        return []
    if not all(named):
        which, other = ("baseline", "candidate") if named[0] else ("candidate", "baseline")
        return [
            f"dataset not checked: the {which} read {_dataset_label(old if named[0] else new)}, "
            f"the {other} an input kept as no dataset version "
            f"({_dataset_label(new if named[0] else old)})"
        ]
    change = (
        f"{_dataset_label(old)} -> {_dataset_label(new)}: {_dataset_change(old, new, runs, store)}"
    )
    if allow:
        return [f"compared although the dataset changed: {change}"]
    raise ConfigError(
        f"the runs read different versions of the dataset ({change}), so their rows do not "
        "all compare; compare anyway with --allow-dataset-change (allow_dataset_change=True)"
    )


def _dataset_change(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    runs: Sequence[OpenedRun],
    store: RunStore | None,
) -> str:
    """The rows added, removed and changed, from the best source at hand."""
    from turneval._dataset_rows import diff_files
    from turneval._files import file_digest

    if store is not None and all(store.dataset_of(r["digest"]) for r in (old, new)):
        return str(store.diff_datasets(old["digest"], new["digest"]).summary())
    files = [r.get("path") for r in (old, new)]
    if all(files) and all(
        file_digest(str(f)) == r["digest"] for f, r in zip(files, (old, new), strict=True)
    ):
        return diff_files(str(files[0]), str(files[1])).summary()
    if not all(run.has_rows for run in runs):
        return "rows not listed (a summary.json alone has no rows)"
    keys = [[row_key(row) for row in run.result.rows] for run in runs]
    before, after = set(keys[0]), set(keys[1])
    added = [str(k) for k in keys[1] if k not in before and k is not None]
    removed = [str(k) for k in keys[0] if k not in after and k is not None]
    return (
        f"{len(added)} added{_names_in(added)}, {len(removed)} removed{_names_in(removed)}; "
        "changed rows not known (neither version's rows are at hand: keep them with "
        "'turneval datasets add')"
    )


def _names_in(labels: Sequence[str]) -> str:
    return f" ({_names(labels)})" if labels else ""

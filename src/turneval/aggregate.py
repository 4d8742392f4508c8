"""The one summariser of rows: summaries, the table, and the figures every sink adds.

Failures are counted, never averaged in. The statistics it uses (the bootstrap interval of a
mean, the exact interval of a pass rate) are :mod:`turneval.stats._inference`, which sits below
it; the names that moved there (``bootstrap_ci``, ``paired_permutation_test``, ``holm``) still
import from here, with a ``DeprecationWarning``.

Longer than 400 lines: it is the one summariser every sink calls (in memory, streamed, read
back, on Ray), and its parts (the summary and its table, the run's trial and agent figures,
pairwise and vote figures, run-level aggregates) are read together when a figure is added;
split them into a package along those lines if it grows.
"""

from __future__ import annotations

import inspect
import math
import re
import warnings
from abc import ABC, abstractmethod
from array import array
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from fractions import Fraction
from importlib import import_module
from typing import TYPE_CHECKING, Any

from turneval.stats import _inference as inference
from turneval.usage import Usage

if TYPE_CHECKING:
    import numpy as np

    from turneval.metrics import Evaluator
    from turneval.results import AgentRun, EarlyStops, EvaluationResult, MetricResult, SampleResult

__all__ = [
    "AGENT_PREFIX",
    "BLAME_PREFIX",
    "FlakyScenario",
    "MetricSummary",
    "PAIRWISE_VALUES",
    "RunAggregate",
    "RunFigures",
    "SummaryTable",
    "agent_figures",
    "builtin_aggregates",
    "compute_aggregates",
    "flaky_scenarios",
    "is_pairwise",
    "pairwise_rates",
    "pairwise_reason",
    "pass_at_k",
    "pass_hat_k",
    "summarise_metrics",
    "summarize",
    "summary_document",
    "trial_outcome",
    "unstable",
    "vote_stability",
]

PAIRWISE_VALUES = {"CANDIDATE": 1.0, "TIE": 0.5, "BASELINE": 0.0}
"""A pairwise verdict's value (:class:`~turneval.metrics.PairwiseMetric`)."""

_PAIRWISE_REASON = re.compile(
    r"(CANDIDATE|BASELINE|TIE) \((?:both orders agree|orders disagree \(\w+ vs \w+\): TIE)\): "
)
"""How a pairwise verdict's reason starts: ``CANDIDATE (both orders agree): ...``."""


def pairwise_reason(choice: str, first: str, second: str, explanation: str) -> str:
    """The reason of a pairwise verdict (read back by :func:`is_pairwise`)."""
    agree = (
        "both orders agree" if first == second else f"orders disagree ({first} vs {second}): TIE"
    )
    return f"{choice} ({agree}): {explanation}"


def is_pairwise(results: Sequence[MetricResult]) -> bool:
    """Whether a column read back from a file (no metric object) holds pairwise verdicts.

    Every result's reason starts as a pairwise verdict's does and its value is that choice's.
    Legacy: only for columns of files written before the run manifest
    (:class:`~turneval.manifest.RunManifest`); a run read back with its manifest has its
    metric objects, whose :meth:`~turneval.metrics.Evaluator.summary_extras` give these rates.
    """
    if not results:
        return False
    for result in results:
        match = _PAIRWISE_REASON.match(result.reason)
        if match is None or PAIRWISE_VALUES[match.group(1)] != result.value:
            return False
    return True


def pairwise_rates(results: Sequence[MetricResult]) -> dict[str, float]:
    """Win, loss and tie rates of pairwise verdicts; with details, how often the orders agree.

    ``candidate_win_rate``, ``baseline_win_rate``, ``tie_rate`` (from the values, so with
    ``details=False`` too) and ``position_consistency`` (the share of pairs whose two orders
    agree, from the details).
    """
    if not results:
        return {}
    n = len(results)
    figures = {
        "candidate_win_rate": sum(r.value == 1.0 for r in results) / n,
        "baseline_win_rate": sum(r.value == 0.0 for r in results) / n,
        "tie_rate": sum(r.value == 0.5 for r in results) / n,
    }
    orders = [(r.details.get("baseline_first"), r.details.get("candidate_first")) for r in results]
    if all(first is not None for first, _ in orders):
        figures["position_consistency"] = sum(a == b for a, b in orders) / n
    return figures


class RunAggregate(ABC):
    """A run-level figure set, listed beside the metrics: ``evaluate(..., aggregates=[...])``.

    Computed once the run's rows are in, from the whole :class:`EvaluationResult` (its rows,
    summaries and metric objects); the figures land in ``result.aggregates`` (a flat dict of
    named numbers) and in the summary document. Subclass it and implement :meth:`compute`;
    ``name`` names the aggregate in ``result.aggregate_errors`` if it raises (a failing
    aggregate never fails the run). :class:`~turneval.metrics.assessments.DatabricksAggregates`
    is the built-in one.
    """

    name: str = "aggregate"

    @abstractmethod
    def compute(self, result: EvaluationResult) -> dict[str, float]:
        """The figures of ``result``, by name."""


def builtin_aggregates() -> dict[str, type[RunAggregate]]:
    """The aggregates that turneval itself defines, by ``name`` (the CLI's ``--aggregate``).

    Found among the subclasses of :class:`RunAggregate` defined so far (the built-in one,
    ``"databricks"``, is defined by :mod:`turneval.metrics`, which ``import turneval`` loads).
    """
    found: dict[str, type[RunAggregate]] = {}
    pending = list(RunAggregate.__subclasses__())
    while pending:
        cls = pending.pop(0)
        pending.extend(cls.__subclasses__())
        if cls.__module__.startswith("turneval.") and not inspect.isabstract(cls):
            found.setdefault(cls.name, cls)
    return dict(sorted(found.items()))


def compute_aggregates(
    aggregates: Sequence[RunAggregate], result: EvaluationResult
) -> tuple[dict[str, float], dict[str, str]]:
    """Every aggregate's figures (merged, in order) and the errors of those that raised."""
    figures: dict[str, float] = {}
    errors: dict[str, str] = {}
    for aggregate in aggregates:
        try:
            figures.update(aggregate.compute(result))
        except Exception as exc:  # one aggregate never sinks the run: kept with its reason
            errors[aggregate.name] = f"{type(exc).__name__}: {exc}"
    return figures, errors


@dataclass(frozen=True, slots=True)
class MetricSummary:
    """Summary of one metric over a run; fields readable as attributes or keys.

    Attributes:
        name: The metric's name.
        mean: Mean of the scored values; None when no row was scored.
        std: Sample standard deviation (ddof=1); None when fewer than two rows were scored.
        count: Number of rows scored.
        failed: Number of rows where the metric failed.
        ci_low: Lower end of the 95% bootstrap confidence interval of the mean (None if n < 2).
        ci_high: Upper end of that interval.
        usage: Judge usage summed over the rows (None for rule-based metrics).
        extra: Evaluator-specific figures, e.g. ``candidate_win_rate`` and ``baseline_win_rate``
            of pairwise judges.
    """

    name: str
    mean: float | None
    std: float | None
    count: int
    failed: int
    ci_low: float | None = None
    ci_high: float | None = None
    usage: Usage | None = None
    extra: dict[str, float] | None = None

    def __getitem__(self, key: str) -> Any:
        """``summary["mean"]`` is ``summary.mean``."""
        if key not in self.__dataclass_fields__:
            raise KeyError(key)
        return getattr(self, key)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict (usage as its counts)."""
        fields = asdict(self)
        fields["usage"] = None if self.usage is None else self.usage.to_dict()
        return fields


_COLUMNS = ("metric", "mean", "95% CI", "std", "scored", "failed")


def _cells(summary: MetricSummary) -> tuple[str, ...]:
    def number(value: float | None) -> str:
        return "n/a" if value is None else f"{value:.4f}"

    ci = "n/a" if summary.ci_low is None else f"[{summary.ci_low:.4f}, {summary.ci_high:.4f}]"
    return (
        summary.name,
        number(summary.mean),
        ci,
        number(summary.std),
        str(summary.count),
        str(summary.failed),
    )


class SummaryTable(dict[str, MetricSummary]):
    """Per-metric summaries by name (a dict) that print as a table.

    ``print(result.summary())`` shows one aligned row per metric (mean, 95% CI, std, scored
    and failed rows); notebooks render it as an HTML table (``_repr_html_``);
    :meth:`to_frame` gives a pandas DataFrame.
    """

    def rows(self) -> list[tuple[str, ...]]:
        """The table's cells as text, one tuple per metric (header excluded)."""
        return [_cells(summary) for summary in self.values()]

    def __str__(self) -> str:
        """An aligned plain-text table: a header line and one line per metric."""
        rows = [_COLUMNS, *self.rows()]
        widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
        lines = [
            "  ".join(
                cell.ljust(width) if i == 0 else cell.rjust(width)
                for i, (cell, width) in enumerate(zip(row, widths, strict=True))
            )
            for row in rows
        ]
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        """An HTML table, for Jupyter."""
        from html import escape

        head = "".join(f"<th>{escape(c)}</th>" for c in _COLUMNS)
        body = "".join(
            "<tr>" + "".join(f"<td>{escape(cell)}</td>" for cell in row) + "</tr>"
            for row in self.rows()
        )
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """Each summary's :meth:`~MetricSummary.to_dict` by name: plain, JSON-ready values."""
        return {name: summary.to_dict() for name, summary in self.items()}

    def to_frame(self) -> Any:
        """A pandas DataFrame indexed by metric name, one column per summary field.

        The figures are float columns (NaN where a summary has None, e.g. ``std`` of one row).
        """
        import pandas as pd

        records = [summary.to_dict() for summary in self.values()]
        frame = pd.DataFrame(records, columns=list(MetricSummary.__dataclass_fields__))
        for column in ("mean", "std", "ci_low", "ci_high"):
            frame[column] = frame[column].astype(float)
        return frame.set_index("name")


def summary_document(
    samples: int,
    summaries: dict[str, MetricSummary],
    usage: Usage,
    *,
    bad_lines: int = 0,
    failed_rows: int = 0,
    aggregates: Mapping[str, float] | None = None,
    aggregate_errors: Mapping[str, str] | None = None,
    skipped_traces: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """The one layout of ``summary.json``, written by the CLI, the stream and the demo.

    ``{"samples": n, "bad_lines": k, "failed_rows": f, "metrics": {name: summary fields},
    "usage": counts}``; ``failed_rows`` counts the rows with at least one failed metric;
    ``"aggregates": {figure: value}`` when the run computed :class:`RunAggregate` figures, and
    ``"aggregate_errors": {aggregate: error}`` for those that raised;
    ``"skipped_traces": {reason: count}`` for OTLP/JSON input (traces that were no
    conversation, never rows).
    """
    document: dict[str, Any] = {
        "samples": samples,
        "bad_lines": bad_lines,
        "failed_rows": failed_rows,
        "metrics": {name: summary.to_dict() for name, summary in summaries.items()},
        "usage": usage.to_dict(),
    }
    if aggregates:
        document["aggregates"] = dict(aggregates)
    if aggregate_errors:
        document["aggregate_errors"] = dict(aggregate_errors)
    if skipped_traces is not None:
        document["skipped_traces"] = dict(skipped_traces)
    return document


def summarize(
    name: str, values: Sequence[float] | np.ndarray, failed: int, usage: Usage | None = None
) -> MetricSummary:
    """Summarise the scored ``values`` of one metric, its failures and judge usage."""
    import numpy as np

    array = np.asarray(values, dtype=float)
    count = int(array.size)
    if not count:
        return MetricSummary(name, None, None, 0, failed, usage=usage)
    std = float(array.std(ddof=1)) if count > 1 else None
    interval = inference.bootstrap_ci(array)
    low, high = interval if interval is not None else (None, None)
    return MetricSummary(name, float(array.mean()), std, count, failed, low, high, usage)


def _over_scenarios(
    outcomes: Sequence[Sequence[bool]], k: int, per_scenario: Callable[[int, int], Fraction]
) -> float | None:
    """The mean of ``per_scenario(c, n)`` over scenarios with n >= k, in exact fractions.

    Computed exactly and rounded once, so pass^1 equals pass@1 and the success rate to the
    last digit (no 0.49999999999999994 beside 0.5).
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    values = [
        per_scenario(sum(map(bool, trials)), len(trials)) for trials in outcomes if len(trials) >= k
    ]
    return float(sum(values, Fraction(0)) / len(values)) if values else None


def pass_hat_k(outcomes: Sequence[Sequence[bool]], k: int) -> float | None:
    """pass^k (tau-bench): the chance that k independent trials of a scenario all succeed.

    ``outcomes`` holds, per scenario, the success of each of its n trials. A scenario with c
    successes in n >= k trials gives the unbiased estimate C(c, k) / C(n, k); the result is
    the mean over scenarios. Scenarios with fewer than k trials are left out; None when none is
    left. pass^1 is the success rate.
    """
    return _over_scenarios(outcomes, k, lambda c, n: Fraction(math.comb(c, k), math.comb(n, k)))


def pass_at_k(outcomes: Sequence[Sequence[bool]], k: int) -> float | None:
    """pass@k: the chance that at least one of k trials of a scenario succeeds.

    Per scenario with c successes in n >= k trials: 1 - C(n - c, k) / C(n, k), averaged over
    scenarios (those with fewer than k trials left out; None when none is left).
    """
    return _over_scenarios(
        outcomes, k, lambda c, n: 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
    )


@dataclass(frozen=True, slots=True)
class FlakyScenario:
    """A scenario whose trials disagree: some succeeded, some failed.

    Attributes:
        scenario_id: The scenario.
        passed: Trials that succeeded.
        trials: Trials with a known outcome.
        pass_rate: ``passed / trials``.
        ci_low: Lower end of the exact (Clopper-Pearson) interval of the pass rate (None
            without SciPy, the ``stats`` extra).
        ci_high: Upper end.
    """

    scenario_id: str
    passed: int
    trials: int
    pass_rate: float
    ci_low: float | None
    ci_high: float | None

    def __str__(self) -> str:
        """``refund: 2/3 passed (0.667, 95% CI [0.094, 0.992])``."""
        interval = (
            "" if self.ci_low is None else f", 95% CI [{self.ci_low:.3f}, {self.ci_high:.3f}]"
        )
        return (
            f"{self.scenario_id}: {self.passed}/{self.trials} passed ({self.pass_rate:.3f}"
            f"{interval})"
        )


def flaky_scenarios(
    outcomes: Mapping[str, Sequence[bool | None]], *, confidence: float = 0.95
) -> list[FlakyScenario]:
    """The scenarios of a trials grid with mixed outcomes, with their pass rate and interval.

    ``outcomes`` holds, per scenario id, each trial's success (None: unknown, left out). A
    scenario is flaky when its known trials hold at least one success and one failure: the
    same agent on the same scenario gives different answers, so one trial's verdict is
    noise. The interval is SciPy's exact binomial (Clopper-Pearson) interval at
    ``confidence`` (None without SciPy). In the order of ``outcomes``.
    """
    flaky = []
    for scenario, trials in outcomes.items():
        known = [bool(o) for o in trials if o is not None]
        passed = sum(known)
        if 0 < passed < len(known):
            low, high = inference.binomial_interval(passed, len(known), confidence=confidence)
            flaky.append(
                FlakyScenario(str(scenario), passed, len(known), passed / len(known), low, high)
            )
    return flaky


def summarise_metrics(
    names: Sequence[str],
    values: Mapping[str, Sequence[float] | np.ndarray],
    failed: Mapping[str, int],
    usage: Mapping[str, Usage | None],
    *,
    metrics: Mapping[str, Evaluator] | None = None,
    results: Mapping[str, Sequence[MetricResult]] | None = None,
    figures: RunFigures | None = None,
    early_stops: EarlyStops | None = None,
    legacy: Collection[str] = (),
) -> SummaryTable:
    """The run's one summariser: agent figures, then per metric its summary and extras.

    Every sink calls it: ``EvaluationResult.summary()`` over the rows in memory or read back
    from a file, and ``evaluate_jsonl`` (the CLI, Ray) over its streamed totals, so the four
    give the same table. Per metric :func:`summarize` and the metric's extras; ``metrics`` are
    the metric objects by name (a run read back from a file has none) and ``results`` their
    scored results, for :meth:`~turneval.metrics.Evaluator.summary_extras` (pairwise win
    rates, ...). ``legacy`` names the columns read back from a file written before the run
    manifest (no metric object can be built for them): only those are recognised as pairwise
    by the text of their reasons (:func:`is_pairwise`). Results with repeated votes add :func:`vote_stability` (``unstable``,
    ``unstable_share``). ``figures`` holds what the rows' provenance gives (agent runs and
    trials, :class:`RunFigures`): the :data:`~turneval.results.AGENT_FIGURES` summaries come
    first, and each metric's ``extra`` gets its trial figures (``pass^k``, ``pass@k``,
    ``success_rate``, ``flaky_scenarios``; with ``early_stops``, the settled figures).
    """
    table = SummaryTable(figures.agent_summaries() if figures is not None else {})
    for name in names:
        summary = summarize(name, values[name], failed[name], usage.get(name))
        extra: dict[str, float] = {}
        metric = (metrics or {}).get(name)
        scored = results.get(name, ()) if results is not None else ()
        if metric is not None and results is not None:
            extra.update(metric.summary_extras(scored))
        extra.update(vote_stability(scored))  # from the rows alone: the same in every sink
        extra.update(agent_figures(scored))
        if figures is not None:
            extra.update(figures.trial_figures(name, early_stops))
        if metric is None and name in legacy and is_pairwise(scored):  # an old file's column
            extra.update(pairwise_rates(scored))
        if extra:
            summary = replace(summary, extra={**(summary.extra or {}), **extra})
        table[name] = summary
    return table


def trial_outcome(row: SampleResult, name: str, threshold: float) -> bool | None:
    """One trial's success on metric ``name``: its value reaches ``threshold``.

    A trial whose agent failed or timed out is a failure; any other failure of the metric (a
    judge or user-model error) is unknown (None).
    """
    result = row.results.get(name)
    if result is not None:
        return bool(result.value >= threshold)
    return False if row.trial is not None and row.trial.agent_failed else None


class RunFigures:
    """What the rows' provenance adds to a run's summary: agent runs and trial outcomes.

    Every sink counts its rows in (:meth:`add`; a streamed run chunk by chunk, then
    :meth:`extend`) and hands this to :func:`summarise_metrics`. Agent figures: latency,
    tokens and steps of the runs that succeeded (a failed run's partial figures would skew
    them); ``failure`` (0/1) of the runs the agent is judged on (a run ended by something
    else, a simulated user that failed, is neither a success nor a failure). Trials: per
    metric and scenario, each trial's :func:`trial_outcome` at the metric's success threshold
    (``thresholds``, 1.0 by default), in row order.
    """

    __slots__ = ("failure", "latency", "runs", "steps", "thresholds", "tokens", "trials")

    def __init__(self, thresholds: Mapping[str, float] | None = None) -> None:
        """Start empty; ``thresholds``: per metric, the value a trial's success needs."""
        self.runs = 0
        self.latency, self.tokens, self.steps = array("d"), array("d"), array("d")
        self.failure = array("d")
        self.thresholds = dict(thresholds or {})
        self.trials: dict[str, dict[str, list[bool | None]]] = {}

    def add(self, row: SampleResult, names: Sequence[str]) -> None:
        """Count one row in: its agent run and, for a trial, its outcome on each of ``names``."""
        if row.agent is not None:
            self.add_agent(row.agent)
        trial = row.trial
        if trial is not None:
            for name in names:
                outcome = trial_outcome(row, name, self.thresholds.get(name, 1.0))
                scenarios = self.trials.setdefault(name, {})
                scenarios.setdefault(trial.scenario_id, []).append(outcome)

    def add_agent(self, run: AgentRun) -> None:
        """Count one agent run in."""
        self.runs += 1
        if run.error is None:
            self.latency.append(run.latency_s)
            self.tokens.append(float(run.usage.total_tokens))
            self.steps.append(float(run.steps))
        if run.error is None or run.by_agent:
            self.failure.append(float(run.failed))

    def extend(self, other: RunFigures) -> None:
        """Count another part's rows in (a chunk of a streamed run, in input order)."""
        self.runs += other.runs
        for mine, theirs in zip(
            (self.latency, self.tokens, self.steps, self.failure),
            (other.latency, other.tokens, other.steps, other.failure),
            strict=True,
        ):
            mine.extend(theirs)
        for name, scenarios in other.trials.items():
            into = self.trials.setdefault(name, {})
            for scenario, outcomes in scenarios.items():
                into.setdefault(scenario, []).extend(outcomes)

    def agent_summaries(self) -> dict[str, MetricSummary]:
        """The :data:`~turneval.results.AGENT_FIGURES` summaries ({} when no agent was run).

        Each figure's ``failed`` counts the runs left out of it.
        """
        if not self.runs:
            return {}
        left_out = self.runs - len(self.latency)
        return {
            "latency_in_seconds": summarize("latency_in_seconds", self.latency, left_out),
            "failure": summarize("failure", self.failure, self.runs - len(self.failure)),
            "agent_total_tokens": summarize("agent_total_tokens", self.tokens, left_out),
            "steps": summarize("steps", self.steps, left_out),
        }

    def outcomes(self, name: str) -> dict[str, list[bool | None]]:
        """Per scenario id, the outcome of each trial on metric ``name`` ({} without trials)."""
        return self.trials.get(name, {})

    def trial_figures(self, name: str, early_stops: EarlyStops | None = None) -> dict[str, float]:
        """The trial figures of metric ``name`` ({} without trials).

        ``pass^k`` and ``pass@k`` (k = 1 to the most trials), ``success_rate`` and
        ``flaky_scenarios``; with trials stopped early, the settled figures.
        """
        outcomes = self.outcomes(name)
        if early_stops is not None and early_stops.saved:
            return _settled_figures(outcomes, early_stops)
        known = [[o for o in trials if o is not None] for trials in outcomes.values()]
        figures: dict[str, float] = {}
        for k in range(1, max((len(trials) for trials in known), default=0) + 1):
            hat, at = pass_hat_k(known, k), pass_at_k(known, k)
            if hat is not None and at is not None:
                figures[f"pass^{k}"], figures[f"pass@{k}"] = hat, at
        if figures:
            figures["success_rate"] = figures["pass^1"]
        if "pass^2" in figures:  # mixed outcomes need two trials
            figures["flaky_scenarios"] = float(len(flaky_scenarios(outcomes)))
        return figures


def _settled_figures(
    outcomes: Mapping[str, Sequence[bool | None]], stops: EarlyStops
) -> dict[str, float]:
    """The figures a run with stopped scenarios gives exactly (see turneval.sequential).

    Per scenario, the verdict "at least ``stops.needed`` of ``stops.trials`` trials
    succeed", known once settled; scenarios with an unknown outcome are left out, as
    pass^k leaves out those with too few known trials.
    """
    verdicts = []
    for trials in outcomes.values():
        if None in trials:
            continue
        passed = sum(map(bool, trials))
        left = stops.trials - len(trials)
        if passed >= stops.needed or passed + left < stops.needed:
            verdicts.append(passed >= stops.needed)
    if not verdicts:
        return {"trials_saved": float(stops.saved)}
    share = sum(verdicts) / len(verdicts)
    figures = {"scenario_pass_rate": share}
    if stops.needed == stops.trials:
        figures[f"pass^{stops.trials}"] = share
    if stops.needed == 1:
        figures[f"pass@{stops.trials}"] = share
    figures["trials_saved"] = float(stops.saved)
    figures["flaky_scenarios"] = float(len(flaky_scenarios(outcomes)))
    return figures


# -- repeated judge votes (``JudgedMetric(repeats=N)``) ----------------------------------------


def _votes(result: MetricResult) -> dict[str, Any] | None:
    """The vote record a judged metric with ``repeats > 1`` keeps in ``details["repeats"]``."""
    record = result.details.get("repeats")
    if isinstance(record, dict) and all(
        isinstance(record.get(key), (int, float)) for key in ("min", "max")
    ):
        return record
    return None


def unstable(result: MetricResult, threshold: float | None = None) -> bool:
    """Whether the votes of ``result`` fall on both sides of a pass threshold.

    A row passes at ``value >= threshold``; it is unstable when its lowest vote fails and its
    highest passes (``min < threshold <= max``): another run of the same votes could flip it.
    ``threshold`` None uses the one the metric was run with (its ``pass_threshold``). False
    for a result without votes (one vote, a rule-based metric, or ``details=False``).
    """
    record = _votes(result)
    if record is None:
        return False
    if threshold is None:
        return bool(record.get("unstable", False))
    return float(record["min"]) < threshold <= float(record["max"])


AGENT_PREFIX = "by_agent."
"""The summary's per-agent figures: ``by_agent.<agent>`` (mean) and ``by_agent.<agent>.rows``."""

BLAME_PREFIX = "blamed."
"""The summary's attributions: ``blamed.<agent>`` (share of rows) and ``blamed.<agent>.rows``."""


def agent_figures(results: Sequence[MetricResult]) -> dict[str, float]:
    """Per-agent figures of results that carry them (from the rows alone: every sink agrees).

    A metric scored ``by_agent`` keeps each agent's value in ``details["by_agent"]``: the
    figures are each agent's mean (``by_agent.<agent>``) over the rows it was scored on
    (``by_agent.<agent>.rows``). An attribution (``details["attribution"]``) names the agent
    responsible: the figures are each agent's share of the attributed rows
    (``blamed.<agent>``) and their number (``blamed.<agent>.rows``), most blamed first.
    Agents come in the order they first appear; empty when no result carries either.
    """
    values: dict[str, list[float]] = {}
    blamed: dict[str, int] = {}
    attributed = 0
    for result in results:
        per_agent = result.details.get("by_agent")
        if isinstance(per_agent, dict):
            for agent, value in per_agent.items():
                if isinstance(value, (int, float)) and not isinstance(value, bool):
                    values.setdefault(str(agent), []).append(float(value))
        attribution = result.details.get("attribution")
        if isinstance(attribution, dict) and attribution.get("agent") is not None:
            attributed += 1
            agent = str(attribution["agent"])
            blamed[agent] = blamed.get(agent, 0) + 1
    figures: dict[str, float] = {}
    for agent, found in values.items():
        figures[f"{AGENT_PREFIX}{agent}"] = sum(found) / len(found)
        figures[f"{AGENT_PREFIX}{agent}.rows"] = float(len(found))
    for agent, count in sorted(blamed.items(), key=lambda item: -item[1]):
        figures[f"{BLAME_PREFIX}{agent}"] = count / attributed
        figures[f"{BLAME_PREFIX}{agent}.rows"] = float(count)
    return figures


def vote_stability(results: Sequence[MetricResult]) -> dict[str, float]:
    """``unstable`` (count) and ``unstable_share`` of rows whose votes straddle the threshold.

    Only for results judged with ``repeats > 1`` and a ``pass_threshold`` (their vote record
    says whether they straddle it); empty otherwise. The share is over the scored rows.
    """
    judged = [r for r in results if (record := _votes(r)) is not None and "unstable" in record]
    if not judged:
        return {}
    count = sum(unstable(r) for r in judged)
    return {"unstable": float(count), "unstable_share": count / len(results)}


# -- names that moved to turneval.stats ----------------------------------------------------------

_MOVED = {
    "bootstrap_ci": "turneval.stats._inference",
    "holm": "turneval.stats._inference",
    "paired_permutation_test": "turneval.stats._inference",
}


def __getattr__(name: str) -> Any:
    """The statistics that moved to :mod:`turneval.stats`, with a ``DeprecationWarning``."""
    module = _MOVED.get(name)
    if module is None:
        raise AttributeError(f"module 'turneval.aggregate' has no attribute {name!r}")
    warnings.warn(
        f"turneval.aggregate.{name} moved to turneval.stats: import it from there "
        f"(from turneval.stats import {name})",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(import_module(module), name)

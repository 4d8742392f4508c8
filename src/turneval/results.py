"""Typed result records: one metric on one sample, one sample, one run."""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turneval._files import naming
from turneval.errors import ConfigError
from turneval.usage import Usage

if TYPE_CHECKING:
    import pandas as pd

    from turneval.aggregate import FlakyScenario, MetricSummary, SummaryTable
    from turneval.messages import Message
    from turneval.samples import Sample

__all__ = [
    "AGENT_FIGURES",
    "AgentRun",
    "EarlyStops",
    "EvaluationResult",
    "MetricFailure",
    "MetricResult",
    "Prices",
    "SampleResult",
    "json_line",
    "ratio",
    "trial_outcome",
]


@dataclass(frozen=True, slots=True)
class MetricResult:
    """The detailed score of one metric on one sample.

    Attributes:
        name: The metric's name.
        value: The score, a finite float (in [0, 1] for every built-in but the 1-5 rubric judges).
        reason: How the score was reached, with its arithmetic (``precision=2/3=0.667 ...``).
        details: Structured evidence, e.g. which calls were matched.
        usage: Judge tokens and calls spent on this result (None for rule-based metrics).
    """

    name: str
    value: float
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    usage: Usage | None = None

    def __post_init__(self) -> None:
        """Reject non-finite values: a failure is recorded as an error, never as NaN."""
        if not math.isfinite(self.value):
            raise ValueError(f"metric {self.name!r} produced a non-finite value {self.value!r}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the fields."""
        usage = None if self.usage is None else self.usage.to_dict()
        return {
            "name": self.name,
            "value": self.value,
            "reason": self.reason,
            "details": self.details,
            "usage": usage,
        }


def ratio(label: str, numerator: int, denominator: int, value: float) -> str:
    """Format ``label=k/n=0.667`` as used in reasons."""
    return f"{label}={numerator}/{denominator}={value:.3f}"


@dataclass(frozen=True, slots=True)
class MetricFailure:
    """A metric that failed on one sample: the error's type and message, kept on the row."""

    name: str
    sample_index: int
    error_type: str
    message: str

    def __str__(self) -> str:
        """``"<ErrorType>: <message>"``."""
        return f"{self.error_type}: {self.message}"


TRIAL_KEYS = ("scenario_id", "trial", "stop_reason")
"""What a row of a simulated conversation records about it (results.jsonl columns)."""


@dataclass(slots=True)
class AgentRun:
    """What one run of an agent produced (``EvalTask``, a simulated conversation or a trace).

    Attributes:
        messages: The conversation, as it happened.
        latency_s: Wall-clock seconds the run took.
        error: ``"<ErrorType>: <message>"`` when the run failed (the row's metrics then fail
            with it), else None.
        usage: The agent's token usage (from its AI messages' usage metadata).
        steps: The number of AI messages the agent produced.
        error_type: The error type recorded on the row's metrics when the run failed.
        by_agent: Whether ``error`` is the agent's; False when something else ended the run (a
            simulated user that failed): the row's metrics fail with it, but the agent did not.
    """

    messages: list[Message]
    latency_s: float
    error: str | None = None
    usage: Usage = field(default_factory=Usage)
    steps: int = 0
    error_type: str = "AgentRunError"
    by_agent: bool = True

    @property
    def failed(self) -> bool:
        """Whether the agent failed (``error`` is set and is the agent's)."""
        return self.error is not None and self.by_agent


AGENT_FIGURES = ("latency_in_seconds", "failure", "agent_total_tokens", "steps")
"""The figures a run's summary adds when an agent was run, before its metrics."""


class _AgentFigures:
    """The numbers of a run's agent runs (no messages), as its summary reads them.

    Latency, tokens and steps of the runs that succeeded (a failed run's partial figures
    would skew them); ``failure`` (0/1) of the runs the agent is judged on (a run ended by
    something else, a simulated user that failed, is neither a success nor a failure).
    A streamed run adds its rows chunk by chunk.
    """

    __slots__ = ("failure", "latency", "runs", "steps", "tokens")

    def __init__(self) -> None:
        self.runs = 0
        self.latency, self.tokens, self.steps = array("d"), array("d"), array("d")
        self.failure = array("d")

    def add(self, run: AgentRun) -> None:
        """Count one agent run in."""
        self.runs += 1
        if run.error is None:
            self.latency.append(run.latency_s)
            self.tokens.append(float(run.usage.total_tokens))
            self.steps.append(float(run.steps))
        if run.error is None or run.by_agent:
            self.failure.append(float(run.failed))

    def extend(self, other: _AgentFigures) -> None:
        """Count another part's runs in (a chunk of a streamed run)."""
        self.runs += other.runs
        for mine, theirs in zip(
            (self.latency, self.tokens, self.steps, self.failure),
            (other.latency, other.tokens, other.steps, other.failure),
            strict=True,
        ):
            mine.extend(theirs)

    def summaries(self) -> dict[str, MetricSummary]:
        """The :data:`AGENT_FIGURES` summaries ({} when no agent was run).

        Each figure's ``failed`` counts the runs left out of it.
        """
        from turneval.aggregate import summarize

        if not self.runs:
            return {}
        left_out = self.runs - len(self.latency)
        return {
            "latency_in_seconds": summarize("latency_in_seconds", self.latency, left_out),
            "failure": summarize("failure", self.failure, self.runs - len(self.failure)),
            "agent_total_tokens": summarize("agent_total_tokens", self.tokens, left_out),
            "steps": summarize("steps", self.steps, left_out),
        }


@dataclass(slots=True)
class SampleResult:
    """Everything measured on one sample: a result or a failure per metric.

    ``agent`` is the :class:`AgentRun` when an agent was run on the sample (``EvalTask``, a
    simulated conversation, a trace); ``latency_s``, ``failure`` (0/1), ``agent_error``,
    ``agent_usage`` and ``steps`` read it (None without one). ``line`` is the sample's 1-based
    line in the input file when it was read from one (the streaming CLI), so reports name the
    same line as results.jsonl. ``stored_id`` and ``stored_trial`` are what a results file
    holds for a row read back without its sample (see :attr:`sample_id` and :attr:`trial_info`).
    """

    index: int
    sample: Sample | None
    results: dict[str, MetricResult] = field(default_factory=dict)
    failures: dict[str, MetricFailure] = field(default_factory=dict)
    line: int | None = None
    agent: AgentRun | None = None
    stored_id: str | None = None
    stored_trial: dict[str, Any] | None = None

    @property
    def trial_info(self) -> dict[str, Any]:
        """A simulated conversation's ``scenario_id``, ``trial`` and ``stop_reason`` ({} else).

        From the sample's metadata, or from the results file a row was read back from
        (``stored_trial``), so pass^k can be computed again from a saved run.
        """
        metadata = getattr(self.sample, "metadata", None) if self.sample is not None else None
        if metadata and "scenario_id" in metadata:
            return {key: metadata.get(key) for key in TRIAL_KEYS}
        return dict(self.stored_trial or {})

    @property
    def sample_id(self) -> str | None:
        """The sample's ``metadata["id"]`` as text (None without one)."""
        metadata = getattr(self.sample, "metadata", None) if self.sample is not None else None
        if metadata and metadata.get("id") is not None:
            return str(metadata["id"])
        return self.stored_id

    @property
    def latency_s(self) -> float | None:
        """The agent run's latency in seconds (None without an agent run)."""
        return None if self.agent is None else self.agent.latency_s

    @property
    def failure(self) -> int | None:
        """1 if the agent run failed, 0 if it succeeded, None without an agent run."""
        return None if self.agent is None else int(self.agent.failed)

    @property
    def agent_error(self) -> str | None:
        """The agent run's error (None when it succeeded or there was none)."""
        return None if self.agent is None else self.agent.error

    @property
    def agent_usage(self) -> Usage | None:
        """The agent run's token usage (None without an agent run)."""
        return None if self.agent is None else self.agent.usage

    @property
    def steps(self) -> int | None:
        """The agent run's AI messages (None without an agent run)."""
        return None if self.agent is None else self.agent.steps

    def score(self, name: str) -> float:
        """The metric's value, NaN where it failed (ragas' convention at this boundary)."""
        result = self.results.get(name)
        return result.value if result is not None else math.nan

    @property
    def usage(self) -> Usage:
        """Judge usage summed over this row's metrics."""
        return sum((r.usage for r in self.results.values() if r.usage is not None), Usage())

    def record(self, metric_names: list[str], *, details: bool = False) -> dict[str, Any]:
        """A flat, JSON-ready dict: ``<name>``, ``<name>_reason``, ``<name>_error`` per metric.

        ``id`` follows ``index`` when the sample has ``metadata["id"]``. Values are None where
        the metric failed; ``details=True`` adds ``<name>_details`` and,
        for judged results, ``<name>_usage`` (:meth:`Usage.to_dict`); ``line`` comes last when
        the row was read from a file. Without details, a judged metric's vote record
        (``repeats`` > 1) is still kept, as ``<name>_details: {"repeats": ...}``: a file read
        back (``from_jsonl``, ``--resume``, ``compare``) then counts the same unstable rows.
        """
        record: dict[str, Any] = {"index": self.index}
        sample_id = self.sample_id
        if sample_id is not None:  # what labels and reports name the row by
            record["id"] = sample_id
        record.update(self.trial_info)  # a simulated conversation's scenario, trial, stop reason
        for name in metric_names:
            result, failure = self.results.get(name), self.failures.get(name)
            record[name] = result.value if result is not None else None
            record[f"{name}_reason"] = result.reason if result is not None else None
            record[f"{name}_error"] = str(failure) if failure is not None else None
            if details and result is not None:
                record[f"{name}_details"] = result.details
                if result.usage is not None:
                    record[f"{name}_usage"] = result.usage.to_dict()
            elif result is not None and "repeats" in result.details:
                votes = {k: v for k, v in result.details["repeats"].items() if k != "votes"}
                record[f"{name}_details"] = {"repeats": votes}
        if self.agent is not None:
            usage = self.agent.usage
            record.update(
                latency_in_seconds=self.agent.latency_s,
                failure=int(self.agent.failed),
                agent_error=self.agent.error,
                agent_input_tokens=usage.input_tokens,
                agent_output_tokens=usage.output_tokens,
                agent_total_tokens=usage.total_tokens,
                steps=self.agent.steps,
            )
        if self.line is not None:  # read from a file: the 1-based input line
            record["line"] = self.line
        return record


def _read_agent(record: dict[str, Any]) -> AgentRun:
    """The agent run of a results.jsonl record (its figures; the messages are not stored)."""
    error = record.get("agent_error")
    return AgentRun(
        [],
        float(record["latency_in_seconds"]),
        str(error) if error else None,
        Usage(
            int(record.get("agent_input_tokens") or 0),
            int(record.get("agent_output_tokens") or 0),
        ),
        int(record.get("steps") or 0),
        by_agent=not error or bool(record.get("failure", 1)),  # an error with failure 0: not its
    )


def _read_row(record: dict[str, Any], names: list[str], number: int) -> SampleResult:
    """The row of one results.jsonl record (``number``: its 1-based line)."""
    row = SampleResult(int(_number(record, "index", number - 1)), None)
    if record.get("line") is not None:  # the streaming CLI's input line
        row.line = int(_number(record, "line"))
    if record.get("id") is not None:
        row.stored_id = str(record["id"])
    if "scenario_id" in record:  # a simulated conversation: pass^k again
        row.stored_trial = {key: record.get(key) for key in TRIAL_KEYS}
    for name in names:
        if record.get(name) is not None:
            row.results[name] = MetricResult(
                name,
                float(_number(record, name)),
                record.get(f"{name}_reason") or "",
                dict(record.get(f"{name}_details") or {}),
                _read_usage(record.get(f"{name}_usage"), name, number),
            )
        elif record.get(f"{name}_error"):
            error_type, _, message = str(record[f"{name}_error"]).partition(": ")
            row.failures[name] = MetricFailure(name, row.index, error_type, message)
    if record.get("latency_in_seconds") is not None:
        row.agent = _read_agent(record)
    return row


def _number(record: dict[str, Any], key: str, default: int | None = None) -> int | float:
    """``record[key]`` as a number (an int or float; the field named if it is not one)."""
    value: Any = record.get(key, default)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    try:
        return float(value)  # a number written as text, as before
    except (TypeError, ValueError):
        raise ValueError(f"{key!r} must be a number, got {value!r}") from None


def _read_stops(record: dict[str, Any], skipped: dict[str, int]) -> tuple[int, int]:
    """``(trials, needed)`` of a row of a run that stopped trials early.

    Its scenario's skipped trials go into ``skipped`` (by scenario id, when some were).
    """
    trials, needed, left = (
        _number(record, key, 0) for key in ("trials_of", "trials_needed", "skipped_trials")
    )
    if left:
        skipped[str(record.get("scenario_id"))] = int(left)
    return int(trials), int(needed)


def _read_usage(data: Any, name: str, line: int) -> Usage | None:
    """The ``<name>_usage`` object of a results line, None when absent."""
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise ValueError(f"line {line}: {name}_usage must be an object, got {data!r}")
    try:
        return Usage.from_dict(data)
    except ValueError as error:
        raise ValueError(f"line {line}: {name}_usage: {error}") from None


def json_line(record: dict[str, Any]) -> str:
    """``record`` as one line of JSON, whatever its strings (lone surrogates are escaped)."""
    text = json.dumps(record, ensure_ascii=False, default=str)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: \\uXXXX escapes keep the line valid UTF-8
        text = json.dumps(record, ensure_ascii=True, default=str)
    return text


@dataclass(frozen=True, slots=True)
class Prices:
    """Judge prices per one million tokens, to turn usage into cost.

    ``batch_discount`` is the share a provider's batch API takes off those prices (OpenAI's
    Batch API and Anthropic's Message Batches: half).
    """

    input_per_million: float
    output_per_million: float
    batch_discount: float = 0.5

    def batch_cost(self, usage: Usage) -> float:
        """The cost of ``usage`` through a batch API (the discount applied)."""
        return self.cost(usage) * (1 - self.batch_discount)

    def cost(self, usage: Usage) -> float:
        """The cost of ``usage``."""
        return usage.cost(self.input_per_million, self.output_per_million)


def trial_outcome(row: SampleResult, name: str, threshold: float) -> bool | None:
    """One trial's success on metric ``name``: its value reaches ``threshold``.

    A trial whose agent failed or timed out is a failure; any other failure of the metric (a
    judge or user-model error) is unknown (None).
    """
    result = row.results.get(name)
    if result is not None:
        return bool(result.value >= threshold)
    failed = row.trial_info.get("stop_reason") in ("agent_error", "timeout")
    return False if failed else None


@dataclass(frozen=True, slots=True)
class EarlyStops:
    """What stopping early saved in a run (``result.early_stops``).

    Attributes:
        trials: Trials per scenario asked for.
        needed: Successes a scenario needs to pass.
        ran: Conversations run.
        skipped: Per scenario id stopped early, the trials not run.
    """

    trials: int
    needed: int
    ran: int
    skipped: dict[str, int] = field(default_factory=dict)

    @property
    def saved(self) -> int:
        """Conversations not run."""
        return sum(self.skipped.values())

    def __str__(self) -> str:
        """``stop_early: 7 of 30 conversations not run (23%), 4 scenarios settled early``."""
        total = self.ran + self.saved
        share = self.saved / total if total else 0.0
        return (
            f"stop_early: {self.saved} of {total} conversations not run ({share:.0%}), "
            f"{len(self.skipped)} scenario{'s' if len(self.skipped) != 1 else ''} settled early"
        )


class EvaluationResult:
    """The rows of a run, in input order, and their summaries.

    When scenarios were simulated, each metric's summary ``extra`` holds ``success_rate`` and
    ``pass^k`` / ``pass@k`` for k = 1 to the number of trials (see :meth:`trial_outcomes`).
    A dataset rebuilt from traces leaves ``skipped_traces``: the traces that were no
    conversation (no model call), counted by reason, never rows.
    """

    def __init__(
        self, rows: list[SampleResult], metric_names: list[str], usage: Usage | None = None
    ) -> None:
        """Hold ``rows`` (one per input sample) scored with ``metric_names``.

        ``usage`` is the run's judge usage (every request, including those of failed rows).
        """
        self.rows = rows
        self.metric_names = metric_names
        self.usage = usage if usage is not None else Usage()
        self.success_thresholds: dict[str, float] = {}  # per metric, for pass^k (default 1.0)
        self.user_usage: Usage | None = None  # the simulated user's, when scenarios were run
        self.metrics: list[Any] = []  # the metric objects of the run, when it ran here
        self.aggregates: dict[str, float] = {}  # the run's RunAggregate figures, by name
        self.aggregate_errors: dict[str, str] = {}  # per aggregate that raised: its error
        self.skipped_traces: dict[str, int] = {}  # traces that were no conversation, by reason
        self.early_stops: EarlyStops | None = None  # what stop_early saved, when trials stopped
        self.store_run: str | None = None  # the run's id in the run store it was kept in

    def __len__(self) -> int:
        """Number of rows (= input samples)."""
        return len(self.rows)

    def __repr__(self) -> str:
        """Metric means at a glance."""
        means = ", ".join(
            f"{name}: {'n/a' if s.mean is None else f'{s.mean:.4f}'}"
            for name, s in self.summary().items()
        )
        return f"EvaluationResult({len(self.rows)} rows; {means})"

    def scores(self, name: str) -> list[float]:
        """One value per row for metric ``name``, NaN where it failed."""
        if name not in self.metric_names:
            raise KeyError(f"no metric named {name!r}; the run has {self.metric_names}")
        return [row.score(name) for row in self.rows]

    def success_threshold(self, name: str) -> float:
        """The value at or above which metric ``name`` counts as a success (default 1.0)."""
        return self.success_thresholds.get(name, 1.0)

    def trial_outcomes(self, name: str) -> dict[str, list[bool | None]]:
        """Per scenario id, the success of each trial of metric ``name`` (simulated runs).

        A trial succeeds when the metric's value reaches :meth:`success_threshold`; a trial
        whose agent failed or timed out is a failure; None where the metric failed for another
        reason (a judge or user-model error): such trials are left out of pass^k.
        """
        outcomes: dict[str, list[bool | None]] = {}
        threshold = self.success_threshold(name)
        for row in self.rows:
            metadata = row.trial_info
            if metadata:
                outcome = trial_outcome(row, name, threshold)
                outcomes.setdefault(str(metadata["scenario_id"]), []).append(outcome)
        return outcomes

    def flaky_scenarios(self, name: str) -> list[FlakyScenario]:
        """Scenarios whose trials of metric ``name`` disagree, with pass rate and interval.

        See :func:`~turneval.aggregate.flaky_scenarios`; their count is the summary's
        ``flaky_scenarios`` figure (simulated runs with more than one trial).
        """
        from turneval.aggregate import flaky_scenarios

        return flaky_scenarios(self.trial_outcomes(name))

    def _trial_figures(self, name: str) -> dict[str, float]:
        from turneval.aggregate import pass_at_k, pass_hat_k

        if self.early_stops is not None and self.early_stops.saved:
            return self._settled_figures(name, self.early_stops)
        known = [
            [o for o in trials if o is not None] for trials in self.trial_outcomes(name).values()
        ]
        figures: dict[str, float] = {}
        for k in range(1, max((len(trials) for trials in known), default=0) + 1):
            hat, at = pass_hat_k(known, k), pass_at_k(known, k)
            if hat is not None and at is not None:
                figures[f"pass^{k}"], figures[f"pass@{k}"] = hat, at
        if figures:
            figures["success_rate"] = figures["pass^1"]
        if "pass^2" in figures:  # mixed outcomes need two trials
            figures["flaky_scenarios"] = float(len(self.flaky_scenarios(name)))
        return figures

    def _settled_figures(self, name: str, stops: EarlyStops) -> dict[str, float]:
        """The figures a run with stopped scenarios gives exactly (see turneval.sequential).

        Per scenario, the verdict "at least ``stops.needed`` of ``stops.trials`` trials
        succeed", known once settled; scenarios with an unknown outcome are left out, as
        pass^k leaves out those with too few known trials.
        """
        verdicts = []
        for outcomes in self.trial_outcomes(name).values():
            if None in outcomes:
                continue
            passed = sum(map(bool, outcomes))
            left = stops.trials - len(outcomes)
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
        figures["flaky_scenarios"] = float(len(self.flaky_scenarios(name)))
        return figures

    def summary(self) -> SummaryTable:
        """Per metric: mean, std (ddof=1), count (scored rows), failed, 95% CI and usage.

        A dict of :class:`MetricSummary` by name that prints as a table (and renders as one
        in notebooks).

        When an agent was run, also ``failure`` over every row (its mean is the failure rate),
        and ``latency_in_seconds``, ``agent_total_tokens`` and ``steps`` over the rows whose
        agent run succeeded (their ``failed`` counts the failed runs, left out). A run ended by
        something else (a simulated user that failed) is neither: it is left out of ``failure``
        too (counted in its ``failed``).
        """
        from turneval.aggregate import (
            SummaryTable,
            _is_pairwise,
            _pairwise_rates,
            summarise_metrics,
        )

        figures = _AgentFigures()
        for row in self.rows:
            if row.agent is not None:
                figures.add(row.agent)
        summaries = SummaryTable(figures.summaries())
        results = {
            name: [row.results[name] for row in self.rows if name in row.results]
            for name in self.metric_names
        }
        usages = {
            name: [r.usage for r in results[name] if r.usage is not None]
            for name in self.metric_names
        }
        metrics = {metric.name: metric for metric in self.metrics}
        table = summarise_metrics(
            self.metric_names,
            {name: [r.value for r in results[name]] for name in self.metric_names},
            {name: sum(name in row.failures for row in self.rows) for name in self.metric_names},
            {name: sum(used, Usage()) if used else None for name, used in usages.items()},
            metrics=metrics,
            results=results,
        )
        for name, summary in table.items():
            extra = self._trial_figures(name)
            if name not in metrics and _is_pairwise(results[name]):  # read back from a file
                extra = {**extra, **_pairwise_rates(results[name])}
            if extra:
                summary = replace(summary, extra={**(summary.extra or {}), **extra})
            summaries[name] = summary
        return summaries

    def summary_frame(self) -> pd.DataFrame:
        """:meth:`summary` as a pandas DataFrame indexed by metric name."""
        frame: pd.DataFrame = self.summary().to_frame()
        return frame

    def cost(self, prices: Prices | Mapping[str, float]) -> float:
        """The run's judge cost: ``Prices`` or ``{"input": .., "output": ..}`` per 1M tokens."""
        if not isinstance(prices, Prices):
            prices = Prices(prices["input"], prices["output"])
        return prices.cost(self.usage)

    def records(self, *, details: bool = False) -> list[dict[str, Any]]:
        """One flat dict per row (see :meth:`SampleResult.record`).

        When trials stopped early (:attr:`early_stops`), each simulated conversation's row
        also says how its scenario was tried: ``trials_of`` (trials asked for),
        ``trials_needed`` (successes a scenario needs) and ``skipped_trials`` (its trials not
        run, 0 when it was not stopped), so a file read back gives the same summary.
        """
        records = [row.record(self.metric_names, details=details) for row in self.rows]
        stops = self.early_stops
        if stops is not None:
            for record in records:
                if "scenario_id" in record:
                    record.update(
                        trials_of=stops.trials,
                        trials_needed=stops.needed,
                        skipped_trials=stops.skipped.get(str(record["scenario_id"]), 0),
                    )
        return records

    def __getitem__(self, name: str) -> list[float]:
        """``result["tool_call_f1"]``: the column of scores, as ragas' results give it.

        ragas' default names of metrics that turneval names differently are accepted too
        (each metric's ``ragas_names``, e.g. ``bleu_score``), when the run has one metric
        they can mean (a result read back from a file has no metric objects: names only).
        """
        if name not in self.metric_names:
            candidates = [m.name for m in self.metrics if name in m.ragas_names]
            if len(candidates) == 1:
                name = candidates[0]
        return self.scores(name)

    def sample_columns(self) -> dict[str, list[Any]]:
        """The samples' fields as columns (ragas' names: ``user_input``, ``reference``, ...).

        A field appears when at least one row's sample sets it; messages and tool calls are
        JSON-ready dicts. Rows read back without samples give no columns.
        """
        dumps = [
            {} if row.sample is None else row.sample.model_dump(mode="json", exclude_none=True)
            for row in self.rows
        ]
        names: list[str] = []
        for dump in dumps:
            names += [key for key in dump if key not in names]
        return {name: [dump.get(name) for dump in dumps] for name in names}

    def to_pandas(self) -> pd.DataFrame:
        """One row per sample in input order: its fields, then values, reasons and errors.

        The sample's fields come first under ragas' column names (``user_input``,
        ``reference``, ``reference_tool_calls``, ...), then per metric its value (NaN where
        failed), ``<name>_reason`` and ``<name>_error``.
        """
        import pandas as pd

        records = self.records()
        for record in records:  # a vote record (repeats) is not a column
            for name in self.metric_names:
                record.pop(f"{name}_details", None)
        frame: pd.DataFrame = pd.DataFrame(records)
        for position, (column, values) in enumerate(self.sample_columns().items(), start=1):
            if column not in frame.columns:
                frame.insert(position, column, pd.Series(values, dtype=object))
        for name in self.metric_names:
            frame[name] = pd.Series(
                [math.nan if r[name] is None else r[name] for r in records], dtype=float
            )
            for column in (f"{name}_reason", f"{name}_error"):  # object: None stays None
                frame[column] = pd.Series([record[column] for record in records], dtype=object)
        return frame

    def to_jsonl(self, path: str | PathLike[str], *, details: bool = True) -> None:
        """Write one JSON object per row (failed values as ``null``), with details by default."""
        with naming(path), Path(path).open("w", encoding="utf-8") as handle:
            for record in self.records(details=details):
                handle.write(json_line(record))
                handle.write("\n")

    @classmethod
    def from_jsonl(cls, path: str | PathLike[str]) -> EvaluationResult:
        """Read back the rows a run wrote (``to_jsonl`` or the CLI's results.jsonl).

        Samples are not stored there, so rows have ``sample=None``; values, reasons, errors,
        the agent run's figures (latency, error, token usage, steps: ``row.agent``, with no
        messages) and (when the file was written with details) each result's details and judge
        usage are restored; the run's ``usage`` is the sum of the results' (requests of failed
        metrics are not in the file). A pairwise judge's column is recognised by its verdicts'
        reasons, so :meth:`summary` gives its win, loss and tie rates again (and, when the file
        has details, ``position_consistency``).

        Raises:
            ConfigError: naming the file and line, for a line that is not a results row (not
                UTF-8, not a JSON object, a value of the wrong type).
        """
        rows: list[SampleResult] = []
        names: list[str] = []
        stopped: list[tuple[int, int]] = []  # per row with trial info: (trials, needed)
        skipped: dict[str, int] = {}
        with Path(path).open("rb") as handle:
            for number, raw in enumerate(handle, start=1):
                if not raw.strip():
                    continue
                try:
                    record = json.loads(raw.decode("utf-8"))
                    if not isinstance(record, dict):
                        raise TypeError(f"expected a JSON object, got {type(record).__name__}")
                    if not names:
                        names = [key for key in record if f"{key}_reason" in record]
                    rows.append(_read_row(record, names, number))
                    if record.get("trials_of") is not None:  # trials stopped early
                        stopped.append(_read_stops(record, skipped))
                except (ValueError, TypeError, KeyError) as exc:  # JSON, UTF-8, a field's type
                    detail = " ".join(str(exc).split())
                    if isinstance(exc, json.JSONDecodeError):  # its line is the text's own
                        detail = f"{exc.msg}, column {exc.colno}"
                    named = detail.removeprefix(f"line {number}: ")  # a field's own message
                    if named == detail:
                        named = f"not a turneval results row ({type(exc).__name__}: {detail})"
                    raise ConfigError(f"{path} line {number}: {named}") from exc
        result = cls(rows, names, sum((row.usage for row in rows), Usage()))
        if stopped:
            trials, needed = stopped[0]
            ran = sum(1 for row in rows if row.trial_info)
            result.early_stops = EarlyStops(trials, needed, ran, skipped)
        return result

    @classmethod
    def from_records(cls, records: Iterable[dict[str, Any]]) -> EvaluationResult:
        """The rows of results.jsonl records already read (a run store's), as ``from_jsonl``."""
        rows: list[SampleResult] = []
        names: list[str] = []
        for number, record in enumerate(records, start=1):
            if not names:
                names = [key for key in record if f"{key}_reason" in record]
            rows.append(_read_row(record, names, number))
        return cls(rows, names, sum((row.usage for row in rows), Usage()))

    def to_html(self, path: str | PathLike[str], *, title: str = "turneval report") -> None:
        """Write a self-contained HTML report (no network): summary, histograms, drill-down."""
        from turneval.report import render_html

        html = render_html(self, title=title)
        with naming(path):
            Path(path).write_text(html, encoding="utf-8", errors="backslashreplace")

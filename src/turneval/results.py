"""Typed result records: one metric on one sample, one sample, one run."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turneval._files import naming
from turneval._rows import (
    AGENT_FIGURES,
    AgentRun,
    MetricFailure,
    MetricResult,
    SampleResult,
    ToolTiming,
    Trial,
    TurnTiming,
    json_line,
    ratio,
)
from turneval.aggregate import RunFigures, summarise_metrics, trial_outcome
from turneval.results_codec import (
    decode,
    decode_file,
    early_stop_columns,
    encode,
    metric_names,
    named_error,
)
from turneval.usage import Usage

if TYPE_CHECKING:
    import pandas as pd

    from turneval.aggregate import FlakyScenario, SummaryTable
    from turneval.manifest import RunManifest

__all__ = [
    "AGENT_FIGURES",
    "AgentRun",
    "EarlyStops",
    "EvaluationResult",
    "MetricFailure",
    "MetricResult",
    "Prices",
    "SampleResult",
    "ToolTiming",
    "Trial",
    "TurnTiming",
    "json_line",
    "ratio",
    "trial_outcome",
]


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
        self.manifest: RunManifest | None = None  # what the run was started with, when known
        # columns read back without a record of their metric (a file written before the run
        # manifest): their metric names came from their <name>_reason columns, and only they
        # are recognised as pairwise by their reasons (legacy)
        self.legacy_columns: frozenset[str] = frozenset()

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
        return self._figures([name]).outcomes(name)

    def flaky_scenarios(self, name: str) -> list[FlakyScenario]:
        """Scenarios whose trials of metric ``name`` disagree, with pass rate and interval.

        See :func:`~turneval.aggregate.flaky_scenarios`; their count is the summary's
        ``flaky_scenarios`` figure (simulated runs with more than one trial).
        """
        from turneval.aggregate import flaky_scenarios

        return flaky_scenarios(self.trial_outcomes(name))

    def _figures(self, names: list[str]) -> RunFigures:
        """The rows' agent runs and trial outcomes on ``names``, as every sink counts them."""
        figures = RunFigures(self.success_thresholds)
        for row in self.rows:
            figures.add(row, names)
        return figures

    def summary(self) -> SummaryTable:
        """Per metric: mean, std (ddof=1), count (scored rows), failed, 95% CI and usage.

        A dict of :class:`MetricSummary` by name that prints as a table (and renders as one
        in notebooks); the run's one summariser
        (:func:`~turneval.aggregate.summarise_metrics`) computes it, as it computes the
        streamed run's.

        When an agent was run, also ``failure`` over every row (its mean is the failure rate),
        and ``latency_in_seconds``, ``agent_total_tokens`` and ``steps`` over the rows whose
        agent run succeeded (their ``failed`` counts the failed runs, left out). A run ended by
        something else (a simulated user that failed) is neither: it is left out of ``failure``
        too (counted in its ``failed``). Simulated trials add their figures to each metric's
        ``extra`` (see :meth:`trial_outcomes`).
        """
        results = {
            name: [row.results[name] for row in self.rows if name in row.results]
            for name in self.metric_names
        }
        usages = {
            name: [r.usage for r in results[name] if r.usage is not None]
            for name in self.metric_names
        }
        return summarise_metrics(
            self.metric_names,
            {name: [r.value for r in results[name]] for name in self.metric_names},
            {name: sum(name in row.failures for row in self.rows) for name in self.metric_names},
            {name: sum(used, Usage()) if used else None for name, used in usages.items()},
            metrics={metric.name: metric for metric in self.metrics},
            results=results,
            figures=self._figures(self.metric_names),
            early_stops=self.early_stops,
            legacy=self.legacy_columns,
        )

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
        """One flat dict per row (see :func:`turneval.results_codec.encode`).

        When trials stopped early (:attr:`early_stops`), each simulated conversation's row
        also says how its scenario was tried: ``trials_of`` (trials asked for),
        ``trials_needed`` (successes a scenario needs) and ``skipped_trials`` (its trials not
        run, 0 when it was not stopped), so a file read back gives the same summary.
        """
        records = [encode(row, self.metric_names, details=details) for row in self.rows]
        stops = self.early_stops
        if stops is not None:
            for row, record in zip(self.rows, records, strict=True):
                if row.trial is not None:
                    record.update(
                        trials_of=stops.trials,
                        trials_needed=stops.needed,
                        skipped_trials=stops.skipped.get(row.trial.scenario_id, 0),
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
        failed), ``<name>_reason`` and ``<name>_error`` (a failure's traceback stays on its row:
        ``result.rows[i].failures[name].traceback``).
        """
        import pandas as pd

        records = self.records()
        for record in records:  # a vote record (repeats), a traceback: not columns
            for name in self.metric_names:
                record.pop(f"{name}_details", None)
                record.pop(f"{name}_traceback", None)
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
    def from_jsonl(
        cls,
        path: str | PathLike[str],
        *,
        manifest: RunManifest | None = None,
        find_manifest: bool = True,
    ) -> EvaluationResult:
        """Read back the rows a run wrote (``to_jsonl`` or the CLI's results.jsonl).

        Samples are not stored there, so rows have ``sample=None``; values, reasons, errors,
        the row's provenance (``source``, the trial, the agent run's figures: latency, error,
        token usage, steps: ``row.agent``, with no messages) and (when the file was written with
        details) each result's details and judge usage are restored (see
        :mod:`turneval.results_codec`); the run's ``usage`` is the sum of the results'
        (requests of failed metrics are not in the file).

        The run's :class:`~turneval.manifest.RunManifest` (``manifest``, else, unless
        ``find_manifest`` is False, the ``run.json`` beside a run folder's ``results.jsonl``)
        names its metrics and rebuilds them
        (:attr:`metrics`, where their classes can be found), so :meth:`summary` gives each
        metric's own figures (a pairwise judge's win, loss and tie rates). A file written
        before the manifest is read as it was: its metric names are its ``<name>_reason``
        columns and a pairwise judge's column is recognised by its verdicts' reasons
        (:attr:`legacy_columns`).

        Raises:
            ConfigError: naming the file and line, for a line that is not a results row (not
                UTF-8, not a JSON object, a value of the wrong type); the run.json beside it
                is not a run record.
        """
        if manifest is None and find_manifest:
            from turneval.manifest import RunManifest

            manifest = RunManifest.find(path) if Path(path).name == "results.jsonl" else None
        names = None if manifest is None else manifest.metric_names
        rows, found, records = decode_file(path, names)
        stopped: list[tuple[int, int]] = []  # per row with a trial: (trials, needed)
        skipped: dict[str, int] = {}
        for number, record in records:
            if record.get("trials_of") is not None:  # trials stopped early
                try:
                    stopped.append(early_stop_columns(record, skipped))
                except ValueError as exc:
                    raise named_error(path, number, exc) from exc
        result = cls(rows, found, sum((row.usage for row in rows), Usage()))
        result._read_with(manifest)
        if stopped:
            trials, needed = stopped[0]
            ran = sum(1 for row in rows if row.trial is not None)
            result.early_stops = EarlyStops(trials, needed, ran, skipped)
        return result

    @classmethod
    def from_records(
        cls,
        records: Iterable[dict[str, Any]],
        *,
        names: Sequence[str] | None = None,
        manifest: RunManifest | None = None,
    ) -> EvaluationResult:
        """The rows of results.jsonl records already read (a run store's), as ``from_jsonl``.

        The metric names are ``names``, else the manifest's, else (a run recorded before
        the manifest) the first record's ``<name>_reason`` columns.
        """
        if names is None and manifest is not None:
            names = manifest.metric_names
        rows: list[SampleResult] = []
        found: list[str] = [] if names is None else list(names)
        for number, record in enumerate(records, start=1):
            if not found:
                found = metric_names(record)
            rows.append(decode(record, found, number))
        result = cls(rows, found, sum((row.usage for row in rows), Usage()))
        if names is None or manifest is not None:
            result._read_with(manifest)
        return result

    @classmethod
    def with_manifest(
        cls, rows: list[SampleResult], names: list[str], manifest: RunManifest | None
    ) -> EvaluationResult:
        """Rows read back (no metric objects) with their run's manifest (None: an old run's).

        As :meth:`from_records` leaves them: the metrics rebuilt from the manifest, the
        columns without a record of their metric marked legacy.
        """
        result = cls(rows, names, sum((row.usage for row in rows), Usage()))
        result._read_with(manifest)
        return result

    def _read_with(self, manifest: RunManifest | None) -> None:
        """Rows read back: rebuild the metrics the manifest records; mark the other columns."""
        self.manifest = manifest
        if manifest is None:
            self.legacy_columns = frozenset(self.metric_names)
            return
        self.metrics = manifest.build_metrics(strict=False)
        recorded = {spec.name for spec in manifest.metrics if spec.class_path is not None}
        self.legacy_columns = frozenset(name for name in self.metric_names if name not in recorded)

    def to_html(self, path: str | PathLike[str], *, title: str = "turneval report") -> None:
        """Write a self-contained HTML report (no network): summary, histograms, drill-down."""
        from turneval.report import render_html

        html = render_html(self, title=title)
        with naming(path):
            Path(path).write_text(html, encoding="utf-8", errors="backslashreplace")

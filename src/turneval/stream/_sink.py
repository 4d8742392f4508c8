"""The sink of a streamed run: rows handed to the run's sinks in input order, totals kept.

:class:`JsonlSink` takes the scored chunks in input order and hands their rows, as written
(their results.jsonl lines, encoded once where they were scored), to the run's sinks: the
run folder's :class:`~turneval.runs.FolderSink` (results.jsonl, flushed line by line, so a
partial file is never corrupt; run.json; summary.json), the run store's
:class:`~turneval.runs.StoreSink` when there is one, and any the caller gave. It counts the
rows into the run's totals and, at the end, summarises them with the run's one summariser
into the summary (summary.json), report.html and the :class:`StreamResult`.
"""

from __future__ import annotations

import json
import sys
from array import array
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from turneval._files import naming
from turneval.aggregate import (
    MetricSummary,
    RunFigures,
    compute_aggregates,
    summarise_metrics,
    summary_document,
)
from turneval.errors import EvaluationAbortedError
from turneval.metrics import Evaluator
from turneval.options import RunOptions
from turneval.pipeline import has_summary_extras
from turneval.report import render_report
from turneval.results import EvaluationResult, MetricResult, SampleResult
from turneval.runs._folder import FolderSink
from turneval.runs._sink import Rows, RunSink
from turneval.runs._to_store import is_store_sink
from turneval.stream._chunks import UNREADABLE, Chunk, Line, RowError, first_errors
from turneval.stream._resume import Done, absorb_finished, row_error
from turneval.usage import Usage

__all__ = [
    "JsonlSink",
    "STOPPED",
    "StreamResult",
]

STOPPED = "stopped early; --resume continues"
"""The error a run stopped early (``stop``, SIGTERM) ends its sinks' run with."""


@dataclass
class StreamResult:
    """What a streamed run leaves in memory: summaries and a bounded sample of rows.

    ``failed_rows`` counts the rows with at least one error (unreadable lines included);
    ``first_errors`` holds the first :data:`FIRST_ERRORS` of them, one per row, in input order;
    ``aggregates`` and ``aggregate_errors`` are the run's :class:`RunAggregate` figures and the
    errors of those that raised (as on :class:`~turneval.results.EvaluationResult`);
    ``agent_summaries`` the agent figures of rows with an agent run (traces): latency, failure
    rate, tokens and steps, as :meth:`~turneval.results.EvaluationResult.summary` gives them
    ({} without agent runs; summary.json lists them first among its ``metrics``, as the
    in-memory summary does); rows of simulated trials add their pass^k figures to each
    metric's ``extra``; ``skipped_traces`` counts, by reason, the traces of OTLP/JSON input
    that were no conversation (None for samples input);
    ``stopped`` is True when the run was stopped early (``evaluate_jsonl(stop=...)``, the CLI's
    SIGTERM): the rows cover the input read until then; ``store_run`` is the run's id in the
    run store it was kept in (``store=``), else None.
    """

    metric_names: list[str]
    total_rows: int
    bad_lines: int
    usage: Usage
    summaries: dict[str, MetricSummary]
    values: dict[str, np.ndarray]
    report_rows: list[SampleResult] = field(default_factory=list)
    failed_rows: int = 0
    first_errors: list[RowError] = field(default_factory=list)
    aggregates: dict[str, float] = field(default_factory=dict)
    aggregate_errors: dict[str, str] = field(default_factory=dict)
    agent_summaries: dict[str, MetricSummary] = field(default_factory=dict)
    store_run: str | None = None
    stopped: bool = False  # ``stop`` was set: the rest of the input was not read
    skipped_traces: dict[str, int] | None = None


class JsonlSink:
    """The streamed run's sink: rows handed on in order, totals kept for the summary."""

    def __init__(
        self,
        metrics: list[Evaluator],
        folder: FolderSink,
        report_rows: int,
        options: RunOptions,
        sinks: Sequence[RunSink] = (),
    ) -> None:
        """Rows go to ``folder`` (the run folder, started) and ``sinks`` (started too).

        ``report_rows`` rows are kept for the report; the folder records the input read so
        far as chunks are written; a :class:`~turneval.runs.StoreSink` among ``sinks`` is
        given a resumed run's finished rows too.
        """
        self.metrics, self.folder = metrics, folder
        self.sinks: list[RunSink] = [folder, *sinks]
        self.inputs: deque[list[str | bytes]] = deque()  # each chunk in flight: its lines
        self.last_lines: deque[int] = deque()  # each chunk in flight: its last input line
        self.progress, self.limiter = options.progress_shown(), options.rate_limit
        self.names = [metric.name for metric in metrics]
        self.report_rows = report_rows
        self.values = {name: array("d") for name in self.names}
        self.failed = dict.fromkeys(self.names, 0)
        self.usage = Usage()
        self.metric_usage = {name: Usage() for name in self.names}
        self.results: dict[str, list[MetricResult]] = {
            metric.name: [] for metric in metrics if has_summary_extras(metric)
        }
        self.kept: list[SampleResult] = []
        self.aggregates, self.options = options.aggregates, options
        self.total = self.bad = self.failed_rows = 0
        self.first_errors: list[RowError] = []
        self.figures = RunFigures()

    def keep(self) -> int:
        """How many rows of the next chunk the report still takes."""
        return max(self.report_rows - len(self.kept), 0)

    def resume(self, done: Done) -> None:
        """Count the finished rows of an interrupted run in (failed rows and their errors too)."""
        names = self.names
        rows = absorb_finished(
            done,
            names,
            self.values,
            self.failed,
            self.kept,
            self.report_rows,
            self.results,
            self.figures,
            {metric.name: metric.vote_threshold for metric in self.metrics},
        )
        self.total = len(rows)
        for sink in self.sinks:
            if is_store_sink(sink):  # the stored run's rows: those of the file
                sink.sync(done.values())
        self.bad = sum(1 for record in done.values() if record.get(UNREADABLE))
        errors = [error for row in rows if (error := row_error(row, names))]
        self.failed_rows = len(errors)
        self.first_errors = first_errors(errors)

    def track(self, chunks: Iterator[list[Line]]) -> Iterator[list[Line]]:
        """``chunks``, each one's last input line noted (chunks are absorbed in this order).

        The chunk's lines are kept too, as the samples of its rows (decoded only for a sink
        that asks for them, as the store sink does).
        """
        for lines in chunks:
            self.last_lines.append(lines[-1][0])
            self.inputs.append([text for _, text in lines])
            yield lines

    def absorb(self, chunk: Chunk) -> None:
        """Hand a scored chunk's rows to the sinks and add its totals.

        ``run.json`` first records the input read up to the chunk's last line, so that every
        row in results.jsonl comes from input a resumed run checks; the folder comes first
        (a resumed run's file has every row the store has).
        """
        if self.last_lines:
            self.folder.read_to(self.last_lines.popleft())
        lines = self.inputs.popleft() if self.inputs else []
        rows = Rows.encoded(  # a row's sample is its line (unknown when they do not pair)
            chunk.records,
            self.names,
            keys=chunk.keys,
            inputs=lines if len(lines) == len(chunk.records) else None,
        )
        for sink in self.sinks:
            sink.add(rows)
        for name in self.names:
            self.values[name].extend(chunk.values[name])
            self.failed[name] += chunk.failed[name]
            self.metric_usage[name] = self.metric_usage[name] + chunk.metric_usage[name]
        for name, results in chunk.results.items():
            self.results[name].extend(results)
        self.figures.extend(chunk.figures)
        self.usage = self.usage + chunk.usage
        self.kept.extend(chunk.report_rows[: self.keep()])
        self.total += len(chunk.records)
        self.bad += chunk.bad_lines
        self.failed_rows += chunk.failed_rows
        if chunk.first_errors:  # a resumed run's rows may come after the new ones
            self.first_errors = first_errors([*self.first_errors, *chunk.first_errors])
        self._after_rows(chunk)
        if self.progress:
            rate = f" ({self.limiter.describe()})" if self.limiter is not None else ""
            line = f"\rturneval: {self.total:,} samples{rate}"
            print(line, end="", file=sys.stderr, flush=True)

    def _after_rows(self, chunk: Chunk) -> None:
        """The run options' ``on_row`` for each row just written, then ``fail_on_error``."""
        if self.options.on_row is not None and chunk.records:
            records = map(json.loads, chunk.records)
            for row in EvaluationResult.from_records(records, names=self.names).rows:
                self.options.on_row(row)
        if chunk.failed_rows and self.options.should_abort(self.failed_rows, self.total):
            results = self.folder.results_path
            raise EvaluationAbortedError(
                f"fail_on_error={self.options.fail_on_error!r}: {self.failed_rows} of "
                f"{self.total} rows failed; first in the last chunk: {chunk.first_errors[0]} "
                f"(the rows written are in {results}; resume=True continues the run)",
                result=EvaluationResult.from_jsonl(results),
            )

    def finish(
        self,
        target: Path,
        title: str,
        skipped_traces: dict[str, int] | None = None,
        *,
        stopped: bool = False,
    ) -> StreamResult:
        """Summarise (the run's one summariser), end the sinks' run, write report.html.

        The folder sink writes summary.json. ``stopped``: the run was stopped early (its sinks' run is ``interrupted``).
        """
        if self.progress:
            print(file=sys.stderr)
        names = self.names
        arrays = {name: np.frombuffer(self.values[name], dtype=float) for name in names}
        table = summarise_metrics(  # the agent figures first, as in memory
            names,
            arrays,
            self.failed,
            {m.name: self.metric_usage[m.name] if m.uses_llm else None for m in self.metrics},
            metrics={metric.name: metric for metric in self.metrics},
            results=self.results,
            figures=self.figures,
        )
        summaries = {name: table[name] for name in names}
        result = StreamResult(
            names,
            self.total,
            self.bad,
            self.usage,
            summaries,
            arrays,
            self.kept,
            self.failed_rows,
            self.first_errors,
            agent_summaries={k: v for k, v in table.items() if k not in summaries},
            skipped_traces=skipped_traces,
        )
        if self.aggregates:  # they read whole rows: the file's, read back (no samples)
            rows = EvaluationResult.from_jsonl(target / "results.jsonl")
            rows.metrics, rows.usage = list(self.metrics), self.usage
            result.aggregates, result.aggregate_errors = compute_aggregates(self.aggregates, rows)
        summary = summary_document(
            self.total,
            table,
            self.usage,
            bad_lines=self.bad,
            failed_rows=self.failed_rows,
            aggregates=result.aggregates,
            aggregate_errors=result.aggregate_errors,
            skipped_traces=skipped_traces,
        )
        status, error = ("interrupted", STOPPED) if stopped else ("finished", None)
        for sink in self.sinks:
            sink.finish(summary, status, error)
        html = render_report(
            title=title,
            metric_names=names,
            summaries=dict(table),
            values=arrays,
            rows=self.kept,
            total_rows=self.total,
            usage=self.usage,
            tools={m.name: m.subject_tool for m in self.metrics if m.subject_tool is not None},
            lower_is_better=[m.name for m in self.metrics if not m.higher_is_better],
        )
        with naming(target / "report.html"):
            (target / "report.html").write_text(html, encoding="utf-8", errors="backslashreplace")
        return result

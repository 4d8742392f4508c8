"""Scoring a chunk of lines: each line read into a sample and scored, its row written at once.

:func:`run_chunk` is the one place a chunk is scored, whatever the engine (this process,
worker processes, Ray actors): it reads each line (:func:`~turneval._sample_lines.parse_line`),
scores the samples with the batch core (:func:`~turneval.pipeline.ascore_batch`), or one at a
time for rule-based metrics in turn, and turns the rows into results.jsonl lines and totals
(:class:`~turneval.stream._chunks.Chunk`). A line that holds no sample becomes a row whose
errors name the line.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import anyio
from pydantic import ValidationError

from turneval._sample_lines import parse_line
from turneval.aggregate import RunFigures
from turneval.errors import InvalidSampleError
from turneval.judge import Usage, judge_run
from turneval.judge._clients import client_scope
from turneval.messages import ToolCall
from turneval.metrics import Evaluator
from turneval.options import RunOptions
from turneval.pipeline import ascore_batch, has_summary_extras, score_sample
from turneval.provenance import DATASET, sample_provenance
from turneval.results import MetricFailure, MetricResult, SampleResult
from turneval.results_codec import encode, fast_line
from turneval.samples import MultiTurnSample, Sample
from turneval.stream._chunks import FIRST_ERRORS, UNREADABLE, Chunk, Line, RowError

__all__ = ["plain_explainers", "run_chunk"]


def _name_line(row: SampleResult, number: int) -> None:
    """Make every error of ``row`` name its 1-based input line."""
    prefix = f"line {number}"
    for name, failure in row.failures.items():
        if not failure.message.startswith((f"{prefix}:", f"{prefix} ")):
            row.failures[name] = replace(failure, message=f"{prefix}: {failure.message}")


def _bad_line_row(index: int, number: int, names: Sequence[str], exc: Exception) -> SampleResult:
    """The row of a line that holds no valid sample: every metric fails, naming the line."""
    row = SampleResult(index, None)
    kind, message = type(exc).__name__, str(exc)
    if not isinstance(exc, (InvalidSampleError, ValidationError)):
        kind, message = "InvalidSampleError", f"line {number}: {kind}: {message}"
    for name in names:
        row.failures[name] = MetricFailure(name, row.index, kind, message)
    return row


async def _score_chunk(
    lines: Sequence[Line],
    first_index: int,
    metrics: list[Evaluator],
    keep: int,
    options: RunOptions,
) -> Chunk:
    names = [metric.name for metric in metrics]
    built = _ChunkBuilder(metrics, keep, options.details)
    judge = options.judge_run()
    if options.max_concurrency == 1 and not any(metric.uses_llm for metric in metrics):
        with judge_run(judge):
            async with client_scope():
                await _score_in_turn(lines, first_index, metrics, options, built)
        return built.finish(judge.usage)
    rows: list[SampleResult | None] = [None] * len(lines)
    by_kind: dict[type, list[tuple[int, Sample]]] = {}  # each sample type is its own run
    bad: set[int] = set()
    for position, (number, line) in enumerate(lines):
        try:
            sample = parse_line(line, number)
        except Exception as exc:  # whatever the line holds, it becomes a row naming its line
            rows[position] = _bad_line_row(first_index + position, number, names, exc)
            bad.add(position)
        else:
            by_kind.setdefault(type(sample), []).append((position, sample))
    for good in by_kind.values():
        batch = await ascore_batch(
            [sample for _, sample in good], metrics, options=options, judge=judge
        )
        for (position, _), row in zip(good, batch, strict=True):
            row.index = first_index + position
            for name, failure in row.failures.items():
                row.failures[name] = replace(failure, sample_index=row.index)
            rows[position] = row
    for position, scored in enumerate(rows):
        assert scored is not None
        built.add(scored, lines[position][0], bad=position in bad)
    return built.finish(judge.usage)


async def _score_in_turn(
    lines: Sequence[Line],
    first_index: int,
    metrics: list[Evaluator],
    options: RunOptions,
    built: _ChunkBuilder,
) -> None:
    """Score rule-based metrics one sample at a time (the workers' setting).

    Each line is scored as it is read (``score_sample``, as the batch core would) and written
    to its row at once; only the report's rows keep their sample. Where every metric has a
    plain value-and-reason function (:func:`plain_explainers`), a row is written from those.
    """
    names = [metric.name for metric in metrics]
    explainers = plain_explainers(metrics, options)
    for position, (number, line) in enumerate(lines):
        index = first_index + position
        try:
            sample = parse_line(line, number)
        except Exception as exc:  # whatever the line holds, it becomes a row naming its line
            built.add(_bad_line_row(index, number, names, exc), number, bad=True)
            continue
        if explainers and len(built.kept) >= built.keep:
            if built.add_plain(index, number, sample, explainers):
                continue
        row = await score_sample(index, sample, metrics, options.timeout, options.details)
        built.add(row, number)


_Explainer = Callable[[list[ToolCall], list[ToolCall]], "tuple[float, str] | None"]


def plain_explainers(metrics: Sequence[Evaluator], options: RunOptions) -> list[_Explainer]:
    """Each metric's plain value-and-reason function, or ``[]`` unless every metric has one.

    A metric that has one (``_plain_explainer()``: the tool-call and trajectory metrics under
    their default equality) gives ``ascore(sample, details=False)``'s value and reason from the
    predicted and reference calls alone, so a row of such metrics needs no result objects.
    Only without details and timeout.
    """
    if options.details or options.timeout is not None:
        return []
    explainers: list[_Explainer] = []
    for metric in metrics:
        if metric.uses_llm or has_summary_extras(metric):
            return []
        explain = metric._plain_explainer()
        if explain is None:
            return []
        explainers.append(explain)
    return explainers


class _ChunkBuilder:
    """A chunk's rows, in input order, turned into results.jsonl lines and totals as they come."""

    def __init__(self, metrics: list[Evaluator], keep: int, details: bool) -> None:
        self.names = [metric.name for metric in metrics]
        self.keep, self.details = keep, details
        self.extras: dict[str, list[MetricResult]] = {
            metric.name: [] for metric in metrics if has_summary_extras(metric)
        }
        self.values: dict[str, list[float]] = {name: [] for name in self.names}
        self.failed = dict.fromkeys(self.names, 0)
        self.metric_usage = {name: Usage() for name in self.names}
        self.records: list[str] = []
        self.row_keys: list[tuple[int, int, str | None, bool]] = []  # see Chunk.keys
        self.kept: list[SampleResult] = []
        self.bad = self.failed_rows = 0
        self.first_errors: list[RowError] = []
        # index, line and three keys a metric: no free-form values (orjson writes it)
        self.plain_size = 2 + 3 * len(self.names)
        self.keys = [(name, f"{name}_reason", f"{name}_error") for name in self.names]
        self.value_lists = [self.values[name] for name in self.names]
        self.figures = RunFigures()

    def add(self, scored: SampleResult, number: int, *, bad: bool = False) -> None:
        """Write the next row (from input line ``number``) and count it in."""
        self.bad += bad
        if scored.failures:
            _name_line(scored, number)
            self.failed_rows += 1
            if len(self.first_errors) < FIRST_ERRORS:
                name, failure = next(iter(scored.failures.items()))
                self.first_errors.append(RowError(number, name, str(failure), failure.traceback))
        scored.line = number
        record = encode(scored, self.names, details=self.details)
        if bad:  # told apart from a sample every metric rejects when a run is resumed
            record[UNREADABLE] = True
        self.records.append(fast_line(record, self.plain_size + ("id" in record)))
        # failed as the run store tells it (RunRecorder): a metric's error or the agent's
        failed = bool(record.get("agent_error")) or any(record.get(key) for _, _, key in self.keys)
        self.row_keys.append((record["index"], number, record.get("id"), failed))
        results, values, extras = scored.results, self.values, self.extras
        for name in self.names:
            cell = results.get(name)
            if cell is None:
                self.failed[name] += 1
                continue
            values[name].append(cell.value)
            if cell.usage is not None:
                self.metric_usage[name] = self.metric_usage[name] + cell.usage
            if name in extras:  # value and details only: what summary extras read
                extras[name].append(MetricResult(name, cell.value, "", cell.details))
        if scored.agent is not None or scored.trial is not None:
            self.figures.add(scored, self.names)
        if len(self.kept) < self.keep:
            self.kept.append(scored)

    def add_plain(
        self, index: int, number: int, sample: Sample, explainers: list[_Explainer]
    ) -> bool:
        """Write the next row from the metrics' plain functions; False: nothing written.

        The row ``score_sample`` and :meth:`add` would write for a conversation with reference
        calls given as they are (no agent run, no trial: :data:`~turneval.provenance.DATASET`).
        Anything else, or any error, is left to them (False).
        """
        if type(sample) is not MultiTurnSample or sample.reference_tool_calls is None:
            return False
        if sample_provenance(sample) is not DATASET:
            return False
        meta = sample.metadata
        predicted, reference = sample.tool_calls, sample.reference_tool_calls
        record: dict[str, Any] = {"index": index}
        size = self.plain_size
        if meta and meta.get("id") is not None:  # as SampleResult.record writes it
            record["id"] = str(meta["id"])
            size += 1  # a string: orjson writes it as the stdlib does
        scored = []
        for explain in explainers:
            try:
                plain = explain(predicted, reference)
            except Exception:  # the general path records it on the row
                return False
            if plain is None:
                return False
            scored.append(plain)
        for (value, reason), (name, reason_key, error_key), values in zip(
            scored, self.keys, self.value_lists, strict=True
        ):
            record[name], record[reason_key], record[error_key] = value, reason, None
            values.append(value)
        record["line"] = number
        self.records.append(fast_line(record, size))
        self.row_keys.append((index, number, record.get("id"), False))
        return True

    def finish(self, usage: Usage) -> Chunk:
        """The chunk's rows and totals; ``usage``: every judge request of the chunk."""
        return Chunk(
            self.records,
            self.values,
            self.failed,
            usage,
            self.metric_usage,
            self.kept,
            self.bad,
            self.failed_rows,
            self.first_errors,
            self.extras,
            self.figures,
            self.row_keys,
        )


_WORKER_METRICS: list[Evaluator] = []
_WORKER_OPTIONS: list[RunOptions] = []


def run_chunk(
    lines: Sequence[Line],
    first_index: int,
    metrics: list[Evaluator],
    keep: int,
    options: RunOptions,
) -> Chunk:
    """Score a chunk in a fresh event loop (``anyio.run``) and return it.

    The chunk leaves the loop's main task through a list, not as the task's result: in the
    main thread, asyncio's runner restores the SIGINT handler with ``signal.getsignal``, which
    formats ``repr()`` of the handler it installed (a partial holding the finished main task,
    result included), and a chunk's repr (every row and sample) costs as much as scoring a
    few dozen rows.
    """
    scored: list[Chunk] = []

    async def score() -> None:
        scored.append(await _score_chunk(lines, first_index, metrics, keep, options))

    anyio.run(score)
    return scored[0]

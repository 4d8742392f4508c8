"""Evaluate a JSONL file of any size: read, score and write as it goes, in bounded memory.

A front end of the run pipeline (:mod:`turneval.pipeline`): JSONL chunks in, rows out to
results.jsonl. Lines are read in chunks; each chunk is scored by the batch core
(:func:`~turneval.pipeline.ascore_batch`), in this process or (rule-based metrics only) in worker
processes, with at most ``2 x workers`` chunks in
flight. Rows are written to ``results.jsonl`` in input order and flushed line by line, so a
partial file is never corrupt. A line that is not valid JSON or not a valid sample becomes a row
whose error names the line and field; every other line is scored as usual. Whatever its bytes
(invalid UTF-8, lone surrogates, nesting too deep to parse), a non-blank line yields exactly one
row; a UTF-8 byte-order mark on the first line is ignored; blank lines are skipped (they hold
no sample and yield no row). A line that is not UTF-8 is named with its file; a line that is not
strict JSON (a duplicate key, ``NaN``, ``Infinity``, ``1e400``) is an error row naming the key,
unless ``lenient_json=True``. With ``resume=True`` the rows of an interrupted run are kept and
their lines skipped (:func:`finished_lines`).
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import threading
import time
import warnings
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import anyio
import numpy as np
from pydantic import ValidationError

from turneval._files import naming
from turneval._gc import batch_collection, freeze_process
from turneval._runfile import RUN_FILE, RunFile
from turneval.aggregate import (
    MetricSummary,
    RunAggregate,
    RunFigures,
    compute_aggregates,
    summarise_metrics,
    summary_document,
)
from turneval.dataset import sample_from_dict
from turneval.errors import ConfigError, EvaluationAbortedError, InvalidSampleError
from turneval.jsonl import (
    LENIENT_HINT,
    jiter_from_json,
    orjson_loads,
    refuse_compressed,
    strict_json_problem,
    utf8_problem,
)
from turneval.judge import SQLiteCache, Usage, judge_run
from turneval.judge.clients import client_scope
from turneval.messages import ToolCall
from turneval.metrics import Evaluator
from turneval.metrics.votes import rethreshold
from turneval.options import RunOptions
from turneval.pipeline import ascore_batch, has_summary_extras, score_sample
from turneval.provenance import DATASET, sample_provenance
from turneval.ratelimit import RateLimit
from turneval.report import render_report
from turneval.results import EvaluationResult, MetricFailure, MetricResult, SampleResult
from turneval.results_codec import decode, encode, fast_line, read_finished
from turneval.runner import check_judges, resolve_metrics
from turneval.samples import MultiTurnSample, Sample, SingleTurnSample

if TYPE_CHECKING:
    from turneval.store import RunRecorder, RunStore

__all__ = [
    "ChunkEngine",
    "FIRST_ERRORS",
    "ResumeWarning",
    "RowError",
    "StreamResult",
    "UNREADABLE",
    "evaluate_jsonl",
    "finished_lines",
    "is_otlp",
]


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


@dataclass(frozen=True, slots=True)
class RowError:
    """One error of a failed row: its 1-based input line, the metric and the error.

    ``traceback`` is where the metric raised (the failure's ``traceback``), when it did.
    """

    line: int
    metric: str
    error: str
    traceback: str | None = None

    def __str__(self) -> str:
        """``line N: metric: ErrorType: message``, on one line (the line named once)."""
        prefix = f"line {self.line}: "
        kind, colon, message = " ".join(self.error.split()).partition(": ")
        return f"{prefix}{self.metric}: {kind}{colon}{message.removeprefix(prefix)}"


FIRST_ERRORS = 10
"""How many errors of failed rows a streamed run keeps (the first, in input order)."""

UNREADABLE = "unreadable"
"""The results.jsonl key set to true on the row of an input line that holds no sample."""

_UNDECODABLE_ROW = "__turneval_undecodable_row__"
"""A JSONL line ``{_UNDECODABLE_ROW: why}`` stands for a row that could not be decoded (a
Parquet cell that is not UTF-8, say): it becomes an error row saying ``why``."""


@dataclass
class _Chunk:
    records: list[str]  # results.jsonl lines, in order
    values: dict[str, list[float]]
    failed: dict[str, int]
    usage: Usage  # every judge request of the chunk
    metric_usage: dict[str, Usage]
    report_rows: list[SampleResult]
    bad_lines: int
    failed_rows: int = 0
    first_errors: list[RowError] = field(default_factory=list)
    results: dict[str, list[MetricResult]] = field(default_factory=dict)  # for summary extras
    figures: RunFigures = field(default_factory=RunFigures)  # agent runs and trials
    # each row's (index, line, sample id, failed): what a run store keeps beside the record
    keys: list[tuple[int, int, str | None, bool]] = field(default_factory=list)


_Line = tuple[int, str | bytes]  # (1-based line number, the line: raw bytes or text)

_MULTI_TURN = re.compile(r'"user_input"\s*:\s*\[')


class _Unreadable(str):
    """A line whose bytes are not UTF-8: kept as text for the row, with the decode error."""

    __slots__ = ("error",)
    error: str

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled with its error (chunks go to worker processes and Ray actors)."""
        return (_unreadable, (str(self), self.error))


def _unreadable(text: str, error: str) -> _Unreadable:
    line = _Unreadable(text)
    line.error = error
    return line


_BOM = b"\xef\xbb\xbf"


def _decode(raw: bytes, number: int) -> str:
    """A raw line's text (a line not UTF-8: an :class:`_Unreadable`; the reader tells most)."""
    if number == 1 and raw.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte-order mark
        raw = raw[3:]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = f"byte 0x{raw[exc.start]:02x} at byte offset {exc.start}"
        return _unreadable(
            raw.decode("utf-8", "backslashreplace"), f"line {number}: not valid UTF-8 ({where})"
        )


_MULTI_TURN_BYTES = re.compile(rb'"user_input"\s*:\s*\[')


class _Lenient(str):
    """A line exempt from the strict-JSON check (``lenient_json``, or JSON turneval wrote)."""

    __slots__ = ()


class _LenientBytes(bytes):
    """A raw line exempt from the strict-JSON check (``lenient_json=True``)."""

    __slots__ = ()


def _parse(line: str | bytes, number: int) -> Sample:
    """The sample on input line ``number``; raises :class:`InvalidSampleError` naming the line.

    A plain ``str`` or ``bytes`` line must be strict JSON (no duplicate key, only finite
    numbers); :class:`_Lenient` and :class:`_LenientBytes` lines need not be.
    """
    strict = type(line) is bytes or type(line) is str
    if isinstance(line, bytes):  # a raw line: validated straight from its bytes (Rust)
        raw = line[3:] if number == 1 and line.startswith(b"\xef\xbb\xbf") else line  # BOM
        kind = MultiTurnSample if _MULTI_TURN_BYTES.search(raw) else SingleTurnSample
        found = _strict_sample(raw, kind) if strict else _lenient_sample(raw, kind)
        if found is not None:
            return found
        line = _decode(line, number)  # the text path below names the line, field or key
    if isinstance(line, _Unreadable):
        raise InvalidSampleError(line.error, sample_id=number)
    try:
        return _parse_text(line, number, strict)
    except RecursionError as exc:
        raise InvalidSampleError(
            f"line {number}: JSON nested too deeply to parse", sample_id=number
        ) from exc


def _lenient_sample(raw: bytes, kind: type[Sample]) -> Sample | None:
    """The sample of a raw line, parsed and validated in one pass (Rust); None on any error."""
    try:
        return kind.model_validate_json(raw)
    except ValidationError:
        return None


def _strict_sample(raw: bytes, kind: type[Sample]) -> Sample | None:
    """The sample of a raw line that is strict JSON; None on any error or doubt.

    jiter parses once, refusing duplicate keys and ``NaN``/``Infinity``, and pydantic
    validates what it built (cheaper than parsing twice); orjson refuses numbers that overflow
    a double (``1e400``). Without jiter or orjson: :func:`strict_json_problem` after the
    one-pass parse. None sends the line to the text path, which tells why (or, should the
    two validation modes ever differ, reads it there).
    """
    if jiter_from_json is None or orjson_loads is None:  # pragma: no cover
        sample = _lenient_sample(raw, kind)
        return None if sample is None or strict_json_problem(raw) else sample
    try:
        document = jiter_from_json(
            raw, allow_inf_nan=False, catch_duplicate_keys=True, cache_mode=False
        )
        sample = kind.model_validate(document)
        orjson_loads(raw)
    except (ValueError, RecursionError):  # ValidationError, the parsers' errors, deep nesting
        return None
    return sample


def _refuse_loose_json(text: str | bytes, number: int) -> None:
    """Raise :class:`InvalidSampleError` unless ``text`` is strict JSON, naming line and key."""
    problem = strict_json_problem(text)
    if problem is not None:
        raise InvalidSampleError(
            f"line {number}: not strict JSON: {problem} ({LENIENT_HINT})", sample_id=number
        )


def _parse_text(line: str, number: int, strict: bool = True) -> Sample:
    kind = MultiTurnSample if _MULTI_TURN.search(line) else SingleTurnSample
    try:  # the fast path: pydantic parses and validates the JSON in one pass (Rust)
        sample = kind.model_validate_json(line)
    except ValidationError:
        pass  # the slow path below finds the error and names the line and field
    else:
        if strict:
            _refuse_loose_json(line, number)
        return sample
    try:
        row = json.loads(line.rstrip("\r\n"))  # the column then counts on this line alone
    except json.JSONDecodeError as exc:
        raise InvalidSampleError(
            f"line {number}: not valid JSON ({exc.msg}, column {exc.colno})", sample_id=number
        ) from exc
    if isinstance(row, dict) and len(row) == 1 and _UNDECODABLE_ROW in row:
        raise InvalidSampleError(f"line {number}: {row[_UNDECODABLE_ROW]}", sample_id=number)
    if strict:  # a duplicate key may be what makes the sample invalid: named first
        _refuse_loose_json(line, number)
    try:
        return sample_from_dict(row)
    except InvalidSampleError as exc:  # "sample (Kind): ..." -> "line N (Kind): ..."
        detail = str(exc).removeprefix("sample")
        raise InvalidSampleError(
            f"line {number}{detail}", sample_id=number, field=exc.field
        ) from exc


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
    lines: Sequence[_Line],
    first_index: int,
    metrics: list[Evaluator],
    keep: int,
    options: RunOptions,
) -> _Chunk:
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
            sample = _parse(line, number)
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
    lines: Sequence[_Line],
    first_index: int,
    metrics: list[Evaluator],
    options: RunOptions,
    built: _ChunkBuilder,
) -> None:
    """Score rule-based metrics one sample at a time (the workers' setting).

    Each line is scored as it is read (``score_sample``, as the batch core would) and written
    to its row at once; only the report's rows keep their sample. Where every metric has a
    plain value-and-reason function (:func:`_plain_explainers`), a row is written from those.
    """
    names = [metric.name for metric in metrics]
    explainers = _plain_explainers(metrics, options)
    for position, (number, line) in enumerate(lines):
        index = first_index + position
        try:
            sample = _parse(line, number)
        except Exception as exc:  # whatever the line holds, it becomes a row naming its line
            built.add(_bad_line_row(index, number, names, exc), number, bad=True)
            continue
        if explainers and len(built.kept) >= built.keep:
            if built.add_plain(index, number, sample, explainers):
                continue
        row = await score_sample(index, sample, metrics, options.timeout, options.details)
        built.add(row, number)


_Explainer = Callable[[list[ToolCall], list[ToolCall]], "tuple[float, str] | None"]


def _plain_explainers(metrics: Sequence[Evaluator], options: RunOptions) -> list[_Explainer]:
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
        self.row_keys: list[tuple[int, int, str | None, bool]] = []  # see _Chunk.keys
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

    def finish(self, usage: Usage) -> _Chunk:
        """The chunk's rows and totals; ``usage``: every judge request of the chunk."""
        return _Chunk(
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


def _init_worker(metrics: list[Evaluator], options: RunOptions) -> None:
    _end_with_parent()
    _WORKER_METRICS[:] = metrics
    _WORKER_OPTIONS[:] = [options]
    freeze_process()  # start-up objects (modules, metrics): never walked by the collector again


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _end_with_parent() -> None:
    """Make this worker process end when its parent dies (``kill -9`` included), within 1 s.

    On Linux the kernel sends SIGKILL when the parent exits (``prctl(PR_SET_PDEATHSIG)``);
    elsewhere, and as a second guard, a daemon thread checks ``os.getppid()`` four times a
    second and exits when the worker has been re-parented. SIGTERM is restored to its default
    (a fork copies the parent's handler, which only asks the parent's loop to stop), and
    SIGINT is left to the parent, which stops the run.
    """
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # pragma: no cover - no prctl: the thread alone
            pass
    if parent == 1 or os.getppid() != parent:  # the parent died before the watch was set
        os._exit(1)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.25)
        os._exit(1)

    threading.Thread(target=watch, name="turneval-parent-watch", daemon=True).start()


def _score_in_worker(lines: list[_Line], first_index: int, keep: int) -> _Chunk:
    with batch_collection():
        return _run_chunk(lines, first_index, _WORKER_METRICS, keep, _WORKER_OPTIONS[0])


def _run_chunk(
    lines: Sequence[_Line],
    first_index: int,
    metrics: list[Evaluator],
    keep: int,
    options: RunOptions,
) -> _Chunk:
    """Score a chunk in a fresh event loop (``anyio.run``) and return it.

    The chunk leaves the loop's main task through a list, not as the task's result: in the
    main thread, asyncio's runner restores the SIGINT handler with ``signal.getsignal``, which
    formats ``repr()`` of the handler it installed (a partial holding the finished main task,
    result included), and a chunk's repr (every row and sample) costs as much as scoring a
    few dozen rows.
    """
    scored: list[_Chunk] = []

    async def score() -> None:
        scored.append(await _score_chunk(lines, first_index, metrics, keep, options))

    anyio.run(score)
    return scored[0]


def _chunks(
    path: Path,
    size: int,
    budget: int,
    skip: frozenset[int] = frozenset(),
    lenient: bool = False,
) -> Iterator[list[_Line]]:
    """Non-blank lines, ``size`` lines or ``budget`` bytes a chunk (at least one line).

    A line is passed on as its bytes, decoded and validated where it is scored; a line that is
    not UTF-8 (told here, where the file's name is known) as an :class:`_Unreadable` naming
    the file, the line and the first bad byte. With ``lenient`` lines need not be strict JSON.
    """
    chunk: list[_Line] = []
    held = 0
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip() or number in skip:
                continue
            where = utf8_problem(raw[3:] if number == 1 and raw[:3] == _BOM else raw)
            if where is None:
                chunk.append((number, _LenientBytes(raw) if lenient else raw))
            else:
                error = f"line {number}: not valid UTF-8 in {path} ({where})"
                chunk.append((number, _unreadable(raw.decode("utf-8", "backslashreplace"), error)))
            held += len(raw)
            if len(chunk) >= size or held >= budget:
                yield chunk
                chunk, held = [], 0
    if chunk:
        yield chunk


def is_otlp(path: Path) -> bool:
    """Whether ``path`` holds OTLP/JSON traces: an export starts with ``{"resourceSpans": ...``.

    The auto-detection of ``input_format="auto"`` (and the CLI's ``--format auto``).
    """
    with path.open("rb") as handle:
        head = handle.read(4096)
    return re.match(rb'\s*\{\s*"resourceSpans"\s*:', head.removeprefix(b"\xef\xbb\xbf")) is not None


def _otlp_chunks(
    path: Path,
    size: int,
    budget: int,
    skip: frozenset[Any] = frozenset(),
    lenient: bool = False,
    group_by: Literal["trace", "session"] = "trace",
    strict_traces: bool = False,
    skipped_traces: dict[str, int] | None = None,
) -> Iterator[list[_Line]]:
    """Samples rebuilt from OTLP/JSON traces, as JSONL lines (numbered by the trace's line).

    ``budget`` is unused: a trace is read whole (memory is bounded by the largest trace).
    ``skip`` holds the finished ``(line, id)`` pairs: a line may hold several traces (a
    collector batches them), each its own row; ``(line, None)`` (a row without an id) skips
    the whole line. Traces that are no conversation are counted into ``skipped_traces``.
    """
    from turneval.traces import iter_otlp_json

    chunk: list[_Line] = []
    pairs = iter_otlp_json(
        path,
        group_by=group_by,
        strict_traces=strict_traces,
        skipped_traces=skipped_traces,
        lenient_json=lenient,
    )
    for number, sample in pairs:
        if (number, (sample.metadata or {}).get("id")) in skip or (number, None) in skip:
            continue
        chunk.append((number, _Lenient(sample.model_dump_json(exclude_none=True))))  # ours
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def finished_lines(results: str | os.PathLike[str]) -> dict[int, dict[str, Any]]:
    """The rows an earlier run of ``evaluate_jsonl`` finished, by input line number.

    Reads ``results`` (a results.jsonl) and cuts off a torn last line (a run killed while
    writing it), so that appending continues the file cleanly. Rows are complete JSON objects
    with a ``line``; the first row seen for a line wins.

    Raises:
        ConfigError: the file holds a line that is not such a row (not a results.jsonl).
    """
    return _finished(results, otlp=False)


_Done = dict[Any, dict[str, Any]]
"""Finished rows by input line, or by ``(line, id)`` for traces (a line may hold several)."""


def _finished(results: str | os.PathLike[str], *, otlp: bool) -> _Done:
    """:func:`finished_lines`; for OTLP/JSON input keyed by ``(line, id)``: one row per trace."""
    if otlp:
        return read_finished(results, key=lambda record: (int(record["line"]), record.get("id")))
    return read_finished(results, key=lambda record: int(record["line"]))


def _row_error(row: SampleResult, names: Sequence[str]) -> RowError | None:
    """The first error of a finished row (None: every metric scored it).

    A metric with neither a value nor an error on the row (written by a run with other
    metrics) failed on it too: it is counted as failed in the summary, so the row fails.
    """
    line = row.line or 0
    for name in names:
        failure = row.failures.get(name)
        if failure is not None:
            return RowError(line, name, str(failure), failure.traceback)
        if name not in row.results:
            return RowError(
                line,
                name,
                "NotScored: the resumed row has no value for it (written by a run with other "
                "metrics)",
            )
    return None


def _first_errors(errors: Iterable[RowError]) -> list[RowError]:
    """The first :data:`FIRST_ERRORS` of ``errors`` in input order."""
    return sorted(errors, key=attrgetter("line"))[:FIRST_ERRORS]


def _absorb_finished(
    done: _Done,
    names: Sequence[str],
    values: dict[str, array[float]],
    failed: dict[str, int],
    kept: list[SampleResult],
    report_rows: int,
    extras: dict[str, list[MetricResult]],
    figures: RunFigures,
    thresholds: Mapping[str, float | None],
) -> list[SampleResult]:
    """Count the finished rows of a resumed run into the totals; returns them, decoded.

    Each record is decoded by the results codec (:func:`~turneval.results_codec.decode`), so
    its agent run and trial count in as a new row's do. A row's vote record is marked again
    with this run's pass threshold (``thresholds``), which may differ from the one the row was
    written with: it changes no score.
    """
    rows = []
    for number, record in enumerate(done.values(), start=1):
        row = decode(record, names, number)
        rows.append(row)
        if row.agent is not None or row.trial is not None:
            figures.add(row, names)
        for name in names:
            result = row.results.get(name)
            if result is None:
                failed[name] += 1
            else:
                values[name].append(result.value)
                if name in extras:
                    details = rethreshold(result.details, thresholds[name])
                    extras[name].append(MetricResult(name, result.value, "", details))
        if len(kept) < report_rows:
            kept.append(row)
    return rows


def _preflight(
    target: Path, chunk_size: int, chunk_bytes: int, resume: bool, overwrite: bool
) -> Path:
    """Check options, output and cache before any row is scored; returns results.jsonl's path."""
    if chunk_size < 1 or chunk_bytes < 1:
        raise ConfigError("chunk_size and chunk_bytes must be >= 1")
    target.mkdir(parents=True, exist_ok=True)
    results_path = target / "results.jsonl"
    if not resume and not overwrite and results_path.exists() and results_path.stat().st_size:
        raise ConfigError(
            f"{results_path} already exists; resume it (--resume) or replace it (--overwrite)"
        )
    return results_path


def _check_input_file(source: Path) -> None:
    """Refuse an input that is not an existing regular file (``InvalidSampleError``, saying why).

    A compressed file is refused too (:class:`ConfigError`, naming the compression).
    """
    if not source.is_file():
        if source.is_dir():
            problem = "a folder, not a JSONL file"
        elif source.exists():  # read in chunks, perhaps by several processes: a file it must be
            problem = "not a regular file (save a pipe's or a device's output to a file first)"
        else:
            problem = "no such file"
        raise InvalidSampleError(f"{source}: {problem}", field="path")
    refuse_compressed(source)


def evaluate_jsonl(
    path: str | os.PathLike[str],
    metrics: Sequence[Evaluator | str],
    out_dir: str | os.PathLike[str],
    *,
    llm: Any = None,
    cache: SQLiteCache | str | os.PathLike[str] | None = None,
    max_concurrency: int = 16,
    max_llm_concurrency: int = 8,
    workers: int | None = None,
    chunk_size: int = 1000,
    chunk_bytes: int = 64 * 2**20,
    report_rows: int = 2000,
    details: bool = True,
    timeout: float | None = None,
    title: str | None = None,
    show_progress: bool | None = None,
    input_format: str = "auto",
    resume: bool = False,
    overwrite: bool = True,
    rate_limit: RateLimit | None = None,
    aggregates: Sequence[RunAggregate] = (),
    engine: ChunkEngine | None = None,
    group_by: Literal["trace", "session"] = "trace",
    stop: threading.Event | None = None,
    strict_traces: bool = False,
    lenient_json: bool = False,
    store: RunStore | str | os.PathLike[str] | None = None,
    fail_on_error: bool | float = False,
    on_row: Callable[[SampleResult], None] | None = None,
) -> StreamResult:
    """Score ``path`` line by line into ``out_dir``: results.jsonl, summary.json, report.html.

    ``out_dir/run.json`` records what the run was started with (see ``resume``).

    The run options (``llm``, ``cache``, ``max_concurrency``, ``max_llm_concurrency``,
    ``timeout``, ``fail_on_error``, ``on_row``, ``details``, ``show_progress``, ``rate_limit``,
    ``aggregates``, ``store``) are those of :class:`~turneval.options.RunOptions`, with the
    same names and defaults.

    Args:
        path: A JSONL file, one sample per line.
        metrics: Evaluator objects or names.
        out_dir: Created if missing.
        llm: Default judge model for judged metrics.
        cache: A SQLite judge cache or its path (a re-run pays for nothing twice).
        max_concurrency: Samples scored at once (in this process).
        max_llm_concurrency: Judge requests in flight at once.
        workers: Worker processes for rule-based metrics (default: one per core, at most 2 x
            chunks in flight); judged metrics always run in this process.
        chunk_size: Lines per chunk (at most).
        chunk_bytes: Input bytes per chunk (at most; a longer line makes a chunk of its own),
            so memory is bounded by bytes as well as lines.
        report_rows: Rows kept for the HTML report's per-sample table.
        details: Also write each metric's ``details`` to results.jsonl (the CLI's
            ``--details``); False saves their cost.
        timeout: Seconds allowed per sample.
        title: The report's title.
        show_progress: Print a progress line to stderr (None: only when it is a terminal).
        input_format: ``"jsonl"`` (samples), ``"otlp"`` (OTLP/JSON traces, one sample per
            trace; needs the ``otel`` extra) or ``"auto"`` (OTLP/JSON when the file starts with
            ``{"resourceSpans"``).
        resume: Continue ``out_dir/results.jsonl`` of an interrupted run: its finished rows are
            kept (and counted in the summary), their lines are not scored again. The run must
            be the same: ``out_dir/run.json`` (written by every run before its first row)
            records the metrics with their configurations, the judge model and the digest of
            the input read so far; a difference raises :class:`ConfigError` naming it. A folder
            without run.json resumes with a :class:`ResumeWarning`.
        overwrite: Without ``resume``, replace an existing, non-empty results.jsonl; if False,
            raise :class:`ConfigError` instead (the CLI's default).
        rate_limit: The judge provider's quota (:class:`~turneval.ratelimit.RateLimit`), held
            across the whole file: judge requests are paced to it and adapt to 429s.
        aggregates: Run-level figure sets (:class:`~turneval.aggregate.RunAggregate`, e.g.
            ``DatabricksAggregates()``), computed once every line is scored from the rows read
            back from results.jsonl (so they need memory for the rows, without samples; with
            ``details=False`` the rows have no details), into the result's ``aggregates`` and
            summary.json; one that raises is kept in ``aggregate_errors``.
        engine: Scores the chunks instead of this process and its workers (e.g. on a Ray
            cluster, :func:`turneval.distributed.evaluate_on_ray`): called with the chunks as
            ``(lines, first_index, report_rows_to_keep)``, the metrics and the run options, it
            yields each chunk's scores in input order. It builds the judges where it scores.
        group_by: For OTLP/JSON input: one sample per trace (``"trace"``), or per
            conversation across traces (``"session"``: traces sharing
            ``gen_ai.conversation.id`` or OpenInference ``session.id``; the file is grouped in
            memory first, each session numbered by the line of its first trace).
        stop: Set it (from a signal handler, another thread) to stop early: no new chunk is
            read, the chunks in flight are scored and written, the summary and report cover
            the rows written, and the result's ``stopped`` is True; ``resume`` continues the
            run. The CLI sets it on SIGTERM.
        strict_traces: For OTLP/JSON input: a trace that records no model call (no LLM span,
            e.g. OpenLLMetry's agent creation) gives an error row; by default it is skipped
            and counted by reason in the result's and summary.json's ``skipped_traces``.
        lenient_json: Accept input lines that are not strict JSON (the CLI's
            ``--lenient-json``): duplicate keys (the last wins) and numbers that are not finite
            (``NaN``, ``Infinity``, ``1e400``). By default such a line is an error row naming
            the line and the key.
        store: A run store (:class:`~turneval.store.RunStore`, or its URL or path): the run
            is kept there too, each chunk's rows (with their input lines) written as they
            are written to results.jsonl, in one transaction; with ``resume``, the stored run
            of ``out_dir`` is continued (its rows made those of results.jsonl first).
        fail_on_error: As for :func:`turneval.evaluate`: False never aborts; True aborts at
            the first failed row (an unreadable line included); a fraction f aborts once more
            than f of the rows done have failed (checked from
            :data:`~turneval.options.MIN_ROWS_FOR_FRACTION` rows on). Checked as each chunk is
            written, so the chunk holding the row that tips it is written whole. Aborting
            raises :class:`~turneval.errors.EvaluationAbortedError` whose ``result`` holds the
            rows written (read back from results.jsonl); no summary or report is written, and
            ``resume=True`` continues the run.
        on_row: Called with each row as it is written to results.jsonl, in input order: the
            row read back from its line (as :meth:`EvaluationResult.from_jsonl` gives it: no
            sample), so the same in this process, in worker processes and on Ray.

    Raises:
        ConfigError: results.jsonl exists and neither ``resume`` nor ``overwrite`` is set; the
            judge cache is unreadable; the existing file is not a results.jsonl; or, resuming,
            run.json shows other metrics, configurations, judge or input.
        InvalidSampleError: ``path`` is not an existing regular file.
    """
    source = Path(path)
    _check_input_file(source)
    if input_format not in ("auto", "jsonl", "otlp"):
        raise InvalidSampleError(f"unknown input format {input_format!r}", field="format")
    otlp = input_format == "otlp" or (input_format == "auto" and is_otlp(source))
    if group_by not in ("trace", "session"):
        raise ConfigError(f"group_by must be 'trace' or 'session', got {group_by!r}")
    if group_by == "session" and not otlp:
        raise ConfigError(
            f"group_by='session' groups the traces of an OTLP/JSON file; {source} holds samples "
            "(one conversation a line already)"
        )
    skipped: dict[str, int] | None = {} if otlp else None
    read_chunks = (
        partial(
            _otlp_chunks,
            group_by=group_by,
            strict_traces=strict_traces,
            skipped_traces=skipped,
            lenient=lenient_json,
        )
        if otlp
        else partial(_chunks, lenient=lenient_json)
    )
    resolved = resolve_metrics(metrics)
    if engine is None:  # an engine builds the judges where it scores
        check_judges(resolved, llm)
    owns_cache = cache is not None and not isinstance(cache, SQLiteCache)
    options = RunOptions(  # a corrupt cache fails here, named, before any row is scored
        llm=llm,
        cache=cache,
        max_concurrency=max_concurrency,
        max_llm_concurrency=max_llm_concurrency,
        timeout=timeout,
        fail_on_error=fail_on_error,
        on_row=on_row,
        details=details,
        show_progress=show_progress,
        rate_limit=rate_limit,  # one limiter for the whole file, across chunks
        aggregates=aggregates,
    )
    target = Path(out_dir)
    run_file = RunFile(target, source, resolved, llm)
    recorder: RunRecorder | None = None
    try:
        results_path = _preflight(target, chunk_size, chunk_bytes, resume, overwrite)
        recorder = _recorder(store, source, run_file, resolved, llm, resume=resume, details=details)
        if resume and results_path.exists() and results_path.stat().st_size:
            if not run_file.resume():  # a run folder from before run.json: not checked
                warnings.warn(
                    f"{target} has no {RUN_FILE} (written by an older turneval): resuming "
                    "without checking that the input, metrics and judge are the same",
                    ResumeWarning,
                    stacklevel=2,
                )
        else:
            run_file.start()  # before the first row
        done = _finished(results_path, otlp=otlp) if resume else {}
        with (
            naming(results_path),
            results_path.open("a" if resume else "w", encoding="utf-8") as handle,
        ):
            sink = _JsonlSink(resolved, handle, report_rows, options, run_file, recorder)
            sink.resume(done)
            chunks = sink.track(read_chunks(source, chunk_size, chunk_bytes, frozenset(done)))
            if engine is None:
                _score_chunks(chunks, resolved, options, workers, sink, stop)
            else:
                for chunk in engine(_numbered(_until(chunks, stop), sink), resolved, options):
                    sink.absorb(chunk)
        result = sink.finish(target, title or f"turneval: {source.name}", skipped)
        result.stopped = stop is not None and stop.is_set()
        result.store_run = None if recorder is None else recorder.run_id
        if recorder is not None and result.stopped:  # the stored run is not done either
            recorder.finish(None, status="interrupted", error="stopped early; --resume continues")
        return result
    except BaseException as exc:
        if recorder is not None:
            recorder.fail(exc)
        raise
    finally:
        run_file.close()
        if owns_cache and options.cache is not None:
            options.cache.close()


class ResumeWarning(UserWarning):
    """A run folder is resumed without its ``run.json``, so nothing checks it is the same run."""


def _recorder(
    store: RunStore | str | os.PathLike[str] | None,
    source: Path,
    run_file: RunFile,
    metrics: list[Evaluator],
    llm: Any,
    *,
    resume: bool,
    details: bool,
) -> RunRecorder | None:
    """The store's writer of this run (None without a store): a new run, or the resumed one.

    The metrics' configurations are those run.json records.
    """
    if store is None:
        return None
    from turneval.store import RunStore, file_digest

    run_store = RunStore.coerce(store)
    assert run_store is not None
    return run_store.start_run(
        name=source.name,
        metrics=metrics,
        llm=llm,
        dataset_path=source.resolve(),
        dataset_digest=file_digest(source),
        out_dir=run_file.path.parent,
        resume=resume,
        details=details,
        configs=run_file.document["metrics"],
    )


class ChunkEngine(Protocol):
    """Scores chunks of numbered lines elsewhere (e.g. on Ray actors), in input order.

    Passed as ``evaluate_jsonl(engine=...)``: called once with an iterator of
    ``(lines, first_index, report_rows_left)`` chunks, the resolved metrics and the run's
    options, it yields each chunk's scored rows in the order the chunks came.
    """

    def __call__(
        self,
        chunks: Iterator[tuple[list[_Line], int, int]],
        metrics: list[Evaluator],
        options: RunOptions,
    ) -> Iterable[_Chunk]:
        """Score ``chunks`` with ``metrics`` under ``options``; yield the results in order."""
        ...


def _numbered(
    chunks: Iterator[list[_Line]], sink: _JsonlSink
) -> Iterator[tuple[list[_Line], int, int]]:
    """Each chunk with the index of its first row and the report rows it may still fill."""
    index = sink.total
    for lines in chunks:
        yield lines, index, max(sink.report_rows - index, 0)
        index += len(lines)


def _until(chunks: Iterator[list[_Line]], stop: threading.Event | None) -> Iterator[list[_Line]]:
    """``chunks`` until ``stop`` is set (checked before each chunk is read)."""
    while stop is None or not stop.is_set():
        lines = next(chunks, None)
        if lines is None:
            return
        yield lines


def _score_chunks(
    chunks: Iterator[list[_Line]],
    metrics: list[Evaluator],
    options: RunOptions,
    workers: int | None,
    sink: _JsonlSink,
    stop: threading.Event | None = None,
) -> None:
    """The score step: each chunk through the batch core, here or in worker processes.

    Once ``stop`` is set, no new chunk is taken; those in flight are finished and written.
    """
    # metrics that will call a judge (grounding without one runs offline)
    judged = any(metric.needs_judge(options.llm) for metric in metrics)
    if workers is None:
        workers = 1 if judged else min(2, os.cpu_count() or 1)
    if judged:
        workers = 1
    index = sink.total
    if workers <= 1:
        for lines in _until(chunks, stop):
            keep = sink.keep()
            with batch_collection():
                chunk = _run_chunk(lines, index, metrics, keep, options)
            sink.absorb(chunk)
            index += len(lines)
        return
    portable = options.replace(
        cache=None, llm=None, on_row=None, show_progress=False, rate_limit=None
    )
    portable = portable.replace(max_concurrency=1, max_llm_concurrency=1)
    with ProcessPoolExecutor(
        workers, initializer=_init_worker, initargs=(metrics, portable)
    ) as pool:
        window: deque[Future[_Chunk]] = deque()
        for lines in _until(chunks, stop):
            keep = max(sink.report_rows - index, 0)
            window.append(pool.submit(_score_in_worker, lines, index, keep))
            index += len(lines)
            if len(window) >= 2 * workers:
                sink.absorb(window.popleft().result())
        while window:
            sink.absorb(window.popleft().result())


class _JsonlSink:
    """The JSONL sink: rows written in order and flushed, totals kept for the summary."""

    def __init__(
        self,
        metrics: list[Evaluator],
        handle: Any,
        report_rows: int,
        options: RunOptions,
        run_file: RunFile | None = None,
        recorder: RunRecorder | None = None,
    ) -> None:
        self.metrics, self.handle, self.run_file = metrics, handle, run_file
        self.recorder = recorder
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

    def resume(self, done: _Done) -> None:
        """Count the finished rows of an interrupted run in (failed rows and their errors too)."""
        names = self.names
        rows = _absorb_finished(
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
        if self.recorder is not None:  # the stored run's rows: those of the file
            self.recorder.sync(done.values())
        self.bad = sum(1 for record in done.values() if record.get(UNREADABLE))
        errors = [error for row in rows if (error := _row_error(row, names))]
        self.failed_rows = len(errors)
        self.first_errors = _first_errors(errors)

    def track(self, chunks: Iterator[list[_Line]]) -> Iterator[list[_Line]]:
        """``chunks``, each one's last input line noted (chunks are absorbed in this order).

        With a store, the chunk's lines are kept too, as the samples of its rows.
        """
        for lines in chunks:
            self.last_lines.append(lines[-1][0])
            if self.recorder is not None:
                self.recorder.expect(
                    text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
                    for _, text in lines
                )
            yield lines

    def absorb(self, chunk: _Chunk) -> None:
        """Write a scored chunk's rows and add its totals.

        ``run.json`` first records the input read up to the chunk's last line, so that every
        row in results.jsonl comes from input a resumed run checks.
        """
        if self.last_lines:
            last = self.last_lines.popleft()
            if self.run_file is not None:
                self.run_file.read_to(last)
        for record in chunk.records:
            self.handle.write(record + "\n")
            self.handle.flush()
        if self.recorder is not None:  # after the file: a resumed run's file has every row
            self.recorder.in_background()  # stored while the next chunks are scored
            self.recorder.add_rows(chunk.keys, chunk.records)  # the rows as written, not re-read
            self.recorder.flush()
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
            self.first_errors = _first_errors([*self.first_errors, *chunk.first_errors])
        self._after_rows(chunk)
        if self.progress:
            rate = f" ({self.limiter.describe()})" if self.limiter is not None else ""
            line = f"\rturneval: {self.total:,} samples{rate}"
            print(line, end="", file=sys.stderr, flush=True)

    def _after_rows(self, chunk: _Chunk) -> None:
        """The run options' ``on_row`` for each row just written, then ``fail_on_error``."""
        if self.options.on_row is not None and chunk.records:
            for row in EvaluationResult.from_records(map(json.loads, chunk.records)).rows:
                self.options.on_row(row)
        if chunk.failed_rows and self.options.should_abort(self.failed_rows, self.total):
            results = Path(self.handle.name)
            raise EvaluationAbortedError(
                f"fail_on_error={self.options.fail_on_error!r}: {self.failed_rows} of "
                f"{self.total} rows failed; first in the last chunk: {chunk.first_errors[0]} "
                f"(the rows written are in {results}; resume=True continues the run)",
                result=EvaluationResult.from_jsonl(results),
            )

    def finish(
        self, target: Path, title: str, skipped_traces: dict[str, int] | None = None
    ) -> StreamResult:
        """Summarise (the run's one summariser), write summary.json and report.html."""
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
        text = json.dumps(summary, indent=2) + "\n"
        with naming(target / "summary.json"):
            (target / "summary.json").write_text(text, encoding="utf-8")
        if self.recorder is not None:
            self.recorder.finish(summary)
        html = render_report(
            title=title,
            metric_names=names,
            summaries=dict(table),
            values=arrays,
            rows=self.kept,
            total_rows=self.total,
            usage=self.usage,
            tools={m.name: str(m.tool_name) for m in self.metrics if hasattr(m, "tool_name")},
        )
        with naming(target / "report.html"):
            (target / "report.html").write_text(html, encoding="utf-8", errors="backslashreplace")
        return result

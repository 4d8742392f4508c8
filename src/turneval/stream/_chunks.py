"""A streamed run's unit of work: chunks of numbered input lines, and a scored :class:`Chunk`.

A scored chunk holds its rows as results.jsonl lines and their totals, on its way to the sink.
:func:`line_chunks` reads a JSONL file of samples, :func:`otlp_chunks` rebuilds samples from
OTLP/JSON traces; both yield lists of :data:`Line` pairs, which any engine (this process,
worker processes, Ray actors) scores into a :class:`Chunk`.
"""

from __future__ import annotations

import re
import threading
from codecs import BOM_UTF8
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any, Literal

from turneval._sample_lines import LenientBytes, LenientLine, unreadable_line
from turneval.aggregate import RunFigures
from turneval.errors import InvalidSampleError
from turneval.jsonl import refuse_compressed, utf8_problem
from turneval.results import MetricResult, SampleResult
from turneval.usage import Usage

__all__ = [
    "Chunk",
    "FIRST_ERRORS",
    "Line",
    "RowError",
    "UNREADABLE",
    "check_input_file",
    "first_errors",
    "is_otlp",
    "line_chunks",
    "otlp_chunks",
    "until",
]

Line = tuple[int, str | bytes]
"""An input line as chunks carry it: ``(1-based line number, the line)``, the line as its raw
bytes or as text (a :class:`~turneval._sample_lines.UnreadableLine`, a
:class:`~turneval._sample_lines.LenientLine`...), read by :func:`~turneval._sample_lines.parse_line`."""

FIRST_ERRORS = 10
"""How many errors of failed rows a streamed run keeps (the first, in input order)."""

UNREADABLE = "unreadable"
"""The results.jsonl key set to true on the row of an input line that holds no sample."""


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


def first_errors(errors: Iterable[RowError]) -> list[RowError]:
    """The first :data:`FIRST_ERRORS` of ``errors`` in input order."""
    return sorted(errors, key=attrgetter("line"))[:FIRST_ERRORS]


@dataclass
class Chunk:
    """A scored chunk: its rows as results.jsonl lines, in input order, and their totals.

    What an engine gives the sink for each chunk of lines (pickled from worker processes and
    Ray actors): per metric the values scored and the count of rows it failed on, the judge
    usage (all of it, and per metric), the rows the report keeps, the count of input lines
    that held no sample, the failed rows with the first of their errors, the results summary
    extras read and the agent and trial figures of its rows.
    """

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


def check_input_file(source: Path) -> None:
    """Refuse an input that is not an existing regular file (``InvalidSampleError``, saying why).

    A compressed file is refused too (:class:`~turneval.errors.ConfigError`, naming the
    compression).
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


def line_chunks(
    path: Path,
    size: int,
    budget: int,
    skip: frozenset[int] = frozenset(),
    lenient: bool = False,
) -> Iterator[list[Line]]:
    """Non-blank lines, ``size`` lines or ``budget`` bytes a chunk (at least one line).

    A line is passed on as its bytes, decoded and validated where it is scored; a line that is
    not UTF-8 (told here, where the file's name is known) as an
    :class:`~turneval._sample_lines.UnreadableLine` naming the file, the line and the first bad
    byte. Lines numbered in ``skip`` (finished by an earlier run) are left out. With
    ``lenient`` lines need not be strict JSON.
    """
    chunk: list[Line] = []
    held = 0
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip() or number in skip:
                continue
            where = utf8_problem(raw[3:] if number == 1 and raw[:3] == BOM_UTF8 else raw)
            if where is None:
                chunk.append((number, LenientBytes(raw) if lenient else raw))
            else:
                error = f"line {number}: not valid UTF-8 in {path} ({where})"
                chunk.append(
                    (number, unreadable_line(raw.decode("utf-8", "backslashreplace"), error))
                )
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


def otlp_chunks(
    path: Path,
    size: int,
    budget: int,
    skip: frozenset[Any] = frozenset(),
    lenient: bool = False,
    group_by: Literal["trace", "session"] = "trace",
    strict_traces: bool = False,
    skipped_traces: dict[str, int] | None = None,
) -> Iterator[list[Line]]:
    """Samples rebuilt from OTLP/JSON traces, as JSONL lines (numbered by the trace's line).

    ``budget`` is unused: a trace is read whole (memory is bounded by the largest trace).
    ``skip`` holds the finished ``(line, id)`` pairs: a line may hold several traces (a
    collector batches them), each its own row; ``(line, None)`` (a row without an id) skips
    the whole line. Traces that are no conversation are counted into ``skipped_traces``.
    """
    from turneval.traces import iter_otlp_json

    chunk: list[Line] = []
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
        chunk.append((number, LenientLine(sample.model_dump_json(exclude_none=True))))  # ours
        if len(chunk) == size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def until(chunks: Iterator[list[Line]], stop: threading.Event | None) -> Iterator[list[Line]]:
    """``chunks`` until ``stop`` is set (checked before each chunk is read)."""
    while stop is None or not stop.is_set():
        lines = next(chunks, None)
        if lines is None:
            return
        yield lines

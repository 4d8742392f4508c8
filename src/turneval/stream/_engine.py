"""What an engine builds on: the chunks it is handed, and the checks before a run starts.

An engine (:mod:`turneval.engines`: ``Local``, ``Ray``, ``Batch``) scores a streamed run's
chunks: it gets them numbered (:func:`numbered`: a :class:`ChunkWork` each) and scores each
with :func:`~turneval.stream.scoring.run_chunk`, as a local run does, into a
:class:`~turneval.stream._chunks.Chunk`; the sink writes them in input order. :func:`preflight`
checks the options and the output folder before anything starts (Ray takes seconds to).
:class:`ChunkEngine` is the bare callable form ``evaluate_jsonl(engine=...)`` still takes.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol

from turneval.errors import ConfigError
from turneval.metrics import Evaluator
from turneval.options import RunOptions
from turneval.stream._chunks import Chunk, Line

if TYPE_CHECKING:
    from turneval.stream._sink import JsonlSink

__all__ = ["ChunkEngine", "ChunkWork", "numbered", "preflight"]


class ChunkWork(NamedTuple):
    """One chunk to score: its numbered lines, the index of its first row, the report's share.

    A tuple, so that an engine written for the bare :class:`ChunkEngine` form unpacks it as
    ``(lines, first_index, keep)``.
    """

    lines: list[Line]
    """The chunk's input lines, numbered from 1 (see :data:`~turneval.stream._chunks.Line`)."""
    first_index: int
    """The row index of its first line (rows are numbered across the run from 0)."""
    keep: int
    """How many of its rows the HTML report may still keep (with their samples)."""


class ChunkEngine(Protocol):
    """The bare form of an engine: a callable scoring chunks of numbered lines, in input order.

    Still taken as ``evaluate_jsonl(engine=...)`` (an engine object, :mod:`turneval.engines`,
    is the documented form: it also checks the run and declares its settings): called once
    with an iterator of :class:`ChunkWork` chunks, the resolved metrics and the run's options,
    it yields each chunk's scored rows in the order the chunks came. It builds the judges where
    it scores (no check that judged metrics have one).
    """

    def __call__(
        self,
        chunks: Iterator[ChunkWork],
        metrics: list[Evaluator],
        options: RunOptions,
    ) -> Iterable[Chunk]:
        """Score ``chunks`` with ``metrics`` under ``options``; yield the results in order."""
        ...


def numbered(chunks: Iterator[list[Line]], sink: JsonlSink) -> Iterator[ChunkWork]:
    """Each chunk with the index of its first row and the report rows it may still fill.

    The share is taken when the chunk is: an engine that scores one chunk at a time gets what
    the report still lacks, one with chunks in flight no more than the rows before it leave.
    """
    index = sink.total
    for lines in chunks:
        yield ChunkWork(lines, index, max(min(sink.report_rows - index, sink.keep()), 0))
        index += len(lines)


def preflight(
    target: Path, chunk_size: int, chunk_bytes: int, resume: bool, overwrite: bool
) -> Path:
    """Check options, output and cache before any row is scored; returns results.jsonl's path.

    Creates ``target``; raises :class:`~turneval.errors.ConfigError` for a chunk size below
    1, or for a non-empty results.jsonl there when neither ``resume`` nor ``overwrite`` is set.
    """
    if chunk_size < 1 or chunk_bytes < 1:
        raise ConfigError("chunk_size and chunk_bytes must be >= 1")
    target.mkdir(parents=True, exist_ok=True)
    results_path = target / "results.jsonl"
    if not resume and not overwrite and results_path.exists() and results_path.stat().st_size:
        raise ConfigError(
            f"{results_path} already exists; resume it (--resume) or replace it (--overwrite)"
        )
    return results_path

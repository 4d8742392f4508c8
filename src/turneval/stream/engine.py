"""Engines: what scores a streamed run's chunks, and what an engine of its own builds on.

By default :func:`~turneval.stream.evaluate_jsonl` scores its chunks in this process or in
worker processes (:mod:`turneval.stream.workers`). A :class:`ChunkEngine` scores them
elsewhere (:func:`turneval.distributed.evaluate_on_ray`: Ray Data actors): it gets the chunks
numbered (:func:`numbered`) and scores each with :func:`~turneval.stream.scoring.run_chunk`,
as a local run does, into a :class:`~turneval.stream.chunks.Chunk`; the sink writes them in
input order. :func:`preflight` checks the options and the output folder before anything
starts (Ray takes seconds to).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from turneval.errors import ConfigError
from turneval.metrics import Evaluator
from turneval.options import RunOptions
from turneval.stream.chunks import Chunk, Line

if TYPE_CHECKING:
    from turneval.stream.sink import JsonlSink

__all__ = ["ChunkEngine", "numbered", "preflight"]


class ChunkEngine(Protocol):
    """Scores chunks of numbered lines elsewhere (e.g. on Ray actors), in input order.

    Passed as ``evaluate_jsonl(engine=...)``: called once with an iterator of
    ``(lines, first_index, report_rows_left)`` chunks, the resolved metrics and the run's
    options, it yields each chunk's scored rows in the order the chunks came.
    """

    def __call__(
        self,
        chunks: Iterator[tuple[list[Line], int, int]],
        metrics: list[Evaluator],
        options: RunOptions,
    ) -> Iterable[Chunk]:
        """Score ``chunks`` with ``metrics`` under ``options``; yield the results in order."""
        ...


def numbered(
    chunks: Iterator[list[Line]], sink: JsonlSink
) -> Iterator[tuple[list[Line], int, int]]:
    """Each chunk with the index of its first row and the report rows it may still fill."""
    index = sink.total
    for lines in chunks:
        yield lines, index, max(sink.report_rows - index, 0)
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

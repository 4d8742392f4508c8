"""What every engine is: a small frozen object holding its own settings, and one method.

An engine is where ``evaluate_jsonl(data, metrics, out, engine=...)`` scores a streamed run.
It holds only its own settings (fields, validated on construction: a bad value or a misspelt
name raises :class:`~turneval.errors.ConfigError` naming it); the run options stay
:class:`~turneval.options.RunOptions`', given to ``evaluate_jsonl`` as keywords, and reach the
engine in the :class:`~turneval.stream._run.StreamJob` it runs.

* :class:`ChunkedEngine` scores the run's chunks: a new one is one class with one method,
  :meth:`ChunkedEngine.score`, yielding each chunk scored in the order they came (``Local``:
  this process or worker processes; ``Ray``: Ray Data actors). The run around it (run.json,
  resume, results.jsonl in input order, the store, summary.json and report.html) is the same
  for all, :func:`~turneval.stream._run.run_stream`.
* :class:`Engine` is the base of all: :meth:`~Engine.check` refuses a run the engine cannot do
  before anything starts, :meth:`~Engine.source` reads ``data`` into a source, and
  :meth:`~Engine.run` runs the job its own way (``Batch``: the judge requests through the
  provider's batch API, then the run scored from their answers).
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from turneval.metrics import Evaluator
from turneval.options import RunOptions, invalid
from turneval.runner import check_judges
from turneval.stream._chunks import Chunk
from turneval.stream._engine import ChunkWork
from turneval.stream._run import StreamJob, run_stream
from turneval.stream._sink import StreamResult
from turneval.stream._sources import Source, as_source

__all__ = ["DEFAULT_CHUNK_BYTES", "DEFAULT_CHUNK_SIZE", "CallableEngine", "ChunkedEngine", "Engine"]

DEFAULT_CHUNK_SIZE = 1000
"""Input lines per chunk, at most (:attr:`ChunkedEngine.chunk_size`)."""

DEFAULT_CHUNK_BYTES = 64 * 2**20
"""Input bytes per chunk, at most (:attr:`ChunkedEngine.chunk_bytes`)."""


class Engine(BaseModel, ABC):
    """Where a streamed run is scored: the engine's own settings, frozen, and its run.

    Subclass :class:`ChunkedEngine` for an engine that scores chunks; subclass this class
    (and write :meth:`run`) for one that runs the whole job its own way.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    name: ClassVar[str] = ""
    """The engine's name on the command line (``turneval evaluate --engine NAME``)."""

    if not TYPE_CHECKING:  # type checkers see the settings as keywords (pydantic's plugin)

        def __init__(self, **settings: Any) -> None:
            """Validate ``settings``; a bad one raises ConfigError naming it."""
            try:
                super().__init__(**settings)
            except ValidationError as exc:
                raise invalid(f"{type(self).__name__} engine setting", exc) from None

    def check(self, metrics: list[Evaluator], options: RunOptions) -> None:
        """Refuse a run this engine cannot do, before anything starts.

        By default: a judged metric without a judge (neither its own nor ``llm=``).

        Raises:
            ConfigError: naming what is missing or refused.
        """
        check_judges(metrics, options.llm)

    def source(self, data: str | os.PathLike[str] | Source | Any, **options: Any) -> Source:
        """The source ``data`` is read from: a source as it is, a path as ``options`` say.

        ``options`` are :func:`~turneval.stream._sources.as_source`'s (``input_format``,
        ``group_by``, ``strict_traces``, ``lenient_json``: the CLI's flags). An engine that
        reads other inputs (``Ray``: Parquet, a Ray Dataset) overrides it.
        """
        return as_source(data, **options)

    @abstractmethod
    def run(self, job: StreamJob) -> StreamResult:
        """Run ``job``: its rows into ``job.out`` (results.jsonl, summary.json, report.html)."""


class ChunkedEngine(Engine):
    """An engine that scores a streamed run's chunks: write :meth:`score`, nothing else.

    Attributes:
        chunk_size: Input lines per chunk (at most).
        chunk_bytes: Input bytes per chunk (at most; a longer line makes a chunk of its own),
            so that memory is bounded by bytes as well as lines.
    """

    chunk_size: int = Field(default=DEFAULT_CHUNK_SIZE, ge=1)
    chunk_bytes: int = Field(default=DEFAULT_CHUNK_BYTES, ge=1)

    @abstractmethod
    def score(
        self, chunks: Iterator[ChunkWork], metrics: list[Evaluator], options: RunOptions
    ) -> Iterable[Chunk]:
        """Score each chunk; yield the scored chunks in the order they came.

        A chunk is scored into a :class:`~turneval.stream._chunks.Chunk` by
        :func:`~turneval.stream.scoring.run_chunk` (``run_chunk(work.lines,
        work.first_index, metrics, work.keep, options)``), wherever that runs; the run writes each as it is yielded, so an engine may hold a few
        in flight. Once the run ends (or fails) the iterable is closed if it can be: a
        generator's ``finally`` (or ``with``) releases what it holds.

        Args:
            chunks: The chunks to score, read as they are asked for.
            metrics: The run's metrics, resolved.
            options: The run options.
        """

    def run(self, job: StreamJob) -> StreamResult:
        """The streamed run, its chunks scored by :meth:`score` (see the module)."""
        job = job.with_changes(chunk_size=self.chunk_size, chunk_bytes=self.chunk_bytes)
        return run_stream(job, self.score)


class CallableEngine(ChunkedEngine):
    """A bare callable engine (:class:`~turneval.stream.ChunkEngine`) as an engine object.

    What ``evaluate_jsonl(engine=callable)`` runs: the callable scores the chunks and builds
    the judges where it scores, so there is no check of its own.

    Attributes:
        scorer: The callable: ``scorer(chunks, metrics, options)`` yields the scored chunks.
    """

    scorer: Any = Field(exclude=True)

    def check(self, metrics: list[Evaluator], options: RunOptions) -> None:
        """Nothing: the callable builds the judges where it scores."""

    def score(
        self, chunks: Iterator[ChunkWork], metrics: list[Evaluator], options: RunOptions
    ) -> Iterable[Chunk]:
        """The callable's chunks."""
        scored: Iterable[Chunk] = self.scorer(chunks, metrics, options)
        return scored

"""The default engine: score here, in this process or (rule-based metrics) in worker processes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

from pydantic import Field

from turneval.engines._base import ChunkedEngine
from turneval.metrics import Evaluator
from turneval.options import RunOptions
from turneval.stream._chunks import Chunk
from turneval.stream._engine import ChunkWork
from turneval.stream._workers import score_chunks

__all__ = ["Local"]


class Local(ChunkedEngine):
    """Score here: ``evaluate_jsonl``'s engine unless another is given (``--engine local``).

    Rule-based metrics run in a pool of worker processes, each holding the metrics from its
    start and ending with its parent, with at most ``2 x workers`` chunks in flight; a run
    with a metric that will call a judge is scored in this process (its judge requests
    concurrent, under the run's ``max_llm_concurrency`` and ``rate_limit``).

    Attributes:
        workers: Worker processes for rule-based metrics (None: one per core, at most two;
            1: none, everything in this process). The CLI's ``--workers``.
        chunk_size: Input lines per chunk (at most).
        chunk_bytes: Input bytes per chunk (at most); the CLI's ``--chunk-mb``.
    """

    name: ClassVar[str] = "local"

    workers: int | None = Field(default=None, ge=1)

    def score(
        self, chunks: Iterator[ChunkWork], metrics: list[Evaluator], options: RunOptions
    ) -> Iterator[Chunk]:
        """Each chunk scored in this process or a worker, in order (see the class)."""
        return score_chunks(chunks, metrics, options, self.workers)

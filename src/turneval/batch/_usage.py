"""What a batch run spent, read back at collect time: answers from the cache, charged once.

The collecting pass scores the run as a live run would, from a cache that holds the batches'
answers (:class:`BatchCache`, which asks nothing live unless the fallback is ``sync``). What
the batches spent on each request (its lines sent, the tokens the provider reported) is
charged to the first cell that reads its answer (:class:`Spent`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from os import PathLike
from typing import TYPE_CHECKING, Any

from turneval.errors import JudgeCallError
from turneval.judge._cache import SQLiteCache
from turneval.usage import Usage

from ._plan import Planned
from ._state import Fallback, State

if TYPE_CHECKING:
    from turneval.metrics.base import Evaluator
    from turneval.options import RunOptions
    from turneval.stream._chunks import Chunk, Line

__all__ = ["BatchCache", "Spent", "with_spent"]


class BatchCache(SQLiteCache):
    """The run's cache at collect time: answers from the batches, and nothing live.

    A request the batches did not answer is asked live only with the fallback ``sync``; with
    ``fail`` its cell fails with the provider's error.
    """

    def __init__(
        self, path: str | PathLike[str], failed: dict[str, str], fallback: Fallback
    ) -> None:
        super().__init__(path)
        self.failed = failed
        self.fallback = fallback
        self.reads: list[str] = []  # every key asked, in order (what the batches spent on it)

    def get(self, key: str) -> dict[str, Any] | None:
        """The batch's answer for ``key``; an unanswered request raises ``JudgeCallError``."""
        self.reads.append(key)
        hit = super().get(key)
        if hit is not None or self.fallback == "sync":
            return hit
        error = self.failed.get(key)
        if error is not None:
            raise JudgeCallError(f"batch request failed: {error}")
        raise JudgeCallError(
            "this judge request was not stated up front, so no batch answered it; collect "
            "with fallback='sync' (--batch-fallback sync) to ask it live"
        )


def with_spent(usage: Usage, spent: Usage, answered: int) -> Usage:
    """``usage`` of a scoring pass, with what the batches ``spent`` on the answers it read.

    ``answered`` of its cache hits were answers of this run's batches: no cache hits, but the
    requests the batches sent for them.
    """
    return Usage(
        input_tokens=usage.input_tokens + spent.input_tokens,
        output_tokens=usage.output_tokens + spent.output_tokens,
        calls=usage.calls + spent.calls,
        cached_calls=max(usage.cached_calls - answered, 0),
    )


class Spent:
    """What the batches spent on each request, charged to the first cell that reads it.

    :meth:`take` turns the keys the collecting pass read since the last call into usage;
    :attr:`engine` scores a streamed run's chunks here, each with what its cells read.
    """

    def __init__(self, plan: dict[str, Planned], store: State, cache: BatchCache) -> None:
        """Read what the batches spent on each request of ``plan`` from the run's ``store``."""
        self.cache = cache
        self.metric_of = {key: planned.metric for key, planned in plan.items()}
        self.spent: dict[str, tuple[Usage, bool]] = {
            key: (Usage(input_tokens, output_tokens, calls=sends), state == "answered")
            for key, sends, input_tokens, output_tokens, state in store.db.execute(
                "SELECT key, sends, input_tokens, output_tokens, state FROM requests "
                "WHERE sends > 0"
            )
        }
        self.read = 0

    def take(self) -> tuple[Usage, int, dict[str, tuple[Usage, int]]]:
        """The usage of the requests read first since the last call: all, and per metric.

        Each with how many of them were answered (the collecting judge counted those as
        cache hits).
        """
        keys = self.cache.reads[self.read :]
        self.read += len(keys)
        total, answered = Usage(), 0
        by_metric: dict[str, tuple[Usage, int]] = {}
        for key in keys:
            found = self.spent.pop(key, None)  # popped: charged once, to the first reader
            if found is None:
                continue
            usage, hit = found
            total, answered = total + usage, answered + hit
            metric = self.metric_of.get(key)
            if metric is not None:
                before, hits = by_metric.get(metric, (Usage(), 0))
                by_metric[metric] = (before + usage, hits + hit)
        return total, answered, by_metric

    def engine(
        self,
        chunks: Iterator[tuple[list[Line], int, int]],
        metrics: list[Evaluator],
        options: RunOptions,
    ) -> Iterable[Chunk]:
        """Score the chunks here, one after another, each charged what its cells read."""
        from turneval._gc import batch_collection
        from turneval.stream.scoring import run_chunk

        for lines, first, keep in chunks:
            with batch_collection():
                chunk = run_chunk(lines, first, metrics, keep, options)
            total, answered, by_metric = self.take()
            chunk.usage = with_spent(chunk.usage, total, answered)
            for name, (usage, hits) in by_metric.items():
                if name in chunk.metric_usage:
                    chunk.metric_usage[name] = with_spent(chunk.metric_usage[name], usage, hits)
            yield chunk

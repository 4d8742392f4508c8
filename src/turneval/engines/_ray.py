"""The Ray engine: a streamed run's chunks scored by Ray Data actors (``--engine ray``).

The driver reads the input in chunks (line numbers, blank lines, resume and OTLP input work as
they do locally) and puts them in Ray's object store; each chunk is scored by an actor of a
Ray Data ``map_batches`` stage, which builds the metrics and the judge once (the judge from
``llm_factory`` inside the actor: chat models are never shipped pickled) and scores the chunk
exactly as a local run scores it; the driver takes the chunks back in input order and writes
``results.jsonl``, ``summary.json`` and ``report.html`` with the local run's own code. So the
rows are identical row by row, and the summary is computed exactly as locally.

The provider quota is global: one Ray actor holds it and every worker takes its request
starts from it (:class:`ActorBudget`). A worker that dies is restarted and its chunk retried;
since only the driver writes, in order, no row is lost or written twice. A re-run with
``resume=True`` and the same run folder scores only the rows the first run did not finish
(and, with the same judge cache, pays for no judge answer twice).

Needs the ``ray`` extra: ``pip install 'turneval[ray]'``.
"""

from __future__ import annotations

import os
import pickle
import shutil
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field

from turneval.engines._base import ChunkedEngine
from turneval.engines._ray_quota import ActorBudget, Quota
from turneval.engines._ray_rows import RayRows, is_parquet, write_rows
from turneval.errors import ConfigError, InvalidSampleError
from turneval.metrics import Evaluator
from turneval.options import RunOptions
from turneval.ratelimit import RateLimit, RateLimiter
from turneval.stream._chunks import Chunk
from turneval.stream._engine import ChunkWork
from turneval.stream._run import StreamJob
from turneval.stream._sink import StreamResult
from turneval.stream._sources import JsonlSource, Source
from turneval.stream.scoring import run_chunk

__all__ = ["ActorBudget", "Ray", "ray_module"]

_EXTRA = "the Ray engine needs Ray Data: pip install 'turneval[ray]'"


def ray_module() -> Any:
    """The ``ray`` module with Ray Data; :class:`ConfigError` naming the extra without it."""
    try:
        import ray
        import ray.data
    except ImportError as exc:
        raise ConfigError(_EXTRA) from exc
    return ray


class Ray(ChunkedEngine):
    """Score on a Ray cluster: each chunk by a Ray Data actor (``--engine ray``).

    Connects to the running Ray cluster (``ray.init()`` first for a remote one, or
    ``address``; a local one is started otherwise). ``data`` may also be a Parquet file or
    folder of sample rows, or a ``ray.data.Dataset`` of them (written to ``OUT/input.jsonl``
    first, in their order, so that rows keep line numbers). The run options are those of
    every front end; the judge is built in each actor by ``llm_factory`` (never ``llm=``:
    chat models are not shipped), ``cache`` is shared by the actors (same machine, or shared
    storage that supports SQLite's locking), ``rate_limit`` is held once for the cluster and
    ``max_concurrency`` / ``max_llm_concurrency`` hold in each actor.

    Attributes:
        address: The Ray cluster to join when Ray is not initialised yet
            (``ray.init(address)``; None: a running cluster, else a local one). The CLI's
            ``--ray-address``.
        workers: Scoring actors (the CLI's ``--workers``).
        num_cpus: CPUs each actor requests (fractional: whole CPUs starve the other stages of
            a small cluster).
        max_retries: Restarts of a dead actor and retries of its chunk.
        llm_factory: Builds the judge model inside each actor (e.g.
            ``lambda: ChatOpenAI(model="gpt-4o-mini")``).
        output_format: ``"jsonl"`` (``results.jsonl``), or ``"parquet"``: also the same rows
            as a folder of Parquet files, ``OUT/results.parquet/``, written by Ray in input
            order (``results.jsonl`` stays: ``resume`` reads it).
        chunk_size: Input lines per chunk: one actor call scores one chunk.
        chunk_bytes: Input bytes per chunk (at most).
    """

    name: ClassVar[str] = "ray"

    address: str | None = None
    workers: int = Field(default=2, ge=1)
    num_cpus: float = Field(default=0.5, gt=0)
    max_retries: int = Field(default=3, ge=0)
    llm_factory: Callable[[], Any] | None = None
    output_format: Literal["jsonl", "parquet"] = "jsonl"

    def check(self, metrics: list[Evaluator], options: RunOptions) -> None:
        """Refuse what a cluster cannot run, before Ray starts (which takes seconds).

        Raises:
            ConfigError: Ray is not installed; ``llm=`` given (pass ``llm_factory``); a metric
                holds its own chat model; a metric needs a judge and there is no
                ``llm_factory``.
        """
        ray_module()
        if options.llm is not None:
            raise ConfigError(
                "the Ray engine builds the judge in each worker: pass "
                "Ray(llm_factory=lambda: ...) instead of llm=..."
            )
        holding = [m.name for m in metrics if m.judge_llm(None) is not None]
        if holding:
            raise ConfigError(
                f"metrics {holding} hold their own chat model: chat models are not shipped to "
                "Ray workers; build the judge in each worker with llm_factory=... instead"
            )
        needing = [m.name for m in metrics if m.needs_judge(None)]
        if needing and self.llm_factory is None:
            raise ConfigError(
                f"metrics {needing} need an LLM judge: pass Ray(llm_factory=...) (called in "
                "each worker)"
            )

    def source(self, data: str | os.PathLike[str] | Source | Any, **options: Any) -> Source:
        """A JSONL or OTLP/JSON file or a source, as locally; or Parquet, or a Ray Dataset.

        Parquet and dataset rows are written as JSON by turneval and read as they are: the
        input ``options`` apply to JSONL and OTLP/JSON files.
        """
        if isinstance(data, Source):
            return super().source(data, **options)
        if isinstance(data, (str, os.PathLike)):
            path = Path(data)
            if not is_parquet(path):
                return super().source(path, **options)
            if not path.exists():
                raise InvalidSampleError(f"{data}: no such file or folder", field="path")
            return RayRows(path)
        return RayRows(Path("<the dataset>"), data)  # a ray.data.Dataset

    def run(self, job: StreamJob) -> StreamResult:
        """Join (or start) the cluster, then run the job with the chunks scored by actors."""
        ray = ray_module()
        job = job.with_changes(chunk_size=self.chunk_size, chunk_bytes=self.chunk_bytes)
        job.preflight()  # the output is checked before Ray starts (which takes seconds)
        progress = job.options.progress_shown()
        options = job.options.replace(show_progress=progress)
        if options.rate_limit is not None:  # the quota's window is the actors' limit
            wanted = max(options.max_llm_concurrency, options.rate_limit.rate_limit.max_in_flight)
            options = options.replace(max_llm_concurrency=wanted)
        if not ray.is_initialized():
            ray.init(address=self.address)
        if isinstance(job.source, RayRows):  # rows in their order: the dataset's (the files')
            with _in_order(ray, progress=progress):
                written = write_rows(job.source.read(ray), job.out, job.source.label)
            # JSON turneval writes (a float column's NaN stays as before)
            job = job.with_changes(source=JsonlSource(written, lenient_json=True))
        result = super().run(job.with_changes(options=options))
        if self.output_format == "parquet":
            parquet = job.out / "results.parquet"
            shutil.rmtree(parquet, ignore_errors=True)
            with _in_order(ray, progress=progress):
                ray.data.read_json(str(job.out / "results.jsonl")).write_parquet(str(parquet))
        return result

    def score(
        self, chunks: Iterator[ChunkWork], metrics: list[Evaluator], options: RunOptions
    ) -> Iterator[Chunk]:
        """Each chunk scored by a Ray Data actor; the chunks come back in input order."""
        ray = ray_module()
        # The chunks go to the object store (which spills to disk), not into the driver's heap:
        # the driver holds one reference per chunk, whatever the size of the file.
        refs = [ray.put(tuple(work)) for work in chunks]
        if not refs:
            return
        items = [{"chunk": number} for number in range(len(refs))]
        limit = None if options.rate_limit is None else options.rate_limit.rate_limit
        quota = None if limit is None else ray.remote(num_cpus=0)(Quota).remote(limit)
        kwargs = {
            "metrics": metrics,
            "options": options.replace(cache=None, llm=None, on_row=None, show_progress=False),
            "llm_factory": self.llm_factory,
            "cache": None if options.cache is None else str(options.cache.path),
            "quota": quota,
            "rate_limit": limit,
            "chunk_refs": refs,
        }
        # a Dataset takes the context's settings when it is made: make it in the block
        with _in_order(ray, progress=options.progress_shown()):
            source = ray.data.from_items(items, override_num_blocks=len(items))
            with warnings.catch_warnings():
                # Ray 2.5x deprecates remote args passed as keywords but names no parameter for
                # actor restarts yet; its default (restart forever) would hang on a chunk that
                # kills every actor, so the bound is passed the only way there is.
                warnings.filterwarnings("ignore", message="`ray_remote_args` is deprecated")
                scored = source.map_batches(
                    _ChunkScorer,
                    batch_size=1,
                    compute=ray.data.ActorPoolStrategy(size=min(self.workers, len(items))),
                    num_cpus=self.num_cpus,
                    fn_constructor_kwargs=kwargs,
                    max_restarts=self.max_retries,
                    max_task_retries=self.max_retries,
                )
            for row in scored.iter_rows():
                yield pickle.loads(row["chunk"])


class _ChunkScorer:
    """One Ray Data actor: metrics and judge built once, then chunk after chunk."""

    def __init__(
        self,
        metrics: list[Evaluator],
        options: RunOptions,
        llm_factory: Callable[[], Any] | None,
        cache: str | None,
        quota: Any,
        rate_limit: RateLimit | None,
        chunk_refs: list[Any],
    ) -> None:
        self.chunk_refs = chunk_refs  # the chunks in the object store, by chunk number
        limiter = None if rate_limit is None else RateLimiter(rate_limit, budget=ActorBudget(quota))
        self.metrics = metrics
        self.options = options.replace(
            llm=llm_factory() if llm_factory is not None else None,
            cache=cache,
            rate_limit=limiter,
        )

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[bytes]]:
        ray = ray_module()
        chunks = []
        for number in batch["chunk"]:
            lines, first, keep = ray.get(self.chunk_refs[number])
            chunk = run_chunk(lines, first, self.metrics, keep, self.options)
            chunks.append(pickle.dumps(chunk))
        return {"chunk": chunks}


@contextmanager
def _in_order(ray: Any, *, progress: bool) -> Iterator[None]:
    """Ray Data keeps the input order (and shows progress bars only if asked) in the block.

    The settings are the process's :class:`ray.data.DataContext`: the caller's own are
    restored when the block ends.
    """
    context = ray.data.DataContext.get_current()
    execution = context.execution_options
    saved = (
        execution.preserve_order,
        execution.verbose_progress,
        context.enable_progress_bars,
        context.print_on_execution_start,
    )
    execution.preserve_order = True  # chunks (and rows) come back in input order
    execution.verbose_progress = False
    context.enable_progress_bars = progress
    context.print_on_execution_start = False
    try:
        yield
    finally:
        (
            execution.preserve_order,
            execution.verbose_progress,
            context.enable_progress_bars,
            context.print_on_execution_start,
        ) = saved

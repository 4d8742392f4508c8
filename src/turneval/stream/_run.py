"""A streamed run, whatever scores it: the job an engine is given, and the run around its chunks.

:class:`StreamJob` is everything ``evaluate_jsonl`` was asked for, checked: the source, the
metrics, the run folder, the run options and the streamed run's own options. :func:`run_stream`
is the run around an engine's scorer: ``run.json`` first, the chunks read from the source
(resumed lines skipped), numbered and handed to the scorer, its scored chunks written in input
order by the sink, then ``summary.json`` and ``report.html``, and the run store kept in step.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turneval.manifest import RUN_FILE, DatasetSpec, RunManifest, dataset_version
from turneval.metrics import Evaluator
from turneval.options import RunOptions
from turneval.runs._folder import FolderSink
from turneval.runs._sink import RunSink, end_status
from turneval.runs._to_store import store_sink
from turneval.stream._chunks import Chunk, until
from turneval.stream._engine import ChunkWork, numbered, preflight
from turneval.stream._resume import ResumeWarning, finished_rows
from turneval.stream._sink import JsonlSink, StreamResult
from turneval.stream._sources import Source

if TYPE_CHECKING:
    from turneval.runs._store import StoreSink
    from turneval.store import RunStore

__all__ = ["Scorer", "StreamJob", "run_stream"]

Scorer = Callable[[Iterator[ChunkWork], list[Evaluator], RunOptions], Iterable[Chunk]]
"""What scores the chunks: called once with the numbered chunks, the metrics and the options,
it yields each chunk scored, in the order they came (an engine's ``score``)."""


@dataclass(frozen=True)
class StreamJob:
    """A streamed run as asked for, checked: what an engine's ``run`` is given.

    Attributes:
        source: The input (a :class:`~turneval.stream._sources.Source`).
        metrics: The metrics, resolved.
        out: The run folder (results.jsonl, summary.json, report.html, run.json).
        options: The run options (``store`` is :attr:`store`, written by the sink).
        chunk_size: Lines per chunk, at most.
        chunk_bytes: Input bytes per chunk, at most.
        report_rows: Rows kept for the HTML report's per-sample table.
        title: The report's title (None: ``turneval: <name>``).
        name: The run's name in run.json and the store (None: the input file's name).
        resume: Continue the run folder's results.jsonl.
        overwrite: Without ``resume``, replace a non-empty results.jsonl (else refuse it).
        stop: Once set, no new chunk is read (the chunks in flight are written).
        store: The run store the rows are kept in too (None: none).
    """

    source: Source
    metrics: list[Evaluator]
    out: Path
    options: RunOptions
    chunk_size: int = 1000
    chunk_bytes: int = 64 * 2**20
    report_rows: int = 2000
    title: str | None = None
    name: str | None = None
    resume: bool = False
    overwrite: bool = True
    stop: threading.Event | None = None
    store: RunStore | None = None

    def preflight(self) -> Path:
        """Check the output folder (made if missing) before anything starts; results.jsonl."""
        return preflight(self.out, self.chunk_size, self.chunk_bytes, self.resume, self.overwrite)

    def with_changes(self, **changes: Any) -> StreamJob:
        """A copy with ``changes`` (an engine adapting the job: its options, its source)."""
        return replace(self, **changes)


def run_stream(job: StreamJob, score: Scorer) -> StreamResult:
    """Run ``job`` with ``score`` scoring its chunks: the rows written in input order.

    The rows go through the run's sinks: the run folder's :class:`~turneval.runs.FolderSink`
    (run.json before the first row, results.jsonl, summary.json), the store's when there is
    one, and the run options' own ``sinks``.

    Raises:
        ConfigError: the output or the resumed run is not as ``job`` asks (see
            :func:`~turneval.stream.evaluate_jsonl`).
        EvaluationAbortedError: past ``fail_on_error``.
    """
    source, resolved, target, options = job.source, job.metrics, job.out, job.options
    path, llm = source.path, options.llm
    skipped: dict[str, int] | None = {} if source.traces else None
    started: list[RunSink] = []
    folder: FolderSink | None = None
    stored: StoreSink | None = None
    try:
        results_path = job.preflight()
        continuing = job.resume and results_path.exists() and results_path.stat().st_size > 0
        if job.store is not None:
            stored = store_sink(
                job.store,
                name=job.name or path.name,
                out_dir=target,
                resume=job.resume,
                details=options.details,
                streamed=True,
            )
        manifest = RunManifest.of(
            resolved,
            llm,
            dataset=_dataset(path, None if stored is None else stored.store),
            name=job.name,
        )
        folder = FolderSink(target, source=path, resume=continuing)
        folder.start(manifest)  # run.json before the first row (resuming: checked first)
        started.append(folder)
        if folder.unchecked:  # a run folder from before run.json: not checked
            warnings.warn(
                f"{target} has no {RUN_FILE} (written by an older turneval): resuming "
                "without checking that the input, metrics and judge are the same",
                ResumeWarning,
                stacklevel=5,  # evaluate_jsonl's caller (through the engine's run)
            )
        for other in ([] if stored is None else [stored]) + list(options.sinks):
            other.start(manifest)
            started.append(other)
        done = finished_rows(results_path, otlp=source.traces) if job.resume else {}
        sink = JsonlSink(resolved, folder, job.report_rows, options, started[1:])
        sink.resume(done)
        lines = source.chunks(job.chunk_size, job.chunk_bytes, frozenset(done), skipped)
        chunks = numbered(until(sink.track(lines), job.stop), sink)
        with _closing(score(chunks, resolved, options)) as scored:
            for chunk in scored:
                sink.absorb(chunk)
        stopped = job.stop is not None and job.stop.is_set()
        title = job.title or f"turneval: {job.name or path.name}"
        result = sink.finish(target, title, skipped, stopped=stopped)
        result.stopped = stopped
        result.store_run = None if stored is None else stored.run_id
        return result
    except BaseException as exc:
        status, error = end_status(exc)
        for other in started:
            with suppress(Exception):  # the run's own error is the one to raise
                other.finish(None, status, error)
        if stored is not None and stored not in started and stored.store.close_after_run:
            stored.store.close()  # opened for this run, which never started in it
        raise
    finally:
        if folder is not None:
            folder.close()


@contextmanager
def _closing(scored: Iterable[Chunk]) -> Iterator[Iterable[Chunk]]:
    """``scored``, closed at the end if it can be (a generator's workers are let go at once)."""
    try:
        yield scored
    finally:
        close = getattr(scored, "close", None)
        if close is not None:
            close()


def _dataset(source: Path, store: RunStore | None) -> DatasetSpec:
    """The input as run.json records it: the file and the dataset version it is (issue 49).

    The version is the whole file's digest, and its name and version when the store keeps
    that content (:func:`~turneval.manifest.dataset_version`); ``compare`` checks it.
    """
    return DatasetSpec(str(source), version=dataset_version(source, store))

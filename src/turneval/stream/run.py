"""A streamed run, whatever scores it: the job an engine is given, and the run around its chunks.

:class:`StreamJob` is everything ``evaluate_jsonl`` was asked for, checked: the source, the
metrics, the run folder, the run options and the streamed run's own options. :func:`run_stream`
is the run around an engine's scorer: ``run.json`` first, the chunks read from the source
(resumed lines skipped), numbered and handed to the scorer, its scored chunks written in input
order by the sink, then ``summary.json`` and ``report.html``, and the run store kept in step.
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turneval._files import naming
from turneval._runfile import RUN_FILE, RunFile
from turneval.metrics import Evaluator
from turneval.options import RunOptions
from turneval.stream.chunks import Chunk, until
from turneval.stream.engine import ChunkWork, numbered, preflight
from turneval.stream.resume import ResumeWarning, finished_rows
from turneval.stream.sink import JsonlSink, StreamResult
from turneval.stream.sources import Source

if TYPE_CHECKING:
    from turneval.store import RunRecorder, RunStore

__all__ = ["Scorer", "StreamJob", "open_store", "run_stream"]

Scorer = Callable[[Iterator[ChunkWork], list[Evaluator], RunOptions], Iterable[Chunk]]
"""What scores the chunks: called once with the numbered chunks, the metrics and the options,
it yields each chunk scored, in the order they came (an engine's ``score``)."""


@dataclass(frozen=True)
class StreamJob:
    """A streamed run as asked for, checked: what an engine's ``run`` is given.

    Attributes:
        source: The input (a :class:`~turneval.stream.sources.Source`).
        metrics: The metrics, resolved.
        out: The run folder (results.jsonl, summary.json, report.html, run.json).
        options: The run options (``store`` is :attr:`store`, written by the sink).
        chunk_size: Lines per chunk, at most.
        chunk_bytes: Input bytes per chunk, at most.
        report_rows: Rows kept for the HTML report's per-sample table.
        title: The report's title (None: ``turneval: <input file name>``).
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

    Raises:
        ConfigError: the output or the resumed run is not as ``job`` asks (see
            :func:`~turneval.stream.evaluate_jsonl`).
        EvaluationAbortedError: past ``fail_on_error``.
    """
    source, resolved, target, options = job.source, job.metrics, job.out, job.options
    path, llm = source.path, options.llm
    skipped: dict[str, int] | None = {} if source.traces else None
    run_file = RunFile(target, path, resolved, llm)
    recorder: RunRecorder | None = None
    try:
        results_path = job.preflight()
        recorder = _recorder(
            job.store, path, run_file, resolved, llm, resume=job.resume, details=options.details
        )
        _record_dataset_version(run_file, path, job.store)
        if job.resume and results_path.exists() and results_path.stat().st_size:
            if not run_file.resume():  # a run folder from before run.json: not checked
                warnings.warn(
                    f"{target} has no {RUN_FILE} (written by an older turneval): resuming "
                    "without checking that the input, metrics and judge are the same",
                    ResumeWarning,
                    stacklevel=5,  # evaluate_jsonl's caller (through the engine's run)
                )
        else:
            run_file.start()  # before the first row
        done = finished_rows(results_path, otlp=source.traces) if job.resume else {}
        with (
            naming(results_path),
            results_path.open("a" if job.resume else "w", encoding="utf-8") as handle,
        ):
            sink = JsonlSink(resolved, handle, job.report_rows, options, run_file, recorder)
            sink.resume(done)
            lines = source.chunks(job.chunk_size, job.chunk_bytes, frozenset(done), skipped)
            chunks = numbered(until(sink.track(lines), job.stop), sink)
            with _closing(score(chunks, resolved, options)) as scored:
                for chunk in scored:
                    sink.absorb(chunk)
        result = sink.finish(target, job.title or f"turneval: {path.name}", skipped)
        result.stopped = job.stop is not None and job.stop.is_set()
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


@contextmanager
def _closing(scored: Iterable[Chunk]) -> Iterator[Iterable[Chunk]]:
    """``scored``, closed at the end if it can be (a generator's workers are let go at once)."""
    try:
        yield scored
    finally:
        close = getattr(scored, "close", None)
        if close is not None:
            close()


def _record_dataset_version(run_file: RunFile, source: Path, store: RunStore | None) -> None:
    """Record in run.json the version of the dataset the run reads (issue 49).

    Its digest, and its name and version when the store keeps it
    (:func:`~turneval.store.dataset_version`); ``compare`` checks it.
    """
    from turneval.store import dataset_version

    if store is not None:  # run.json has the digest: the store may know its name and version
        recorded = run_file.document["dataset"]["version"]
        run_file.document["dataset"]["version"] = dataset_version(
            source, store, digest=recorded["digest"]
        )


def _recorder(
    store: RunStore | None,
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
    from turneval.store import file_digest

    return store.start_run(
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


def open_store(store: RunStore | str | os.PathLike[str] | None) -> RunStore | None:
    """The run store of ``store`` (a store, its URL or path), opened now (None: none)."""
    if store is None:
        return None
    from turneval.store import RunStore

    return RunStore.coerce(store)

"""Evaluate a JSONL file of any size: read, score and write as it goes, in bounded memory.

A front end of the run pipeline (:mod:`turneval.pipeline`): JSONL chunks in, rows out to
results.jsonl. Lines are read in chunks (:mod:`turneval.stream.chunks`); each chunk is scored
by the batch core (:mod:`turneval.stream.scoring`), in this process or (rule-based metrics
only) in worker processes (:mod:`turneval.stream.workers`), with at most ``2 x workers``
chunks in flight, or by an engine (:mod:`turneval.stream.engine`). Rows are written to
``results.jsonl`` in input order and flushed line by line (:mod:`turneval.stream.sink`), so a
partial file is never corrupt. A line that is not valid JSON or not a valid sample becomes a
row whose error names the line and field; every other line is scored as usual. Whatever its
bytes (invalid UTF-8, lone surrogates, nesting too deep to parse), a non-blank line yields
exactly one row; a UTF-8 byte-order mark on the first line is ignored; blank lines are
skipped (they hold no sample and yield no row). A line that is not UTF-8 is named with its
file; a line that is not strict JSON (a duplicate key, ``NaN``, ``Infinity``, ``1e400``) is
an error row naming the key, unless ``lenient_json=True``. With ``resume=True`` the rows of
an interrupted run are kept and their lines skipped (:mod:`turneval.stream.resume`).
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from turneval.aggregate import RunAggregate
from turneval.errors import ConfigError, InvalidSampleError
from turneval.judge import SQLiteCache
from turneval.manifest import RUN_FILE, DatasetSpec, RunManifest, dataset_version
from turneval.metrics import Evaluator
from turneval.options import RunOptions
from turneval.ratelimit import RateLimit
from turneval.results import SampleResult
from turneval.runner import check_judges, resolve_metrics
from turneval.runs.folder import FolderSink
from turneval.runs.sink import RunSink, end_status
from turneval.runs.to_store import store_sink
from turneval.stream.chunks import check_input_file, is_otlp, line_chunks, otlp_chunks, until
from turneval.stream.engine import ChunkEngine, numbered, preflight
from turneval.stream.resume import ResumeWarning, finished_rows
from turneval.stream.sink import JsonlSink, StreamResult
from turneval.stream.workers import score_chunks

if TYPE_CHECKING:
    from turneval.runs.store import StoreSink
    from turneval.store import RunStore

__all__ = ["evaluate_jsonl"]


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
    sinks: Sequence[RunSink] = (),
) -> StreamResult:
    """Score ``path`` line by line into ``out_dir``: results.jsonl, summary.json, report.html.

    ``out_dir/run.json`` records what the run was started with (see ``resume``).

    The run options (``llm``, ``cache``, ``max_concurrency``, ``max_llm_concurrency``,
    ``timeout``, ``fail_on_error``, ``on_row``, ``details``, ``show_progress``, ``rate_limit``,
    ``aggregates``, ``store``, ``sinks``) are those of :class:`~turneval.options.RunOptions`, with the
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
        sinks: More places the run goes (:class:`~turneval.runs.RunSink`), beside the run
            folder (a :class:`~turneval.runs.FolderSink`) and the store: each is started with
            the run's manifest, given each chunk's rows in input order and finished with the
            summary. A resumed run gives them only the rows it scores.

    Raises:
        ConfigError: results.jsonl exists and neither ``resume`` nor ``overwrite`` is set; the
            judge cache is unreadable; the existing file is not a results.jsonl; or, resuming,
            run.json shows other metrics, configurations, judge or input.
        InvalidSampleError: ``path`` is not an existing regular file.
    """
    source = Path(path)
    check_input_file(source)
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
            otlp_chunks,
            group_by=group_by,
            strict_traces=strict_traces,
            skipped_traces=skipped,
            lenient=lenient_json,
        )
        if otlp
        else partial(line_chunks, lenient=lenient_json)
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
        sinks=sinks,
    )
    target = Path(out_dir)
    started: list[RunSink] = []
    folder: FolderSink | None = None
    stored: StoreSink | None = None
    try:
        results_path = preflight(target, chunk_size, chunk_bytes, resume, overwrite)
        continuing = resume and results_path.exists() and results_path.stat().st_size > 0
        if store is not None:
            stored = store_sink(
                store,
                name=source.name,
                out_dir=target,
                resume=resume,
                details=details,
                streamed=True,
            )
        manifest = RunManifest.of(
            resolved, llm, dataset=_dataset(source, None if stored is None else stored.store)
        )
        folder = FolderSink(target, source=source, resume=continuing)
        folder.start(manifest)  # run.json before the first row (resuming: checked first)
        started.append(folder)
        if folder.unchecked:  # a run folder from before run.json: not checked
            warnings.warn(
                f"{target} has no {RUN_FILE} (written by an older turneval): resuming "
                "without checking that the input, metrics and judge are the same",
                ResumeWarning,
                stacklevel=2,
            )
        for other in ([] if stored is None else [stored]) + list(options.sinks):
            other.start(manifest)
            started.append(other)
        done = finished_rows(results_path, otlp=otlp) if resume else {}
        sink = JsonlSink(resolved, folder, report_rows, options, started[1:])
        sink.resume(done)
        chunks = sink.track(read_chunks(source, chunk_size, chunk_bytes, frozenset(done)))
        if engine is None:
            score_chunks(chunks, resolved, options, workers, sink, stop)
        else:
            for chunk in engine(numbered(until(chunks, stop), sink), resolved, options):
                sink.absorb(chunk)
        stopped = stop is not None and stop.is_set()
        result = sink.finish(target, title or f"turneval: {source.name}", skipped, stopped=stopped)
        result.stopped = stopped
        result.store_run = None if stored is None else stored.run_id
        return result
    except BaseException as exc:
        status, error = end_status(exc)
        for other in started:
            with contextlib.suppress(Exception):  # the run's own error is the one to raise
                other.finish(None, status, error)
        if stored is not None and stored not in started and stored.store.close_after_run:
            stored.store.close()  # opened for this run, which never started in it
        raise
    finally:
        if folder is not None:
            folder.close()
        if owns_cache and options.cache is not None:
            options.cache.close()


def _dataset(source: Path, store: RunStore | None) -> DatasetSpec:
    """The input as run.json records it: the file and the dataset version it is (issue 49).

    The version is the whole file's digest, and its name and version when the store keeps
    that content (:func:`~turneval.manifest.dataset_version`); ``compare`` checks it.
    """
    return DatasetSpec(str(source), version=dataset_version(source, store))

"""Evaluate a JSONL file of any size: read, score and write as it goes, in bounded memory.

A front end of the run pipeline (:mod:`turneval.pipeline`): a source of samples in, rows out
to results.jsonl. The source (:mod:`turneval.stream._sources`) is read in chunks; an engine
(:mod:`turneval.engines`: ``Local`` by default, ``Ray``, ``Batch``) scores them, each with the
batch core (:mod:`turneval.stream.scoring`); rows are written to ``results.jsonl`` in input
order and flushed line by line (:mod:`turneval.stream._sink`), so a partial file is never
corrupt. A line that is not valid JSON or not a valid sample becomes a row whose error names
the line and field; every other line is scored as usual. Whatever its bytes (invalid UTF-8,
lone surrogates, nesting too deep to parse), a non-blank line yields exactly one row; a UTF-8
byte-order mark on the first line is ignored; blank lines are skipped (they hold no sample and
yield no row). A line that is not UTF-8 is named with its file; a line that is not strict JSON
(a duplicate key, ``NaN``, ``Infinity``, ``1e400``) is an error row naming the key, unless the
source is lenient (``JsonlSource(path, lenient_json=True)``). With ``resume=True`` the rows of
an interrupted run are kept and their lines skipped (:mod:`turneval.stream._resume`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turneval._deprecation import deprecated, renamed_keywords
from turneval.aggregate import RunAggregate
from turneval.judge import SQLiteCache
from turneval.metrics import Evaluator
from turneval.options import RunOptions
from turneval.ratelimit import RateLimit, RateLimiter
from turneval.results import SampleResult
from turneval.runner import resolve_metrics
from turneval.runs._to_store import open_store
from turneval.stream._engine import ChunkEngine
from turneval.stream._run import StreamJob
from turneval.stream._sink import StreamResult
from turneval.stream._sources import Source

if TYPE_CHECKING:
    from turneval.engines._base import Engine
    from turneval.runs._sink import RunSink
    from turneval.store import RunStore

__all__ = ["ENGINE_SETTINGS", "SOURCE_OPTIONS", "evaluate_jsonl"]

ENGINE_SETTINGS = {
    "workers": "engine=Local(workers=...)",
    "chunk_size": "engine=Local(chunk_size=...)",
    "chunk_bytes": "engine=Local(chunk_bytes=...)",
}
"""The engine settings ``evaluate_jsonl`` once took itself, each with where it is now."""

SOURCE_OPTIONS = {
    "input_format": "a source: JsonlSource(path) or OtlpSource(path)",
    "group_by": "OtlpSource(path, group_by=...)",
    "strict_traces": "OtlpSource(path, strict=...)",
    "lenient_json": "JsonlSource(path, lenient_json=...) or OtlpSource(path, lenient_json=...)",
}
"""The input options ``evaluate_jsonl`` once took itself, each with where it is now."""


@renamed_keywords({"path": "data", "out_dir": "out"})
def evaluate_jsonl(
    data: str | os.PathLike[str] | Source | Any,
    metrics: Sequence[Evaluator | str],
    out: str | os.PathLike[str],
    *,
    engine: Engine | ChunkEngine | None = None,
    llm: Any = None,
    cache: SQLiteCache | str | os.PathLike[str] | None = None,
    max_concurrency: int = 16,
    max_llm_concurrency: int = 8,
    timeout: float | None = None,
    fail_on_error: bool | float = False,
    on_row: Callable[[SampleResult], None] | None = None,
    details: bool = True,
    show_progress: bool | None = None,
    rate_limit: RateLimit | RateLimiter | None = None,
    aggregates: Sequence[RunAggregate] = (),
    store: RunStore | str | os.PathLike[str] | None = None,
    report_rows: int = 2000,
    title: str | None = None,
    name: str | None = None,
    resume: bool = False,
    overwrite: bool = True,
    stop: threading.Event | None = None,
    sinks: Sequence[RunSink] = (),
    **moved: Any,
) -> StreamResult:
    """Score ``data`` line by line into the folder ``out``: results.jsonl, summary.json, report.html.

    ``out/run.json`` records what the run was started with (see ``resume``). ``engine``
    scores the chunks (:class:`~turneval.engines.Local` by default: this process and worker
    processes; :class:`~turneval.engines.Ray`, :class:`~turneval.engines.Batch`); it holds its
    own settings, the options here are the same whatever the engine.

    The run options (``llm``, ``cache``, ``max_concurrency``, ``max_llm_concurrency``,
    ``timeout``, ``fail_on_error``, ``on_row``, ``details``, ``show_progress``, ``rate_limit``,
    ``aggregates``, ``store``, ``sinks``) are those of :class:`~turneval.options.RunOptions`,
    with the same names and defaults. The names of earlier versions still work, with a
    :class:`DeprecationWarning`: ``path`` and ``out_dir`` (now ``data`` and ``out``),
    ``workers``, ``chunk_size`` and ``chunk_bytes`` (now the engine's,
    :data:`ENGINE_SETTINGS`), ``input_format``, ``group_by``, ``strict_traces`` and
    ``lenient_json`` (now the source's, :data:`SOURCE_OPTIONS`).

    Args:
        data: A JSONL file, one sample per line, or an OTLP/JSON file of traces (told by its
            first bytes: ``{"resourceSpans"``), or a source saying which and how to read it
            (:class:`~turneval.stream.JsonlSource`, :class:`~turneval.stream.OtlpSource`);
            the Ray engine also reads Parquet and Ray Datasets.
        metrics: Evaluator objects or names.
        out: The run folder, created if missing.
        engine: Where the chunks are scored (default ``Local()``). A bare callable (the
            :class:`~turneval.stream.ChunkEngine` form) is still taken: it builds the judges
            where it scores.
        llm: Default judge model for judged metrics.
        cache: A SQLite judge cache or its path (a re-run pays for nothing twice).
        max_concurrency: Samples scored at once (in one process).
        max_llm_concurrency: Judge requests in flight at once.
        timeout: Seconds allowed to score one sample; metrics unfinished then fail with
            ``TimeoutError`` on that row.
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
            sample), so the same whatever the engine.
        details: Also write each metric's ``details`` to results.jsonl (the CLI's
            ``--details``); False saves their cost.
        show_progress: Print a progress line to stderr (None: only when it is a terminal).
        rate_limit: The judge provider's quota (:class:`~turneval.ratelimit.RateLimit`), held
            across the whole file: judge requests are paced to it and adapt to 429s.
        aggregates: Run-level figure sets (:class:`~turneval.aggregate.RunAggregate`, e.g.
            ``DatabricksAggregates()``), computed once every line is scored from the rows read
            back from results.jsonl (so they need memory for the rows, without samples; with
            ``details=False`` the rows have no details), into the result's ``aggregates`` and
            summary.json; one that raises is kept in ``aggregate_errors``.
        store: A run store (:class:`~turneval.store.RunStore`, or its URL or path): the run
            is kept there too, each chunk's rows (with their input lines) written as they
            are written to results.jsonl, in one transaction; with ``resume``, the stored run
            of ``out`` is continued (its rows made those of results.jsonl first).
        report_rows: Rows kept for the HTML report's per-sample table.
        title: The report's title (default: ``turneval: <name>``).
        name: The run's name, in ``run.json`` and the run store (``turneval store list``, the
            viewer), so two runs of one file can be told apart (default: the input file's name).
        resume: Continue ``out/results.jsonl`` of an interrupted run: its finished rows are
            kept (and counted in the summary), their lines are not scored again. The run must
            be the same: ``out/run.json`` (written by every run before its first row) records
            the metrics with their configurations, the judge model and the digest of the
            input read so far; a difference raises :class:`ConfigError` naming it. A folder
            without run.json resumes with a :class:`ResumeWarning`.
        overwrite: Without ``resume``, replace an existing, non-empty results.jsonl; if False,
            raise :class:`ConfigError` instead (the CLI's default).
        stop: Set it (from a signal handler, another thread) to stop early: no new chunk is
            read, the chunks in flight are scored and written, the summary and report cover
            the rows written, and the result's ``stopped`` is True; ``resume`` continues the
            run. The CLI sets it on SIGTERM.
        sinks: More places the run goes (:class:`~turneval.runs.RunSink`), beside the run
            folder (a :class:`~turneval.runs.FolderSink`) and the store: each is started with
            the run's manifest, given each chunk's rows in input order and finished with the
            summary. A resumed run gives them only the rows it scores.
        **moved: The deprecated names above (a :class:`DeprecationWarning` each).

    Raises:
        ConfigError: results.jsonl exists and neither ``resume`` nor ``overwrite`` is set; the
            judge cache is unreadable; the existing file is not a results.jsonl; resuming,
            run.json shows other metrics, configurations, judge or input; the engine refuses
            the run (a judged metric without a judge, ...).
        InvalidSampleError: ``data`` is not an existing regular file.
        TypeError: an unknown keyword, or a deprecated one beside the object it moved to.
    """
    arguments = dict(locals())
    runner = _engine(engine, moved)
    source_options = _source_options(data, moved)
    if moved:
        raise TypeError(
            f"evaluate_jsonl() got an unexpected keyword argument {next(iter(moved))!r}"
        )
    resolved = resolve_metrics(metrics)
    # a corrupt cache fails here, named, before any row is scored; the store is the sink's
    options = RunOptions.from_arguments(arguments, store=None)
    owns_cache = cache is not None and not isinstance(cache, SQLiteCache)
    try:
        runner.check(resolved, options)
        source = runner.source(data, **source_options)
        source.check()
        job = StreamJob(
            source,
            resolved,
            Path(out),
            options,
            report_rows=report_rows,
            title=title,
            name=name,
            resume=resume,
            overwrite=overwrite,
            stop=stop,
            store=open_store(store),  # an unopenable store fails before the engine starts
        )
        return runner.run(job)
    finally:
        if owns_cache and options.cache is not None:
            options.cache.close()


def _engine(engine: Engine | ChunkEngine | None, moved: dict[str, Any]) -> Engine:
    """The engine object: ``engine``, ``Local()``, or a callable's wrapper; deprecated settings.

    Raises:
        TypeError: an engine setting given beside an engine object (pass it to the object).
    """
    # here, not at the top: the engines build on the stream package, whose front end this is
    from turneval.engines._base import CallableEngine, Engine
    from turneval.engines._local import Local

    settings = _take(moved, ENGINE_SETTINGS)
    if isinstance(engine, Engine):
        if settings:
            raise TypeError(
                f"evaluate_jsonl() got {', '.join(settings)}= beside engine={engine!r}: pass "
                f"them to the engine, e.g. {type(engine).__name__}({next(iter(settings))}=...)"
            )
        return engine
    if engine is None:
        return Local(**settings)
    settings.pop("workers", None)  # never read with an engine of this form
    return CallableEngine(scorer=engine, **settings)


def _source_options(data: Any, moved: dict[str, Any]) -> dict[str, Any]:
    """The deprecated input options given (a warning each), for :func:`as_source`.

    Raises:
        TypeError: an input option given beside a source object (pass it to the source).
    """
    given = _take(moved, SOURCE_OPTIONS, as_data=True)
    if given and isinstance(data, Source):
        raise TypeError(
            f"evaluate_jsonl() got {', '.join(given)}= beside the source {data!r}: pass "
            "them to the source"
        )
    return given


def _take(moved: dict[str, Any], where: dict[str, str], *, as_data: bool = False) -> dict[str, Any]:
    """The deprecated keywords of ``moved`` that ``where`` names (taken out), a warning each."""
    given = {name: moved.pop(name) for name in list(moved) if name in where}
    for name in given:
        place = f"{where[name]} as data" if as_data else where[name]
        deprecated(f"evaluate_jsonl({name}=...) is deprecated: pass {place}", stacklevel=5)
    return given

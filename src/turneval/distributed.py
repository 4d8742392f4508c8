"""Evaluate on a Ray cluster: the streamed run's chunks scored by Ray Data actors.

:func:`evaluate_on_ray` is :func:`turneval.stream.evaluate_jsonl` with another engine. The driver
reads the file in chunks (line numbers, blank lines, resume and OTLP input work as they do
locally); each chunk is scored by an actor of a Ray Data ``map_batches`` stage, which builds
the metrics and the judge once (the judge from ``llm_factory`` inside the actor: chat models are
never shipped pickled) and scores the chunk exactly as a local run scores it; the driver takes
the chunks back in input order and writes ``results.jsonl``, ``summary.json`` and
``report.html`` with the local run's own code. So the rows are identical row by row, and the
summary is computed exactly as locally.

The provider quota is global: one Ray actor holds the :class:`~turneval.ratelimit.LocalBudget`
and every worker takes its request starts from it (the actor computes the wait, the worker
sleeps it), so the sum over workers stays within the quota while each worker keeps its own
adaptive in-flight window. A worker that dies is restarted and its chunk retried; since only the
driver writes, in order, no row is lost or written twice. A re-run with ``resume=True`` and the
same ``output`` scores only the rows the first run did not finish (and, with the same judge
cache, pays for no judge answer twice).

Needs the ``ray`` extra: ``pip install 'turneval[ray]'``.
"""

from __future__ import annotations

import inspect
import json
import os
import pickle
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio

from turneval.aggregate import RunAggregate
from turneval.errors import ConfigError, InvalidSampleError
from turneval.metrics import Evaluator
from turneval.options import RunOptions
from turneval.ratelimit import LocalBudget, RateLimit, RateLimiter
from turneval.results import SampleResult
from turneval.runner import resolve_metrics
from turneval.sample_lines import UNDECODABLE_ROW
from turneval.stream import StreamResult, evaluate_jsonl
from turneval.stream.chunks import Chunk, Line, check_input_file
from turneval.stream.engine import preflight
from turneval.stream.scoring import run_chunk

if TYPE_CHECKING:
    from turneval.runs import RunSink
    from turneval.store import RunStore

__all__ = ["RENAMED_OPTIONS", "ActorBudget", "DistributedResult", "evaluate_on_ray"]

_LATE_RETRIES = 4  # starts a worker may miss in a row before it sends anyway
_MIN_LATENESS = 0.005  # seconds late that never count as missing a start
_MIN_LEAD, _MAX_LEAD = 0.005, 1.0  # how far ahead a worker asks for its starts (seconds)

_EXTRA = "evaluate_on_ray needs Ray Data: pip install 'turneval[ray]'"


def _ray() -> Any:
    try:
        import ray
        import ray.data
    except ImportError as exc:
        raise ConfigError(_EXTRA) from exc
    return ray


@dataclass
class DistributedResult:
    """What :func:`evaluate_on_ray` leaves: the streamed run's result and where its rows are.

    Attributes:
        stream: Summaries, counts, usage and the report's rows, as a local streamed run gives.
        output: The folder holding ``results.jsonl``, ``summary.json`` and ``report.html``.
    """

    stream: StreamResult
    output: Path

    @property
    def results_path(self) -> Path:
        """``results.jsonl``: one row per input line, in input order."""
        return self.output / "results.jsonl"

    @property
    def parquet_path(self) -> Path:
        """``results.parquet/``: the rows as Parquet files (with ``output_format="parquet"``)."""
        return self.output / "results.parquet"

    def summary(self) -> dict[str, Any]:
        """The run's ``summary.json``, as a local run writes it."""
        loaded: dict[str, Any] = json.loads((self.output / "summary.json").read_text("utf-8"))
        return loaded

    def dataset(self) -> Any:
        """The result rows as a Ray Dataset (read from ``results.jsonl``)."""
        return _ray().data.read_json(str(self.results_path))

    def to_pandas(self) -> Any:
        """The result rows as a pandas DataFrame, in input order (needs the ``pandas`` extra).

        Columns as in ``results.jsonl``, with their JSON types (an id ``"001"`` stays text):
        per metric a float column (NaN where it failed), ``<name>_reason`` and
        ``<name>_error`` (None where there is none), as ``EvaluationResult.to_pandas`` gives
        (a failure's ``<name>_traceback`` stays in results.jsonl, not a column).
        """
        import pandas as pd

        with self.results_path.open(encoding="utf-8") as handle:
            frame = pd.DataFrame([json.loads(line) for line in handle if line.strip()])
        names = self.summary()["metrics"]
        frame = frame.drop(columns=[f"{name}_traceback" for name in names], errors="ignore")
        for name in names:
            if name in frame.columns:
                frame[name] = frame[name].astype(float)
            for column in (f"{name}_reason", f"{name}_error"):
                if column in frame.columns:  # object: None stays None
                    frame[column] = pd.Series(
                        [None if pd.isna(v) else v for v in frame[column]], dtype=object
                    )
        return frame


_CLUSTER_HEADROOM = 0.03
"""How much slower than the quota a cluster's starts are paced (one process: 1%). A request
leaves a worker up to half a gap after its start and crosses processes (or machines) to the
provider with a delay that varies more than within one process: measured on one 2-core
machine, 1% let 102 requests into a 10-second window of a 100-request quota; 3% none."""


class _Quota:
    """The provider's quota, held once for the whole cluster (a Ray actor's state)."""

    def __init__(self, rate_limit: RateLimit) -> None:
        self.budget = LocalBudget(rate_limit, headroom=_CLUSTER_HEADROOM)

    def reserve(self, tokens: int, lead: float = 0.0) -> tuple[float, float]:
        """The start (wall clock) and the gap between starts; the start is ``lead`` s ahead."""
        return time.time() + self.budget.reserve(tokens, lead=lead), self.budget.request_gap

    def correct(self, estimated: int, actual: int) -> None:
        self.budget.correct(estimated, actual)


class ActorBudget:
    """A :class:`~turneval.ratelimit.Budget` held by a Ray actor that every worker asks.

    Args:
        handle: The quota actor (``reserve(tokens, lead) -> (wall-clock start, gap)`` and
            ``correct(estimated, actual)``).
    """

    def __init__(self, handle: Any) -> None:
        """Ask ``handle`` for request starts."""
        self.handle = handle
        self.lead = _MIN_LEAD
        self.missed = 0  # starts this worker woke up too late for
        self._round_trip = 0.0

    async def acquire(self, tokens: int) -> None:
        """Take the next start from the actor, then wait for it here.

        The actor answers with a wall-clock time, not a delay, so that the time its answer
        takes to arrive does not shift the start (the clocks of a cluster's nodes are assumed
        synchronised, as NTP keeps them), and the worker asks for starts far enough ahead
        (twice its recent round trip to the actor) that the answer arrives before the start. A
        worker that wakes up more than half a request gap past its start (its process was
        busy) takes a new start instead of sending late, so that late requests never bunch up
        with the ones on time (a window of the quota's length then holds at most its share,
        within the cluster budget's 3% headroom); the missed start is lost.
        """
        for _ in range(_LATE_RETRIES):
            asked = time.time()
            start_at, gap = await self.handle.reserve.remote(tokens, self.lead)
            now = time.time()
            # Ask for starts at least twice the recent round trip ahead, so that an answer
            # that travels slowly still arrives before its start.
            took = now - asked
            self._round_trip = (
                took if self._round_trip == 0 else 0.8 * self._round_trip + 0.2 * took
            )
            self.lead = min(max(2 * self._round_trip, _MIN_LEAD), _MAX_LEAD)
            if start_at > now:
                await anyio.sleep(start_at - now)
            if time.time() - start_at <= max(gap / 2, _MIN_LATENESS):
                return
            self.missed += 1

    async def settle(self, estimated: int, actual: int) -> None:
        """Correct the shared token budget with the provider's reported usage."""
        await self.handle.correct.remote(estimated, actual)


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
        ray = _ray()
        chunks = []
        for number in batch["chunk"]:
            lines, first, keep = ray.get(self.chunk_refs[number])
            chunk = run_chunk(lines, first, self.metrics, keep, self.options)
            chunks.append(pickle.dumps(chunk))
        return {"chunk": chunks}


def _engine(
    ray: Any,
    *,
    llm_factory: Callable[[], Any] | None,
    cache: str | None,
    rate_limit: RateLimit | None,
    concurrency: int,
    num_cpus: float,
    max_retries: int,
) -> Callable[..., Iterable[Chunk]]:
    def run(
        chunks: Iterator[tuple[list[Line], int, int]],
        metrics: list[Evaluator],
        options: RunOptions,
    ) -> Iterator[Chunk]:
        # The chunks go to the object store (which spills to disk), not into the driver's heap:
        # the driver holds one reference per chunk, whatever the size of the file.
        refs = [ray.put(chunk) for chunk in chunks]
        if not refs:
            return
        items = [{"chunk": number} for number in range(len(refs))]
        quota = None
        if rate_limit is not None:
            quota = ray.remote(num_cpus=0)(_Quota).remote(rate_limit)
        portable = options.replace(cache=None, llm=None, on_row=None, show_progress=False)
        kwargs = {
            "metrics": metrics,
            "options": portable,
            "llm_factory": llm_factory,
            "cache": cache,
            "quota": quota,
            "rate_limit": rate_limit,
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
                scored = _scored(source, concurrency, len(items), num_cpus, max_retries, kwargs)
            for row in scored.iter_rows():
                yield pickle.loads(row["chunk"])

    return run


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


def _scored(
    source: Any,
    concurrency: int,
    chunks: int,
    num_cpus: float,
    max_retries: int,
    kwargs: dict[str, Any],
) -> Any:
    """The ``map_batches`` stage of the scoring actors over ``source``."""
    import ray.data

    return source.map_batches(
        _ChunkScorer,
        batch_size=1,
        compute=ray.data.ActorPoolStrategy(size=min(concurrency, chunks)),
        num_cpus=num_cpus,
        fn_constructor_kwargs=kwargs,
        max_restarts=max_retries,
        max_task_retries=max_retries,
    )


def evaluate_on_ray(
    data: str | os.PathLike[str] | Any,
    metrics: Sequence[Evaluator | str],
    *,
    output: str | os.PathLike[str] | None = None,
    address: str | None = None,
    llm_factory: Callable[[], Any] | None = None,
    rate_limit: RateLimit | None = None,
    cache: str | os.PathLike[str] | None = None,
    batch_size: int = 1000,
    concurrency: int = 2,
    num_cpus: float = 0.5,
    max_concurrency: int = 16,
    max_llm_concurrency: int = 8,
    resume: bool = False,
    overwrite: bool = True,
    input_format: str = "auto",
    details: bool = True,
    timeout: float | None = None,
    fail_on_error: bool | float = False,
    on_row: Callable[[SampleResult], None] | None = None,
    max_retries: int = 3,
    report_rows: int = 2000,
    title: str | None = None,
    show_progress: bool | None = None,
    output_format: str = "jsonl",
    aggregates: Sequence[RunAggregate] = (),
    group_by: Literal["trace", "session"] = "trace",
    strict_traces: bool = False,
    lenient_json: bool = False,
    store: RunStore | str | os.PathLike[str] | None = None,
    sinks: Sequence[RunSink] = (),
    **renamed: Any,
) -> DistributedResult:
    """Score a dataset on Ray: ``results.jsonl``, ``summary.json`` and ``report.html`` in ``output``.

    Connects to the running Ray cluster (``ray.init()`` first for a remote one; a local one is
    started otherwise). The run options (``cache``, ``rate_limit``, ``max_concurrency``,
    ``max_llm_concurrency``, ``details``, ``timeout``, ``fail_on_error``, ``on_row``,
    ``show_progress``, ``aggregates``, ``store``, ``sinks``) are those of
    :class:`~turneval.options.RunOptions`, with the same names and defaults, as for
    :func:`~turneval.stream.evaluate_jsonl`; the judge is ``llm_factory`` instead of ``llm``.
    The names of turneval 0.x, ``sample_concurrency``, ``llm_concurrency`` and ``progress``,
    still work, with a :class:`DeprecationWarning`.

    Args:
        data: A JSONL (or OTLP/JSON) file of samples, a Parquet file or folder of sample rows,
            or a ``ray.data.Dataset`` of sample rows (Parquet and datasets are written to
            ``output/input.jsonl`` first, in their order, so that rows keep line numbers).
        metrics: Evaluator objects or names. Metrics are shipped to the actors; a metric that
            holds its own chat model is refused (pass ``llm_factory``).
        output: Folder of the results (created; a temporary folder if None).
        address: The Ray cluster to join when Ray is not initialised yet (``ray.init(address)``;
            None: a running cluster, else a local one).
        llm_factory: Builds the judge model inside each actor (e.g.
            ``lambda: ChatOpenAI(model="gpt-4o-mini")``).
        rate_limit: The provider's quota, held once for the whole cluster.
        cache: SQLite judge cache path, shared by the actors (same machine or shared storage
            that supports SQLite's locking).
        batch_size: Input lines per chunk (one actor call scores one chunk).
        concurrency: Scoring actors.
        num_cpus: CPUs each actor requests (fractional: whole CPUs starve the other stages
            of a small cluster).
        max_concurrency: Samples in flight in one actor.
        max_llm_concurrency: Judge requests in flight in one actor (the quota's ``max_in_flight``
            when ``rate_limit`` is given).
        resume: Keep the rows ``output/results.jsonl`` already holds; score only the others.
        overwrite: Without ``resume``, replace an existing results.jsonl (if False, raise
            :class:`~turneval.errors.ConfigError` instead, as the CLI does by default).
        input_format: ``"jsonl"``, ``"otlp"`` or ``"auto"``, as for
            :func:`~turneval.stream.evaluate_jsonl`.
        details: Also write each metric's ``details`` (False saves their cost; it was the
            default before the run options were shared).
        timeout: Seconds allowed per sample.
        fail_on_error: Stop the run past this many failed rows, as
            :func:`~turneval.stream.evaluate_jsonl` does (checked as the chunks come back).
        on_row: Called in the driver with each row written, in input order.
        max_retries: Restarts of a dead actor and retries of its chunk.
        report_rows: Rows kept for the report's per-sample table.
        title: The report's title.
        show_progress: Print a progress line to stderr (None: only when it is a terminal).
        output_format: ``"jsonl"`` (``results.jsonl``), or ``"parquet"``: also the same rows as
            a folder of Parquet files, ``results.parquet/``, written by Ray in input order
            (``results.jsonl`` stays: ``resume`` reads it).
        aggregates: Run-level figure sets computed in the driver once every row is written
            (as :func:`~turneval.stream.evaluate_jsonl` does), into ``summary.json`` and the
            result's ``aggregates``.
        group_by: For OTLP/JSON input, one sample per trace or per session, as for
            :func:`~turneval.stream.evaluate_jsonl`.
        strict_traces: For OTLP/JSON input, a trace with no model call is an error row
            instead of a skipped trace, as for :func:`~turneval.stream.evaluate_jsonl`.
        lenient_json: Accept JSONL or OTLP/JSON lines that are not strict JSON (duplicate
            keys, ``NaN``, ``Infinity``, ``1e400``), as for
            :func:`~turneval.stream.evaluate_jsonl`. Parquet and dataset rows are written as
            JSON by turneval and read as they are.
        store: A run store (:class:`~turneval.store.RunStore`, or its URL or path), written
            by the driver as the rows come back, as :func:`~turneval.stream.evaluate_jsonl`
            does.
        sinks: More places the run goes (:class:`~turneval.runs.RunSink`), given the rows by
            the driver as they come back.
        **renamed: The old names ``sample_concurrency``, ``llm_concurrency`` and
            ``progress`` (:data:`RENAMED_OPTIONS`), deprecated.

    Raises:
        ConfigError: Ray is not installed, a metric holds its own chat model, or an option is
            out of range.
        TypeError: an unknown keyword argument.
    """
    shared = {
        "max_concurrency": max_concurrency,
        "max_llm_concurrency": max_llm_concurrency,
        "show_progress": show_progress,
    }
    given = _renamed(renamed, shared)
    max_concurrency = given.get("max_concurrency", max_concurrency)
    max_llm_concurrency = given.get("max_llm_concurrency", max_llm_concurrency)
    show_progress = given.get("show_progress", show_progress)
    progress = sys.stderr.isatty() if show_progress is None else bool(show_progress)
    ray = _ray()
    if output_format not in ("jsonl", "parquet"):
        raise ConfigError(f"output_format must be 'jsonl' or 'parquet', got {output_format!r}")
    if concurrency < 1 or num_cpus <= 0 or max_retries < 0:
        raise ConfigError("concurrency must be >= 1, num_cpus > 0 and max_retries >= 0")
    resolved = resolve_metrics(metrics)
    holding = [m.name for m in resolved if m.judge_llm(None) is not None]
    if holding:
        raise ConfigError(
            f"metrics {holding} hold their own chat model: chat models are not shipped to Ray "
            "workers; build the judge in each worker with llm_factory=... instead"
        )
    needing = [m.name for m in resolved if m.needs_judge(None)]
    if needing and llm_factory is None:
        raise ConfigError(
            f"metrics {needing} need an LLM judge: pass llm_factory=... (called in each worker)"
        )
    # The input and the output are checked before Ray starts (which takes seconds).
    if isinstance(data, (str, os.PathLike)) and not _is_parquet(Path(data)):
        check_input_file(Path(data))
    elif isinstance(data, (str, os.PathLike)) and not Path(data).exists():
        raise InvalidSampleError(f"{data}: no such file or folder", field="path")
    target = Path(output) if output is not None else Path(tempfile.mkdtemp(prefix="turneval-"))
    preflight(target, batch_size, 1, resume, overwrite)
    if store is not None:  # an unopenable store fails before Ray starts
        from turneval.store import RunStore

        store = RunStore.coerce(store)
    if not ray.is_initialized():
        ray.init(address=address)
    if isinstance(data, (str, os.PathLike)) and not _is_parquet(Path(data)):
        path: str | os.PathLike[str] = data
    else:  # rows in their order: the dataset's (or the files') own
        lenient_json = True  # JSON turneval writes (a float column's NaN stays as before)
        with _in_order(ray, progress=progress):
            rows = (
                ray.data.read_parquet(str(data)) if isinstance(data, (str, os.PathLike)) else data
            )
            source = str(data) if isinstance(data, (str, os.PathLike)) else "the dataset"
            path = _write_rows(rows, target, source)
    engine = _engine(
        ray,
        llm_factory=llm_factory,
        cache=None if cache is None else str(cache),
        rate_limit=rate_limit,
        concurrency=concurrency,
        num_cpus=num_cpus,
        max_retries=max_retries,
    )
    stream = evaluate_jsonl(
        path,
        resolved,
        target,
        max_concurrency=max_concurrency,
        max_llm_concurrency=max_llm_concurrency
        if rate_limit is None
        else max(max_llm_concurrency, rate_limit.max_in_flight),
        chunk_size=batch_size,
        report_rows=report_rows,
        details=details,
        timeout=timeout,
        fail_on_error=fail_on_error,
        on_row=on_row,
        title=title,
        show_progress=progress,
        resume=resume,
        overwrite=overwrite,
        input_format=input_format,
        aggregates=aggregates,
        engine=engine,
        group_by=group_by,
        strict_traces=strict_traces,
        lenient_json=lenient_json,
        store=store,
        sinks=sinks,
    )
    result = DistributedResult(stream, target)
    if output_format == "parquet":
        shutil.rmtree(result.parquet_path, ignore_errors=True)
        with _in_order(ray, progress=progress):
            result.dataset().write_parquet(str(result.parquet_path))
    return result


RENAMED_OPTIONS = {
    "sample_concurrency": "max_concurrency",
    "llm_concurrency": "max_llm_concurrency",
    "progress": "show_progress",
}
"""The old names of :func:`evaluate_on_ray`'s run options, each with its shared name."""


def _renamed(given: dict[str, Any], shared: dict[str, Any]) -> dict[str, Any]:
    """The options given by their old names, under the shared names (a warning each).

    ``shared`` holds the shared names' values as given: an old name beside its new one given
    too (not at its default) is a :class:`TypeError`, never a silent choice.
    """
    found: dict[str, Any] = {}
    defaults = inspect.signature(evaluate_on_ray).parameters
    for old, value in given.items():
        new = RENAMED_OPTIONS.get(old)
        if new is None:
            raise TypeError(f"evaluate_on_ray() got an unexpected keyword argument {old!r}")
        if shared[new] != defaults[new].default:
            raise TypeError(
                f"evaluate_on_ray() got both {old}= (its old name) and {new}=: pass {new} only"
            )
        warnings.warn(
            f"evaluate_on_ray({old}=...) is deprecated: pass {new}=..., the name every "
            "front end uses",
            DeprecationWarning,
            stacklevel=3,
        )
        found[new] = value
    return found


def _is_parquet(path: Path) -> bool:
    """A Parquet file, or a folder of them."""
    if path.is_dir():
        return any(path.glob("*.parquet"))
    return path.suffix.lower() in {".parquet", ".pq"}


def _write_rows(dataset: Any, target: Path, source: str = "the dataset") -> Path:
    """A Ray Dataset of sample rows as ``target/input.jsonl``, in the dataset's order.

    A row with a text cell that is not UTF-8 (Parquet does not check) is written as an
    undecodable-row marker: its line becomes one error row naming ``source``, the row and the
    column, and the other rows are scored.
    """
    path = target / "input.jsonl"
    number = 0
    with path.open("w", encoding="utf-8") as handle:
        for batch in dataset.iter_batches(batch_size=None, batch_format="pyarrow"):
            try:
                records = batch.to_pylist()
            except UnicodeDecodeError:  # a bad cell: the batch row by row, each row alone
                records = [_row_or_problem(batch.slice(at, 1)) for at in range(batch.num_rows)]
            for record in records:
                number += 1
                if isinstance(record, str):
                    record = {UNDECODABLE_ROW: f"row {number} of {source}: {record}"}
                handle.write(json.dumps(_plain(record), ensure_ascii=False, default=str) + "\n")
    return path


def _row_or_problem(row: Any) -> dict[str, Any] | str:
    """The one row of the Arrow table ``row`` as a dict, or which cell is not UTF-8."""
    try:
        record: dict[str, Any] = row.to_pylist()[0]
        return record
    except UnicodeDecodeError:
        pass
    for column in row.column_names:
        try:
            row.column(column).to_pylist()
        except UnicodeDecodeError as exc:
            where = f"byte 0x{exc.object[exc.start]:02x} at byte offset {exc.start}"
            return f"column {column!r} is not valid UTF-8 ({where})"
    return "a cell is not valid UTF-8"  # pragma: no cover - a cell that fails once fails again


def _plain(value: Any) -> Any:
    """Arrow/numpy values of a Ray row as plain JSON values (None fields dropped)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    if hasattr(value, "tolist"):
        return _plain(value.tolist())
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value

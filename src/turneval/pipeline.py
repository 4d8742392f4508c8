"""The run pipeline: one set of run options and one engine-agnostic core every front end uses.

A run is ``source -> [agent or simulation step] -> score -> sink``:

* **source**: samples (``evaluate``), JSONL chunks (``evaluate_jsonl``), scenarios
  (``EvalTask`` with a simulated user) or traces (``--format otlp``);
* **step** (optional): an agent replays each sample's human turns (``EvalTask``) or a
  simulated user talks with it (``asimulate``); its :class:`~turneval.results.AgentRun` is kept
  on the row, and a failed step fails the row's metrics without scoring a partial run;
* **score**: :func:`score_sample` scores one sample with every metric (failures and a timeout
  recorded on the row), then the row-derived metrics;
* **sink**: rows kept in memory (an :class:`~turneval.results.EvaluationResult`) or written
  to results.jsonl as they come (``evaluate_jsonl``), summarised by one summariser
  (:func:`turneval.aggregate.summarise_metrics`).

:class:`~turneval.options.RunOptions` (re-exported here) validates the options of every
front end in one place, and
:func:`ascore_batch` is the batch core engines call (the streaming CLI per chunk, the Ray
adapter per task).

Longer than 400 lines: it is the run's one core, and its parts (scoring a sample, running the
rows with their limits and progress, reading items into samples, the recording of a run to its
sinks) are the steps of one loop, read together whenever a front end changes.
"""

from __future__ import annotations

import traceback
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import anyio

from turneval._gc import batch_collection
from turneval._sample_lines import parse_line  # the per-line reader of streamed runs
from turneval._sync import sync_form
from turneval.aggregate import compute_aggregates
from turneval.errors import (
    ConfigError,
    EvaluationAbortedError,
    InvalidSampleError,
    JudgeOutputError,
)
from turneval.judge import JudgeRun, judge_run
from turneval.judge._clients import client_scope
from turneval.manifest import RunManifest
from turneval.metrics import Evaluator, Metric
from turneval.metrics.base import RowEvaluator
from turneval.options import MIN_ROWS_FOR_FRACTION, RunOptions
from turneval.provenance import Provenance, sample_provenance
from turneval.results import EvaluationResult, MetricFailure, SampleResult
from turneval.runs._sink import Rows, RunSink, end_status
from turneval.runs._to_store import is_store_sink, store_sink
from turneval.samples import MultiTurnSample, Sample, SingleTurnSample

__all__ = [
    "Item",
    "MIN_ROWS_FOR_FRACTION",
    "Recording",
    "RunOptions",
    "arun",
    "ascore_batch",
    "failure_traceback",
    "finish_recording",
    "has_summary_extras",
    "recording",
    "run_rows",
    "score_batch",
    "score_row",
    "score_sample",
]

Item = Sample | dict[str, Any] | str | bytes
"""One item of a batch: a sample, its dict, or its JSON line (text or UTF-8 bytes)."""


def has_summary_extras(metric: Evaluator) -> bool:
    """Whether ``metric`` adds run-level figures (so a streamed run keeps its results).

    Its own :meth:`~turneval.metrics.Evaluator.summary_extras` or per-agent figures
    (:attr:`~turneval.metrics.Evaluator.keeps_results`), or the stability of repeated votes (a
    judged metric with ``repeats`` > 1 and a ``pass_threshold``).
    """
    voting = metric.votes_per_row > 1 and metric.vote_threshold is not None
    return metric.keeps_results or voting


# -- score: one sample, every metric ----------------------------------------------------------


RAW_SHOWN = 300
"""Characters of a judge's unparseable output kept in the row's error."""

TRACEBACK_FRAMES = 12
"""Frames of a failed metric's traceback kept on its row (the innermost: where it raised)."""

TRACEBACK_CHARS = 4000
"""Characters of a failed metric's traceback kept on its row (its end: the error itself)."""

TRACEBACK_LINE = 300
"""Characters kept of each line of a traceback (a long message is cut, never the frames)."""


def failure_traceback(exc: BaseException) -> str | None:
    """Where ``exc`` was raised, as Python prints it: its last frames, at most a few KB.

    The innermost :data:`TRACEBACK_FRAMES` frames of each exception in the chain (a helper deep
    in a custom metric included), each line cut at :data:`TRACEBACK_LINE` characters and the
    whole to its last lines within :data:`TRACEBACK_CHARS` (``...`` marks the cut). None for an
    exception that was never raised (a timeout the runner records): it has no frames.
    """
    if exc.__traceback__ is None:
        return None
    text = "".join(
        traceback.format_exception(type(exc), exc, exc.__traceback__, limit=-TRACEBACK_FRAMES)
    )
    lines = [  # a long message is in the row's error already: its start is enough here
        line if len(line) <= TRACEBACK_LINE else line[:TRACEBACK_LINE] + " ..."
        for line in text.rstrip("\n").split("\n")
    ]
    size, cut = sum(len(line) + 1 for line in lines) - 1, 0
    if size > TRACEBACK_CHARS:  # the outermost lines go, "...\n" marks the cut
        while size > TRACEBACK_CHARS - len("...\n") and cut < len(lines) - 1:
            size -= len(lines[cut]) + 1
            cut += 1
    return "\n".join(["..."] * bool(cut) + lines[cut:])


def _failure(row: SampleResult, name: str, exc: BaseException) -> None:
    if isinstance(exc, InvalidSampleError) and exc.sample_id is None:
        exc.sample_id = row.index
    message = str(exc)
    raw = getattr(exc, "raw_output", None) if isinstance(exc, JudgeOutputError) else None
    if raw:  # what the judge said, for the row's reader (the exception keeps all of it)
        shown = raw if len(raw) <= RAW_SHOWN else raw[:RAW_SHOWN] + "..."
        message = f"{message}; its last output: {shown!r}"
    # a data error names its sample and field already: where the check sits says nothing more,
    # and formatting it for every row of a bad file cost 16x the run (a traceback is for a bug)
    trace = None if isinstance(exc, InvalidSampleError) else failure_traceback(exc)
    row.failures[name] = MetricFailure(name, row.index, type(exc).__name__, message, trace)


async def _score_cell(row: SampleResult, metric: Metric, details: bool) -> None:
    try:
        sample: Any = row.sample
        row.results[metric.name] = await metric.ascore(sample, details=details)
    except Exception as exc:  # recorded on the row; the run goes on
        _failure(row, metric.name, exc)


async def _score_all(row: SampleResult, metrics: Sequence[Evaluator], details: bool) -> None:
    scored = [metric for metric in metrics if isinstance(metric, Metric)]  # row evaluators: later
    judged = [metric for metric in scored if metric.uses_llm]
    for metric in scored:
        if not metric.uses_llm:
            await _score_cell(row, metric, details)
    if len(judged) == 1:
        await _score_cell(row, judged[0], details)
    elif judged:  # independent judge calls of one sample run concurrently
        async with anyio.create_task_group() as group:
            for metric in judged:
                group.start_soon(_score_cell, row, metric, details)


async def score_sample(
    index: int,
    sample: Sample,
    metrics: Sequence[Evaluator],
    timeout: float | None = None,
    details: bool = True,
    *,
    provenance: Provenance | None = None,
) -> SampleResult:
    """Score one sample with every metric; failures (and a timeout) are recorded on the row.

    ``provenance`` is what the source step says produced the sample (its source, agent run
    and trial, kept on the row); None reads what a saved sample's source step recorded
    (:func:`~turneval.provenance.sample_provenance`). When the source step could not produce
    the sample (a trace that did not convert), every metric fails with its error.
    """
    row = SampleResult(index, sample)
    found = provenance if provenance is not None else sample_provenance(sample)
    row.source, row.agent, row.trial = found.source, found.agent, found.trial
    if found.error is not None:
        for metric in metrics:
            _failure(row, metric.name, InvalidSampleError(found.error, sample_id=index))
        return row
    if timeout is None:
        await _score_all(row, metrics, details)
    else:
        with anyio.move_on_after(timeout):
            # All at once: a slow metric (a custom function awaiting something) must not keep
            # the others from finishing in time.
            async with anyio.create_task_group() as group:
                for metric in metrics:
                    if isinstance(metric, Metric):
                        group.start_soon(_score_cell, row, metric, details)
        for metric in metrics:
            if metric.name not in row.results and metric.name not in row.failures:
                _failure(
                    row, metric.name, TimeoutError(f"sample exceeded its {timeout:g}s timeout")
                )
    _derive(row, metrics)
    # Results in the metrics' order, whatever order the judged ones finished in.
    row.results = {m.name: row.results[m.name] for m in metrics if m.name in row.results}
    return row


def _derive(row: SampleResult, metrics: Sequence[Evaluator]) -> None:
    """Row evaluators (chosen by type): computed from the row's other results."""
    errors = {name: str(failure) for name, failure in row.failures.items()}
    for metric in metrics:
        if isinstance(metric, RowEvaluator) and metric.name not in row.failures:
            try:
                row.results[metric.name] = metric.derive(row.sample, row.results, errors, metrics)
            except Exception as exc:  # recorded on the row; the run goes on
                _failure(row, metric.name, exc)


async def score_row(
    index: int,
    sample: Sample,
    metrics: Sequence[Evaluator],
    options: RunOptions,
    *,
    provenance: Provenance | None = None,
) -> SampleResult:
    """Score the sample an agent or simulation step produced (or a plain sample).

    ``provenance`` is the step's record of it (source, agent run, trial; None: a sample as
    given, or what a saved sample's metadata records). When the step failed
    (``provenance.agent.error``), no metric is computed on the partial run: each fails with
    the step's error, and the row keeps the agent run.
    """
    agent = provenance.agent if provenance is not None else None
    if provenance is not None and agent is not None and agent.error is not None:
        row = SampleResult(
            index, sample, agent=agent, trial=provenance.trial, source=provenance.source
        )
        # "<ErrorType>: <message>" once: the run's error may already start with its type.
        message = agent.error.removeprefix(f"{agent.error_type}: ")
        for metric in metrics:
            row.failures[metric.name] = MetricFailure(metric.name, index, agent.error_type, message)
        return row
    return await score_sample(
        index, sample, metrics, options.timeout, options.details, provenance=provenance
    )


# -- the run loop: concurrency, progress, on_row, fail_on_error ----------------------------


def _progress_bar(total: int, options: RunOptions) -> Any:
    if not options.progress_shown():
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        if options.show_progress:
            raise ConfigError(
                "show_progress=True needs tqdm: pip install 'turneval[progress]'"
            ) from None
        return None
    return tqdm(total=total, unit="sample", desc="turneval")


async def run_rows(
    count: int,
    produce: Callable[[int], Awaitable[SampleResult]],
    options: RunOptions,
    *,
    judge: JudgeRun,
    aborted: list[str] | None = None,
    batch: bool = False,
) -> list[SampleResult]:
    """Produce rows ``0..count-1`` with ``options.max_concurrency`` workers inside ``judge``.

    Rows come back in input order. Unless ``batch``, each finished row goes to
    ``options.on_row`` and counts towards ``options.fail_on_error``: past it the run stops
    (the rows done so far are returned) and the reason is appended to ``aborted``; a progress
    bar is shown as ``options.show_progress`` says.
    """
    rows: list[SampleResult | None] = [None] * count
    pending = iter(range(count))
    bar = None if batch else _progress_bar(count, options)
    tally = {"done": 0, "failed": 0}
    raised: list[Exception] = []  # on_row's own error: the run stops and raises it as it is

    def stop(row: SampleResult) -> bool:
        tally["done"] += 1
        tally["failed"] += bool(row.failures)
        if options.on_row is not None:
            try:
                options.on_row(row)
            except Exception as exc:  # not wrapped in the task group's ExceptionGroup
                raised.append(exc)
                return True
        if not options.should_abort(tally["failed"], tally["done"]):
            return False
        if aborted is not None:
            first = next(iter(row.failures.values()), None)
            aborted.append(
                f"fail_on_error={options.fail_on_error!r}: {tally['failed']} of "
                f"{tally['done']} rows failed; last: row {row.index}: {first}"
            )
        return True

    async def worker(scope: anyio.CancelScope) -> None:
        for index in pending:  # shared iterator: each index is taken once
            row = await produce(index)
            rows[index] = row
            if bar is not None:
                if judge.rate_limiter is not None:
                    bar.set_postfix_str(judge.rate_limiter.describe(), refresh=False)
                bar.update(1)
            if not batch and stop(row):
                scope.cancel()
                return

    try:
        with judge_run(judge):
            async with client_scope(), anyio.create_task_group() as group:
                for _ in range(min(options.max_concurrency, max(count, 1))):
                    group.start_soon(worker, group.cancel_scope)
    finally:
        if bar is not None:
            bar.close()
    if raised:
        raise raised[0]
    return [row for row in rows if row is not None]


# -- the batch core ---------------------------------------------------------------------------


def _read_item(item: Any, index: int, line: int) -> Sample:
    """The sample an item holds; InvalidSampleError naming the item (or line) and field."""
    if isinstance(item, (SingleTurnSample, MultiTurnSample)):
        return item
    if isinstance(item, (str, bytes)):
        return parse_line(item, line)  # bytes are validated as they are (decoded only on error)
    if isinstance(item, dict):
        from turneval.dataset import sample_from_dict

        return sample_from_dict(item, index=index)
    raise InvalidSampleError(
        f"item {index}: expected a sample, a dict or a JSON line, got {type(item).__name__}",
        sample_id=index,
        field="sample",
    )


def _unreadable_row(index: int, names: Sequence[str], exc: Exception) -> SampleResult:
    row = SampleResult(index, None)
    kind = type(exc).__name__ if isinstance(exc, InvalidSampleError) else "InvalidSampleError"
    message = str(exc) if isinstance(exc, InvalidSampleError) else f"{type(exc).__name__}: {exc}"
    for name in names:
        row.failures[name] = MetricFailure(name, index, kind, message)
    return row


async def ascore_batch(
    items: Sequence[Item],
    metrics: Sequence[Evaluator],
    *,
    options: RunOptions,
    start_index: int = 0,
    judge: JudgeRun | None = None,
) -> list[SampleResult]:
    """Score a batch of items: one row per item, in order, indexed from ``start_index``.

    The engine-agnostic core of a run: ``evaluate_jsonl`` and the Ray adapter call it per
    chunk. ``metrics`` are built (and resolved) once by the caller. An item is a sample, its
    dict, or its JSON line (``str``, or ``bytes`` read as UTF-8); a JSON line item is line
    ``start_index + position + 1`` and its row's ``line``. An item that holds no valid sample
    becomes a row whose every metric fails with an ``InvalidSampleError`` naming the item
    (``row N`` for dicts, ``line N`` for JSON lines, ``item N`` otherwise) and the field.
    Never raises for a row: every failure is recorded on its row.

    Uses ``options``' concurrency, judge limit, timeout, details, default judge and cache;
    ``on_row``, ``fail_on_error`` and progress belong to the front end that owns the run.
    ``judge`` is the batch's judge context (default: a fresh one from ``options``); pass one
    to read the batch's judge usage (every request, failed rows' included) from it.
    """
    names = [metric.name for metric in metrics]
    rows: list[SampleResult | None] = [None] * len(items)
    good: list[tuple[int, Sample]] = []
    for position, item in enumerate(items):
        index, line = start_index + position, start_index + position + 1
        try:
            sample = _read_item(item, index, line)
        except Exception as exc:  # whatever the item holds, it becomes a row naming it
            rows[position] = _unreadable_row(index, names, exc)
        else:
            good.append((position, sample))
        if isinstance(item, (str, bytes)) and rows[position] is not None:
            rows[position].line = line  # type: ignore[union-attr]

    async def produce(k: int) -> SampleResult:
        position, sample = good[k]
        return await score_row(start_index + position, sample, metrics, options)

    scored = await run_rows(
        len(good), produce, options, judge=judge or options.judge_run(), batch=True
    )
    for (position, _), row in zip(good, scored, strict=True):
        if isinstance(items[position], (str, bytes)):
            row.line = start_index + position + 1
        rows[position] = row
    return [row for row in rows if row is not None]


score_batch = sync_form(ascore_batch)
"""Sync form of :func:`ascore_batch` (same arguments): one row per item, in order."""


# -- the memory sink ------------------------------------------------------------------------


async def arun(
    count: int,
    produce: Callable[[int], Awaitable[SampleResult]],
    metrics: Sequence[Evaluator],
    options: RunOptions,
    *,
    judge: JudgeRun | None = None,
    name: str = "evaluate",
) -> EvaluationResult:
    """Run ``produce`` over rows ``0..count-1`` and keep them: the in-memory sink.

    With ``options.store``, the run (called ``name`` there) is kept in the store too, each
    row written as it finishes (:func:`recording`).

    Raises:
        EvaluationAbortedError: past ``options.fail_on_error``, carrying the rows done.
    """
    judge = judge or options.judge_run()
    aborted: list[str] = []
    options, recorder = recording(options, metrics, name=name)
    try:
        with batch_collection():  # the collector skips the dataset, runs less often
            rows = await run_rows(count, produce, options, judge=judge, aborted=aborted)
        result = EvaluationResult(rows, [metric.name for metric in metrics], judge.usage)
        result.metrics = list(metrics)
        result.aggregates, result.aggregate_errors = compute_aggregates(options.aggregates, result)
    except BaseException as exc:
        if recorder is not None:
            recorder.fail(exc)
        raise
    finish_recording(recorder, result, aborted)
    if aborted:
        raise EvaluationAbortedError(aborted[0], result=result)
    return result


# -- the run's sinks -------------------------------------------------------------------------


class Recording:
    """A run's sinks while it runs: the store's (``options.store``) and ``options.sinks``.

    Each finished row is handed to every sink as it finishes (:meth:`add`); :meth:`finish`
    ends their run. Used as a context manager, an exception ends it ``failed`` (or
    ``interrupted`` for Ctrl-C or a cancellation) with the error.

    Attributes:
        sinks: The sinks, started.
        run_id: The run's id in the store (None without a store).
    """

    def __init__(self, sinks: Sequence[RunSink], names: list[str], details: bool) -> None:
        """Hand rows of metrics ``names`` to ``sinks`` (started already)."""
        self.sinks, self.names, self.details = list(sinks), names, details
        self.run_id = next((s.run_id for s in self.sinks if is_store_sink(s)), None)

    def add(self, row: SampleResult) -> None:
        """A finished row, to every sink."""
        rows = Rows.of([row], self.names, details=self.details)
        for sink in self.sinks:
            sink.add(rows)

    def finish(
        self,
        summary: Mapping[str, Any] | None,
        *,
        status: str = "finished",
        error: str | None = None,
    ) -> None:
        """End the sinks' run: its summary, status and error."""
        for sink in self.sinks:
            sink.finish(summary, status, error)

    def fail(self, exc: BaseException) -> None:
        """End the sinks' run ``failed`` (``interrupted`` for Ctrl-C or a cancellation)."""
        status, error = end_status(exc)
        for sink in self.sinks:
            try:
                sink.finish(None, status, error)
            except Exception:  # a sink that fails now: the run's own error is the one to raise
                continue

    def __enter__(self) -> Recording:
        """The recording itself."""
        return self

    def __exit__(self, kind: object, exc: BaseException | None, _traceback: object) -> None:
        """On an exception, end the sinks' run failed or interrupted."""
        if exc is not None:
            self.fail(exc)


def recording(
    options: RunOptions, metrics: Sequence[Evaluator], *, name: str
) -> tuple[RunOptions, Recording | None]:
    """Start the run's sinks (``options.store``'s, ``options.sinks``): rows go there.

    Each finished row goes to every sink as it finishes. Each sink is started with the run's :class:`~turneval.manifest.RunManifest` (the metrics
    and ``options.llm``); the store's run is called ``name``. Returns the options to run with
    (their ``on_row`` hands each row to the sinks first, then calls the caller's) and the
    :class:`Recording` (None without a sink).
    """
    sinks: list[RunSink] = []
    if options.store is not None:
        sinks.append(store_sink(options.store, name=name, details=options.details))
    sinks += options.sinks
    if not sinks:
        return options, None
    manifest = RunManifest.of(metrics, options.llm)
    started: list[RunSink] = []
    try:
        for sink in sinks:
            sink.start(manifest)
            started.append(sink)
    except BaseException as exc:
        Recording(started, [], options.details).fail(exc)
        raise
    run = Recording(started, manifest.metric_names, options.details)
    user = options.on_row

    def on_row(row: SampleResult) -> None:
        run.add(row)
        if user is not None:
            user(row)

    return options.replace(on_row=on_row), run


def finish_recording(
    recorder: Recording | None, result: EvaluationResult, aborted: Sequence[str] = ()
) -> None:
    """End a recorded run: its summary, and ``failed`` when ``fail_on_error`` stopped it.

    The run's id in the store becomes ``result.store_run``.
    """
    if recorder is None:
        return
    from turneval.aggregate import summary_document

    summary = summary_document(
        len(result),
        dict(result.summary()),
        result.usage,
        failed_rows=sum(1 for row in result.rows if row.failures),
        aggregates=result.aggregates,
        aggregate_errors=result.aggregate_errors,
    )
    recorder.finish(
        summary,
        status="failed" if aborted else "finished",
        error=aborted[0] if aborted else None,
    )
    result.store_run = recorder.run_id

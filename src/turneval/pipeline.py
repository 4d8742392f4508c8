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

:class:`RunOptions` validates the options of every front end in one place, and
:func:`ascore_batch` is the batch core engines call (the streaming CLI per chunk, the Ray
adapter per task).
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Sequence
from os import PathLike
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from turneval._gc import batch_collection
from turneval.aggregate import RunAggregate, compute_aggregates
from turneval.errors import (
    ConfigError,
    EvaluationAbortedError,
    InvalidSampleError,
    JudgeOutputError,
)
from turneval.judge import JudgeRun, SQLiteCache, judge_run
from turneval.judge.clients import client_scope
from turneval.metrics import Evaluator, Metric
from turneval.metrics.base import RowEvaluator, run_sync
from turneval.ratelimit import RateLimiter
from turneval.results import AgentRun, EvaluationResult, MetricFailure, SampleResult
from turneval.samples import MultiTurnSample, Sample, SingleTurnSample

if TYPE_CHECKING:
    from turneval.store import RunRecorder

__all__ = [
    "MIN_ROWS_FOR_FRACTION",
    "Item",
    "RunOptions",
    "arun",
    "ascore_batch",
    "finish_recording",
    "has_summary_extras",
    "recording",
    "run_rows",
    "score_batch",
    "score_row",
    "score_sample",
]

MIN_ROWS_FOR_FRACTION = 20
"""``fail_on_error=<fraction>`` is first checked once this many rows are done."""

Item = Sample | dict[str, Any] | str | bytes
"""One item of a batch: a sample, its dict, or its JSON line (text or UTF-8 bytes)."""


class RunOptions(BaseModel):
    """The options of a run, validated once; every front end builds one.

    ``evaluate``/``aevaluate``, ``EvalTask.evaluate``, ``evaluate_jsonl``, ``asimulate`` and
    the CLI take these as keyword arguments of the same names (and defaults) and build a
    ``RunOptions``; an invalid value raises :class:`~turneval.errors.ConfigError` naming the
    option, before anything runs.

    Attributes:
        max_concurrency: Samples (agent runs, conversations) in flight at once.
        max_llm_concurrency: Judge requests in flight at once, across metrics and samples.
        timeout: Seconds allowed to score one sample; metrics unfinished by then fail with
            ``TimeoutError`` (None: no limit).
        agent_timeout: Seconds allowed for the agent or simulation step of one sample (one
            agent run with all its turns, one simulated conversation); past it the row fails
            with ``TimeoutError`` and is not scored (None: no limit).
        fail_on_error: False: never abort. True: abort at the first failed row. A fraction f
            in [0, 1): abort once more than f of the rows done have failed (checked from
            :data:`MIN_ROWS_FOR_FRACTION` rows on). Aborting raises
            :class:`~turneval.errors.EvaluationAbortedError` carrying the rows done so far.
        on_row: Called with each finished row, in completion order.
        show_progress: A progress display on stderr; None shows it only when stderr is a
            terminal.
        details: Keep each result's ``details`` (matched calls, verdicts, ...); False saves
            their cost (summary extras that need details, such as a pairwise judge's position
            consistency, are then left out).
        cache: A judge cache: a :class:`~turneval.llms.SQLiteCache` or the path of one (opened
            here, so an unreadable cache fails before any row is scored).
        llm: The default judge (a LangChain chat model) for judged metrics built without one.
        seed: Seed of the simulated user (trial t uses ``seed + t``), where the model has one.
        rate_limit: The provider's quota: a :class:`~turneval.ratelimit.RateLimit` (a
            :class:`~turneval.ratelimit.RateLimiter` is made from it here, so copies of these
            options share it) or a limiter shared as is. Judge requests (and the simulated
            user's) are paced to it and adapt to 429s.
        aggregates: Run-level figure sets (:class:`~turneval.aggregate.RunAggregate`)
            computed once the rows are in, into ``result.aggregates`` (a streamed run reads
            its rows back from results.jsonl for them).
        store: A run store (:class:`~turneval.store.RunStore`, or its URL or path, opened
            here): the run and its rows are kept there, each row written as it finishes.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    max_concurrency: int = Field(default=16, ge=1)
    max_llm_concurrency: int = Field(default=8, ge=1)
    timeout: float | None = Field(default=None, gt=0)
    agent_timeout: float | None = Field(default=None, gt=0)
    fail_on_error: bool | float = False
    on_row: Callable[[SampleResult], None] | None = None
    show_progress: bool | None = None
    details: bool = True
    cache: SQLiteCache | None = None
    llm: Any = None
    seed: int | None = None
    rate_limit: RateLimiter | None = None
    aggregates: tuple[RunAggregate, ...] = ()
    store: Any = None

    def __init__(self, **options: Any) -> None:
        """Validate ``options``; a bad value raises ConfigError naming the option."""
        try:
            super().__init__(**options)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(part) for part in error['loc']) or 'options'}: {error['msg']}"
                for error in exc.errors(include_url=False)
            )
            raise ConfigError(f"invalid run option: {problems}") from None

    @field_validator("fail_on_error", mode="before")
    @classmethod
    def _fraction(cls, value: Any) -> bool | float:
        if isinstance(value, bool):
            return value
        if not isinstance(value, (int, float)) or not 0.0 <= float(value) < 1.0:
            raise ValueError(f"must be a bool or a fraction in [0, 1), got {value!r}")
        return float(value)

    @field_validator("cache", mode="before")
    @classmethod
    def _open_cache(cls, value: Any) -> SQLiteCache | None:
        if value is None or isinstance(value, SQLiteCache):
            return value
        if isinstance(value, (str, PathLike)):
            return SQLiteCache(value)  # ConfigError here names the unreadable file
        raise ValueError(f"must be a SQLiteCache or the path of one, got {type(value).__name__}")

    @field_validator("aggregates", mode="before")
    @classmethod
    def _aggregates(cls, value: Any) -> tuple[RunAggregate, ...]:
        found = tuple(value or ())
        wrong = [type(item).__name__ for item in found if not isinstance(item, RunAggregate)]
        if wrong:
            raise ValueError(f"expected RunAggregate objects, got {', '.join(wrong)}")
        return found

    @field_validator("store", mode="before")
    @classmethod
    def _open_store(cls, value: Any) -> Any:
        if value is None:
            return None
        from turneval.store import RunStore

        return RunStore.coerce(value)  # ConfigError here names the store that cannot open

    @field_validator("rate_limit", mode="before")
    @classmethod
    def _limiter(cls, value: Any) -> RateLimiter | None:
        return RateLimiter.coerce(value)  # ConfigError, as is, for anything else

    def replace(self, **changes: Any) -> RunOptions:
        """A copy with ``changes`` applied, validated like the original."""
        values = {name: getattr(self, name) for name in type(self).model_fields}
        return type(self)(**{**values, **changes})

    def judge_run(self) -> JudgeRun:
        """A fresh judge context for one run: default model, request limiter and cache."""
        return JudgeRun(
            llm=self.llm,
            max_concurrency=self.max_llm_concurrency,
            cache=self.cache,
            rate_limiter=self.rate_limit,
        )

    def should_abort(self, failed: int, done: int) -> bool:
        """Whether ``fail_on_error`` stops a run with ``failed`` of ``done`` rows failed."""
        if isinstance(self.fail_on_error, bool):
            return self.fail_on_error and failed > 0
        return done >= MIN_ROWS_FOR_FRACTION and failed / done > self.fail_on_error

    def progress_shown(self) -> bool:
        """Whether to show progress (``show_progress``, or None and stderr is a terminal)."""
        if self.show_progress is None:
            return sys.stderr.isatty()
        return self.show_progress


def has_summary_extras(metric: Evaluator) -> bool:
    """Whether ``metric`` adds run-level figures (so a streamed run keeps its results).

    Its own :meth:`~turneval.metrics.Evaluator.summary_extras`, or the stability of repeated
    votes (a judged metric with ``repeats`` > 1 and a ``pass_threshold``).
    """
    voting = metric.votes_per_row > 1 and metric.vote_threshold is not None
    return type(metric).summary_extras is not Evaluator.summary_extras or voting


# -- score: one sample, every metric ----------------------------------------------------------


RAW_SHOWN = 300
"""Characters of a judge's unparseable output kept in the row's error."""


def _failure(row: SampleResult, name: str, exc: BaseException) -> None:
    if isinstance(exc, InvalidSampleError) and exc.sample_id is None:
        exc.sample_id = row.index
    message = str(exc)
    raw = getattr(exc, "raw_output", None) if isinstance(exc, JudgeOutputError) else None
    if raw:  # what the judge said, for the row's reader (the exception keeps all of it)
        shown = raw if len(raw) <= RAW_SHOWN else raw[:RAW_SHOWN] + "..."
        message = f"{message}; its last output: {shown!r}"
    row.failures[name] = MetricFailure(name, row.index, type(exc).__name__, message)


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
) -> SampleResult:
    """Score one sample with every metric; failures (and a timeout) are recorded on the row."""
    row = SampleResult(index, sample)
    if _from_trace(row, metrics):
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


def _from_trace(row: SampleResult, metrics: Sequence[Evaluator]) -> bool:
    """Fill the agent run of a sample read from a trace; True if it could not be read."""
    meta = row.sample.metadata if row.sample is not None else None
    if not meta or meta.get("source") != "otel":
        return False
    from turneval.judge import Usage

    if meta.get("latency_in_seconds") is not None:
        messages = list(getattr(row.sample, "user_input", ()))
        row.agent = AgentRun(
            messages,
            float(meta["latency_in_seconds"]),
            (meta.get("error") or meta.get("conversion_error") or "trace status ERROR")
            if meta.get("status") == "ERROR" or meta.get("conversion_error")
            else None,
            Usage(int(meta.get("input_tokens", 0)), int(meta.get("output_tokens", 0))),
            sum(1 for m in messages if m.type == "ai"),
        )
    error = meta.get("conversion_error")
    for metric in metrics if error else ():
        _failure(row, metric.name, InvalidSampleError(str(error), sample_id=row.index))
    return bool(error)


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
    agent: AgentRun | None = None,
) -> SampleResult:
    """Score the sample an agent or simulation step produced (or a plain sample).

    When the step failed (``agent.error``), no metric is computed on the partial run: each
    fails with the step's error, and the row keeps the agent run.
    """
    if agent is not None and agent.error is not None:
        row = SampleResult(index, sample, agent=agent)
        # "<ErrorType>: <message>" once: the run's error may already start with its type.
        message = agent.error.removeprefix(f"{agent.error_type}: ")
        for metric in metrics:
            row.failures[metric.name] = MetricFailure(metric.name, index, agent.error_type, message)
        return row
    row = await score_sample(index, sample, metrics, options.timeout, options.details)
    if agent is not None:
        row.agent = agent
    return row


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

    def stop(row: SampleResult) -> bool:
        tally["done"] += 1
        tally["failed"] += bool(row.failures)
        if options.on_row is not None:
            options.on_row(row)
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
    return [row for row in rows if row is not None]


# -- the batch core ---------------------------------------------------------------------------


def _read_item(item: Any, index: int, line: int) -> Sample:
    """The sample an item holds; InvalidSampleError naming the item (or line) and field."""
    if isinstance(item, (SingleTurnSample, MultiTurnSample)):
        return item
    if isinstance(item, (str, bytes)):
        from turneval.stream import _parse  # the streaming CLI's per-line reader

        return _parse(item, line)  # bytes are validated as they are (decoded only on error)
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


def score_batch(
    items: Sequence[Item],
    metrics: Sequence[Evaluator],
    *,
    options: RunOptions,
    start_index: int = 0,
    judge: JudgeRun | None = None,
) -> list[SampleResult]:
    """Sync form of :func:`ascore_batch` (same arguments)."""

    async def call() -> list[SampleResult]:
        return await ascore_batch(
            items, metrics, options=options, start_index=start_index, judge=judge
        )

    return run_sync(call)


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


# -- the store sink ---------------------------------------------------------------------------


def recording(
    options: RunOptions, metrics: Sequence[Evaluator], *, name: str
) -> tuple[RunOptions, RunRecorder | None]:
    """Start recording a run in ``options.store`` (if any): its rows go there as they finish.

    Returns the options to run with (their ``on_row`` writes each row first, then calls the
    caller's) and the run's recorder (None without a store).
    """
    if options.store is None:
        return options, None
    recorder = options.store.start_run(
        name=name, metrics=metrics, llm=options.llm, details=options.details
    )
    user = options.on_row

    def on_row(row: SampleResult) -> None:
        recorder.add(row)
        if user is not None:
            user(row)

    return options.replace(on_row=on_row), recorder


def finish_recording(
    recorder: RunRecorder | None, result: EvaluationResult, aborted: Sequence[str] = ()
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

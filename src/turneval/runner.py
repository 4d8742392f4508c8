"""evaluate/aevaluate: score every sample with every metric, one row per sample, in order."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from functools import partial
from typing import Any

import anyio

from turneval.dataset import EvaluationDataset
from turneval.errors import ConfigError, EvaluationAbortedError, InvalidSampleError
from turneval.judge import JudgeRun, SQLiteCache, judge_run, resolve_llm
from turneval.judge._clients import client_scope
from turneval.metrics import BUILTIN_METRICS, Metric
from turneval.metrics.base import run_sync
from turneval.ratelimit import RateLimit, RateLimiter
from turneval.results import EvaluationResult, MetricFailure, SampleResult
from turneval.samples import Sample

__all__ = [
    "MIN_ROWS_FOR_FRACTION",
    "aevaluate",
    "check_judges",
    "evaluate",
    "metric_names",
    "resolve_metrics",
    "run_in_order",
    "score_sample",
]

MIN_ROWS_FOR_FRACTION = 20
"""``fail_on_error=<fraction>`` is first checked once this many rows are done."""


def metric_names() -> dict[str, type[Metric]]:
    """Built-in metrics by name."""
    return {cls.model_fields["name"].default: cls for cls in BUILTIN_METRICS}


def resolve_metrics(metrics: Iterable[Metric | str] | Metric | str) -> list[Metric]:
    """Metric objects from objects or names; unknown or duplicate names raise ConfigError.

    A single metric or name may be given alone (``"tool_call_f1"`` means
    ``["tool_call_f1"]``).
    """
    by_name = metric_names()
    if isinstance(metrics, (str, Metric)):  # one metric given alone, not in a list
        metrics = [metrics]
    elif not isinstance(metrics, Iterable):
        raise ConfigError(
            "metrics must be a list of Metric objects or built-in names, e.g. "
            f"['tool_call_f1'], got {type(metrics).__name__}"
        )
    resolved: list[Metric] = []
    for item in metrics:
        if isinstance(item, str):
            if item not in by_name:
                raise ConfigError(
                    f"unknown metric name {item!r}; known names: {', '.join(sorted(by_name))}"
                )
            resolved.append(by_name[item].model_validate({}))
        elif isinstance(item, Metric):
            resolved.append(item)
        else:
            raise ConfigError(f"metrics must be Metric objects or names, got {type(item).__name__}")
    names = [metric.name for metric in resolved]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ConfigError(
            f"two metrics share the name(s) {duplicates}; pass name=... to tell them apart"
        )
    if not resolved:
        raise ConfigError("no metric given")
    return resolved


def check_judges(metrics: Sequence[Metric], llm: Any) -> None:
    """Raise ConfigError before a run if a judged metric would have no model."""
    if llm is not None:
        resolve_llm(llm)  # a wrong type fails here, before any sample
    for metric in metrics:
        needs = metric.uses_llm and getattr(metric, "requires_llm", True)
        if needs and getattr(metric, "llm", None) is None and llm is None:
            raise ConfigError(
                f"metric {metric.name!r} needs an LLM judge: pass llm=... to the metric or to "
                "evaluate(..., llm=...)"
            )


def _failure(row: SampleResult, name: str, exc: BaseException) -> None:
    if isinstance(exc, InvalidSampleError) and exc.sample_id is None:
        exc.sample_id = row.index
    row.failures[name] = MetricFailure(name, row.index, type(exc).__name__, str(exc))


async def _score_cell(row: SampleResult, metric: Metric, details: bool) -> None:
    try:
        sample: Any = row.sample
        row.results[metric.name] = await metric.ascore(sample, details=details)
    except Exception as exc:  # recorded on the row; the run goes on
        _failure(row, metric.name, exc)


async def _score_all(row: SampleResult, metrics: Sequence[Metric], details: bool) -> None:
    judged = [metric for metric in metrics if metric.uses_llm]
    for metric in metrics:
        if not metric.uses_llm and not metric.derived:
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
    metrics: Sequence[Metric],
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
            await _score_all(row, metrics, details)
        for metric in metrics:
            if metric.name not in row.results and metric.name not in row.failures:
                _failure(
                    row, metric.name, TimeoutError(f"sample exceeded its {timeout:g}s timeout")
                )
    _derive(row, metrics)
    # Results in the metrics' order, whatever order the judged ones finished in.
    row.results = {m.name: row.results[m.name] for m in metrics if m.name in row.results}
    return row


def _from_trace(row: SampleResult, metrics: Sequence[Metric]) -> bool:
    """Fill EvalTask's columns for a sample read from a trace; True if it could not be read."""
    meta = row.sample.metadata if row.sample is not None else None
    if not meta or meta.get("source") != "otel":
        return False
    from turneval.judge import Usage

    if meta.get("latency_in_seconds") is not None:
        row.latency_s = float(meta["latency_in_seconds"])
        row.failure = int(meta.get("status") == "ERROR" or bool(meta.get("conversion_error")))
        row.agent_error = meta.get("error") or meta.get("conversion_error")
        row.agent_usage = Usage(int(meta.get("input_tokens", 0)), int(meta.get("output_tokens", 0)))
        row.steps = sum(1 for m in getattr(row.sample, "user_input", ()) if m.type == "ai")
    error = meta.get("conversion_error")
    for metric in metrics if error else ():
        _failure(row, metric.name, InvalidSampleError(str(error), sample_id=row.index))
    return bool(error)


def _derive(row: SampleResult, metrics: Sequence[Metric]) -> None:
    """Metrics computed from the row's other results (e.g. the overall assessment)."""
    custom = [
        m.name
        for m in metrics
        if getattr(m, "assessment", False) and type(m).__name__ == "AssessmentJudge"
    ]
    errors = {name: str(failure) for name, failure in row.failures.items()}
    for metric in metrics:
        if metric.derived and metric.name not in row.failures:
            try:
                row.results[metric.name] = metric.derive(row.sample, row.results, errors, custom)  # type: ignore[attr-defined]
            except Exception as exc:  # recorded on the row; the run goes on
                _failure(row, metric.name, exc)


def _progress(total: int, show: bool | None) -> Any:
    if show is False or (show is None and not sys.stderr.isatty()):
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:
        if show:
            raise ConfigError(
                "show_progress=True needs tqdm: pip install 'turneval[progress]'"
            ) from None
        return None
    return tqdm(total=total, unit="sample", desc="turneval")


def _fail_check(fail_on_error: bool | float) -> Callable[[int, int], bool]:
    """``(failed_rows, done_rows) -> abort?`` for ``fail_on_error``."""
    if fail_on_error is True:
        return lambda failed, done: failed > 0
    if fail_on_error is False:
        return lambda failed, done: False
    fraction = float(fail_on_error)
    if not 0.0 <= fraction < 1.0:
        raise ConfigError(
            f"fail_on_error must be a bool or a fraction in [0, 1), got {fail_on_error}"
        )
    return lambda failed, done: done >= MIN_ROWS_FOR_FRACTION and failed / done > fraction


async def aevaluate(
    dataset: EvaluationDataset | Sequence[Sample] | Sample,
    metrics: Iterable[Metric | str] | Metric | str,
    *,
    llm: Any = None,
    cache: SQLiteCache | None = None,
    max_concurrency: int = 16,
    max_llm_concurrency: int = 8,
    timeout: float | None = None,
    fail_on_error: bool | float = False,
    show_progress: bool | None = None,
    on_row: Callable[[SampleResult], None] | None = None,
    details: bool = True,
    rate_limit: RateLimit | RateLimiter | None = None,
) -> EvaluationResult:
    """Score every sample with every metric; one row per sample, in input order.

    A metric that fails on a sample records its error on that row (its score is NaN in the
    tables) and the run goes on.

    Args:
        dataset: An :class:`EvaluationDataset` or a sequence of samples.
        metrics: Metric objects or built-in names (``"tool_call_f1"``, ...); one metric or
            name may be given alone.
        llm: Default judge (a LangChain chat model) for judged metrics built without one.
        cache: A :class:`~turneval.llms.SQLiteCache`; identical judge requests are answered
            from it (a second identical run makes no LLM request).
        max_concurrency: How many samples are scored at once.
        max_llm_concurrency: How many judge requests are in flight at once, across all
            metrics and samples.
        timeout: Seconds allowed per sample; metrics unfinished by then fail with TimeoutError.
        fail_on_error: False: never abort. True: abort at the first failed row. A fraction f:
            abort once more than f of the rows done have failed (checked from 20 rows on).
            Aborting raises :class:`EvaluationAbortedError` carrying the rows done so far.
        show_progress: A tqdm progress bar (the ``progress`` extra); None shows it only when
            stderr is a terminal.
        on_row: Called with each finished row (in completion order).
        details: Keep each result's ``details`` (matched calls, ...); False saves their cost.
        rate_limit: The provider's quota (:class:`~turneval.ratelimit.RateLimit`): judge
            requests are paced to its requests and tokens a minute, and the requests in flight
            adapt to 429s (AIMD, at most ``max_in_flight``, which then replaces
            ``max_llm_concurrency``). A :class:`~turneval.ratelimit.RateLimiter` is shared as is.
    """
    if max_concurrency < 1 or max_llm_concurrency < 1:
        raise ConfigError(
            f"max_concurrency and max_llm_concurrency must be >= 1, got {max_concurrency} "
            f"and {max_llm_concurrency}"
        )
    if timeout is not None and timeout <= 0:
        raise ConfigError(f"timeout must be > 0 seconds, got {timeout}")
    should_abort = _fail_check(fail_on_error)
    data = EvaluationDataset.coerce(dataset)
    resolved = resolve_metrics(metrics)
    check_judges(resolved, llm)
    run = JudgeRun(
        llm=llm,
        max_concurrency=max_llm_concurrency,
        cache=cache,
        rate_limiter=RateLimiter.coerce(rate_limit),
    )
    tally = {"done": 0, "failed": 0}
    aborted: list[str] = []

    def after(row: SampleResult) -> bool:
        tally["done"] += 1
        tally["failed"] += bool(row.failures)
        if on_row is not None:
            on_row(row)
        if should_abort(tally["failed"], tally["done"]):
            first = next(iter(row.failures.values()), None)
            aborted.append(
                f"fail_on_error={fail_on_error!r}: {tally['failed']} of {tally['done']} rows "
                f"failed; last: row {row.index}: {first}"
            )
            return True
        return False

    samples = data.samples
    rows = await run_in_order(
        len(samples),
        lambda index: score_sample(index, samples[index], resolved, timeout, details),
        concurrency=max_concurrency,
        judge=run,
        show_progress=show_progress,
        after=after,
    )
    result = EvaluationResult(rows, [metric.name for metric in resolved], run.usage)
    if aborted:
        raise EvaluationAbortedError(aborted[0], result=result)
    return result


async def run_in_order(
    count: int,
    produce: Callable[[int], Awaitable[SampleResult]],
    *,
    concurrency: int,
    judge: JudgeRun,
    show_progress: bool | None,
    after: Callable[[SampleResult], bool] | None = None,
) -> list[SampleResult]:
    """Produce rows ``0..count-1`` with ``concurrency`` workers inside ``judge``'s context.

    Rows come back in input order. ``after`` sees each finished row and may return True to
    stop the run (the rows done so far are returned).
    """
    rows: list[SampleResult | None] = [None] * count
    pending = iter(range(count))
    bar = _progress(count, show_progress)

    async def worker(scope: anyio.CancelScope) -> None:
        for index in pending:  # shared iterator: each index is taken once
            row = await produce(index)
            rows[index] = row
            if bar is not None:
                if judge.rate_limiter is not None:
                    bar.set_postfix_str(judge.rate_limiter.describe(), refresh=False)
                bar.update(1)
            if after is not None and after(row):
                scope.cancel()
                return

    try:
        with judge_run(judge):
            async with client_scope(), anyio.create_task_group() as group:
                for _ in range(min(concurrency, max(count, 1))):
                    group.start_soon(worker, group.cancel_scope)
    finally:
        if bar is not None:
            bar.close()
    return [row for row in rows if row is not None]


def evaluate(
    dataset: EvaluationDataset | Sequence[Sample] | Sample,
    metrics: Iterable[Metric | str] | Metric | str,
    *,
    llm: Any = None,
    cache: SQLiteCache | None = None,
    max_concurrency: int = 16,
    max_llm_concurrency: int = 8,
    timeout: float | None = None,
    fail_on_error: bool | float = False,
    show_progress: bool | None = None,
    on_row: Callable[[SampleResult], None] | None = None,
    details: bool = True,
    rate_limit: RateLimit | RateLimiter | None = None,
) -> EvaluationResult:
    """Sync form of :func:`aevaluate` (same arguments)."""
    return run_sync(
        partial(
            aevaluate,
            dataset,
            metrics,
            llm=llm,
            cache=cache,
            max_concurrency=max_concurrency,
            max_llm_concurrency=max_llm_concurrency,
            timeout=timeout,
            fail_on_error=fail_on_error,
            show_progress=show_progress,
            on_row=on_row,
            details=details,
            rate_limit=rate_limit,
        )
    )

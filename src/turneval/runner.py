"""evaluate/aevaluate: score every sample with every metric, one row per sample, in order.

A front end of the run pipeline (:mod:`turneval.pipeline`): samples in, rows kept in memory.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from os import PathLike
from typing import TYPE_CHECKING, Any

from turneval._sync import sync_form
from turneval.aggregate import RunAggregate
from turneval.dataset import EvaluationDataset
from turneval.errors import ConfigError
from turneval.judge import SQLiteCache, resolve_llm
from turneval.metrics import BUILTIN_METRICS, Evaluator, builtin_metrics, resolve_metric_name
from turneval.metrics.base import RowEvaluator
from turneval.options import MIN_ROWS_FOR_FRACTION, RunOptions
from turneval.pipeline import arun, score_row, score_sample
from turneval.ratelimit import RateLimit, RateLimiter
from turneval.results import EvaluationResult, SampleResult
from turneval.samples import Sample

if TYPE_CHECKING:
    from turneval.runs import RunSink
    from turneval.store import RunStore

__all__ = [
    "MIN_ROWS_FOR_FRACTION",
    "aevaluate",
    "check_judges",
    "evaluate",
    "metric_names",
    "resolve_metrics",
    "score_sample",
]


def metric_names() -> dict[str, type[Evaluator]]:
    """Built-in metrics by name."""
    return {cls.model_fields["name"].default: cls for cls in BUILTIN_METRICS}


def resolve_metrics(metrics: Iterable[Evaluator | str] | Evaluator | str) -> list[Evaluator]:
    """Metric objects from objects or names; unknown or duplicate names raise ConfigError.

    A single metric or name may be given alone (``"tool_call_f1"`` means
    ``["tool_call_f1"]``). ragas' names are accepted where they mean one metric
    (``"bleu_score"`` is ``"bleu"``).
    """
    if isinstance(metrics, (str, Evaluator)):  # one metric given alone, not in a list
        metrics = [metrics]
    elif not isinstance(metrics, Iterable):
        raise ConfigError(
            "metrics must be a list of Metric objects or built-in names, e.g. "
            f"['tool_call_f1'], got {type(metrics).__name__}"
        )
    resolved: list[Evaluator] = []
    for item in metrics:
        if isinstance(item, str):
            resolved.append(_by_name(item).model_validate({}))
        elif isinstance(item, Evaluator):  # a Metric or a RowEvaluator (no other subclass)
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
    for metric in resolved:
        if isinstance(metric, RowEvaluator):
            metric.check_run(resolved)
    return resolved


def _by_name(name: str) -> type[Evaluator]:
    """The built-in metric called ``name`` (see :func:`~turneval.metrics.resolve_metric_name`).

    A metric that needs options to be built (``trajectory_single_tool_use`` needs
    ``tool_name``) is refused, naming them and its class.
    """
    cls = builtin_metrics()[resolve_metric_name(name)]
    if not cls.buildable_by_name():
        needed = [key for key, info in cls.model_fields.items() if info.is_required()]
        options = ", ".join(f"{key}=..." for key in needed)
        raise ConfigError(
            f"metric {cls.model_fields['name'].default!r} needs its option(s) "
            f"{', '.join(map(repr, needed))}: pass {cls.__name__}({options}) instead of its name"
        )
    return cls


def check_judges(metrics: Sequence[Evaluator], llm: Any) -> None:
    """Raise ConfigError before a run if a judged metric would have no model."""
    if llm is not None:
        resolve_llm(llm)  # a wrong type fails here, before any sample
    for metric in metrics:
        if metric.needs_judge(llm) and metric.judge_llm(llm) is None:
            raise ConfigError(
                f"metric {metric.name!r} needs an LLM judge: pass llm=... to the metric or to "
                "evaluate(..., llm=...)"
            )


async def aevaluate(
    dataset: EvaluationDataset | Sequence[Sample] | Sample,
    metrics: Iterable[Evaluator | str] | Evaluator | str,
    *,
    llm: Any = None,
    cache: SQLiteCache | str | PathLike[str] | None = None,
    max_concurrency: int = 16,
    max_llm_concurrency: int = 8,
    timeout: float | None = None,
    fail_on_error: bool | float = False,
    show_progress: bool | None = None,
    on_row: Callable[[SampleResult], None] | None = None,
    details: bool = True,
    rate_limit: RateLimit | RateLimiter | None = None,
    aggregates: Sequence[RunAggregate] = (),
    store: RunStore | str | PathLike[str] | None = None,
    sinks: Sequence[RunSink] = (),
) -> EvaluationResult:
    """Score every sample with every metric; one row per sample, in input order.

    A metric that fails on a sample records its error on that row (its score is NaN in the
    tables) and the run goes on. The options are those of :class:`~turneval.options.RunOptions`
    (same names, same defaults), validated there.

    Args:
        dataset: An :class:`EvaluationDataset` or a sequence of samples.
        metrics: Evaluator objects or built-in names (``"tool_call_f1"``, ...); one metric or
            name may be given alone.
        llm: Default judge (a LangChain chat model) for judged metrics built without one.
        cache: A :class:`~turneval.llms.SQLiteCache` (or its path); identical judge requests
            are answered from it (a second identical run makes no LLM request).
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
        aggregates: Run-level figure sets (:class:`~turneval.aggregate.RunAggregate`, e.g.
            :class:`~turneval.metrics.assessments.DatabricksAggregates`) computed once the rows
            are in: ``result.aggregates``, and ``summary.json``'s ``"aggregates"``.
        store: A run store (:class:`~turneval.store.RunStore`, or its URL or path): the run
            is kept there, each row written as it finishes (the ``store`` extra).
        sinks: More places the run goes (:class:`~turneval.runs.RunSink`: e.g. a
            :class:`~turneval.runs.FolderSink`, or an object of your own with ``start``,
            ``add`` and ``finish``), each row handed to them as it finishes.
    """
    options = RunOptions.from_arguments(locals())
    data = EvaluationDataset.coerce(dataset)
    resolved = resolve_metrics(metrics)
    check_judges(resolved, options.llm)
    samples = data.samples
    result = await arun(
        len(samples),
        lambda index: score_row(index, samples[index], resolved, options),
        resolved,
        options,
    )
    result.skipped_traces = dict(data.skipped_traces)
    return result


evaluate = sync_form(aevaluate)
"""Sync form of :func:`aevaluate` (same arguments): score every sample with every metric."""

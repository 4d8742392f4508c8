"""Testing helpers: score assertions for pytest, datasets as test cases, a scripted chat model.

``assert_scores`` fails a test with each metric's value, threshold and reason;
``parametrize_dataset`` turns each sample of a JSONL file into a test case. Under pytest the
``turneval`` plugin (installed with the package) gives every judged metric one judge cache for
the session and, with ``--turneval-report=PATH``, writes one HTML report of every assertion.
``ScriptedChatModel`` (a LangChain chat model answering from a script) is imported on first use.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Iterable, Mapping
from os import PathLike
from typing import TYPE_CHECKING, Any

from turneval.dataset import EvaluationDataset, distinct_sample_ids
from turneval.errors import ConfigError
from turneval.samples import Sample, sample_id

if TYPE_CHECKING:
    import pytest

    from turneval._scripted import ScriptedChatModel
    from turneval.judge import SQLiteCache
    from turneval.metrics import Evaluator
    from turneval.results import EvaluationResult

__all__ = [
    "DEFAULT_THRESHOLD",
    "ScoreAssertionError",
    "ScriptedChatModel",
    "aassert_scores",
    "assert_scores",
    "parametrize_dataset",
    "sample_id",
]

DEFAULT_THRESHOLD = 0.5
"""The bar a score must reach when no threshold is given (as in deepeval)."""


class ScoreAssertionError(AssertionError):
    """A score below its threshold, or a metric that failed; the message lists each one.

    Attributes:
        result: The evaluation behind the assertion.
        failures: One line per failed check.
    """

    def __init__(self, message: str, result: EvaluationResult, failures: list[str]) -> None:
        """Keep the result and the failed checks beside the message."""
        super().__init__(message)
        self.result = result
        self.failures = failures


def __getattr__(name: str) -> Any:
    """``ScriptedChatModel`` is imported on first use (it loads LangChain)."""
    if name == "ScriptedChatModel":
        from turneval._scripted import ScriptedChatModel

        return ScriptedChatModel
    raise AttributeError(f"module 'turneval.testing' has no attribute {name!r}")


def parametrize_dataset(path: str | PathLike[str], argname: str = "sample") -> pytest.MarkDecorator:
    """A ``pytest.mark.parametrize`` running the test once per sample of a JSONL file.

    Each case's id is the sample's ``metadata["id"]`` or its first user message (see
    :func:`sample_id`). Relative paths are read from the current directory; the
    ``@pytest.mark.turneval_dataset(path)`` marker reads them next to the test file instead.

    Args:
        path: A JSONL dataset, one sample per line.
        argname: The test function's argument that receives the sample.

    Raises:
        InvalidSampleError: naming the line, for an unreadable sample.
    """
    import pytest

    samples = EvaluationDataset.from_jsonl(path).samples
    return pytest.mark.parametrize(argname, samples, ids=distinct_sample_ids(samples))


def _thresholds(
    names: list[str], thresholds: float | Mapping[str, float] | None
) -> dict[str, float]:
    if thresholds is None:
        return dict.fromkeys(names, DEFAULT_THRESHOLD)
    if isinstance(thresholds, (int, float)):
        return dict.fromkeys(names, float(thresholds))
    if not isinstance(thresholds, Mapping):
        raise ConfigError(
            "thresholds must be a number or a {metric name: number} dict, got "
            f"{type(thresholds).__name__}"
        )
    unknown = sorted(set(thresholds) - set(names))
    if unknown:
        raise ConfigError(f"thresholds name metrics that were not run: {unknown}; run: {names}")
    return {name: float(thresholds.get(name, DEFAULT_THRESHOLD)) for name in names}


def _check(result: EvaluationResult, bars: dict[str, float]) -> None:
    __tracebackhide__ = True
    from turneval.aggregate import unstable

    failures: list[str] = []
    shown: list[str] = []  # the message: each failure, with where a metric raised under it
    for row in result.rows:
        label = f"sample {row.index}"
        if row.sample is not None and len(result.rows) > 1:
            label += f" ({sample_id(row.sample, row.index)})"
        for name, bar in bars.items():
            scored = row.results.get(name)
            failed = row.failures.get(name)
            if failed is not None:
                failures.append(f"{label}: {name} failed: {failed}")
                shown.append(f"  {failures[-1]}")
                if failed.traceback:  # a bug in the metric's code: where it raised
                    shown.extend(f"    {line}" for line in failed.traceback.splitlines())
            elif scored is not None and scored.value < bar:
                reason = f": {scored.reason}" if scored.reason else ""
                if unstable(scored, bar):
                    reason = " (unstable: its votes fall on both sides of the bar)" + reason
                failures.append(f"{label}: {name} = {scored.value:.4g} < {bar:g}{reason}")
                shown.append(f"  {failures[-1]}")
    if failures:
        checked = len(result.rows) * len(bars)
        message = f"{len(failures)} of {checked} score checks failed:\n" + "\n".join(shown)
        raise ScoreAssertionError(message, result, failures)


def _prepare(
    samples: EvaluationDataset | Sample | Iterable[Sample],
    metrics: Iterable[Evaluator | str] | Evaluator | str,
    cache: SQLiteCache | None,
    thresholds: float | Mapping[str, float] | None,
) -> tuple[EvaluationDataset, list[Evaluator], SQLiteCache | None]:
    from turneval.metrics._votes import with_vote_options
    from turneval.pytest_plugin import session_state
    from turneval.runner import resolve_metrics

    data = EvaluationDataset.coerce(samples)
    resolved = resolve_metrics(metrics)
    # judged metrics voting several times flag rows whose votes straddle their bar
    bars = _thresholds([metric.name for metric in resolved], thresholds)
    resolved = with_vote_options(resolved, thresholds=bars)
    state = session_state()
    if cache is None and state is not None and any(m.uses_llm for m in resolved):
        cache = state.judge_cache()
    return data, resolved, cache


async def aassert_scores(
    samples: EvaluationDataset | Sample | Iterable[Sample],
    metrics: Iterable[Evaluator | str] | Evaluator | str,
    thresholds: float | Mapping[str, float] | None = None,
    *,
    llm: Any = None,
    cache: SQLiteCache | None = None,
) -> EvaluationResult:
    """Async form of :func:`assert_scores` (same arguments), for async tests."""
    __tracebackhide__ = True
    from turneval.pytest_plugin import record
    from turneval.runner import aevaluate

    data, resolved, cache = _prepare(samples, metrics, cache, thresholds)
    result = await aevaluate(data, resolved, llm=llm, cache=cache, show_progress=False)
    record(result)
    _check(result, _thresholds(result.metric_names, thresholds))
    return result


def assert_scores(
    samples: EvaluationDataset | Sample | Iterable[Sample],
    metrics: Iterable[Evaluator | str] | Evaluator | str,
    thresholds: float | Mapping[str, float] | None = None,
    *,
    llm: Any = None,
    cache: SQLiteCache | None = None,
) -> EvaluationResult:
    """Score samples and fail (an ``AssertionError``) where a score is below its threshold.

    The message lists every failed check: the sample, the metric, its value, the threshold
    and the metric's reason; a metric that could not score a sample fails with its error.
    Works in plain and async tests (inside a running event loop the evaluation runs on a worker
    thread; async tests may also ``await aassert_scores(...)``).

    Args:
        samples: One sample, a list of samples or a dataset.
        metrics: Evaluator objects or built-in names; one may be given alone.
        thresholds: The minimum passing score: one number for every metric, or per metric
            name (metrics left out use 0.5). Default 0.5.
        llm: The judge for judged metrics built without one.
        cache: A judge cache; by default, under pytest, the session's cache.

    Returns:
        The evaluation, when every check passed.

    Raises:
        ScoreAssertionError: listing the failed checks.
        ConfigError: for thresholds naming metrics that were not run.
    """
    __tracebackhide__ = True
    from turneval.pytest_plugin import record
    from turneval.runner import evaluate

    data, resolved, cache = _prepare(samples, metrics, cache, thresholds)
    try:
        import asyncio

        asyncio.get_running_loop()
    except RuntimeError:
        result = evaluate(data, resolved, llm=llm, cache=cache, show_progress=False)
    else:  # called from an async test: run on a worker thread with its own loop
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            future = pool.submit(
                evaluate, data, resolved, llm=llm, cache=cache, show_progress=False
            )
            result = future.result()
    record(result)
    _check(result, _thresholds(result.metric_names, thresholds))
    return result

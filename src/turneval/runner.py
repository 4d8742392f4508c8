"""evaluate/aevaluate: score every sample with every metric, one row per sample, in order."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import partial
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from turneval.aggregate import MetricSummary, summarize
from turneval.dataset import EvaluationDataset
from turneval.errors import ConfigError, InvalidSampleError
from turneval.judge import JudgeRun, SQLiteCache, Usage, judge_run, resolve_llm
from turneval.metrics import BUILTIN_METRICS, Metric
from turneval.metrics.base import run_sync
from turneval.results import MetricResult
from turneval.samples import Sample

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "EvaluationResult",
    "MetricFailure",
    "SampleResult",
    "aevaluate",
    "evaluate",
    "resolve_metrics",
]


@dataclass(frozen=True, slots=True)
class MetricFailure:
    """A metric that failed on one sample: the error's type and message, kept on the row."""

    name: str
    sample_index: int
    error_type: str
    message: str

    def __str__(self) -> str:
        """``"<ErrorType>: <message>"``."""
        return f"{self.error_type}: {self.message}"


@dataclass(slots=True)
class SampleResult:
    """Everything measured on one sample: a result or a failure per metric."""

    index: int
    sample: Sample
    results: dict[str, MetricResult] = field(default_factory=dict)
    failures: dict[str, MetricFailure] = field(default_factory=dict)

    def score(self, name: str) -> float:
        """The metric's value, NaN where it failed (ragas' convention at this boundary)."""
        result = self.results.get(name)
        return result.value if result is not None else math.nan

    @property
    def usage(self) -> Usage:
        """Judge usage summed over this row's metrics."""
        total = Usage()
        for result in self.results.values():
            if result.usage is not None:
                total = total + result.usage
        return total


class EvaluationResult:
    """The rows of a run, in input order, and their summaries."""

    def __init__(
        self, rows: list[SampleResult], metric_names: list[str], usage: Usage | None = None
    ) -> None:
        """Hold ``rows`` (one per input sample) scored with ``metric_names``.

        ``usage`` is the run's judge usage (every request, including those of failed rows).
        """
        self.rows = rows
        self.metric_names = metric_names
        self.usage = usage if usage is not None else Usage()

    def __len__(self) -> int:
        """Number of rows (= input samples)."""
        return len(self.rows)

    def __repr__(self) -> str:
        """Metric means at a glance."""
        means = ", ".join(
            f"{name}: {'n/a' if s.mean is None else f'{s.mean:.4f}'}"
            for name, s in self.summary().items()
        )
        return f"EvaluationResult({len(self.rows)} rows; {means})"

    def scores(self, name: str) -> list[float]:
        """One value per row for metric ``name``, NaN where it failed."""
        if name not in self.metric_names:
            raise KeyError(f"no metric named {name!r}; the run has {self.metric_names}")
        return [row.score(name) for row in self.rows]

    def summary(self) -> dict[str, MetricSummary]:
        """Per metric: mean, std (ddof=1), count (scored rows) and failed."""
        summaries = {}
        for name in self.metric_names:
            results = [row.results[name] for row in self.rows if name in row.results]
            failed = sum(1 for row in self.rows if name in row.failures)
            usages = [result.usage for result in results if result.usage is not None]
            usage = sum(usages, Usage()) if usages else None
            summaries[name] = summarize(name, [r.value for r in results], failed, usage)
        return summaries

    def records(self) -> list[dict[str, Any]]:
        """One flat dict per row: ``<name>``, ``<name>_reason``, ``<name>_error`` per metric."""
        records = []
        for row in self.rows:
            record: dict[str, Any] = {"index": row.index}
            for name in self.metric_names:
                result, failure = row.results.get(name), row.failures.get(name)
                record[name] = result.value if result is not None else math.nan
                record[f"{name}_reason"] = result.reason if result is not None else None
                record[f"{name}_error"] = str(failure) if failure is not None else None
            records.append(record)
        return records

    def to_pandas(self) -> pd.DataFrame:
        """One row per sample in input order (needs the ``pandas`` extra)."""
        import pandas as pd

        records = self.records()
        frame: pd.DataFrame = pd.DataFrame(records)
        for name in self.metric_names:  # object columns keep None (not NaN) where empty
            for column in (f"{name}_reason", f"{name}_error"):
                frame[column] = pd.Series([record[column] for record in records], dtype=object)
        return frame

    def to_jsonl(self, path: str | PathLike[str]) -> None:
        """Write :meth:`records` as JSON lines (NaN written as ``null``), with details."""
        with Path(path).open("w", encoding="utf-8") as handle:
            for row, record in zip(self.rows, self.records(), strict=True):
                for name in self.metric_names:
                    if isinstance(record[name], float) and math.isnan(record[name]):
                        record[name] = None
                    if name in row.results:
                        record[f"{name}_details"] = row.results[name].details
                handle.write(json.dumps(record, ensure_ascii=False, default=str))
                handle.write("\n")


def resolve_metrics(metrics: Iterable[Metric | str]) -> list[Metric]:
    """Metric objects from objects or names; unknown or duplicate names raise ConfigError."""
    by_name: dict[str, type[Metric]] = {
        cls.model_fields["name"].default: cls for cls in BUILTIN_METRICS
    }
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


async def _score_cell(row: SampleResult, metric: Metric) -> None:
    try:
        row.results[metric.name] = await metric.ascore(row.sample)
    except Exception as exc:  # recorded on the row; the run goes on
        if isinstance(exc, InvalidSampleError) and exc.sample_id is None:
            exc.sample_id = row.index
        row.failures[metric.name] = MetricFailure(
            metric.name, row.index, type(exc).__name__, str(exc)
        )


async def _score_sample(index: int, sample: Sample, metrics: Sequence[Metric]) -> SampleResult:
    row = SampleResult(index, sample)
    judged = [metric for metric in metrics if metric.uses_llm]
    for metric in metrics:
        if not metric.uses_llm:
            await _score_cell(row, metric)
    if len(judged) == 1:
        await _score_cell(row, judged[0])
    elif judged:  # independent judge calls of one sample run concurrently
        async with anyio.create_task_group() as group:
            for metric in judged:
                group.start_soon(_score_cell, row, metric)
    # Results in the metrics' order, whatever order the judged ones finished in.
    row.results = {m.name: row.results[m.name] for m in metrics if m.name in row.results}
    return row


async def aevaluate(
    dataset: EvaluationDataset | Sequence[Sample],
    metrics: Iterable[Metric | str],
    *,
    llm: Any = None,
    cache: SQLiteCache | None = None,
    max_concurrency: int = 16,
    max_llm_concurrency: int = 8,
) -> EvaluationResult:
    """Score every sample with every metric; one row per sample, in input order.

    A metric that fails on a sample records its error on that row (its score is NaN in the
    tables) and the run goes on.

    Args:
        dataset: An :class:`EvaluationDataset` or a sequence of samples.
        metrics: Metric objects or built-in names (``"tool_call_f1"``, ...).
        llm: Default judge (a LangChain chat model) for judged metrics built without one.
        cache: A :class:`~turneval.llms.SQLiteCache`; identical judge requests are answered
            from it (a second identical run makes no LLM request).
        max_concurrency: How many samples are scored at once.
        max_llm_concurrency: How many judge requests are in flight at once, across all
            metrics and samples.
    """
    if max_concurrency < 1 or max_llm_concurrency < 1:
        raise ConfigError(
            f"max_concurrency and max_llm_concurrency must be >= 1, got {max_concurrency} "
            f"and {max_llm_concurrency}"
        )
    data = EvaluationDataset.coerce(dataset)
    resolved = resolve_metrics(metrics)
    if llm is not None:
        resolve_llm(llm)  # a wrong type fails here, before any sample
    for metric in resolved:
        if metric.uses_llm and getattr(metric, "llm", None) is None and llm is None:
            raise ConfigError(
                f"metric {metric.name!r} needs an LLM judge: pass llm=... to the metric or to "
                "evaluate(..., llm=...)"
            )
    run = JudgeRun(llm=llm, max_concurrency=max_llm_concurrency, cache=cache)
    rows: list[SampleResult | None] = [None] * len(data)
    pending = iter(enumerate(data.samples))

    async def worker() -> None:
        for index, sample in pending:  # shared iterator: each sample is taken once
            rows[index] = await _score_sample(index, sample, resolved)

    with judge_run(run):
        async with anyio.create_task_group() as group:
            for _ in range(min(max_concurrency, max(len(data), 1))):
                group.start_soon(worker)
    complete = [row for row in rows if row is not None]
    assert len(complete) == len(rows)
    return EvaluationResult(complete, [metric.name for metric in resolved], run.usage)


def evaluate(
    dataset: EvaluationDataset | Sequence[Sample],
    metrics: Iterable[Metric | str],
    *,
    llm: Any = None,
    cache: SQLiteCache | None = None,
    max_concurrency: int = 16,
    max_llm_concurrency: int = 8,
) -> EvaluationResult:
    """Sync form of :func:`aevaluate`."""
    return run_sync(
        partial(
            aevaluate,
            dataset,
            metrics,
            llm=llm,
            cache=cache,
            max_concurrency=max_concurrency,
            max_llm_concurrency=max_llm_concurrency,
        )
    )

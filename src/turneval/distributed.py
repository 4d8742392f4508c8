"""Evaluate on a Ray cluster: the deprecated front end over the Ray engine.

:func:`evaluate_on_ray` is ``evaluate_jsonl(data, metrics, out, engine=Ray(...))``
(:class:`turneval.engines.Ray`, where the machinery lives and is documented) under the names
of earlier versions; it still works, with a :class:`DeprecationWarning`. What it returns,
:class:`DistributedResult`, is the streamed run's result and the folder of its rows, with
readers of those rows (a Ray Dataset, a pandas DataFrame).

Needs the ``ray`` extra: ``pip install 'turneval[ray]'``.
"""

from __future__ import annotations

import inspect
import json
import os
import tempfile
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from turneval._deprecation import deprecated
from turneval.aggregate import RunAggregate
from turneval.engines._ray import ActorBudget, Ray, ray_module
from turneval.metrics import Evaluator
from turneval.options import RunOptions
from turneval.ratelimit import RateLimit
from turneval.results import SampleResult
from turneval.runner import resolve_metrics
from turneval.stream import StreamResult, evaluate_jsonl

if TYPE_CHECKING:
    from turneval.runs import RunSink
    from turneval.store import RunStore

__all__ = ["ActorBudget", "DistributedResult", "RAY_SETTINGS", "RENAMED_OPTIONS", "evaluate_on_ray"]


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
        return ray_module().data.read_json(str(self.results_path))

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


RAY_SETTINGS = {
    "address": "address",
    "llm_factory": "llm_factory",
    "batch_size": "chunk_size",
    "concurrency": "workers",
    "num_cpus": "num_cpus",
    "max_retries": "max_retries",
    "output_format": "output_format",
}
""":func:`evaluate_on_ray`'s engine settings, each with its name on :class:`Ray`."""


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
    output_format: Literal["jsonl", "parquet"] = "jsonl",
    aggregates: Sequence[RunAggregate] = (),
    group_by: Literal["trace", "session"] = "trace",
    strict_traces: bool = False,
    lenient_json: bool = False,
    store: RunStore | str | os.PathLike[str] | None = None,
    sinks: Sequence[RunSink] = (),
    **renamed: Any,
) -> DistributedResult:
    """Deprecated: ``evaluate_jsonl(data, metrics, out, engine=Ray(...))`` is the same run.

    Warns with a :class:`DeprecationWarning`, then runs
    :func:`~turneval.stream.evaluate_jsonl` with the :class:`~turneval.engines.Ray` engine:
    ``address``, ``llm_factory``, ``num_cpus``, ``max_retries`` and ``output_format`` are the
    engine's settings of the same names, ``batch_size`` its ``chunk_size``, ``concurrency``
    its ``workers`` (:data:`RAY_SETTINGS`); ``input_format``, ``group_by``, ``strict_traces``
    and ``lenient_json`` make the source (:func:`~turneval.stream._sources.as_source`);
    ``output`` is ``out`` (None: a new temporary folder); the other options are
    ``evaluate_jsonl``'s. The names of turneval 0.x, ``sample_concurrency``,
    ``llm_concurrency`` and ``progress``, still work too, with a warning each.

    Args:
        data: A JSONL (or OTLP/JSON) file of samples, a Parquet file or folder of sample rows,
            or a ``ray.data.Dataset`` of sample rows.
        metrics: Evaluator objects or names.
        output: Folder of the results (created; a temporary folder if None).
        address: ``Ray(address=...)``.
        llm_factory: ``Ray(llm_factory=...)``.
        rate_limit: The provider's quota, held once for the whole cluster.
        cache: SQLite judge cache path, shared by the actors.
        batch_size: ``Ray(chunk_size=...)``.
        concurrency: ``Ray(workers=...)``.
        num_cpus: ``Ray(num_cpus=...)``.
        max_concurrency: Samples in flight in one actor.
        max_llm_concurrency: Judge requests in flight in one actor.
        resume: As for :func:`~turneval.stream.evaluate_jsonl`.
        overwrite: As for :func:`~turneval.stream.evaluate_jsonl`.
        input_format: ``"jsonl"``, ``"otlp"`` or ``"auto"`` (the source's format).
        details: As for :func:`~turneval.stream.evaluate_jsonl`.
        timeout: Seconds allowed to score one sample.
        fail_on_error: As for :func:`~turneval.stream.evaluate_jsonl`.
        on_row: Called in the driver with each row written, in input order.
        max_retries: ``Ray(max_retries=...)``.
        report_rows: Rows kept for the report's per-sample table.
        title: The report's title.
        show_progress: Print a progress line to stderr (None: only when it is a terminal).
        output_format: ``Ray(output_format=...)``.
        aggregates: As for :func:`~turneval.stream.evaluate_jsonl`.
        group_by: ``OtlpSource(path, group_by=...)``.
        strict_traces: ``OtlpSource(path, strict=...)``.
        lenient_json: ``JsonlSource(path, lenient_json=...)`` (or ``OtlpSource``'s).
        store: As for :func:`~turneval.stream.evaluate_jsonl`.
        sinks: As for :func:`~turneval.stream.evaluate_jsonl` (more places the run goes).
        **renamed: The old names ``sample_concurrency``, ``llm_concurrency`` and
            ``progress`` (:data:`RENAMED_OPTIONS`), deprecated.

    Raises:
        ConfigError: Ray is not installed, a metric holds its own chat model, or an option is
            out of range.
        TypeError: an unknown keyword argument.
    """
    deprecated(
        "evaluate_on_ray is deprecated: use evaluate_jsonl(data, metrics, out, "
        "engine=Ray(...)) (turneval.engines.Ray)"
    )
    shared = {
        "max_concurrency": max_concurrency,
        "max_llm_concurrency": max_llm_concurrency,
        "show_progress": show_progress,
    }
    given = _renamed(renamed, shared)
    arguments = {**locals(), **given}
    engine = Ray(**{new: arguments[old] for old, new in RAY_SETTINGS.items()})
    resolved = resolve_metrics(metrics)
    engine.check(resolved, RunOptions())  # before the input is read, as evaluate_jsonl does
    source = engine.source(
        data,
        input_format=input_format,
        group_by=group_by,
        strict_traces=strict_traces,
        lenient_json=lenient_json,
    )
    target = Path(output) if output is not None else Path(tempfile.mkdtemp(prefix="turneval-"))
    options = {name: arguments[name] for name in _RUN_OPTIONS}
    stream = evaluate_jsonl(source, resolved, target, engine=engine, **options)
    return DistributedResult(stream, target)


_RUN_OPTIONS = (
    "rate_limit",
    "cache",
    "max_concurrency",
    "max_llm_concurrency",
    "resume",
    "overwrite",
    "details",
    "timeout",
    "fail_on_error",
    "on_row",
    "report_rows",
    "title",
    "show_progress",
    "aggregates",
    "store",
    "sinks",
)
"""The options :func:`evaluate_on_ray` passes to :func:`~turneval.stream.evaluate_jsonl` as they are."""


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

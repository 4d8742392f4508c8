"""What the viewer's pages show, as plain data: pure functions over a run store.

The runs list, one run's page (summary, clusters, distributions, skipped conversations) and
two runs compared; a run's rows are :mod:`turneval.view._row_queries`'.

No HTTP and no HTML here: each function takes a :class:`~turneval.store.RunStore` (or a
stored run) and the page's parameters, and returns values, lists and small records the pages
(:mod:`turneval.view._pages`, :mod:`turneval.view._row_pages`) turn into HTML. The viewer keeps
what is costly to work out for ended runs (``turneval.view._app``); these functions keep
nothing.

Size: every answer is bounded, whatever the store holds. Lists are paged (:data:`RUNS`,
:data:`PAGE` rows); a filter that needs the rows' values reads at most :data:`SCAN_MAX` rows
a page; a sort, a histogram and a comparison read the narrow columns they need
(:meth:`~turneval.store.RunStore.columns`), never whole runs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Any

from turneval.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np

    from turneval.clusters.grouping import FailureCluster
    from turneval.results import EvaluationResult
    from turneval.store import RunStore, StoredRun, StoredSkip
    from turneval.view._compare import Compared

__all__ = [
    "CLUSTERED",
    "FLIPS",
    "FULL_RUN",
    "METRICS",
    "PAGE",
    "RUNS",
    "SCAN",
    "SCAN_MAX",
    "DatasetVersion",
    "Distributions",
    "RunsListing",
    "SummaryLine",
    "compare_choices",
    "compared",
    "config_problem",
    "dataset_change",
    "dataset_version",
    "day",
    "distributions",
    "failure_clusters",
    "integer",
    "number",
    "runs_listing",
    "skipped",
    "summary_lines",
    "whole",
]

PAGE = 50  # rows a page shows
RUNS = 50  # runs a page of the runs list shows
FLIPS = 100  # changed rows a page of a comparison shows
SCAN = 1000  # rows read at a time when a filter needs the row's values
SCAN_MAX = 20_000  # rows one filtered page reads at most before it stops and offers "more"
FULL_RUN = 50_000  # simulated runs up to this many rows get the trials grid (and clusters)
CLUSTERED = 5_000  # failed rows whose records the run page reads for its failure clusters
METRICS = 100  # metrics a run's page summarises and draws at most


# -- parameters as typed ---------------------------------------------------------------------


def day(text: str | None) -> date | None:
    """``2024-05-01`` as a date; None for nothing or anything else."""
    try:
        return date.fromisoformat(text) if text else None
    except ValueError:
        return None


def number(text: str | None) -> float | None:
    """A finite number typed in a filter; None for nothing, not a number or not finite."""
    try:
        value = float(text) if text not in (None, "") else None
    except ValueError:
        return None
    return value if value is None or math.isfinite(value) else None


def integer(text: str | None) -> int | None:
    """A whole number typed in a link (an offset, a seed); None for anything else."""
    try:
        return int(text) if text not in (None, "") else None
    except ValueError:
        return None


def whole(value: Any) -> int:
    """A count from a stored summary: an int, else 0 (an imported file's text never counts)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# -- runs ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunsListing:
    """One page of the runs list: the runs, how many match, the metric names they have."""

    runs: list[StoredRun]
    total: int
    metric_names: list[str]


def runs_listing(store: RunStore, filters: Mapping[str, Any], offset: int = 0) -> RunsListing:
    """The runs ``filters`` pick, newest first, :data:`RUNS` from ``offset``.

    ``filters``: ``text``, ``dataset``, ``metric``, ``judge``, ``since``, ``until`` (None: any).
    """
    shown = store.runs(limit=RUNS, offset=offset, **filters)
    names = sorted({name for run in shown for name in run.metric_names})
    return RunsListing(shown, store.count_runs(**filters), names)


@dataclass(frozen=True)
class SummaryLine:
    """One metric of a run's stored summary, as stored (values checked by the page)."""

    name: str
    mean: Any
    ci_low: Any
    ci_high: Any
    count: Any
    failed: Any
    usage: tuple[int, int, int] | None  # requests, input tokens, output tokens


def summary_lines(run: StoredRun) -> tuple[list[SummaryLine], int, dict[str, Any]]:
    """The run's summary, metric by metric (the first :data:`METRICS`).

    Returns the lines, how many metrics the summary holds, and each metric's ``extra``
    (figures by agent, agents blamed). A summary of any shape (an older turneval's, a file
    written by hand) gives what it holds that has the expected shape, nothing else.
    """
    summary = run.summary if isinstance(run.summary, dict) else {}
    stats = summary.get("metrics") if isinstance(summary.get("metrics"), dict) else {}
    items = [(str(name), item) for name, item in (stats or {}).items() if isinstance(item, dict)]
    lines = []
    for name, item in items[:METRICS]:
        usage = item.get("usage") if isinstance(item.get("usage"), dict) else None
        used = (
            None
            if not usage
            else (
                whole(usage.get("calls")),
                whole(usage.get("input_tokens")),
                whole(usage.get("output_tokens")),
            )
        )
        lines.append(
            SummaryLine(
                name,
                item.get("mean"),
                item.get("ci_low"),
                item.get("ci_high"),
                item.get("count", ""),
                item.get("failed", ""),
                used,
            )
        )
    extras = {name: item.get("extra") for name, item in items}
    return lines, len(items), extras


@dataclass(frozen=True)
class DatasetVersion:
    """The dataset a run read: its digest and, when ``turneval datasets`` keeps it, its label."""

    digest: str
    label: str | None


def dataset_version(store: RunStore, run: StoredRun) -> DatasetVersion | None:
    """The version of the dataset ``run`` read (None: the run names no digest)."""
    if not run.dataset_digest:
        return None
    found = store.dataset_of(run.dataset_digest)
    return DatasetVersion(run.dataset_digest, None if found is None else found.label)


def dataset_change(store: RunStore, base: StoredRun, cand: StoredRun) -> str | None:
    """What changed between the datasets two runs read (None: the same, or not known)."""
    if not (base.dataset_digest and cand.dataset_digest) or (
        base.dataset_digest == cand.dataset_digest
    ):
        return None
    old, new = store.dataset_of(base.dataset_digest), store.dataset_of(cand.dataset_digest)
    if old is None or new is None:
        return "rows not listed: keep both versions with 'turneval datasets add'"
    return f"{old.label} → {new.label}: {store.diff_datasets(old.digest, new.digest).summary()}"


def skipped(
    store: RunStore, run: StoredRun, latest: int = 20
) -> tuple[dict[str, int], list[StoredSkip]]:
    """The conversations a ``turneval watch`` run skipped: counts by reason, the latest few."""
    counts = store.skipped_counts(run.id)
    return counts, (store.skipped(run.id, limit=latest) if counts else [])


def failure_clusters(store: RunStore, run: StoredRun) -> list[FailureCluster] | None:
    """The failure clusters of a run with an attribution, None when none can be drawn.

    Runs of up to :data:`FULL_RUN` rows whose metrics include a ``FailureAttribution``.
    Narrow columns pick the rows a cluster can hold (a failed metric, a value under the bar,
    an attribution); only those rows' records are read, at most :data:`CLUSTERED`.
    """
    if run.rows > FULL_RUN:
        return None
    attributing = [
        str(m.get("name"))
        for m in run.metrics
        if re.split(r"[.:]", str(m.get("class", "")))[-1] == "FailureAttribution"
    ]
    if not attributing:
        return None
    import numpy as np

    from turneval.clusters import DEFAULT_FAIL_UNDER, cluster_failures
    from turneval.results import EvaluationResult

    columns = store.columns(run.id, run.metric_names)
    chosen = np.asarray(columns.failed, dtype=bool).copy()
    for name, values in columns.values.items():
        with np.errstate(invalid="ignore"):
            chosen |= values < DEFAULT_FAIL_UNDER
        if name in attributing:
            chosen |= ~np.isnan(values)
    indexes = [int(i) for i in np.asarray(columns.indexes)[chosen]][:CLUSTERED]
    records = [
        found.record
        for start in range(0, len(indexes), 1000)
        for found in store.rows_at(run.id, indexes[start : start + 1000])
    ]
    try:
        rows = EvaluationResult.from_records(records).rows
    except (ValueError, TypeError, KeyError):  # a stored row that is no results row
        return None
    return cluster_failures(rows)


@dataclass(frozen=True)
class Distributions:
    """Each metric's finite values, the rows left out as not numbers, whether it is simulated."""

    values: dict[str, np.ndarray]
    not_numbers: dict[str, int]
    simulated: bool


def distributions(store: RunStore, run: StoredRun) -> Distributions:
    """The values of the run's first :data:`METRICS` metrics, from their columns."""
    import numpy as np

    names = run.metric_names[:METRICS]
    columns = store.columns(run.id, names)
    values = {name: columns.values[name][np.isfinite(columns.values[name])] for name in names}
    simulated = any(scenario is not None for scenario in columns.scenario_ids)
    return Distributions(values, {n: int(columns.not_numbers[n]) for n in names}, simulated)


def trials(store: RunStore, run: StoredRun) -> EvaluationResult:
    """The run read whole, for its trials grid (the page draws it for :data:`FULL_RUN` rows)."""
    result: EvaluationResult = store.result(run.id)
    return result


# -- compare ---------------------------------------------------------------------------------


def compare_choices(
    store: RunStore, picked: Sequence[str], find: Callable[[str], StoredRun]
) -> list[StoredRun]:
    """The runs a comparison may pick: the runs ``picked`` (when found) and the latest."""
    listed = store.runs(limit=RUNS)
    chosen = []
    for run_id in picked:
        if run_id and not any(run.id == run_id for run in listed):
            try:
                chosen.append(find(run_id))
            except ConfigError:
                continue
    return chosen + listed


def config_problem(base: StoredRun, cand: StoredRun) -> str | None:
    """Why two runs' scores do not compare (a metric configured otherwise), None if they do."""
    from turneval.compare import check_metric_configs

    try:
        check_metric_configs(base.metrics, cand.metrics)
    except ConfigError as exc:
        return str(exc)
    return None


def compared(store: RunStore, base: StoredRun, cand: StoredRun) -> Compared:
    """Two runs compared from the columns of the metrics they share."""
    from turneval.view._compare import compare_columns

    shared = [name for name in base.metric_names if name in cand.metric_names]
    return compare_columns(
        store.columns(base.id, shared),
        store.columns(cand.id, shared),
        base.metric_names,
        cand.metric_names,
    )

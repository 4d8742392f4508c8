"""A run's rows as plain data: pure functions over a run store (no HTTP, no HTML).

A page of rows (:func:`rows_page`) is one keyset page, or the rows value filters keep (read
:data:`~turneval.view._queries.SCAN` at a time, at most
:data:`~turneval.view._queries.SCAN_MAX` a page), or the rows sorted by value (from the
metric's column, :func:`value_order`); one row's texts are served whole by :func:`row_text`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from turneval.view._queries import PAGE, SCAN, SCAN_MAX, integer, number

if TYPE_CHECKING:
    import numpy as np

    from turneval.store import RunStore, StoredRow, StoredRun

__all__ = [
    "RowQuery",
    "RowsPage",
    "filtered_rows",
    "lower_is_better",
    "row",
    "row_text",
    "rows_page",
    "unstable",
    "value_order",
]


@dataclass(frozen=True)
class RowQuery:
    """The rows page's parameters: a metric, filters, a sort, where the page starts."""

    metric: str
    failed: bool = False
    search: str | None = None
    below: float | None = None
    low: float | None = None
    high: float | None = None
    unstable: bool = False
    sort: str = "index"
    after: int | None = None
    offset: int = 0

    @classmethod
    def of(cls, params: Mapping[str, str], names: Sequence[str]) -> RowQuery:
        """The query a page's parameters (``?metric=&below=&sort=...``) ask for."""
        return cls(
            metric=params.get("metric") or (names[0] if names else ""),
            failed=params.get("failed") == "1",
            search=params.get("q", "").strip() or None,
            below=number(params.get("below")),
            low=number(params.get("min")),
            high=number(params.get("max")),
            unstable=params.get("unstable") == "1",
            sort=params.get("sort", "index"),
            after=integer(params.get("after")),
            offset=max(integer(params.get("offset")) or 0, 0),
        )

    @property
    def filtered(self) -> bool:
        """Whether a filter needs each row's value (a bound, unstable votes)."""
        return any(x is not None for x in (self.below, self.low, self.high)) or self.unstable

    @property
    def by_value(self) -> bool:
        """Whether the rows are sorted by their value of the metric."""
        return self.sort in ("value", "-value") and bool(self.metric)

    def keeps(self, found: StoredRow) -> bool:
        """Whether ``found`` passes the value filters."""
        value = found.record.get(self.metric)
        if not isinstance(value, (int, float)):  # no value: kept only when no bound is set
            value = None
        if self.below is not None and not (value is not None and value < self.below):
            return False
        if self.low is not None and not (value is not None and value >= self.low):
            return False
        if self.high is not None and not (value is not None and value <= self.high):
            return False
        return not self.unstable or unstable(found.record, self.metric)


def unstable(record: Mapping[str, Any], metric: str) -> bool:
    """Whether the row's repeated votes of ``metric`` fall on both sides of its threshold."""
    details = record.get(f"{metric}_details")
    repeats = details.get("repeats") if isinstance(details, dict) else None
    return isinstance(repeats, dict) and bool(repeats.get("unstable"))


@dataclass(frozen=True)
class RowsPage:
    """A page of rows; ``more``: the link parameters of the next page (None: the last)."""

    rows: list[StoredRow]
    more: dict[str, Any] | None = None
    note: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def rows_page(
    store: RunStore,
    run: StoredRun,
    query: RowQuery,
    order: Callable[[], np.ndarray] | None = None,
) -> RowsPage:
    """The page of rows ``query`` asks for (:data:`PAGE` rows).

    Sorted by value: from the run's order of values (``order``, by default
    :func:`value_order`), from ``query.offset``. Filtered on values: read :data:`SCAN` rows
    at a time from ``query.after``, at most :data:`SCAN_MAX`. Else one keyset page.
    """
    failed = True if query.failed else None
    if query.by_value:
        indexes = order() if order is not None else value_order(store, run, query)
        start = query.offset
        page = store.rows_at(run.id, [int(i) for i in indexes[start : start + PAGE]])
        more = {"offset": start + PAGE, "after": None} if len(indexes) > start + PAGE else None
        return RowsPage(page, more, f"sorted by value: {len(indexes):,} rows have a value")
    if query.filtered:
        page, last, scanned = filtered_rows(
            store, run.id, query.after, query.failed, query.search, query.keeps
        )
        note = ""
        if scanned >= SCAN_MAX and len(page) < PAGE:
            note = f"read {scanned:,} rows for these matches; more may follow"
        return RowsPage(page, None if last is None else {"after": last}, note)
    page = store.rows_page(
        run.id, after=query.after, limit=PAGE, failed=failed, search=query.search
    )
    return RowsPage(page, {"after": page[-1].index} if len(page) == PAGE else None)


def filtered_rows(
    store: RunStore,
    run_id: str,
    after: int | None,
    failed: bool,
    search: str | None,
    keep: Callable[[StoredRow], bool],
) -> tuple[list[StoredRow], int | None, int]:
    """A page of the rows ``keep`` takes, read a batch at a time from ``after``.

    Returns the page, the index the next page starts after (None: no more rows) and how
    many rows were read; stops after :data:`SCAN_MAX` rows (the next page goes on from there).
    """
    page: list[StoredRow] = []
    last, scanned = after, 0
    while len(page) < PAGE and scanned < SCAN_MAX:
        chunk = store.rows_page(
            run_id, after=last, limit=SCAN, failed=True if failed else None, search=search
        )
        for found in chunk:
            last = found.index
            if keep(found):
                page.append(found)
                if len(page) == PAGE:
                    return page, last, scanned + len(chunk)
        scanned += len(chunk)
        if len(chunk) < SCAN:
            return page, None, scanned
    return page, last, scanned


def value_order(store: RunStore, run: StoredRun, query: RowQuery) -> np.ndarray:
    """The indexes of the rows with a value of the metric (and the filters), by value.

    Ascending for ``sort=value``, descending for ``-value``; ties by row index. Worked out
    from the run's column of values (one pass, 8 bytes a row).
    """
    import numpy as np

    columns = store.columns(
        run.id, [query.metric], failed=True if query.failed else None, search=query.search
    )
    values = columns.values[query.metric]
    wanted = np.isfinite(values)
    if query.below is not None:
        wanted &= values < query.below
    if query.low is not None:
        wanted &= values >= query.low
    if query.high is not None:
        wanted &= values <= query.high
    if query.unstable:
        wanted &= columns.unstable[query.metric]
    indexes, values = columns.indexes[wanted], values[wanted]
    keys = values if query.sort == "value" else -values
    order: np.ndarray = indexes[np.lexsort((indexes, keys))]
    return order


def lower_is_better(metric: str) -> bool:
    """Whether lower is better for ``metric`` (latency, cost): shown without a verdict colour."""
    from turneval.compare import metric_directions

    return not metric_directions([metric])[metric]


def row(store: RunStore, run_id: str, index: int) -> StoredRow | None:
    """Row ``index`` of the run, None when it has none."""
    found = store.rows_at(run_id, [index])
    return found[0] if found else None


def row_text(store: RunStore, run_id: str, found: StoredRow, at: Any) -> str:
    """The whole of one text of a row: ``at`` names it (``["record", "judge_reason"]``).

    ``["sample", "user_input", 3, "content"]`` is in the row's sample. A str is given as it
    is, anything else as JSON.

    Raises:
        LookupError: the row has no text there.
    """
    node: Any = {"record": found.record}
    if at[0] == "sample":
        node = {"sample": store.samples(run_id, [found.index]).get(found.index)}
    for step in at:
        if isinstance(node, dict) and isinstance(step, str) and step in node:
            node = node[step]
        elif (
            isinstance(node, list)
            and isinstance(step, int)
            and not isinstance(step, bool)
            and 0 <= step < len(node)
        ):
            node = node[step]
        else:
            raise LookupError(f"row {found.index} of run {run_id[:12]} has no text at {at!r}")
    return node if isinstance(node, str) else json.dumps(node, indent=1, ensure_ascii=False)

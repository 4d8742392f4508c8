"""Labeled rows from labels-file records and the samples they label (a file, or a stored run).

A record is a labels-file line, ``{"index"|"id": ..., "metric": ..., "label": ..., "reason":
...}``, as ``turneval labels export`` writes it; an ``"item"`` key (``"message_4"``) makes it
an item label, whose ``label`` is the item's category (``"irrelevant"``). The records of one
row's items are gathered into one labeled row.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from os import PathLike
from pathlib import Path
from typing import Any

from turneval.calibration._labels import coerce_label
from turneval.calibration._units import LabeledRow
from turneval.errors import ConfigError

__all__ = ["read_label_records", "rows_from_records"]


def read_label_records(path: str | PathLike[str]) -> list[dict[str, Any]]:
    """The records of a labels file (blank lines skipped; ``null`` labels kept as None).

    Raises:
        ConfigError: naming the line, when it is not a JSON object.
    """
    records = []
    source = Path(path)
    for number, line in enumerate(source.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{source.name} line {number}: not JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise ConfigError(f"{source.name} line {number}: expected a JSON object")
        record.setdefault("_where", f"{source.name} line {number}")
        records.append(record)
    return records


def rows_from_records(
    records: Iterable[Mapping[str, Any]],
    samples: Mapping[int, Any],
    metric: str,
    *,
    ids: Mapping[str, int] | None = None,
) -> list[LabeledRow]:
    """The labeled rows of ``metric``: each record's row (by index, or by sample id) and label.

    Records of other metrics and ``null`` labels are left out; a later label of the same row
    (or item) replaces an earlier one.

    Args:
        records: Labels-file records.
        samples: The samples by row index.
        metric: The metric whose labels are read.
        ids: Row index by sample id (records that name an ``id``).

    Raises:
        ConfigError: naming the record, for an unknown row, a row without a sample, or a
            value that is not a label.
    """
    values: dict[int, float] = {}
    items: dict[int, dict[str, str]] = {}
    reasons: dict[int, str] = {}
    for number, record in enumerate(records, start=1):
        where = str(record.get("_where") or f"label {number}")
        if record.get("metric") not in (None, metric) or record.get("label") is None:
            continue
        row = record.get("index")
        if row is None and "id" in record:
            row = (ids or {}).get(str(record["id"]))
            if row is None:
                raise ConfigError(f"{where}: no row has sample id {record['id']!r}")
        if isinstance(row, float) and row.is_integer():
            row = int(row)
        if not isinstance(row, int) or isinstance(row, bool):
            raise ConfigError(f"{where}: needs an integer 'index' or a string 'id' of the row")
        if samples.get(row) is None:
            raise ConfigError(f"{where}: row {row} has no sample to judge again")
        if record.get("item") is not None:
            items.setdefault(row, {})[str(record["item"])] = str(record["label"])
        else:
            values[row] = coerce_label(record["label"], where)
        if record.get("reason"):
            reasons[row] = str(record["reason"])
    both = sorted(set(values) & set(items))
    if both:
        raise ConfigError(f"row {both[0]} of {metric!r} has a row label and item labels")
    return [
        LabeledRow(
            samples[row],
            values.get(row),
            items.get(row, {}),
            reasons.get(row, ""),
            str(row),
        )
        for row in sorted(set(values) | set(items))
    ]

"""Human labels: read from a labels file, a column, a mapping or ``(sample, label)`` pairs.

A label is on the metric's scale: a number, or a word (yes/no, true/false, pass/fail,
CANDIDATE/TIE/BASELINE) read as one. Every error names where the label came from (the file's
line, the row, the labeled example).
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from turneval.errors import ConfigError

if TYPE_CHECKING:
    from turneval.samples import Sample

__all__ = [
    "Label",
    "LabeledExample",
    "as_labels",
    "coerce_label",
    "label_from_record",
    "labeled_examples",
    "load_labels",
]

_WORDS = {
    "yes": 1.0,
    "no": 0.0,
    "true": 1.0,
    "false": 0.0,
    "pass": 1.0,
    "fail": 0.0,
    "candidate": 1.0,
    "tie": 0.5,
    "baseline": 0.0,
}


@dataclass(frozen=True, slots=True)
class Label:
    """One human label: which row (``index`` or sample ``id``), for which metric, which value.

    Attributes:
        row: The row's index (int) or its sample id (``metadata["id"]``, str).
        value: The label on the metric's scale.
        metric: The metric it labels (None: the metric being checked).
        where: Where the label came from (``labels.jsonl line 3``), for error messages.
        reason: The person's reason, if given.
    """

    row: int | str
    value: float
    metric: str | None = None
    where: str = ""
    reason: str = ""


def coerce_label(raw: Any, where: str) -> float:
    """A label as a number on the metric's scale: a number, a bool, or a known word.

    ``where`` names the label in the error (``labels.jsonl line 3``, ``label 4``).

    Raises:
        ConfigError: naming ``where``, for a value that is not a finite score or a known word.
    """
    if isinstance(raw, bool | np.bool_):
        return 1.0 if raw else 0.0
    if isinstance(raw, numbers.Real) and math.isfinite(raw):  # numpy's integers too
        return float(raw)
    if isinstance(raw, str):
        word = raw.strip().lower()
        if word in _WORDS:
            return _WORDS[word]
        try:
            value = float(word)
        except ValueError:
            pass
        else:
            if math.isfinite(value):
                return value
    raise ConfigError(
        f"{where}: label {raw!r} is not a score, yes/no, true/false, pass/fail or "
        "CANDIDATE/TIE/BASELINE"
    )


def load_labels(path: str | PathLike[str]) -> list[Label]:
    """Read a JSONL of ``{"index": 3, "metric": "fluency", "label": 4}`` (or ``"id"``).

    A ``null`` label is no label (the line is skipped), as None in a label column.

    Raises:
        ConfigError: naming the line, when a line is not JSON or lacks ``index``/``id`` or
            ``label``.
    """
    labels = []
    with Path(path).open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{Path(path).name} line {number}"
            try:
                record = json.loads(line.decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise ConfigError(
                    f"{where}: not UTF-8 (byte 0x{line[exc.start]:02x} at offset {exc.start})"
                ) from None
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{where}: not JSON ({exc.msg}, column {exc.colno})") from None
            label = label_from_record(record, where)
            if label is not None:
                labels.append(label)
    return labels


def label_from_record(record: Any, where: str) -> Label | None:
    """The label a labels-file line holds (``{"index"|"id", "metric", "label", "reason"}``).

    None for a ``null`` label (not labeled). ``where`` names the line in errors.

    Raises:
        ConfigError: naming ``where``, when the record lacks ``index``/``id`` or ``label``, or
            the label is not a score or a known word.
    """
    if not isinstance(record, dict):
        raise ConfigError(f"{where}: expected an object with index|id, metric and label")
    if "label" in record and record["label"] is None:
        return None  # null: not labeled (as None in a label column)
    row = record.get("index", record.get("id"))
    if isinstance(row, float) and row.is_integer():
        row = int(row)  # 3.0: pandas writes an index column with gaps as floats
    if isinstance(row, bool) or not isinstance(row, int | str):
        raise ConfigError(f"{where}: needs an integer 'index' or a string 'id' of the row")
    if "label" not in record:
        raise ConfigError(f"{where}: has no 'label'")
    metric = record.get("metric")
    if metric is not None and not isinstance(metric, str):
        raise ConfigError(f"{where}: 'metric' must be a metric name, got {metric!r}")
    value = coerce_label(record["label"], where)
    return Label(row, value, metric, where, str(record.get("reason") or ""))


def _missing(value: Any) -> bool:
    """An unlabeled cell: None, NaN, or pandas' NA (a nullable column's missing value)."""
    if value is None or type(value).__name__ == "NAType":
        return True
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isnan(value)


def _row_key(key: Any) -> int | str:
    """A mapping's key: a row index (numpy's integers too, as a DataFrame's index gives)."""
    if isinstance(key, numbers.Integral) and not isinstance(key, bool | np.bool_):
        return int(key)
    return key  # type: ignore[no-any-return]


def as_labels(labels: Any, rows: int) -> list[Label]:
    """Labels from any form :func:`~turneval.calibration.agreement` takes, for ``rows`` rows.

    A column (list, array or pandas Series: one value, or None/NaN/NA for unlabeled, per
    row), a mapping from row index or sample id to a value, a list of :class:`Label`, or the
    path of a labels file (:func:`load_labels`).

    Raises:
        ConfigError: a column of the wrong length, a value that is not a label, or another
            type.
    """
    if isinstance(labels, str | PathLike):
        return load_labels(labels)
    if isinstance(labels, Mapping):
        return [
            Label(
                _row_key(key),
                coerce_label(value, f"label for row {_row_key(key)!r}"),
                where=f"label for row {_row_key(key)!r}",
            )
            for key, value in labels.items()
            if value is not None
        ]
    if not isinstance(labels, Sequence) and hasattr(labels, "__len__"):
        labels = list(labels)  # a pandas Series or numpy array: a column
    if isinstance(labels, Sequence):
        if labels and all(isinstance(item, Label) for item in labels):
            return list(labels)
        if len(labels) != rows:
            raise ConfigError(
                f"a label column needs one label (or None) per row: got {len(labels)} labels "
                f"for {rows} rows"
            )
        return [
            Label(index, coerce_label(value, f"label {index}"), where=f"label {index}")
            for index, value in enumerate(labels)
            if not _missing(value)
        ]  # None, NaN or pandas' NA: not labeled (a pandas column's missing values)
    raise ConfigError(
        "labels must be a column (one per row), a mapping from row index or sample id, a list "
        f"of Label, or a JSONL path; got {type(labels).__name__}"
    )


@dataclass(frozen=True)
class LabeledExample:
    """A sample with its human label, an example :func:`~turneval.calibration.align` learns from.

    Attributes:
        sample: The sample.
        value: Its label on the metric's scale.
        reason: The person's reason, if given (shown to the judge with the example).
    """

    sample: Sample
    value: float
    reason: str = ""


def labeled_examples(labeled: Sequence[Any]) -> list[LabeledExample]:
    """``(sample, label)`` or ``(sample, label, reason)`` tuples read as labeled examples.

    Raises:
        ConfigError: naming the example's position, for another shape, a non-sample or a
            value that is not a label.
    """
    from turneval.samples import MultiTurnSample, SingleTurnSample

    items = []
    for position, item in enumerate(labeled):
        if isinstance(item, tuple) and len(item) in (2, 3):
            sample, raw = item[0], item[1]
            reason = str(item[2]) if len(item) == 3 else ""
        else:
            raise ConfigError(
                f"labeled example {position}: expected (sample, label) or (sample, label, reason)"
            )
        if not isinstance(sample, SingleTurnSample | MultiTurnSample):
            raise ConfigError(
                f"labeled example {position}: expected a sample, got {type(sample).__name__}"
            )
        items.append(
            LabeledExample(sample, coerce_label(raw, f"labeled example {position}"), reason)
        )
    return items

"""Rows of a Parquet file or a Ray Dataset as a JSONL file of samples, in their order.

The Ray engine reads Parquet (a file or a folder of files) and Ray Datasets of sample rows:
they are written to ``OUT/input.jsonl`` first, in their order, so that rows keep line numbers
(resume, the report and errors name them) and the run is scored as a JSONL run is.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from turneval._sample_lines import UNDECODABLE_ROW
from turneval.errors import ConfigError
from turneval.stream._sources import Source

__all__ = ["RayRows", "is_parquet", "write_rows"]


@dataclass(frozen=True, init=False)
class RayRows(Source):
    """Sample rows only the Ray engine reads: a Parquet file or folder, or a Ray Dataset.

    ``path`` is the Parquet path (for a dataset: ``<the dataset>``); ``rows`` the dataset.
    """

    rows: Any = None
    traces: ClassVar[bool] = False

    def __init__(self, path: Path, rows: Any = None) -> None:
        """Rows at ``path`` (Parquet), or the dataset ``rows``."""
        object.__setattr__(self, "path", path)
        object.__setattr__(self, "rows", rows)

    @property
    def label(self) -> str:
        """How errors name the input: the path, or ``the dataset``."""
        return "the dataset" if self.rows is not None else str(self.path)

    def check(self) -> None:
        """Nothing to check here: the Ray engine checked the path when it made this source."""

    def chunks(self, *args: Any, **kwargs: Any) -> Any:
        """Not readable as chunks: the Ray engine writes the rows as JSONL first."""
        raise ConfigError(
            f"{self.label}: Parquet files and Ray Datasets are read by the Ray engine only "
            "(engine=Ray(...))"
        )

    def read(self, ray: Any) -> Any:
        """The rows as a Ray Dataset."""
        return self.rows if self.rows is not None else ray.data.read_parquet(str(self.path))


def is_parquet(path: Path) -> bool:
    """A Parquet file, or a folder of them."""
    if path.is_dir():
        return any(path.glob("*.parquet"))
    return path.suffix.lower() in {".parquet", ".pq"}


def write_rows(dataset: Any, target: Path, source: str = "the dataset") -> Path:
    """A Ray Dataset of sample rows as ``target/input.jsonl``, in the dataset's order.

    A row with a text cell that is not UTF-8 (Parquet does not check) is written as an
    undecodable-row marker: its line becomes one error row naming ``source``, the row and the
    column, and the other rows are scored.
    """
    path = target / "input.jsonl"
    number = 0
    with path.open("w", encoding="utf-8") as handle:
        for batch in dataset.iter_batches(batch_size=None, batch_format="pyarrow"):
            try:
                records = batch.to_pylist()
            except UnicodeDecodeError:  # a bad cell: the batch row by row, each row alone
                records = [_row_or_problem(batch.slice(at, 1)) for at in range(batch.num_rows)]
            for record in records:
                number += 1
                if isinstance(record, str):
                    record = {UNDECODABLE_ROW: f"row {number} of {source}: {record}"}
                handle.write(json.dumps(_plain(record), ensure_ascii=False, default=str) + "\n")
    return path


def _row_or_problem(row: Any) -> dict[str, Any] | str:
    """The one row of the Arrow table ``row`` as a dict, or which cell is not UTF-8."""
    try:
        record: dict[str, Any] = row.to_pylist()[0]
        return record
    except UnicodeDecodeError:
        pass
    for column in row.column_names:
        try:
            row.column(column).to_pylist()
        except UnicodeDecodeError as exc:
            where = f"byte 0x{exc.object[exc.start]:02x} at byte offset {exc.start}"
            return f"column {column!r} is not valid UTF-8 ({where})"
    return "a cell is not valid UTF-8"  # pragma: no cover - a cell that fails once fails again


def _plain(value: Any) -> Any:
    """Arrow/numpy values of a Ray row as plain JSON values (None fields dropped)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if v is not None}
    if hasattr(value, "tolist"):
        return _plain(value.tolist())
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value

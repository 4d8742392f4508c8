"""A stored run's rows: read back in pages, by index, as records or as narrow columns.

:class:`RowsPart` is the part of :class:`turneval.store.RunStore` that reads the ``rows``
table (a :class:`~turneval.store.RunRecorder` writes it): keyset pages with the viewer's
filters, samples, and the numpy columns a comparison or a histogram needs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from turneval.errors import ConfigError
from turneval.store._engine import loads
from turneval.store._runs import RunsPart


@dataclass(frozen=True)
class StoredRow:
    """One stored row of a run (its sample is read apart: :meth:`RunStore.samples`).

    Attributes:
        index: The row's index in the run.
        line: Its 1-based input line (None for samples given in memory).
        sample_id: Its sample's id (``metadata["id"]``), if any.
        failed: Whether a metric (or the agent) failed on it.
        record: The results.jsonl row.
    """

    index: int
    line: int | None
    sample_id: str | None
    failed: bool
    record: dict[str, Any]


@dataclass(frozen=True)
class RunColumns:
    """Narrow columns of a run's rows in index order (:meth:`RunStore.columns`).

    Attributes:
        indexes: Each row's index (int64 array).
        sample_ids: Each row's sample id (None without one).
        scenario_ids: Each simulated conversation's scenario id (None for other rows).
        trials: Each simulated conversation's trial number (None for other rows): with the
            scenario id, what pairs the row with another run's (``scenario#trial``).
        failed: Whether a metric (or the agent) failed on the row (bool array).
        values: Per metric, each row's value (float array; NaN where it has none, or where
            it is not a number).
        errors: Per metric, whether the row holds its error instead of a value (bool array).
        unstable: Per metric, whether the row's repeated judge votes were marked unstable.
        vote_ranges: Per metric, the lowest and highest vote of each row (NaN without votes).
        not_numbers: Per metric, how many rows hold a value that is not a number.
    """

    indexes: Any
    sample_ids: list[str | None]
    scenario_ids: list[str | None]
    trials: list[int | None]
    failed: Any
    values: dict[str, Any]
    errors: dict[str, Any]
    unstable: dict[str, Any]
    vote_ranges: dict[str, tuple[Any, Any]]
    not_numbers: dict[str, int]

    def __len__(self) -> int:
        """The number of rows."""
        return len(self.sample_ids)


_FLOATS = ("values", "lows", "highs")
"""The float columns of :meth:`RunStore.columns` (the others are bool, and the indexes)."""


def _sample(text: str) -> Any:
    """A stored sample: its JSON, or the input line as read when it was not JSON (a str)."""
    try:
        return loads(text)
    except ValueError:  # orjson's and the stdlib's decode errors are ValueErrors
        pass
    try:  # a lenient run's sample (NaN): the stdlib reads it
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _number_or_nan(value: Any) -> float | None:
    """A metric's stored value as a results file is read: NaN for none, None if not a number.

    As :func:`turneval.results_codec.decode` reads it: a number, or text or a bool that
    ``float()`` takes.
    """
    if value is None:
        return float("nan")
    if _is_number(value):
        return float(value)
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        return None


def _trial(value: Any) -> int | None:
    """A simulated conversation's stored trial number, as ``decode`` reads it (None: 0).

    None when it is no number (``decode`` refuses such a row; a comparison then pairs the
    row by position or not at all).
    """
    if value is None:
        return 0
    try:
        return int(value if _is_number(value) else float(value))
    except (TypeError, ValueError, OverflowError):
        return None


def _vote_record(details: Any) -> dict[str, Any] | None:
    """The ``repeats`` record of a judged metric's details, if it has one."""
    votes = details.get("repeats") if isinstance(details, dict) else None
    return votes if isinstance(votes, dict) else None


class RowsPart(RunsPart):
    """The rows of a store's runs, read back."""

    def stored_indexes(self, run_id: str) -> set[int]:
        """The row indexes a run has in the store (what a restarted writer need not redo)."""
        from sqlalchemy import select

        from turneval.store._schema import rows

        with self.engine.connect() as connection:
            found = connection.execute(select(rows.c.idx).where(rows.c.run_id == run_id))
            return {int(index) for index in found.scalars()}

    def records(self, run_id: str, *, batch: int = 1000) -> Iterator[dict[str, Any]]:
        """The run's rows as results.jsonl records, in index order (read in batches)."""
        for text in self.record_lines(run_id, batch=batch):
            yield loads(text)

    def record_lines(self, run_id: str, *, batch: int = 1000) -> Iterator[str]:
        """The run's rows as results.jsonl lines (no newline), in index order, as written."""
        from sqlalchemy import select

        from turneval.store._schema import rows

        with self.engine.connect() as connection:
            full = self._resolve(connection, run_id)
        after = -(2**31)
        while True:  # keyset pagination: each page a short read, memory bounded
            with self.engine.connect() as connection:
                page = connection.execute(
                    select(rows.c.idx, rows.c.record)
                    .where(rows.c.run_id == full, rows.c.idx > after)
                    .order_by(rows.c.idx)
                    .limit(batch)
                ).all()
            for _, record in page:
                yield record
            if len(page) < batch:
                return
            after = page[-1][0]

    def rows_page(
        self,
        run_id: str,
        *,
        after: int | None = None,
        limit: int = 50,
        failed: bool | None = None,
        search: str | None = None,
    ) -> list[StoredRow]:
        """One page of a run's rows in index order, from the row after index ``after``.

        Keyset pagination (the next page starts after the last index of this one), so any page
        of a large run costs the same. ``failed`` keeps only failed (or only clean) rows;
        ``search`` only rows whose sample contains the text (case-sensitive on PostgreSQL).

        Raises:
            ConfigError: the run is unknown, or ``limit`` is not between 1 and 1000.
        """
        from sqlalchemy import select

        from turneval.store._schema import rows

        if not 1 <= limit <= 1000:
            raise ConfigError(f"limit must be between 1 and 1000, got {limit}")
        with self.engine.connect() as connection:
            full = self._resolve(connection, run_id)
            query = select(
                rows.c.idx, rows.c.line, rows.c.sample_id, rows.c.failed, rows.c.record
            ).where(rows.c.run_id == full)
            if after is not None:
                query = query.where(rows.c.idx > after)
            if failed is not None:
                query = query.where(rows.c.failed.is_(failed))
            if search:
                query = query.where(rows.c.sample.contains(search, autoescape=True))
            found = connection.execute(query.order_by(rows.c.idx).limit(limit)).all()
        return [
            StoredRow(int(idx), line, sample_id, bool(is_failed), loads(record))
            for idx, line, sample_id, is_failed, record in found
        ]

    def samples(self, run_id: str, indexes: Iterable[int]) -> dict[int, Any]:
        """The stored samples (parsed JSON) of some rows of a run, by row index.

        A sample is a JSON object (None: the run did not keep it); a row whose input line
        was not JSON (a failed row of a streamed file) has that line as it was read, a str.
        """
        from sqlalchemy import select

        from turneval.store._schema import rows

        wanted = sorted(set(indexes))
        found: dict[int, Any] = {}
        with self.engine.connect() as connection:
            full = self._resolve(connection, run_id)
            for start in range(0, len(wanted), 500):
                part = wanted[start : start + 500]
                for idx, sample in connection.execute(
                    select(rows.c.idx, rows.c.sample).where(
                        rows.c.run_id == full, rows.c.idx.in_(part)
                    )
                ):
                    found[int(idx)] = None if sample is None else _sample(sample)
        return found

    def rows_at(self, run_id: str, indexes: Sequence[int]) -> list[StoredRow]:
        """Some rows of a run by index, in the order asked (an index it lacks is left out).

        Raises:
            ConfigError: the run is unknown, or more than 1000 rows are asked for.
        """
        from sqlalchemy import select

        from turneval.store._schema import rows

        if len(indexes) > 1000:
            raise ConfigError(f"at most 1000 rows at a time, got {len(indexes)}")
        with self.engine.connect() as connection:
            full = self._resolve(connection, run_id)
            found = {
                int(idx): StoredRow(int(idx), line, sample_id, bool(failed), loads(record))
                for idx, line, sample_id, failed, record in connection.execute(
                    select(
                        rows.c.idx, rows.c.line, rows.c.sample_id, rows.c.failed, rows.c.record
                    ).where(rows.c.run_id == full, rows.c.idx.in_(sorted(set(indexes))))
                )
            }
        return [found[index] for index in indexes if index in found]

    def columns(
        self,
        run_id: str,
        metrics: Sequence[str],
        *,
        failed: bool | None = None,
        search: str | None = None,
        limit: int | None = None,
        batch: int = 1000,
    ) -> RunColumns:
        """Narrow columns of a run's rows: what a comparison, a histogram or a sort needs.

        The rows are read in keyset batches and only these fields kept (numpy arrays: 8 bytes
        a row and metric), so a run of any size costs one pass and no more memory than its
        columns. ``failed`` and ``search`` keep the rows :meth:`rows_page` would; ``limit``
        reads the first rows only.

        Raises:
            ConfigError: the run is unknown.
        """
        import numpy as np
        from sqlalchemy import select

        from turneval.results_codec import TRIAL_KEYS
        from turneval.store._schema import rows

        with self.engine.connect() as connection:
            full = self._resolve(connection, run_id)
        sample_ids: list[str | None] = []
        scenarios: list[str | None] = []
        trials: list[int | None] = []
        # each batch's fields become arrays at once: memory is the columns and one batch
        chunks: dict[str, list[Any]] = {"indexes": [], "failed": []}
        for name in metrics:
            for field_ in ("values", "errors", "unstable", "lows", "highs"):
                chunks[f"{field_}:{name}"] = []
        not_numbers = dict.fromkeys(metrics, 0)
        nan = float("nan")
        scenario = TRIAL_KEYS[0]  # the trial's scenario id column
        after, count = -(2**31), 0
        while True:
            query = select(rows.c.idx, rows.c.sample_id, rows.c.failed, rows.c.record).where(
                rows.c.run_id == full, rows.c.idx > after
            )
            if failed is not None:
                query = query.where(rows.c.failed.is_(failed))
            if search:
                query = query.where(rows.c.sample.contains(search, autoescape=True))
            size = batch if limit is None else min(batch, limit - count)
            with self.engine.connect() as connection:
                page = connection.execute(query.order_by(rows.c.idx).limit(size)).all()
            fields: dict[str, list[Any]] = {key: [] for key in chunks}
            for idx, sample_id, is_failed, text in page:
                record = loads(text)
                if not isinstance(record, dict):
                    record = {}
                fields["indexes"].append(int(idx))
                sample_ids.append(sample_id)
                # a simulated conversation's row (its trial's columns), as decode reads it
                scenarios.append(str(record[scenario]) if scenario in record else None)
                trials.append(_trial(record.get(TRIAL_KEYS[1])) if scenario in record else None)
                fields["failed"].append(bool(is_failed))
                for name in metrics:
                    value = _number_or_nan(record.get(name))
                    if value is None:
                        not_numbers[name] += 1
                        value = nan
                    fields[f"values:{name}"].append(value)
                    fields[f"errors:{name}"].append(
                        record.get(name) is None and bool(record.get(f"{name}_error"))
                    )
                    votes = _vote_record(record.get(f"{name}_details"))
                    fields[f"unstable:{name}"].append(
                        bool(votes.get("unstable")) if votes else False
                    )
                    low, high = (  # as turneval.aggregate.unstable reads a vote record
                        (float(votes["min"]), float(votes["max"]))
                        if votes
                        and isinstance(votes.get("min"), (int, float))
                        and isinstance(votes.get("max"), (int, float))
                        else (nan, nan)
                    )
                    fields[f"lows:{name}"].append(low)
                    fields[f"highs:{name}"].append(high)
            for key, found in fields.items():
                kind = key.partition(":")[0]
                dtype = np.int64 if kind == "indexes" else float if kind in _FLOATS else bool
                chunks[key].append(np.asarray(found, dtype=dtype))
            count += len(page)
            if len(page) < size or (limit is not None and count >= limit):
                break
            after = page[-1][0]

        def column(key: str) -> Any:
            return np.concatenate(chunks[key])

        return RunColumns(
            indexes=column("indexes"),
            sample_ids=sample_ids,
            scenario_ids=scenarios,
            trials=trials,
            failed=column("failed"),
            values={name: column(f"values:{name}") for name in metrics},
            errors={name: column(f"errors:{name}") for name in metrics},
            unstable={name: column(f"unstable:{name}") for name in metrics},
            vote_ranges={
                name: (column(f"lows:{name}"), column(f"highs:{name}")) for name in metrics
            },
            not_numbers=not_numbers,
        )

    def result(self, run_id: str) -> Any:
        """The run's rows as an :class:`~turneval.results.EvaluationResult` (no samples).

        With its manifest (:attr:`StoredRun.manifest`: its metrics rebuilt where they can be).
        """
        from turneval.results import EvaluationResult

        run = self.run(run_id)
        return EvaluationResult.from_records(self.records(run.id), manifest=run.manifest)

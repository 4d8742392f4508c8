"""Human labels kept beside a run's rows, and the judge configurations fitted to them.

:class:`LabelsPart` is the part of :class:`turneval.store.RunStore` that keeps the ``labels``
table (given in the viewer, exported for ``turneval calibrate``) and the judge configurations
``turneval optimize`` keeps (``_judge_configs``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turneval.errors import ConfigError
from turneval.store._engine import StoreEngine, aware, now
from turneval.store._judge_configs import StoredJudgeConfig

if TYPE_CHECKING:
    from sqlalchemy.engine import RowMapping


@dataclass(frozen=True)
class StoredLabel:
    """A human label kept in the store.

    Attributes:
        id: Its id in the store.
        run_id: The run it was given in (None: it labels the sample id in every run).
        row_index: The labeled row's index in that run (or None).
        sample_id: The labeled sample's id (or None).
        metric: The metric it labels.
        label: The label: a number, a bool or a word (``pass``, ``yes``, ...).
        note: The annotator's note.
        annotator: Who gave it.
        created: When (UTC).
    """

    id: int
    run_id: str | None
    row_index: int | None
    sample_id: str | None
    metric: str
    label: Any
    note: str | None
    annotator: str | None
    created: datetime


def _stored_label(record: RowMapping) -> StoredLabel:
    return StoredLabel(
        id=int(record["id"]),
        run_id=record["run_id"],
        row_index=record["row_index"],
        sample_id=record["sample_id"],
        metric=record["metric"],
        label=json.loads(record["label"]),
        note=record["note"],
        annotator=record["annotator"],
        created=aware(record["created"]) or now(),
    )


class LabelsPart(StoreEngine):
    """The human labels of a store's rows, and the judge configurations made from them."""

    def add_label(
        self,
        *,
        metric: str,
        label: Any,
        run_id: str | None = None,
        row_index: int | None = None,
        sample_id: str | None = None,
        note: str | None = None,
        annotator: str | None = None,
    ) -> int:
        """Keep a human label of one row (by run and index, or by sample id); returns its id.

        A later label of the same row and metric replaces the earlier one when exported.

        Raises:
            ConfigError: neither a row index (with its run) nor a sample id is given, or the
                run is unknown.
        """
        from sqlalchemy import insert

        from turneval.store._schema import labels

        if sample_id is None and (row_index is None or run_id is None):
            raise ConfigError("a label needs a sample_id, or a run_id and a row_index")
        with self.writing() as connection:
            full = None if run_id is None else self._resolve(connection, run_id)
            added = connection.execute(
                insert(labels).values(
                    run_id=full,
                    row_index=row_index,
                    sample_id=sample_id,
                    metric=metric,
                    label=json.dumps(label),
                    note=note,
                    annotator=annotator,
                    created=now(),
                )
            )
            key = added.inserted_primary_key
            return int(key[0]) if key is not None else 0

    def latest_label(self, run_id: str, metric: str, row_index: int) -> StoredLabel | None:
        """The latest label of one row of a run for ``metric`` (None: not labeled).

        Found through the index on run, metric and row: one lookup, however many labels the
        run has.
        """
        from sqlalchemy import select

        from turneval.store._schema import labels

        with self.engine.connect() as connection:
            full = self._resolve(connection, run_id)
            record = (
                connection.execute(
                    select(labels)
                    .where(
                        labels.c.run_id == full,
                        labels.c.metric == metric,
                        labels.c.row_index == row_index,
                    )
                    .order_by(labels.c.id.desc())
                    .limit(1)
                )
                .mappings()
                .first()
            )
        return None if record is None else _stored_label(record)

    def row_labels(self, run_id: str, metric: str, *, below: int | None = None) -> dict[int, Any]:
        """Each labeled row's latest label of ``metric`` in a run, by row index.

        ``below`` keeps the rows of lower index only. One pass over the run's labels of that
        metric (the index on run, metric and row), none of the others.
        """
        from sqlalchemy import select

        from turneval.store._schema import labels

        with self.engine.connect() as connection:
            full = self._resolve(connection, run_id)
            query = select(labels.c.row_index, labels.c.label).where(
                labels.c.run_id == full,
                labels.c.metric == metric,
                labels.c.row_index.is_not(None),
            )
            if below is not None:
                query = query.where(labels.c.row_index < below)
            latest: dict[int, Any] = {}
            for index, label in connection.execute(query.order_by(labels.c.id)):
                latest[int(index)] = json.loads(label)
        return latest

    # -- judge configurations (turneval optimize) -------------------------------------------

    def add_judge_config(
        self, config: dict[str, Any], *, run_id: str | None = None, report: Any = None
    ) -> int:
        """Keep a judge configuration (its file's content) beside a run; returns its id.

        ``config`` needs its ``metric`` and ``digest``; ``report`` is the optimisation's
        figures (a dict), if any.
        """
        from turneval.store._judge_configs import add_config

        with self.writing() as connection:
            full = None if run_id is None else self._resolve(connection, run_id)
            return add_config(connection, full, config, report)

    def judge_configs(
        self, *, run_id: str | None = None, metric: str | None = None
    ) -> list[StoredJudgeConfig]:
        """The kept judge configurations, newest first: of a run, of a metric (or all)."""
        from turneval.store._judge_configs import list_configs

        with self.engine.connect() as connection:
            full = None if run_id is None else self._resolve(connection, run_id)
            return list_configs(connection, full, metric)

    def judge_config(self, config_id: int) -> StoredJudgeConfig:
        """One kept judge configuration, by its id (ConfigError: none has it)."""
        from turneval.store._judge_configs import find_config

        with self.engine.connect() as connection:
            return find_config(connection, config_id)

    def labels(self, *, run_id: str | None = None, metric: str | None = None) -> list[StoredLabel]:
        """The stored labels, oldest first: of a run (and the sample ids it holds), a metric."""
        from sqlalchemy import or_, select

        from turneval.store._schema import labels, rows

        with self.engine.connect() as connection:
            query = select(labels).order_by(labels.c.id)
            if run_id is not None:
                full = self._resolve(connection, run_id)
                ids = select(rows.c.sample_id).where(
                    rows.c.run_id == full, rows.c.sample_id.is_not(None)
                )
                query = query.where(
                    or_(
                        labels.c.run_id == full,
                        labels.c.run_id.is_(None) & labels.c.sample_id.in_(ids),
                    )
                )
            if metric is not None:
                query = query.where(labels.c.metric == metric)
            return [_stored_label(record) for record in connection.execute(query).mappings()]

    def label_records(self, run_id: str, metric: str | None = None) -> list[dict[str, Any]]:
        """A run's labels as the lines of a labels file ``turneval calibrate`` reads.

        One ``{"index"|"id": ..., "metric": ..., "label": ..., "reason": note}`` per labeled
        row and metric (the latest label wins), by index where the label names one, in the
        order the rows were first labeled.
        """
        latest: dict[tuple[Any, str], dict[str, Any]] = {}
        for item in self.labels(run_id=run_id, metric=metric):
            key: tuple[Any, str]
            if item.row_index is not None:
                record: dict[str, Any] = {"index": item.row_index}
                key = (("index", item.row_index), item.metric)
            else:
                record = {"id": item.sample_id}
                key = (("id", item.sample_id), item.metric)
            record.update(metric=item.metric, label=item.label)
            if item.note:
                record["reason"] = item.note
            latest[key] = record  # the latest label, where the row was first labeled
        return list(latest.values())

    def export_labels(
        self, run_id: str, out: str | os.PathLike[str], *, metric: str | None = None
    ) -> int:
        """Write a run's labels as the JSONL file ``turneval calibrate`` takes; returns how many."""
        records = self.label_records(run_id, metric)
        target = Path(out)
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("w", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps(record) + "\n")
        return len(records)

"""A stored run's metadata: recorded when it starts, listed, filtered, renamed, deleted.

:class:`RunsPart` is the part of :class:`turneval.store.RunStore` that keeps the ``runs`` table
(what a run was started with, its status and summary); its rows are ``_rows``', written
by a :class:`~turneval.store.RunRecorder`.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from turneval._version import VERSION
from turneval.manifest import DatasetSpec, JudgeSpec, MetricSpec, RunManifest
from turneval.store._engine import StoreEngine, aware, now
from turneval.store._recorder import RunRecorder

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, RowMapping

    from turneval.store._store import RunStore


@dataclass(frozen=True)
class StoredRun:
    """A run as the store keeps it (without its rows).

    Attributes:
        id: The run's id (32 hex digits; commands take any unique prefix).
        name: A name for people (the input file's, or the front end's).
        created: When the run started (UTC).
        finished: When it ended (None while running).
        status: ``running``, ``finished``, ``failed`` or ``interrupted``.
        turneval_version: The turneval that ran it.
        git_commit: The commit of the repository it ran in (None outside one).
        dataset_path: The input file (None for samples given in memory).
        dataset_digest: The input file's SHA-256 (None when unknown).
        metrics: Each metric's ``name``, ``class`` and ``config`` (its fields).
        judge_model: The default judge's model name (None: no judge).
        summary: The run's summary.json document (None until it ends).
        out_dir: The run folder a streamed run writes (a resumed run continues this one).
        error: Why it failed or stopped.
        rows: How many rows it holds.
    """

    id: str
    name: str
    created: datetime
    finished: datetime | None
    status: str
    turneval_version: str
    git_commit: str | None
    dataset_path: str | None
    dataset_digest: str | None
    metrics: list[dict[str, Any]]
    judge_model: str | None
    summary: dict[str, Any] | None
    out_dir: str | None
    error: str | None
    rows: int

    @property
    def metric_names(self) -> list[str]:
        """The names of the run's metrics, in order."""
        return [str(metric["name"]) for metric in self.metrics]

    @property
    def manifest(self) -> RunManifest:
        """What the run was started with, as the store keeps it.

        The judge's model (not its server), the input's path and digest (the whole file's:
        the dataset version the run read, whose name and version the store knows when it
        keeps that content).
        """
        digest = self.dataset_digest
        return RunManifest(
            [MetricSpec.from_dict(metric, f"run {self.id}") for metric in self.metrics],
            JudgeSpec(self.judge_model, base_url_recorded=False),
            None
            if self.dataset_path is None and digest is None
            else DatasetSpec(
                self.dataset_path,
                digest,
                version=None
                if digest is None
                else {"digest": digest, "name": None, "version": None},
            ),
            self.turneval_version,
        )


def _git_commit() -> str | None:
    """The commit checked out in the working directory's repository (None outside one)."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and commit else None


class RunsPart(StoreEngine):
    """The runs of a store: their metadata (the rows are ``RowsPart``'s)."""

    def start_run(
        self,
        *,
        name: str,
        metrics: Sequence[Any] = (),
        llm: Any = None,
        dataset_path: str | os.PathLike[str] | None = None,
        dataset_digest: str | None = None,
        out_dir: str | os.PathLike[str] | None = None,
        resume: bool = False,
        details: bool = True,
        configs: list[dict[str, Any]] | None = None,
        manifest: RunManifest | None = None,
    ) -> RunRecorder:
        """Record a new run (status ``running``) and return the writer of its rows.

        With ``resume`` and an ``out_dir``, the newest stored run of that folder is continued
        instead (status back to ``running``); a new one is recorded when there is none. The
        run's metrics and judge are those of ``manifest`` (its
        :class:`~turneval.manifest.RunManifest`), else of ``metrics`` and ``llm``
        (``configs``: the metrics as recorded elsewhere, deprecated).
        """
        from sqlalchemy import insert, select, update

        from turneval.store._schema import runs

        if manifest is None:
            manifest = RunManifest.of(metrics, llm)
            if configs is not None:
                manifest.metrics = [MetricSpec.from_dict(config) for config in configs]
        folder = str(Path(out_dir).resolve()) if out_dir is not None else None
        names = manifest.metric_names
        with self.writing() as connection:
            if resume and folder is not None:
                found = connection.execute(
                    select(runs.c.id)
                    .where(runs.c.out_dir == folder)
                    .order_by(runs.c.created.desc())
                    .limit(1)
                ).scalar()
                if found is not None:
                    connection.execute(
                        update(runs)
                        .where(runs.c.id == found)
                        .values(status="running", finished=None, error=None, row_count=None)
                    )
                    return RunRecorder(cast("RunStore", self), str(found), names, details=details)
            run_id = uuid.uuid4().hex
            connection.execute(
                insert(runs).values(
                    id=run_id,
                    name=name,
                    created=now(),
                    turneval_version=VERSION,
                    git_commit=_git_commit(),
                    dataset_path=None if dataset_path is None else os.fspath(dataset_path),
                    dataset_digest=dataset_digest,
                    metrics=json.dumps([metric.to_dict() for metric in manifest.metrics]),
                    judge_model=manifest.judge.model,
                    status="running",
                    out_dir=folder,
                )
            )
        return RunRecorder(cast("RunStore", self), run_id, names, details=details)

    def run(self, run_id: str) -> StoredRun:
        """One run, by its id or a unique prefix of it.

        Raises:
            ConfigError: no run (or several) has that id.
        """
        from sqlalchemy import select

        from turneval.store._schema import runs

        with self.engine.connect() as connection:
            full = self._resolve(connection, run_id)
            record = connection.execute(select(runs).where(runs.c.id == full)).mappings().one()
            return self._stored_run(connection, record)

    def runs(
        self,
        *,
        limit: int | None = None,
        offset: int = 0,
        text: str | None = None,
        dataset: str | None = None,
        metric: str | None = None,
        judge: str | None = None,
        since: date | None = None,
        until: date | None = None,
    ) -> list[StoredRun]:
        """The stored runs, newest first; ``limit`` of them from the ``offset``-th, filtered.

        Args:
            limit: At most this many (None: all).
            offset: Skip this many first (the runs of earlier pages).
            text: Only runs whose id or name holds this text (any case).
            dataset: Only runs whose input path holds this text (any case).
            metric: Only runs with a metric of this name.
            judge: Only runs whose judge model's name holds this text (any case).
            since: Only runs started on this day (UTC) or later.
            until: Only runs started on this day (UTC) or earlier.
        """
        from sqlalchemy import select

        from turneval.store._schema import runs

        query = self._filtered_runs(
            select(runs), text, dataset, metric, judge, since, until
        ).order_by(runs.c.created.desc(), runs.c.id)
        if metric is None:  # the metric filter is checked below: the others page in SQL
            query = query.offset(offset).limit(limit)
        with self.engine.connect() as connection:
            found = []
            skipped = 0
            for record in connection.execute(query).mappings():
                if metric is not None:
                    names = {str(m.get("name")) for m in json.loads(record["metrics"])}
                    if metric not in names:
                        continue
                    if skipped < offset:
                        skipped += 1
                        continue
                found.append(self._stored_run(connection, record))
                if limit is not None and len(found) >= limit:
                    break
            return found

    def count_runs(
        self,
        *,
        text: str | None = None,
        dataset: str | None = None,
        metric: str | None = None,
        judge: str | None = None,
        since: date | None = None,
        until: date | None = None,
    ) -> int:
        """How many stored runs :meth:`runs` finds with these filters (and no limit)."""
        from sqlalchemy import func, select

        from turneval.store._schema import runs

        with self.engine.connect() as connection:
            if metric is None:
                query = self._filtered_runs(
                    select(func.count()).select_from(runs), text, dataset, None, judge, since, until
                )
                return int(connection.execute(query).scalar_one())
            query = self._filtered_runs(
                select(runs.c.metrics), text, dataset, metric, judge, since, until
            )
            return sum(
                metric in {str(m.get("name")) for m in json.loads(listed)}
                for listed in connection.execute(query).scalars()
            )

    @staticmethod
    def _filtered_runs(
        query: Any,
        text: str | None,
        dataset: str | None,
        metric: str | None,
        judge: str | None,
        since: date | None,
        until: date | None,
    ) -> Any:
        """``query`` (over ``runs``) with the filters of :meth:`runs` that SQL applies.

        The metric filter narrows to runs whose metrics' JSON holds the name (checked exactly
        by the caller); text filters ignore case.
        """
        from datetime import time, timedelta

        from sqlalchemy import func, or_

        from turneval.store._schema import runs

        def holds(column: Any, words: str) -> Any:
            return func.lower(column).contains(words.lower(), autoescape=True)

        if text:
            query = query.where(or_(holds(runs.c.id, text), holds(runs.c.name, text)))
        if dataset:
            query = query.where(holds(runs.c.dataset_path, dataset))
        if judge:
            query = query.where(holds(runs.c.judge_model, judge))
        if metric:
            query = query.where(runs.c.metrics.contains(json.dumps(metric), autoescape=True))
        if since is not None:
            query = query.where(runs.c.created >= datetime.combine(since, time(), timezone.utc))
        if until is not None:
            end = datetime.combine(until + timedelta(days=1), time(), timezone.utc)
            query = query.where(runs.c.created < end)
        return query

    def _stored_run(self, connection: Connection, record: RowMapping) -> StoredRun:
        from sqlalchemy import func, select

        from turneval.store._schema import rows

        count = record.get("row_count")
        if count is None:  # running (or ended before revision 0006 counted it): counted now
            count = connection.execute(
                select(func.count()).select_from(rows).where(rows.c.run_id == record["id"])
            ).scalar_one()
        return StoredRun(
            id=record["id"],
            name=record["name"],
            created=aware(record["created"]) or now(),
            finished=aware(record["finished"]),
            status=record["status"],
            turneval_version=record["turneval_version"],
            git_commit=record["git_commit"],
            dataset_path=record["dataset_path"],
            dataset_digest=record["dataset_digest"],
            metrics=json.loads(record["metrics"]),
            judge_model=record["judge_model"],
            summary=None if record["summary"] is None else json.loads(record["summary"]),
            out_dir=record["out_dir"],
            error=record["error"],
            rows=int(count),
        )

    def rename_run(self, run_id: str, name: str) -> None:
        """Give a run another name."""
        from sqlalchemy import update

        from turneval.store._schema import runs

        with self.writing() as connection:
            full = self._resolve(connection, run_id)
            connection.execute(update(runs).where(runs.c.id == full).values(name=name))

    def delete_run(self, run_id: str) -> None:
        """Delete a run with its rows, its labels and the judge configurations made from them."""
        from sqlalchemy import delete

        from turneval.store._schema import judge_configs, labels, rows, runs

        with self.writing() as connection:
            full = self._resolve(connection, run_id)
            connection.execute(delete(judge_configs).where(judge_configs.c.run_id == full))
            connection.execute(delete(rows).where(rows.c.run_id == full))
            connection.execute(delete(labels).where(labels.c.run_id == full))
            connection.execute(delete(runs).where(runs.c.id == full))

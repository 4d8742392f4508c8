"""The run store: every run's metadata, rows and human labels in one database.

SQLite (a file, WAL mode) by default, PostgreSQL for a team. Rows are the results.jsonl rows
(:meth:`turneval.results.SampleResult.record`), kept as written, with the sample beside them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import queue
import subprocess
import threading
import uuid
import warnings
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from time import monotonic
from types import TracebackType
from typing import TYPE_CHECKING, Any

from turneval._version import VERSION
from turneval.errors import ConfigError
from turneval.manifest import DatasetSpec, JudgeSpec, MetricSpec, RunManifest
from turneval.manifest import judge_model as manifest_judge_model
from turneval.store._skips import StoredSkip

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine, RowMapping

    from turneval.results import SampleResult

__all__ = [
    "DEFAULT_STORE",
    "STORE_ENV",
    "RunRecorder",
    "RunStore",
    "StoredLabel",
    "StoredRow",
    "StoredRun",
    "file_digest",
    "judge_model",
    "metric_configs",
]

DEFAULT_STORE = ".turneval/runs.db"
"""The store used when none is named: a SQLite file in the working directory."""

STORE_ENV = "TURNEVAL_STORE"
"""The environment variable the CLI reads the store's URL from when ``--store`` is not given."""

STATUSES = ("running", "finished", "failed", "interrupted")
"""A stored run's status: ``running`` until it ends one of the three other ways."""

_FLUSH_SECONDS = 1.0  # a slow run's rows reach the store at least this often
_PAGE_SIZE = 16384  # a new SQLite store's page size (bytes)


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

        The judge's model (not its server), the input's path and digest.
        """
        return RunManifest(
            [MetricSpec.from_dict(metric, f"run {self.id}") for metric in self.metrics],
            JudgeSpec(self.judge_model, base_url_recorded=False),
            None
            if self.dataset_path is None and self.dataset_digest is None
            else DatasetSpec(self.dataset_path, self.dataset_digest),
            self.turneval_version,
        )


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


def judge_model(llm: Any) -> str | None:
    """Deprecated: :func:`turneval.manifest.judge_model` (the run manifest names judges)."""
    warnings.warn(
        "turneval.store.judge_model is deprecated; use turneval.manifest.judge_model",
        DeprecationWarning,
        stacklevel=2,
    )
    return manifest_judge_model(llm)


def metric_configs(metrics: Sequence[Any]) -> list[dict[str, Any]]:
    """Deprecated: ``MetricSpec.of(metric).to_dict()`` (:class:`turneval.manifest.MetricSpec`)."""
    warnings.warn(
        "turneval.store.metric_configs is deprecated; use "
        "turneval.manifest.MetricSpec.of(metric).to_dict()",
        DeprecationWarning,
        stacklevel=2,
    )
    return [MetricSpec.of(metric).to_dict() for metric in metrics]


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


def file_digest(path: str | os.PathLike[str]) -> str | None:
    """The SHA-256 of a file (None when it cannot be read)."""
    digest = hashlib.sha256()
    try:
        with Path(path).open("rb") as handle:
            for block in iter(lambda: handle.read(2**20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _aware(moment: datetime | None) -> datetime | None:
    """SQLite gives naive datetimes back: they were stored in UTC."""
    if moment is not None and moment.tzinfo is None:
        return moment.replace(tzinfo=timezone.utc)
    return moment


def _wal(cursor: Any, busy_timeout: float) -> None:
    """Switch a SQLite connection to WAL, waiting while another process holds the file.

    Two processes opening a new store at once both switch its journal mode; SQLite refuses the
    second at once ("database is locked") rather than through the busy timeout, so it is asked
    again until the timeout.
    """
    import sqlite3
    import time

    deadline = monotonic() + busy_timeout
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or monotonic() > deadline:
                raise
            time.sleep(0.02)


def _loads(text: str | bytes) -> Any:
    try:
        from orjson import loads
    except ImportError:  # pragma: no cover - exercised only without orjson
        return json.loads(text)
    return loads(text)


def _engine_url(url: str) -> tuple[str, str]:
    """``(SQLAlchemy URL, kind)`` of a store URL or path; ConfigError for another scheme."""
    scheme, sep, rest = url.partition("://")
    if not sep:  # a file path
        return f"sqlite:///{url}", "sqlite"
    scheme = scheme.lower()
    if scheme == "sqlite":
        return url, "sqlite"
    if scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        return f"postgresql+psycopg://{rest}", "postgresql"
    raise ConfigError(
        f"run store {scheme}://...: expected a file path, sqlite:///PATH or postgresql://..."
    )


def _first_line(exc: BaseException) -> str:
    original = getattr(exc, "orig", None) or exc
    text = " ".join(str(original).split()) or type(original).__name__
    return text[:300]


class RunStore:
    """The runs of a project (or a team) in one database: metadata, rows and labels.

    ``RunStore()`` opens ``.turneval/runs.db`` in the working directory (created if missing;
    SQLite in WAL mode, so readers never block the run writing); a path or ``sqlite:///PATH``
    names another file, and ``postgresql://user:pass@host/db`` a shared PostgreSQL database
    (through psycopg 3). Opening a store made by an older turneval migrates it (Alembic); one
    made by a newer turneval is refused. Several processes may write one store at once: SQLite
    serialises their transactions (waiting up to ``busy_timeout`` seconds), no row is lost.

    Needs the ``store`` extra: ``pip install 'turneval[store]'``.

    Args:
        url: A file path, ``sqlite:///PATH`` or ``postgresql://...`` (None: the default file).
        batch_rows: Rows written per transaction at most (a run's rows are also written at
            least once a second, and at its end).
        busy_timeout: Seconds a SQLite writer waits for another one's transaction.

    Raises:
        ConfigError: the extra is missing, the URL has another scheme, the database cannot be
            opened, or it was made by a newer turneval (one line, saying which).

    Attributes:
        url: The store's URL, its password hidden (a SQLite store: the file's path).
        kind: ``"sqlite"`` or ``"postgresql"``.
        engine: The SQLAlchemy engine.
        batch_rows: Rows written per transaction at most.
        close_after_run: Close the connections when a run ends (a store a front end opened
            from a URL).
    """

    def __init__(
        self,
        url: str | os.PathLike[str] | None = None,
        *,
        batch_rows: int = 500,
        busy_timeout: float = 60.0,
    ) -> None:
        """Open (and create or migrate) the store at ``url``."""
        if batch_rows < 1:
            raise ConfigError(f"batch_rows must be >= 1, got {batch_rows}")
        text = os.fspath(url) if url is not None else DEFAULT_STORE
        target, self.kind = _engine_url(text)
        try:
            from sqlalchemy import create_engine, event
            from sqlalchemy.engine import make_url
            from sqlalchemy.exc import ArgumentError, SQLAlchemyError
        except ImportError:
            raise ConfigError(
                "the run store needs SQLAlchemy: pip install 'turneval[store]'"
            ) from None
        try:
            parsed = make_url(target)
        except ArgumentError as exc:
            raise ConfigError(f"run store {text!r}: not a database URL ({exc})") from None
        self.url = (
            parsed.render_as_string(hide_password=True).replace("+psycopg://", "://", 1)
            if self.kind == "postgresql"
            else str(parsed.database)
        )
        self.batch_rows = batch_rows
        self.close_after_run = False
        if self.kind == "sqlite":
            database = parsed.database or ""
            if not database or database == ":memory:":
                raise ConfigError("run store: SQLite needs a file (every connection must see it)")
            with contextlib.suppress(OSError):  # an unwritable place fails below, named
                Path(database).parent.mkdir(parents=True, exist_ok=True)
            engine = create_engine(parsed, connect_args={"timeout": busy_timeout})

            @event.listens_for(engine, "connect")
            def _connect(dbapi: Any, _record: Any) -> None:
                dbapi.isolation_level = None  # transactions are begun below, IMMEDIATE
                cursor = dbapi.cursor()
                cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
                # A new file gets 16 KiB pages: a row (its results row and its sample, about
                # 2 KB each in a typical run) no longer takes a 4 KiB page of its own, so a run
                # writes about a third fewer bytes. An existing file keeps its pages (no-op).
                cursor.execute(f"PRAGMA page_size = {_PAGE_SIZE}")
                _wal(cursor, busy_timeout)
                cursor.execute("PRAGMA synchronous = NORMAL")
                cursor.execute("PRAGMA foreign_keys = ON")
                cursor.close()

            @event.listens_for(engine, "begin")
            def _begin(connection: Any) -> None:
                # A writer takes the write lock at once (two writers never deadlock upgrading
                # a read lock); a reader reads a snapshot and never blocks (WAL).
                write = connection.get_execution_options().get("turneval_write", False)
                connection.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")
        else:
            try:
                engine = create_engine(
                    parsed, pool_pre_ping=True, connect_args={"connect_timeout": 10}
                )
            except ImportError:
                raise ConfigError(
                    "a PostgreSQL run store needs psycopg 3: pip install 'turneval[store]'"
                ) from None
        self.engine: Engine = engine
        try:
            self._migrate()
        except ImportError:
            engine.dispose()
            raise ConfigError(
                "the run store needs Alembic (its migrations): pip install 'turneval[store]'"
            ) from None
        except ConfigError:
            engine.dispose()
            raise
        except SQLAlchemyError as exc:
            engine.dispose()
            raise ConfigError(f"cannot open the run store {self.url}: {_first_line(exc)}") from None

    def writing(self) -> contextlib.AbstractContextManager[Connection]:
        """A write transaction (on SQLite, it holds the write lock from its start)."""
        return self.engine.execution_options(turneval_write=True).begin()

    def stored_indexes(self, run_id: str) -> set[int]:
        """The row indexes a run has in the store (what a restarted writer need not redo)."""
        from sqlalchemy import select

        from turneval.store._schema import rows

        with self.engine.connect() as connection:
            found = connection.execute(select(rows.c.idx).where(rows.c.run_id == run_id))
            return {int(index) for index in found.scalars()}

    def claim(self, key: str, owner: str, run_id: str) -> bool:
        """Claim ``key`` for ``owner`` (writing into ``run_id``); whether ``owner`` holds it.

        The first claim of a key wins, across processes sharing the store; claiming a key one
        already holds (after a restart) is True again.
        """
        from sqlalchemy import insert, select
        from sqlalchemy.exc import IntegrityError

        from turneval.store._schema import claims

        try:
            with self.writing() as connection:
                connection.execute(
                    insert(claims).values(
                        key=key, owner=owner, run_id=run_id, claimed=datetime.now(timezone.utc)
                    )
                )
            return True
        except IntegrityError:
            with self.engine.connect() as connection:
                holder = connection.execute(
                    select(claims.c.owner).where(claims.c.key == key)
                ).scalar()
            return bool(holder == owner)

    # -- conversations `turneval watch` skipped (schema revision 0005) -----------------------

    def add_skipped(self, run_id: str, skips: Iterable[StoredSkip]) -> None:
        """Record conversations a ``turneval watch`` run did not score, with why.

        A conversation the run already has is left as it was (recording again is harmless).
        """
        from turneval.store._skips import insert_skips

        with self.writing() as connection:
            insert_skips(connection, self.kind, self._resolve(connection, run_id), skips)

    def skipped(
        self, run_id: str, *, reason: str | None = None, limit: int | None = 100
    ) -> list[StoredSkip]:
        """A run's skipped conversations, newest first: of one ``reason``, ``limit`` at most."""
        from turneval.store._skips import select_skips

        with self.engine.connect() as connection:
            return select_skips(connection, self._resolve(connection, run_id), reason, limit)

    def skipped_counts(self, run_id: str) -> dict[str, int]:
        """A run's skipped conversations counted by reason, most first (empty: none)."""
        from turneval.store._skips import select_skip_counts

        with self.engine.connect() as connection:
            return select_skip_counts(connection, self._resolve(connection, run_id))

    @classmethod
    def coerce(cls, value: RunStore | str | os.PathLike[str] | None) -> RunStore | None:
        """A store from a store, a URL or a path (None stays None)."""
        if value is None or isinstance(value, RunStore):
            return value
        if isinstance(value, (str, os.PathLike)):
            store = cls(value)
            store.close_after_run = True  # opened for a run: its connections end with it
            return store
        raise ConfigError(f"store must be a RunStore, a URL or a path, got {type(value).__name__}")

    def __repr__(self) -> str:
        """``RunStore('<url without password>')``."""
        return f"RunStore({self.url!r})"

    def close(self) -> None:
        """Close the store's connections."""
        self.engine.dispose()

    def __enter__(self) -> RunStore:
        """The store itself, closed on exit."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the store."""
        self.close()

    # -- schema ------------------------------------------------------------------------------

    def _migrate(self) -> None:
        """Create or upgrade the schema; refuse a store from a newer turneval."""
        from alembic import command
        from alembic.config import Config
        from alembic.runtime.migration import MigrationContext
        from alembic.script import ScriptDirectory
        from sqlalchemy import text

        config = Config()
        config.set_main_option("script_location", str(Path(__file__).parent / "migrations"))
        script = ScriptDirectory.from_config(config)
        head = script.get_current_head()
        known = {revision.revision for revision in script.walk_revisions()}
        with self.writing() as connection:  # one writer migrates; the others wait
            if self.kind == "postgresql":
                connection.execute(text("SELECT pg_advisory_xact_lock(7253491034)"))
            current = MigrationContext.configure(connection).get_current_revision()
            if current == head:
                return
            if current is not None and current not in known:
                raise ConfigError(
                    f"run store {self.url} has schema revision {current}, made by a newer "
                    f"turneval than this one ({VERSION}, which knows up to {head}): "
                    "upgrade turneval to open it"
                )
            config.attributes["connection"] = connection
            command.upgrade(config, "head")

    def schema_revision(self) -> str | None:
        """The store's schema revision (Alembic's)."""
        from alembic.runtime.migration import MigrationContext

        with self.engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()

    # -- runs --------------------------------------------------------------------------------

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
                        .values(status="running", finished=None, error=None)
                    )
                    return RunRecorder(self, str(found), names, details=details)
            run_id = uuid.uuid4().hex
            connection.execute(
                insert(runs).values(
                    id=run_id,
                    name=name,
                    created=_now(),
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
        return RunRecorder(self, run_id, names, details=details)

    def _resolve(self, connection: Connection, run_id: str) -> str:
        """The full id of a run named by its id or a unique prefix; ConfigError otherwise."""
        from sqlalchemy import select

        from turneval.store._schema import runs

        prefix = run_id.strip().lower()
        if not prefix or any(char not in "0123456789abcdef" for char in prefix):
            raise ConfigError(f"run {run_id!r} is not in the run store {self.url}")
        found = (
            connection.execute(
                select(runs.c.id).where(runs.c.id.startswith(prefix, autoescape=True)).limit(2)
            )
            .scalars()
            .all()
        )
        if not found:
            raise ConfigError(f"run {run_id!r} is not in the run store {self.url}")
        if len(found) > 1:
            raise ConfigError(f"run {run_id!r} names several runs in {self.url}: give more of it")
        return str(found[0])

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

    def runs(self, *, limit: int | None = None) -> list[StoredRun]:
        """The stored runs, newest first."""
        from sqlalchemy import select

        from turneval.store._schema import runs

        with self.engine.connect() as connection:
            query = select(runs).order_by(runs.c.created.desc())
            if limit is not None:
                query = query.limit(limit)
            found = connection.execute(query).mappings().all()
            return [self._stored_run(connection, record) for record in found]

    def _stored_run(self, connection: Connection, record: RowMapping) -> StoredRun:
        from sqlalchemy import func, select

        from turneval.store._schema import rows

        count = connection.execute(
            select(func.count()).select_from(rows).where(rows.c.run_id == record["id"])
        ).scalar_one()
        return StoredRun(
            id=record["id"],
            name=record["name"],
            created=_aware(record["created"]) or _now(),
            finished=_aware(record["finished"]),
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
        """Delete a run with its rows and its labels."""
        from sqlalchemy import delete

        from turneval.store._schema import labels, rows, runs

        with self.writing() as connection:
            full = self._resolve(connection, run_id)
            connection.execute(delete(rows).where(rows.c.run_id == full))
            connection.execute(delete(labels).where(labels.c.run_id == full))
            connection.execute(delete(runs).where(runs.c.id == full))

    # -- rows --------------------------------------------------------------------------------

    def records(self, run_id: str, *, batch: int = 1000) -> Iterator[dict[str, Any]]:
        """The run's rows as results.jsonl records, in index order (read in batches)."""
        for text in self.record_lines(run_id, batch=batch):
            yield _loads(text)

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
            StoredRow(int(idx), line, sample_id, bool(is_failed), _loads(record))
            for idx, line, sample_id, is_failed, record in found
        ]

    def samples(self, run_id: str, indexes: Iterable[int]) -> dict[int, Any]:
        """The stored samples (parsed JSON) of some rows of a run, by row index."""
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
                    found[int(idx)] = None if sample is None else _loads(sample)
        return found

    def result(self, run_id: str) -> Any:
        """The run's rows as an :class:`~turneval.results.EvaluationResult` (no samples).

        With its manifest (:attr:`StoredRun.manifest`: its metrics rebuilt where they can be).
        """
        from turneval.results import EvaluationResult

        run = self.run(run_id)
        return EvaluationResult.from_records(self.records(run.id), manifest=run.manifest)

    # -- labels ------------------------------------------------------------------------------

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
                    created=_now(),
                )
            )
            key = added.inserted_primary_key
            return int(key[0]) if key is not None else 0

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
            return [
                StoredLabel(
                    id=int(record["id"]),
                    run_id=record["run_id"],
                    row_index=record["row_index"],
                    sample_id=record["sample_id"],
                    metric=record["metric"],
                    label=json.loads(record["label"]),
                    note=record["note"],
                    annotator=record["annotator"],
                    created=_aware(record["created"]) or _now(),
                )
                for record in connection.execute(query).mappings()
            ]

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

    # -- run folders -------------------------------------------------------------------------

    def import_run(self, run_dir: str | os.PathLike[str], *, name: str | None = None) -> str:
        """Bring in a run folder (results.jsonl, summary.json, run.json when present).

        Returns the new run's id. The rows are read and written in batches.

        Raises:
            ConfigError: the folder has no results.jsonl, or a line of it is not a JSON row
                (naming the line).
        """
        folder = Path(run_dir)
        results = folder / "results.jsonl" if folder.is_dir() else folder
        if not results.is_file():
            raise ConfigError(f"{folder}: no results.jsonl to import (a run's --out folder?)")
        folder = results.parent
        manifest = RunManifest.find(results)  # None: a folder from before run.json
        summary = _read_json(folder / "summary.json")
        dataset = None if manifest is None else manifest.dataset
        names: list[str] | None = None if manifest is None else manifest.metric_names
        recorder = self._imported_run(
            name or folder.resolve().name,
            [] if manifest is None else [metric.to_dict() for metric in manifest.metrics],
            version=VERSION if manifest is None else manifest.turneval_version,
            judge=None if manifest is None else manifest.judge.model,
            dataset_path=None if dataset is None else dataset.path,
            dataset_digest=None if dataset is None else dataset.sha256,
            out_dir=folder,
        )
        with recorder:
            with results.open(encoding="utf-8") as handle:
                for number, line in enumerate(handle, start=1):
                    text = line.rstrip("\r\n")
                    if not text.strip():
                        continue
                    try:
                        record = json.loads(text)
                        int(record["index"])
                    except (ValueError, KeyError, TypeError):
                        raise ConfigError(
                            f"{results} line {number}: not a results.jsonl row"
                        ) from None
                    if names is None:  # legacy: the names of the first row's reason columns
                        names = [key for key in record if f"{key}_reason" in record]
                        recorder.names = names
                        self._set_metrics(recorder.run_id, names)
                    recorder.add_record(text, record)
            recorder.finish(summary or None)
        return recorder.run_id

    def _imported_run(
        self,
        name: str,
        metrics: list[dict[str, Any]],
        *,
        version: str,
        judge: str | None,
        dataset_path: str | None,
        dataset_digest: str | None,
        out_dir: Path,
    ) -> RunRecorder:
        from sqlalchemy import insert

        from turneval.store._schema import runs

        run_id = uuid.uuid4().hex
        with self.writing() as connection:
            connection.execute(
                insert(runs).values(
                    id=run_id,
                    name=name,
                    created=_now(),
                    turneval_version=version,
                    dataset_path=dataset_path,
                    dataset_digest=dataset_digest,
                    metrics=json.dumps(metrics),
                    judge_model=judge,
                    status="running",
                    out_dir=str(out_dir.resolve()),
                )
            )
        return RunRecorder(self, run_id, [str(m.get("name")) for m in metrics])

    def _set_metrics(self, run_id: str, names: list[str]) -> None:
        from sqlalchemy import update

        from turneval.store._schema import runs

        listed = [{"name": name, "class": None, "config": None} for name in names]
        with self.writing() as connection:
            connection.execute(
                update(runs).where(runs.c.id == run_id).values(metrics=json.dumps(listed))
            )

    def export_run(self, run_id: str, out_dir: str | os.PathLike[str]) -> Path:
        """Write a stored run's folder: results.jsonl (the rows as written) and summary.json.

        ``turneval compare``, ``plan`` and ``calibrate`` read the folder as they read the
        run's own. No run.json: the folder is a record of the run, not a run to resume (what
        the run was started with stays in the store). Returns the folder.
        """
        run = self.run(run_id)
        target = Path(out_dir)
        target.mkdir(parents=True, exist_ok=True)
        with (target / "results.jsonl").open("w", encoding="utf-8") as handle:
            for line in self.record_lines(run.id):
                handle.write(line + "\n")
        if run.summary is not None:
            text = json.dumps(run.summary, indent=2) + "\n"
            (target / "summary.json").write_text(text, encoding="utf-8")
        return target


def _read_json(path: Path) -> dict[str, Any]:
    """A JSON object file of a run folder ({} when absent)."""
    if not path.is_file():
        return {}
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, OSError) as exc:
        raise ConfigError(f"{path}: not readable JSON ({_first_line(exc)})") from None
    if not isinstance(found, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    return found


@dataclass
class RunRecorder:
    """Writes one run's rows to the store as they finish, in batches, and its end.

    Rows are buffered up to the store's ``batch_rows`` (or one second) and written in one
    transaction, so memory stays bounded and a run stopped at any point leaves only whole
    batches. Used as a context manager, an exception marks the run ``failed`` (or
    ``interrupted`` for Ctrl-C or a cancellation) with the error.
    """

    store: RunStore
    run_id: str
    names: list[str]
    details: bool = True
    _pending: list[tuple[Any, ...]] = field(default_factory=list)
    _keys: list[str] = field(default_factory=list)
    _last: float = field(default_factory=monotonic)
    _samples: deque[str | None] = field(default_factory=deque)
    _batches: queue.Queue[list[tuple[Any, ...]] | None] | None = None
    _writer: threading.Thread | None = None
    _error: BaseException | None = None

    def in_background(self) -> None:
        """Write the batches from a thread of its own from now on (the streamed CLI's sink).

        SQLite and the PostgreSQL driver release the GIL while they write, so the rows are
        stored while the next chunk is read and scored. At most two batches wait (bounded
        memory); :meth:`finish`, :meth:`fail` and :meth:`drain` wait for them, and a write
        that failed raises at the next :meth:`flush` or :meth:`drain`.
        """
        if self._writer is None:
            self._batches = queue.Queue(maxsize=2)
            self._writer = threading.Thread(
                target=self._write_batches, name="turneval-store-writer", daemon=True
            )
            self._writer.start()

    def _write_batches(self) -> None:
        assert self._batches is not None
        while True:
            batch = self._batches.get()
            try:
                if batch is None:
                    return
                if self._error is None:
                    self._insert(batch)
            except BaseException as exc:  # raised in the caller's thread by drain()
                self._error = exc
            finally:
                self._batches.task_done()

    def _close_writer(self) -> None:
        """Wait for the writer thread's batches, then end it (later flushes write inline)."""
        batches, writer = self._batches, self._writer
        if batches is None or writer is None:
            return
        try:
            self.drain()
        finally:
            batches.put(None)
            writer.join()
            self._batches, self._writer = None, None

    def drain(self) -> None:
        """Wait until every batch handed to the writer thread is stored; raise its error."""
        if self._batches is not None:
            self._batches.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def __enter__(self) -> RunRecorder:
        """The recorder itself."""
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        _traceback: TracebackType | None,
    ) -> None:
        """On an exception, write what is buffered and mark the run failed or interrupted."""
        if exc is not None:
            self.fail(exc)

    def add(self, row: SampleResult) -> None:
        """Write a finished row (written with the next batch)."""
        from turneval.results_codec import encode
        from turneval.rows import json_line

        record = encode(row, self.names, details=self.details)
        sample = None if row.sample is None else row.sample.model_dump_json(exclude_none=True)
        self._queue(json_line(record), record, sample)

    def add_record(self, text: str, record: Mapping[str, Any], sample: str | None = None) -> None:
        """Write a results.jsonl row (``text``, parsed as ``record``) with its sample's JSON."""
        self._queue(text, record, sample)

    def add_rows(
        self, keys: Iterable[tuple[int, int | None, str | None, bool]], lines: Iterable[str]
    ) -> None:
        """Write results.jsonl rows as their writer knows them, without reading them back.

        Args:
            keys: Each row's ``(index, line, sample id, failed)``: its ``index``, ``line`` and
                ``id`` fields, and whether a metric's ``*_error`` or ``agent_error`` is set.
            lines: The rows' text, as written to results.jsonl (same order).

        Their samples are taken from :meth:`expect`.
        """
        run_id, samples, pending = self.run_id, self._samples, self._pending
        for (index, line, sample_id, failed), text in zip(keys, lines, strict=True):
            sample = samples.popleft() if samples else None
            pending.append((run_id, index, line, sample_id, failed, sample, text))
            if len(pending) >= self.store.batch_rows:
                self.flush()
                pending = self._pending
        if monotonic() - self._last > _FLUSH_SECONDS:
            self.flush()

    def expect(self, samples: Iterable[str | None]) -> None:
        """The samples (JSON text) of the next rows :meth:`add_rows` gets, in order."""
        self._samples.extend(samples)

    def _queue(self, text: str, record: Mapping[str, Any], sample: str | None) -> None:
        sample_id = record.get("id")
        failed = any(record.get(key) for key in self._error_keys) or bool(record.get("agent_error"))
        self._pending.append(
            (
                self.run_id,
                int(record["index"]),
                record.get("line"),
                None if sample_id is None else str(sample_id),
                failed,
                sample,
                text,
            )
        )
        if len(self._pending) >= self.store.batch_rows or monotonic() - self._last > _FLUSH_SECONDS:
            self.flush()

    @property
    def _error_keys(self) -> list[str]:
        if len(self._keys) != len(self.names):
            self._keys = [f"{name}_error" for name in self.names]
        return self._keys

    def flush(self) -> None:
        """Write the buffered rows in one transaction."""
        self._last = monotonic()
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        if self._batches is not None:
            if self._error is not None:
                self.drain()
            self._batches.put(pending)
            return
        self._insert(pending)

    def _insert(self, pending: list[tuple[Any, ...]]) -> None:
        columns = "rows (run_id, idx, line, sample_id, failed, sample, record)"
        with self.store.writing() as connection:
            if self.store.kind == "postgresql":  # COPY: one stream of rows, no statement each
                driver = connection.connection.driver_connection
                assert driver is not None
                with driver.cursor() as cursor, cursor.copy(f"COPY {columns} FROM STDIN") as copy:
                    for row in pending:
                        copy.write_row(row)
            else:  # the driver's own executemany: one prepared statement for the batch
                connection.exec_driver_sql(
                    f"INSERT INTO {columns} VALUES (?, ?, ?, ?, ?, ?, ?)", pending
                )

    def sync(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Make the stored rows those of a resumed run's file (its finished rows).

        Rows the store lacks (written to the file, the run stopped before they were stored)
        are added; rows the file lacks are removed (they will be scored again).
        """
        from sqlalchemy import delete, select

        from turneval.results import json_line
        from turneval.store._schema import rows

        with self.store.engine.connect() as connection:
            stored = set(
                connection.execute(select(rows.c.idx).where(rows.c.run_id == self.run_id))
                .scalars()
                .all()
            )
        wanted: set[int] = set()
        for record in records:
            index = int(record["index"])
            wanted.add(index)
            if index not in stored:
                self._queue(json_line(dict(record)), record, None)
        self.flush()
        extra = sorted(stored - wanted)
        with self.store.writing() as connection:
            for start in range(0, len(extra), 500):
                connection.execute(
                    delete(rows).where(
                        rows.c.run_id == self.run_id, rows.c.idx.in_(extra[start : start + 500])
                    )
                )

    def finish(
        self,
        summary: Mapping[str, Any] | None,
        *,
        status: str = "finished",
        error: str | None = None,
    ) -> None:
        """Write what is buffered and end the run (its summary, status and error)."""
        from sqlalchemy import update

        from turneval.store._schema import runs

        if status not in STATUSES:
            raise ConfigError(f"status must be one of {', '.join(STATUSES)}, got {status!r}")
        self.flush()
        self._close_writer()
        values: dict[str, Any] = {"status": status, "finished": _now(), "error": error}
        if summary is not None:
            values["summary"] = json.dumps(summary)
        with self.store.writing() as connection:
            connection.execute(update(runs).where(runs.c.id == self.run_id).values(**values))
        if self.store.close_after_run:
            self.store.close()  # its pool only: a later run opens connections again

    def fail(self, exc: BaseException) -> None:
        """End the run ``failed`` (``interrupted`` for Ctrl-C or a cancellation) with ``exc``."""
        import asyncio

        stopped = isinstance(exc, (KeyboardInterrupt, SystemExit, asyncio.CancelledError))
        status = "interrupted" if stopped else "failed"
        message = f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:2000]
        try:
            self.finish(None, status=status, error=message)
        except Exception:  # the store itself failed: the run's own error is the one to raise
            self.abandon()

    def abandon(self) -> None:
        """Drop what is buffered (the store failed while the run was ending)."""
        self._pending.clear()
        if self.store.close_after_run:
            self.store.close()

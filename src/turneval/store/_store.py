"""The run store: every run's metadata, rows and human labels in one database.

SQLite (a file, WAL mode) by default, PostgreSQL for a team. Rows are the results.jsonl rows
(:meth:`turneval.results.SampleResult.record`), kept as written, with the sample beside them.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import subprocess
import threading
import uuid
import warnings
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path
from time import monotonic
from types import TracebackType
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt

from turneval._files import file_digest
from turneval._hidden import shown
from turneval._version import VERSION
from turneval.errors import ConfigError
from turneval.manifest import RUN_FILE, DatasetSpec, JudgeSpec, MetricSpec, RunManifest
from turneval.manifest import dataset_version as manifest_dataset_version
from turneval.manifest import judge_model as manifest_judge_model
from turneval.store._datasets import DatasetDiff, DatasetRow, StoredDataset
from turneval.store._judge_configs import StoredJudgeConfig
from turneval.store._skips import StoredSkip

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine, RowMapping

    from turneval.results import SampleResult

__all__ = [
    "DEFAULT_STORE",
    "STORE_ENV",
    "RunColumns",
    "RunRecorder",
    "RunStore",
    "StoredLabel",
    "StoredRow",
    "StoredRun",
    "dataset_version",
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


def dataset_version(
    path: str | os.PathLike[str], store: RunStore | None = None, *, digest: str | None = None
) -> dict[str, Any]:
    """What a run records of the dataset it reads: its digest, and its name and version.

    :func:`turneval.manifest.dataset_version` (the manifest records it): ``{"digest": SHA-256
    of the file, "name": ..., "version": ...}``, the name and version when ``store`` keeps
    that content (``turneval datasets add``), else None. ``digest``, when known, saves
    reading the file again.
    """
    return manifest_dataset_version(path, store, digest=digest)


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


_EXPECTED = "a file in an existing folder, or a URL like sqlite:///PATH or postgresql://..."
"""What a store's URL may be: named in every error about one."""

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")
"""A URL's scheme (two characters at least: ``C:`` is a drive, not a scheme)."""


_FLOATS = ("values", "lows", "highs")
"""The float columns of :meth:`RunStore.columns` (the others are bool, and the indexes)."""


def _sample(text: str) -> Any:
    """A stored sample: its JSON, or the input line as read when it was not JSON (a str)."""
    try:
        return _loads(text)
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
        created=_aware(record["created"]) or _now(),
    )


def _engine_url(url: str) -> tuple[str, str]:
    """``(SQLAlchemy URL, kind)`` of a store URL or path; ConfigError for another scheme.

    A scheme without ``//`` (``sqlite:/runs.db``, ``postgresql:host/db``) is a mistyped URL,
    not a file path: refused rather than made into a folder named ``sqlite:``.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:  # a file path
        if _SCHEME.match(url):
            raise ConfigError(
                f"run store {_named(url)} looks like a URL without its '//': expected {_EXPECTED}"
            )
        return f"sqlite:///{url}", "sqlite"
    if scheme.lower() == "sqlite":
        return url, "sqlite"
    if scheme.lower() in ("postgresql", "postgres", "postgresql+psycopg"):
        return f"postgresql+psycopg://{rest}", "postgresql"
    raise ConfigError(f"run store {_named(scheme + '://...')}: expected {_EXPECTED}")


def _named(value: object) -> str:
    """A path or URL in an error: quoted, on one line, hidden characters shown."""
    return repr(shown(os.fspath(value) if isinstance(value, os.PathLike) else value))


def _check_folder(database: Path, text: str, *, made: bool) -> None:
    """Refuse a SQLite file whose folder is missing, or that is a folder; ``made``: make it.

    Only the default store's folder (``.turneval``) is made: a mistyped path is an error
    naming it, never a new folder tree holding an empty store.
    """
    folder = database.parent
    if made:
        with contextlib.suppress(OSError):  # an unwritable place fails when opened, named
            folder.mkdir(parents=True, exist_ok=True)
    if database.is_dir():
        raise ConfigError(f"run store {_named(text)} is a folder: expected {_EXPECTED}")
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise ConfigError(
            f"run store {_named(text)}: its folder {_named(folder)} {what}: expected {_EXPECTED}"
        )


def _first_line(exc: BaseException) -> str:
    original = getattr(exc, "orig", None) or exc
    text = " ".join(str(original).split()) or type(original).__name__
    return text[:300]


class RunStore:
    """The runs of a project (or a team) in one database: metadata, rows and labels.

    ``RunStore()`` opens ``.turneval/runs.db`` in the working directory (created if missing,
    with its folder; SQLite in WAL mode, so readers never block the run writing); a path or
    ``sqlite:///PATH`` names another file (created if missing, in a folder that must exist: a
    mistyped path is an error, not a new folder), and ``postgresql://user:pass@host/db`` a shared PostgreSQL database
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
        ConfigError: the extra is missing, the URL has another scheme (or lacks its ``//``),
            a SQLite file's folder does not exist (or the path is a folder), the database
            cannot be opened, or it was made by a newer turneval (one line, saying which).

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
            from sqlalchemy.engine import URL, make_url
            from sqlalchemy.exc import ArgumentError, SQLAlchemyError
        except ImportError:
            raise ConfigError(
                "the run store needs SQLAlchemy: pip install 'turneval[store]'"
            ) from None
        try:  # a file path is the database as given: never parsed as a URL ('?' is no query)
            parsed = URL.create("sqlite", database=text) if "://" not in text else make_url(target)
        except (ArgumentError, ValueError):  # ValueError: a port that is not a number
            shown_url = _named(
                text if self.kind == "sqlite" else text.partition("://")[0] + "://..."
            )
            raise ConfigError(
                f"run store {shown_url}: not a database URL: expected {_EXPECTED}"
            ) from None
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
                raise ConfigError(
                    f"run store {_named(text)}: SQLite needs a file (every connection must "
                    f"see it): expected {_EXPECTED}"
                )
            _check_folder(Path(database), text, made=url is None or text == DEFAULT_STORE)
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

    # -- dataset versions (schema revision 0008; turneval.store._datasets) ---------------------

    def add_dataset(self, path: str | os.PathLike[str], *, name: str) -> tuple[StoredDataset, bool]:
        """Keep a JSONL file as ``name``'s next version; whether that version is new.

        The content is kept once by its SHA-256; when it is ``name``'s latest version already,
        that version is returned (False). Raises ConfigError for an unreadable file.
        """
        from turneval.store import _datasets

        if not name.strip():
            raise ConfigError("a dataset needs a name")
        digest, rows = _datasets.file_rows(Path(path))
        with self.writing() as connection:
            return _datasets.add(connection, Path(path).resolve(), name.strip(), digest, rows)

    def datasets(self, *, name: str | None = None) -> list[StoredDataset]:
        """Every dataset version (of ``name`` only, when given), by name then version."""
        from turneval.store import _datasets

        with self.engine.connect() as connection:
            return _datasets.listed(connection, name)

    def dataset(self, ref: str) -> StoredDataset:
        """The version ``ref`` names: ``NAME@VERSION``, ``NAME`` (its latest), or a digest.

        Raises:
            ConfigError: none matches.
        """
        from turneval.store import _datasets

        with self.engine.connect() as connection:
            return _datasets.find(connection, ref)

    def dataset_of(self, digest: str | None) -> StoredDataset | None:
        """The dataset version with this content digest (a run's input), None when none."""
        from turneval.store import _datasets

        if not digest:
            return None
        with self.engine.connect() as connection:
            return _datasets.by_digest(connection, digest)

    def dataset_rows(self, ref: str, *, limit: int | None = None) -> list[DatasetRow]:
        """The lines of the version ``ref`` names, in order (the first ``limit``)."""
        from turneval.store import _datasets

        with self.engine.connect() as connection:
            found = _datasets.find(connection, ref)
            return _datasets.contents(connection, found.digest, limit)

    def diff_datasets(self, old: str, new: str) -> DatasetDiff:
        """The rows added, removed and changed from version ``old`` to ``new`` (refs or digests).

        Raises:
            ConfigError: a ref names no version.
        """
        from turneval.store import _datasets

        with self.engine.connect() as connection:
            before, after = _datasets.find(connection, old), _datasets.find(connection, new)
            return _datasets.diff_rows(
                _datasets.row_keys(connection, before.digest),
                _datasets.row_keys(connection, after.digest),
                labels=(before.label, after.label),
            )

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
                        .values(status="running", finished=None, error=None, row_count=None)
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
        """Delete a run with its rows, its labels and the judge configurations made from them."""
        from sqlalchemy import delete

        from turneval.store._schema import judge_configs, labels, rows, runs

        with self.writing() as connection:
            full = self._resolve(connection, run_id)
            connection.execute(delete(judge_configs).where(judge_configs.c.run_id == full))
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
                int(idx): StoredRow(int(idx), line, sample_id, bool(failed), _loads(record))
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
                record = _loads(text)
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
        # the files' types checked first (an error names the file and field), then read
        meta = _checked(folder / RUN_FILE, _RunFile)
        summary = _checked(folder / "summary.json", _SummaryFile)
        listed = meta.get("metrics") is not None
        manifest = (  # None: a folder from before run.json
            RunManifest.from_dict(
                {**meta, "metrics": meta.get("metrics") or []}, str(folder / RUN_FILE)
            )
            if meta
            else None
        )
        dataset = None if manifest is None else manifest.dataset
        names: list[str] | None = manifest.metric_names if manifest is not None and listed else None
        recorder = self._imported_run(
            name or (manifest and manifest.name) or folder.resolve().name,
            [] if manifest is None else [metric.to_dict() for metric in manifest.metrics],
            version=VERSION if manifest is None else manifest.turneval_version,
            judge=None if manifest is None else manifest.judge.model,
            dataset_path=None if dataset is None else dataset.path,
            dataset_digest=None if dataset is None else dataset.sha256,
            out_dir=folder,
        )
        try:
            with recorder:
                with results.open(encoding="utf-8") as handle:
                    for number, line in enumerate(handle, start=1):
                        text = line.rstrip("\r\n")
                        if not text.strip():
                            continue
                        record = _results_row(results, number, text, names)
                        if names is None:  # legacy: the names of the first row's reason columns
                            names = [key for key in record if f"{key}_reason" in record]
                            recorder.names = names
                            _results_row(results, number, text, names)  # its values, named
                            self._set_metrics(recorder.run_id, names)
                        recorder.add_record(text, record)
                recorder.finish(summary or None)
        except (ConfigError, UnicodeDecodeError) as exc:  # refused: no half-imported run left
            self.delete_run(recorder.run_id)
            if isinstance(exc, UnicodeDecodeError):
                raise ConfigError(f"{results}: not UTF-8 ({exc.reason})") from None
            raise
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
    """A JSON object file of a run folder ({} when absent), read as strict JSON."""
    from turneval.jsonl import strict_json_problem

    if not path.is_file():
        return {}
    try:
        text = path.read_text(encoding="utf-8")
        found = json.loads(text)
    except (ValueError, OSError, RecursionError) as exc:
        raise ConfigError(f"{path}: not readable JSON ({_first_line(exc)})") from None
    problem = strict_json_problem(text)
    if problem is not None:
        raise ConfigError(f"{path}: not strict JSON: {problem}")
    if not isinstance(found, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    return found


def _checked(path: Path, shape: Any) -> dict[str, Any]:
    """A run folder's JSON file checked against its layout ({} when absent).

    Only the fields turneval reads are checked (their types); others are kept as written.

    Raises:
        ConfigError: naming the file and the first field of the wrong type.
    """
    from pydantic import ValidationError

    found = _read_json(path)
    try:
        shape.model_validate(found)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = ".".join(str(part) for part in error["loc"]) or "the document"
        raise ConfigError(
            f"{path}: not a turneval {path.name}: {shown(where)}: {error['msg']} "
            f"(got {shown(_cut_repr(error.get('input')))})"
        ) from None
    return found


def _cut_repr(value: Any, size: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= size else text[: size - 1] + "…"


def _results_row(path: Path, number: int, text: str, names: list[str] | None) -> dict[str, Any]:
    """One results.jsonl line, strict JSON, with an integer index and numbers as values.

    Raises:
        ConfigError: naming the line and what is wrong with it.
    """
    from turneval.jsonl import strict_json_problem

    where = f"{path} line {number}"
    try:
        record = json.loads(text)
    except (ValueError, RecursionError):
        raise ConfigError(f"{where}: not a results.jsonl row (not JSON)") from None
    problem = strict_json_problem(text)
    if problem is not None:
        raise ConfigError(f"{where}: not strict JSON: {problem}")
    if not isinstance(record, dict):
        raise ConfigError(f"{where}: not a results.jsonl row (not a JSON object)")
    index = record.get("index")
    if isinstance(index, bool) or not isinstance(index, int):
        raise ConfigError(f"{where}: not a results.jsonl row ('index' must be an integer)")
    for name in names or ():
        value = record.get(name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ConfigError(
                f"{where}: {shown(repr(name))} must be a number or null, got "
                f"{shown(_cut_repr(value))}"
            )
    return record


class _Usage(BaseModel):
    """A judge usage record (summary.json): counts."""

    model_config = ConfigDict(extra="allow", strict=True)
    input_tokens: NonNegativeInt | None = None
    output_tokens: NonNegativeInt | None = None
    calls: NonNegativeInt | None = None
    cached_calls: NonNegativeInt | None = None
    total_tokens: NonNegativeInt | None = None


class _MetricFigures(BaseModel):
    """One metric's figures in summary.json."""

    model_config = ConfigDict(extra="allow", strict=True)
    name: str | None = None
    mean: float | None = None
    std: float | None = None
    count: NonNegativeInt | None = None
    failed: NonNegativeInt | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    usage: _Usage | None = None
    extra: dict[str, float | None] | None = None


class _SummaryFile(BaseModel):
    """summary.json's layout (:func:`turneval.aggregate.summary_document`)."""

    model_config = ConfigDict(extra="allow", strict=True)
    samples: NonNegativeInt | None = None
    bad_lines: NonNegativeInt | None = None
    failed_rows: NonNegativeInt | None = None
    metrics: dict[str, _MetricFigures] | None = None
    usage: _Usage | None = None
    aggregates: dict[str, float | None] | None = None
    aggregate_errors: dict[str, str] | None = None
    skipped_traces: dict[str, NonNegativeInt] | None = None


class _StoredMetric(BaseModel):
    """A metric as run.json lists it: its name, class and configuration."""

    model_config = ConfigDict(extra="allow", strict=True)
    name: str
    class_: str | None = Field(default=None, alias="class")


class _Named(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True)
    path: str | None = None
    sha256: str | None = None
    model: str | None = None


class _RunFile(BaseModel):
    """The fields of run.json an import reads."""

    model_config = ConfigDict(extra="allow", strict=True)
    turneval_version: str | None = None
    dataset: _Named | None = None
    judge: _Named | None = None
    metrics: list[_StoredMetric] | None = None


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
    _counted_cleared: bool = False

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
        from turneval._rows import json_line
        from turneval.results_codec import encode

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
        from sqlalchemy import update

        from turneval.store._schema import runs

        columns = "rows (run_id, idx, line, sample_id, failed, sample, record)"
        with self.store.writing() as connection:
            if not self._counted_cleared:  # rows added: the count it ended with no longer holds
                connection.execute(
                    update(runs).where(runs.c.id == self.run_id).values(row_count=None)
                )
                self._counted_cleared = True
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
        from sqlalchemy import delete, select, update

        from turneval.results import json_line
        from turneval.store._schema import rows, runs

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
            connection.execute(update(runs).where(runs.c.id == self.run_id).values(row_count=None))
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
        from sqlalchemy import func, select

        from turneval.store._schema import rows

        counted = (
            select(func.count()).select_from(rows).where(rows.c.run_id == self.run_id)
        ).scalar_subquery()  # the rows it ended with, kept: listing runs never counts again
        values: dict[str, Any] = {
            "status": status,
            "finished": _now(),
            "error": error,
            "row_count": counted,
        }
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

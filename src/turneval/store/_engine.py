"""The run store's database: its URL, the engine (SQLite or PostgreSQL), transactions, schema.

:class:`StoreEngine` opens a store (a SQLite file in WAL mode, or a PostgreSQL database through
psycopg 3), migrates its schema at open (Alembic, ``_migrations``) and names a run by its id or a
unique prefix; :class:`turneval.store.RunStore` is built on it. The small helpers every part of
the store shares (the time, JSON reading, an error's first line) are here too.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from time import monotonic
from typing import TYPE_CHECKING, Any

from turneval._hidden import shown
from turneval._version import VERSION
from turneval.errors import ConfigError

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

DEFAULT_STORE = ".turneval/runs.db"
"""The store used when none is named: a SQLite file in the working directory."""

STORE_ENV = "TURNEVAL_STORE"
"""The environment variable the CLI reads the store's URL from when ``--store`` is not given."""

_PAGE_SIZE = 16384  # a new SQLite store's page size (bytes)

MIGRATIONS = Path(__file__).parent / "_migrations"
"""Alembic's script folder: the store's schema revisions (its ids, not this path, are stored)."""


def now() -> datetime:
    """The time now, in UTC."""
    return datetime.now(timezone.utc)


def aware(moment: datetime | None) -> datetime | None:
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


def loads(text: str | bytes) -> Any:
    """JSON text read with orjson (the standard library's reader without it)."""
    try:
        from orjson import loads
    except ImportError:  # pragma: no cover - exercised only without orjson
        return json.loads(text)
    return loads(text)


_EXPECTED = "a file in an existing folder, or a URL like sqlite:///PATH or postgresql://..."
"""What a store's URL may be: named in every error about one."""

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")
"""A URL's scheme (two characters at least: ``C:`` is a drive, not a scheme)."""


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


def first_line(exc: BaseException) -> str:
    """An error (or the database error under it) as one line of 300 characters at most."""
    original = getattr(exc, "orig", None) or exc
    text = " ".join(str(original).split()) or type(original).__name__
    return text[:300]


class StoreEngine:
    """A store's database: the engine, its transactions, its schema and its runs' ids.

    The base of :class:`turneval.store.RunStore` (whose docstring says what a URL may be);
    every other part of the store reaches the database through it.

    Attributes:
        url: The store's URL, its password hidden (a SQLite store: the file's path).
        kind: ``"sqlite"`` or ``"postgresql"``.
        engine: The SQLAlchemy engine.
        batch_rows: Rows written per transaction at most.
        close_after_run: Close the connections when a run ends.
    """

    url: str
    kind: str
    engine: Engine
    batch_rows: int
    close_after_run: bool

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
            raise ConfigError(f"cannot open the run store {self.url}: {first_line(exc)}") from None

    def writing(self) -> contextlib.AbstractContextManager[Connection]:
        """A write transaction (on SQLite, it holds the write lock from its start)."""
        return self.engine.execution_options(turneval_write=True).begin()

    def close(self) -> None:
        """Close the store's connections."""
        self.engine.dispose()

    # -- schema ------------------------------------------------------------------------------

    def _migrate(self) -> None:
        """Create or upgrade the schema; refuse a store from a newer turneval."""
        from alembic import command
        from alembic.config import Config
        from alembic.runtime.migration import MigrationContext
        from alembic.script import ScriptDirectory
        from sqlalchemy import text

        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
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

"""A persistent judge cache in SQLite (stdlib): identical requests are answered from disk."""

from __future__ import annotations

import json
import sqlite3
import tempfile
import threading
import warnings
from collections.abc import Iterable
from os import PathLike
from pathlib import Path
from typing import Any

from turneval.errors import ConfigError

__all__ = ["CacheWarning", "SQLiteCache"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS judge_cache (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    created REAL NOT NULL DEFAULT (julianday('now'))
)
"""

_PROBE = "turneval:write-probe"  # written and rolled back when the cache is opened


class CacheWarning(UserWarning):
    """The judge cache cannot store (or read) answers; the run goes on without it.

    Every answer the judge gives is still used: a cache that fails costs re-asking next
    time, never a row.
    """


class SQLiteCache:
    """Judge answers keyed by model identity and parameters, messages and output schema.

    Each answer is committed as it arrives (a crashed run resumes without paying twice). The
    database runs in WAL mode with a busy timeout, so several processes or threads may read and
    write it at once; writes of the same key keep the first answer.

    A cache that cannot be written (a read-only file or folder, a full disk) is found when it
    is opened, before any request is paid: a :class:`CacheWarning` names the path (and the
    folder or file that is read-only), answers already stored are still read, and new ones are
    not stored. In a read-only folder the file is read through the ``-shm`` index a connected
    writer keeps there, or else read as it stands. A cache that fails later (a read or a write
    raising) warns once the same way and is left out for the rest of the run; the judge's
    answer is used either way.

    Args:
        path: The database file; created with its parent folder if missing.

    Raises:
        ConfigError: The file is not a SQLite database, cannot be read at all, or does not
            exist and cannot be created (its folder is read-only or cannot be made): a cache
            that could never answer is refused before the run, naming the folder or file.

    Attributes:
        writable: False once writes are known to fail (new answers are not stored).
        readable: False once reads are known to fail (every request goes to the judge).
    """

    def __init__(self, path: str | PathLike[str]) -> None:
        """Open (or create) the cache at ``path``; warn if it cannot be written."""
        self.path = Path(path)
        self._lock = threading.Lock()
        self.writable = self.readable = True
        if not _exists(self.path):
            self._connection = self._create()
        else:
            self._connection, refused, snapshot = self._open()
            if refused is not None:  # opened read-only: answers are read, new ones not stored
                self._fail(
                    "cannot be written",
                    self._explained(refused, snapshot=snapshot),
                    reads=not self._has_table(),
                )
                return
        try:  # before the run: can it store an answer? (a rolled-back write)
            self._connection.execute("PRAGMA journal_mode=WAL")
            self._connection.execute(_SCHEMA)
            self._connection.execute("BEGIN IMMEDIATE")
            try:
                self._connection.execute(
                    "INSERT OR REPLACE INTO judge_cache (key, value) VALUES (?, '{}')", (_PROBE,)
                )
            finally:
                self._connection.execute("ROLLBACK")
        except sqlite3.Error as exc:
            self._fail("cannot be written", self._explained(exc), reads=not self._has_table())

    def _create(self) -> sqlite3.Connection:
        """A new cache file (and its folder); a :class:`ConfigError` naming the folder if not."""
        folder = self.path.parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
            return _checked(self._connect(""))
        except (OSError, sqlite3.Error) as exc:
            if not folder.is_dir():
                reason = f"its folder {folder} cannot be made"
            elif not _can_write_in(folder):
                reason = f"its folder {folder} is read-only"
            else:
                reason = "SQLite cannot create it"
            raise ConfigError(
                f"judge cache {self.path} does not exist and cannot be created: {reason} "
                f"({_one_line(exc)}); pass a cache path in a folder you can write"
            ) from exc

    def _open(self) -> tuple[sqlite3.Connection, sqlite3.Error | None, bool]:
        """The existing cache, opened for writing if it can be, else for reading.

        Returns the connection, why it could not be opened for writing (None if it could) and
        whether it is read as a snapshot. A cache in WAL mode is read through its ``-shm``
        index: SQLite's ``mode=ro`` uses one that exists (a writer is connected) or that it can
        make beside the file. In a read-only folder without one, the file is read as it stands
        (``immutable=1``: what other processes store meanwhile is not seen). A file that no
        mode can read is a :class:`ConfigError`.
        """
        refused: sqlite3.Error | None = None
        for query in ("", "mode=ro", "immutable=1"):
            try:
                connection = _checked(self._connect(query))
            except sqlite3.OperationalError as exc:  # cannot open or read it this way
                refused = refused or exc
                continue
            except sqlite3.DatabaseError as exc:
                raise ConfigError(
                    f"judge cache {self.path} is not a readable SQLite database "
                    f"({_one_line(exc)}); move or delete it, or use another cache path"
                ) from exc
            return connection, refused, query == "immutable=1"
        assert refused is not None  # every way failed
        raise ConfigError(
            f"judge cache {self.path} cannot be read ({_one_line(refused)}); check its "
            "permissions, or use another cache path"
        ) from refused

    def _explained(self, exc: sqlite3.Error, *, snapshot: bool = False) -> BaseException:
        """``exc``, saying first which of the folder or the file is read-only (if either)."""
        folder = self.path.parent
        if not _can_write_in(folder):
            where = f"its folder {folder} is read-only"
        elif not _can_write(self.path):
            where = "the file is read-only"
        else:
            return exc
        if snapshot:
            where += ", so it is read as it stands"
        return sqlite3.OperationalError(f"{where}; SQLite: {_one_line(exc)}")

    def _connect(self, query: str) -> sqlite3.Connection:
        """A connection in autocommit mode; ``query`` holds SQLite URI parameters if any."""
        target: str | Path = self.path
        if query:
            target = f"{self.path.absolute().as_uri()}?{query}"
        return sqlite3.connect(
            target, timeout=30.0, check_same_thread=False, isolation_level=None, uri=bool(query)
        )

    def _has_table(self) -> bool:
        try:
            return bool(
                self._connection.execute(
                    "SELECT 1 FROM sqlite_master WHERE name = 'judge_cache'"
                ).fetchone()
            )
        except sqlite3.Error:
            return False

    def _fail(self, what: str, exc: BaseException, *, reads: bool) -> None:
        """Stop writing (and reading, if ``reads``) and say so once, naming the path."""
        if reads and self.readable:
            self.readable = self.writable = False
            effect = "this run does without it (every judge request is sent)"
        elif self.writable and not reads:
            self.writable = False
            effect = (
                "answers already in it are read, new ones are not stored (a re-run pays "
                "for them again)"
                if self.readable
                else "this run does without it"
            )
        else:
            return
        detail = _one_line(exc)
        warnings.warn(
            f"judge cache {self.path} {what} ({detail}); {effect}; every answer is still "
            "used. Fix its permissions or space, or pass another cache path",
            CacheWarning,
            stacklevel=3,
        )

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored answer for ``key``, or None (also when the cache cannot be read)."""
        if not self.readable:
            return None
        try:
            with self._lock:
                row = self._connection.execute(
                    "SELECT value FROM judge_cache WHERE key = ?", (key,)
                ).fetchone()
        except sqlite3.Error as exc:
            self._fail("cannot be read", exc, reads=True)
            return None
        return None if row is None else dict(json.loads(row[0]))

    def set(self, key: str, value: dict[str, Any], *, replace: bool = False) -> None:
        """Store ``value`` for ``key`` and commit at once.

        A first answer is kept unless ``replace`` (the judge replaces an entry that no longer
        validates). A write that fails warns once (:class:`CacheWarning`) and turns writing
        off; it never raises.
        """
        if not self.writable:
            return
        text = json.dumps(value, ensure_ascii=True)
        verb = "REPLACE" if replace else "IGNORE"
        try:
            with self._lock:
                self._connection.execute(
                    f"INSERT OR {verb} INTO judge_cache (key, value) VALUES (?, ?)", (key, text)
                )
        except sqlite3.Error as exc:
            self._fail("cannot be written", exc, reads=False)

    def set_many(
        self, items: Iterable[tuple[str, dict[str, Any]]], *, replace: bool = False
    ) -> None:
        """Store many answers in one transaction (as :meth:`set` does one; a failure warns once)."""
        if not self.writable:
            return
        rows = [(key, json.dumps(value, ensure_ascii=True)) for key, value in items]
        verb = "REPLACE" if replace else "IGNORE"
        try:
            with self._lock:
                self._connection.execute("BEGIN")
                try:
                    self._connection.executemany(
                        f"INSERT OR {verb} INTO judge_cache (key, value) VALUES (?, ?)", rows
                    )
                except BaseException:
                    self._connection.execute("ROLLBACK")
                    raise
                self._connection.execute("COMMIT")
        except sqlite3.Error as exc:
            self._fail("cannot be written", exc, reads=False)

    def __len__(self) -> int:
        """Number of stored answers (0 when the cache cannot be read)."""
        if not self.readable:
            return 0
        with self._lock:
            return int(self._connection.execute("SELECT COUNT(*) FROM judge_cache").fetchone()[0])

    def clear(self) -> None:
        """Remove every stored answer (nothing to do when the cache cannot be written)."""
        if not self.writable:
            return
        with self._lock:
            self._connection.execute("DELETE FROM judge_cache")

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._connection.close()

    def __repr__(self) -> str:
        """The cache's path."""
        return f"SQLiteCache({str(self.path)!r})"


def _exists(path: Path) -> bool:
    """Whether ``path`` exists (True when that cannot be told: opening it will say why)."""
    try:
        path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError:
        return True
    return True


def _can_write_in(folder: Path) -> bool:
    """Whether a file can be made in ``folder`` (tried: permission bits do not bind root)."""
    try:
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def _can_write(path: Path) -> bool:
    """Whether ``path`` opens for writing (opened, not written)."""
    try:
        with path.open("r+b"):
            return True
    except OSError:
        return False


def _checked(connection: sqlite3.Connection) -> sqlite3.Connection:
    """``connection``, once SQLite has read the whole file and found it sound (else closed)."""
    try:
        connection.execute("PRAGMA busy_timeout=30000")
        check = connection.execute("PRAGMA quick_check").fetchone()
        if check is None or check[0] != "ok":
            raise sqlite3.DatabaseError(str(check[0] if check else "no answer"))
    except BaseException:
        connection.close()
        raise
    return connection


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__

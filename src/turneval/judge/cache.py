"""A persistent judge cache in SQLite (stdlib): identical requests are answered from disk."""

from __future__ import annotations

import json
import sqlite3
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
    is opened, before any request is paid: a :class:`CacheWarning` names the path, answers
    already stored are still read, and new ones are not stored. A cache that fails later (a
    read or a write raising) warns once the same way and is left out for the rest of the run;
    the judge's answer is used either way.

    Args:
        path: The database file; created with its parent folder if missing.

    Attributes:
        writable: False once writes are known to fail (new answers are not stored).
        readable: False once reads are known to fail (every request goes to the judge).
    """

    def __init__(self, path: str | PathLike[str]) -> None:
        """Open (or create) the cache at ``path``; warn if it cannot be written."""
        self.path = Path(path)
        self._lock = threading.Lock()
        self.writable = self.readable = True
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._connection = sqlite3.connect(
                self.path, timeout=30.0, check_same_thread=False, isolation_level=None
            )
        except (OSError, sqlite3.Error) as exc:  # a folder that cannot be made or opened
            self._connection = sqlite3.connect(":memory:", check_same_thread=False)
            self._fail("cannot be opened", exc, reads=True)
            return
        try:
            self._connection.execute("PRAGMA busy_timeout=30000")
            check = self._connection.execute("PRAGMA quick_check").fetchone()
            if check is None or check[0] != "ok":
                raise sqlite3.DatabaseError(str(check[0] if check else "no answer"))
        except sqlite3.DatabaseError as exc:
            self._connection.close()
            raise ConfigError(
                f"judge cache {self.path} is not a readable SQLite database ({exc}); "
                "move or delete it, or use another cache path"
            ) from exc
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
            self._fail("cannot be written", exc, reads=not self._has_table())

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
        detail = " ".join(str(exc).split()) or type(exc).__name__
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

"""A persistent judge cache in SQLite (stdlib): identical requests are answered from disk."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable
from os import PathLike
from pathlib import Path
from typing import Any

from turneval.errors import ConfigError

__all__ = ["SQLiteCache"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS judge_cache (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL,
    created REAL NOT NULL DEFAULT (julianday('now'))
)
"""


class SQLiteCache:
    """Judge answers keyed by model identity and parameters, messages and output schema.

    Each answer is committed as it arrives (a crashed run resumes without paying twice). The
    database runs in WAL mode with a busy timeout, so several processes or threads may read and
    write it at once; writes of the same key keep the first answer.

    Args:
        path: The database file; created with its parent folder if missing.
    """

    def __init__(self, path: str | PathLike[str]) -> None:
        """Open (or create) the cache at ``path``."""
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._connection = sqlite3.connect(
            self.path, timeout=30.0, check_same_thread=False, isolation_level=None
        )
        try:
            self._connection.execute("PRAGMA journal_mode=WAL")
            self._connection.execute("PRAGMA busy_timeout=30000")
            self._connection.execute(_SCHEMA)
            check = self._connection.execute("PRAGMA quick_check").fetchone()
            if check is None or check[0] != "ok":
                raise sqlite3.DatabaseError(str(check[0] if check else "no answer"))
        except sqlite3.DatabaseError as exc:
            self._connection.close()
            raise ConfigError(
                f"judge cache {self.path} is not a readable SQLite database ({exc}); "
                "move or delete it, or use another cache path"
            ) from exc

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored answer for ``key``, or None."""
        with self._lock:
            row = self._connection.execute(
                "SELECT value FROM judge_cache WHERE key = ?", (key,)
            ).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def set(self, key: str, value: dict[str, Any], *, replace: bool = False) -> None:
        """Store ``value`` for ``key`` and commit at once.

        A first answer is kept unless ``replace`` (the judge replaces an entry that no longer
        validates).
        """
        text = json.dumps(value, ensure_ascii=True)
        verb = "REPLACE" if replace else "IGNORE"
        with self._lock:
            self._connection.execute(
                f"INSERT OR {verb} INTO judge_cache (key, value) VALUES (?, ?)", (key, text)
            )

    def set_many(
        self, items: Iterable[tuple[str, dict[str, Any]]], *, replace: bool = False
    ) -> None:
        """Store many answers in one transaction (as :meth:`set` does one)."""
        rows = [(key, json.dumps(value, ensure_ascii=True)) for key, value in items]
        verb = "REPLACE" if replace else "IGNORE"
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

    def __len__(self) -> int:
        """Number of stored answers."""
        with self._lock:
            return int(self._connection.execute("SELECT COUNT(*) FROM judge_cache").fetchone()[0])

    def clear(self) -> None:
        """Remove every stored answer."""
        with self._lock:
            self._connection.execute("DELETE FROM judge_cache")

    def close(self) -> None:
        """Close the database connection."""
        with self._lock:
            self._connection.close()

    def __repr__(self) -> str:
        """The cache's path."""
        return f"SQLiteCache({str(self.path)!r})"

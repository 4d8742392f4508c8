"""The batch run's folder: its state database, its lock and the digest of its input.

The folder's ``state.sqlite`` appears only once the run is planned whole (planning writes
``state.sqlite.part`` and renames it; see ``_submit``). One process at a time
works on a folder: it holds ``batch.lock`` (``fcntl.flock``) while it plans, reconciles, polls,
cancels or collects; another waits for it, then works from what the first wrote.
"""

from __future__ import annotations

import json
import os
import sqlite3
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Literal

from turneval.errors import ConfigError

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "LOCK_FILE",
    "PARTIAL_FILE",
    "STATE_FILE",
    "Fallback",
    "FolderLock",
    "State",
    "check_input",
    "discard_partial",
]

Fallback = Literal["fail", "sync"]
"""What becomes of a request the batches could not answer: a failed cell, or a live call."""

DEFAULT_MAX_ATTEMPTS = 3
"""Times a request is sent in batches at most (the first and its follow-ups)."""

STATE_FILE = "state.sqlite"
"""The run's state in its folder; it exists only once the run is planned whole."""

PARTIAL_FILE = "state.sqlite.part"
"""The state while the run is planned (renamed to :data:`STATE_FILE` at the end)."""

LOCK_FILE = "batch.lock"
"""The folder's lock file: held by the one process working on the run (its pid inside)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS requests (
    key TEXT PRIMARY KEY,
    custom_id TEXT,
    state TEXT NOT NULL,
    sends INTEGER NOT NULL DEFAULT 0,
    repairs INTEGER NOT NULL DEFAULT 0,
    feedback TEXT NOT NULL DEFAULT '[]',
    batch TEXT,
    error TEXT,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS requests_custom_id ON requests (custom_id);
CREATE INDEX IF NOT EXISTS requests_state ON requests (state);
CREATE TABLE IF NOT EXISTS batches (
    local_id TEXT PRIMARY KEY,
    provider_id TEXT,
    round INTEGER NOT NULL,
    state TEXT NOT NULL,
    remote_status TEXT,
    created REAL NOT NULL,
    count INTEGER NOT NULL,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0
);
"""


class State:
    """The folder's state database (SQLite): every write is committed before the next step."""

    def __init__(self, path: Path, *, wal: bool = True) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute(f"PRAGMA journal_mode={'WAL' if wal else 'DELETE'}")
        self.db.executescript(_SCHEMA)
        columns = {row[1] for row in self.db.execute("PRAGMA table_info(requests)")}
        for name in ("input_tokens", "output_tokens"):  # a folder from before they were kept
            if name not in columns:
                try:
                    self.db.execute(
                        f"ALTER TABLE requests ADD COLUMN {name} INTEGER NOT NULL DEFAULT 0"
                    )
                except sqlite3.OperationalError:  # another process added it first
                    pass

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One immediate transaction: committed on leaving, rolled back on any exception."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def meta(self, name: str) -> Any:
        """The run's setting ``name`` (JSON), None when it was never written."""
        row = self.db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return None if row is None else json.loads(row[0])

    def set_meta(self, name: str, value: Any) -> None:
        """Write the run's setting ``name`` (as JSON)."""
        self.db.execute(
            "INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)", (name, json.dumps(value))
        )


if sys.platform == "win32":  # pragma: no cover - no flock: one process per folder is on you

    def _flock(handle: IO[str], wait: bool) -> bool:
        return True

else:
    import fcntl

    def _flock(handle: IO[str], wait: bool) -> bool:
        """Take the exclusive lock on ``handle``; False if another holds it and not ``wait``."""
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            return False
        return True


class FolderLock:
    """The run folder's lock (:data:`LOCK_FILE`): one process works on the run at a time.

    A second process waits for the first (saying once on stderr which process it waits for),
    then reads what the first wrote. Reentrant: a thread holding it may take it again; other
    threads of the process wait as other processes do.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._thread_lock = threading.RLock()
        self._depth = 0

    @contextmanager
    def held(self) -> Iterator[None]:
        """Hold the lock for the ``with`` block (waiting for another process that holds it)."""
        with self._thread_lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            path = self.folder / LOCK_FILE
            with path.open("a+", encoding="utf-8") as handle:  # closing it releases the lock
                if not _flock(handle, wait=False):
                    handle.seek(0)
                    holder = handle.read().strip() or "?"
                    print(
                        f"turneval: waiting for process {holder}, which is working on the "
                        f"batch run in {self.folder}",
                        file=sys.stderr,
                        flush=True,
                    )
                    _flock(handle, wait=True)
                handle.seek(0)
                handle.truncate()
                handle.write(f"{os.getpid()}\n")
                handle.flush()
                self._depth = 1
                try:
                    yield
                finally:
                    self._depth = 0


def discard_partial(folder: Path) -> None:
    """Remove the state of a planning that was stopped (it never became the run's)."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        (folder / (PARTIAL_FILE + suffix)).unlink(missing_ok=True)


def check_input(folder: Path, recorded: dict[str, Any] | None, data: Path) -> None:
    """Refuse ``data`` when the run in ``folder`` was submitted with another input."""
    from turneval.store import file_digest

    if recorded is None:  # a folder from before the input was recorded
        return
    digest = file_digest(data)
    if digest is None:
        raise ConfigError(f"{data}: cannot be read (no such file, or not readable)")
    if digest != recorded.get("sha256"):
        submitted = recorded.get("path") or "samples given in memory"
        raise ConfigError(
            f"{folder} holds the batch run of {submitted} (sha256 {recorded.get('sha256')}), "
            f"not of {data} (sha256 {digest}): collect that run as it is, or give this "
            "input another folder"
        )

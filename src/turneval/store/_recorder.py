"""A run's rows written to the store as they finish: :class:`RunRecorder`.

Rows are buffered and written in batches (one transaction each, ``COPY`` on PostgreSQL), from
the caller's thread or a writer thread of their own; the run's end (summary, status, error)
is written last.
"""

from __future__ import annotations

import json
import queue
import threading
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from time import monotonic
from types import TracebackType
from typing import TYPE_CHECKING, Any

from turneval.errors import ConfigError
from turneval.store._engine import now

if TYPE_CHECKING:
    from turneval.results import SampleResult
    from turneval.store._store import RunStore

STATUSES = ("running", "finished", "failed", "interrupted")
"""A stored run's status: ``running`` until it ends one of the three other ways."""

_FLUSH_SECONDS = 1.0  # a slow run's rows reach the store at least this often


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
            "finished": now(),
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

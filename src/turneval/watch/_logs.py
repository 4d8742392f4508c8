"""The watcher's files: appended whole or not at all, and read back after a crash.

``spool.jsonl`` (every accepted request's new spans), ``ledger.jsonl`` (each conversation's
claim, each scored batch's spend) and, without a store, ``results.jsonl`` are :class:`Log`
files: a write or an fsync that fails (a full disk) is cut back off the file, so no torn line
is left between whole ones. A crash may still leave a last line without its newline:
:func:`cut_torn` removes it before the files are read again.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["Log", "cut_torn", "read_lines"]


class Log:
    """An append-only JSON Lines file whose appends are on disk whole, or not in it at all.

    Each append is written with ``os.write`` and fsync'd; when either fails, the bytes written
    past the last whole append are cut off again (and, should that fail too, before the next
    append), so a full disk never leaves a torn line between whole ones.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.size = os.fstat(self.fd).st_size
        self._dirty = False

    def append(self, records: Iterable[Any]) -> None:
        """Append ``records`` as JSON lines, fsync'd; raises ``OSError`` with nothing appended."""
        self.write(b"".join(_dumps(record) + b"\n" for record in records))

    def write(self, data: bytes) -> None:
        """Append ``data`` (whole lines), fsync'd; raises ``OSError`` with nothing appended."""
        if not data:
            return
        try:
            if self._dirty:
                os.ftruncate(self.fd, self.size)
                self._dirty = False
            self._dirty = True
            view, done = memoryview(data), 0
            while done < len(data):
                written = os.write(self.fd, view[done:])
                if written <= 0:  # pragma: no cover - a regular file never writes nothing
                    raise OSError(errno.EIO, "write wrote nothing", str(self.path))
                done += written
            os.fsync(self.fd)
        except OSError as exc:
            with contextlib.suppress(OSError):  # else cut at the next append
                os.ftruncate(self.fd, self.size)
                self._dirty = False
            if exc.filename is None:
                exc.filename = str(self.path)
            raise
        self._dirty = False
        self.size += len(data)

    def close(self) -> None:
        """Close the file."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def cut_torn(path: Path) -> None:
    """Cut a last line a crash left without its newline."""
    if not path.exists():
        return
    with path.open("rb+") as handle:
        data = handle.read()
        if data and not data.endswith(b"\n"):
            handle.truncate(data.rfind(b"\n") + 1)


def read_lines(path: Path) -> Iterator[dict[str, Any]]:
    if not path.exists():
        return
    with path.open("rb") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


try:  # orjson (a langsmith dependency, so nearly always present) writes JSON about 5x faster
    from orjson import dumps as _fast_dumps
except ImportError:  # pragma: no cover
    _fast_dumps = None  # type: ignore[assignment]


def _dumps(record: Any) -> bytes:
    if _fast_dumps is not None:
        try:
            return _fast_dumps(record)
        except TypeError:  # what orjson refuses (an integer past 64 bits): the stdlib writes it
            pass
    return json.dumps(record, separators=(",", ":")).encode()

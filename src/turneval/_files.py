"""Writing output files: an OSError names the file it was writing (a failed write names none)."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from os import PathLike
from pathlib import Path

__all__ = [
    "AppendLog",
    "file_digest",
    "naming",
]


@contextmanager
def naming(path: str | PathLike[str]) -> Iterator[None]:
    """Re-raise an OSError of the block with ``path`` as its file name, if it names none.

    ``write()`` and ``flush()`` fail without a file name (``[Errno 28] No space left on
    device``); the CLI's message then says which file could not be written.
    """
    try:
        yield
    except OSError as exc:
        if exc.filename is not None or exc.errno is None:
            raise
        raise OSError(exc.errno, exc.strerror or str(exc), str(path)) from exc


class AppendLog:
    """An append-only file whose appends are on disk whole, or not in it at all.

    Each append is written with ``os.write`` and fsync'd; when either fails, the bytes written
    past the last whole append are cut off again (and, should that fail too, before the next
    append), so a full disk never leaves a torn line between whole ones.
    """

    def __init__(self, path: str | PathLike[str]) -> None:
        """Open ``path`` for appending (created if missing)."""
        self.path = Path(path)
        self.fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.size = os.fstat(self.fd).st_size
        self._dirty = False

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


def file_digest(path: str | PathLike[str]) -> str | None:
    """The SHA-256 of a file (None when it cannot be read)."""
    digest = hashlib.sha256()
    try:
        with Path(path).open("rb") as handle:
            for block in iter(lambda: handle.read(2**20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()

"""Writing output files: an OSError names the file it was writing (a failed write names none)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from os import PathLike

__all__ = ["naming"]


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

"""The watcher's files: appended whole or not at all, and read back after a crash.

``spool.jsonl`` (every accepted request's new spans), ``ledger.jsonl`` (each conversation's
claim, each scored batch's spend) and, without a store, ``results.jsonl`` are :class:`Log`
files: a write or an fsync that fails (a full disk) is cut back off the file, so no torn line
is left between whole ones. A crash may still leave a last line without its newline:
:func:`cut_torn` removes it before the files are read again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from turneval._files import AppendLog

__all__ = ["Log", "cut_torn", "read_lines"]


class Log(AppendLog):
    """An append-only JSON Lines file whose appends are on disk whole, or not at all.

    :class:`~turneval._files.AppendLog` (written and fsync'd whole, a failed append cut back
    off), with records appended as JSON lines.
    """

    def append(self, records: Iterable[Any]) -> None:
        """Append ``records`` as JSON lines, fsync'd; raises ``OSError`` with nothing appended."""
        self.write(b"".join(_dumps(record) + b"\n" for record in records))


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

"""Runs in, runs out: where a run's rows go (sinks) and where a run is read back from.

Out: a :class:`RunSink` is told a run starts (with its
:class:`~turneval.manifest.RunManifest`), receives its finished rows (:class:`Rows`) and is
told how it ended. Three come with turneval: :class:`MemorySink` (rows kept in memory),
:class:`FolderSink` (a run folder: ``run.json``, ``results.jsonl``, ``summary.json``; the
streamed run and ``turneval watch`` write through it) and :class:`StoreSink` (a run store,
as the rows finish). Any object with the three methods is a sink too: pass it to a run as
``sinks=[...]``.

In: :func:`open_run` reads a run folder, a ``results.jsonl``, a ``summary.json`` or a stored
run's id, and returns an :class:`OpenedRun`: the rows with their manifest (the metrics
rebuilt), the summary, and :meth:`OpenedRun.write` to send the run into other sinks.
"""

from typing import TYPE_CHECKING, Any

from turneval.runs._folder import FolderSink
from turneval.runs._open import OpenedRun, open_run
from turneval.runs._sink import STATUSES, MemorySink, RowKey, Rows, RunSink, end_status, row_key

if TYPE_CHECKING:
    from turneval.runs._store import StoreSink

__all__ = [
    "FolderSink",
    "MemorySink",
    "OpenedRun",
    "RowKey",
    "Rows",
    "RunSink",
    "STATUSES",
    "StoreSink",
    "end_status",
    "open_run",
    "row_key",
]


def __getattr__(name: str) -> Any:
    """``StoreSink`` on first use: importing :mod:`turneval.runs` loads no store (SQLAlchemy)."""
    if name == "StoreSink":
        from turneval.runs._store import StoreSink

        return StoreSink
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

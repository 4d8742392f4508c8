"""The store sink: a run kept in a run store (:class:`~turneval.store.RunStore`) as it goes.

It wraps the store's :class:`~turneval.store.RunRecorder`: :meth:`StoreSink.start` records
the run (its manifest's metrics and judge), :meth:`StoreSink.add` hands the rows (their
results.jsonl lines, with their samples) to the recorder, which writes them in batches, and
:meth:`StoreSink.finish` ends the run with its summary and status.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from turneval.errors import ConfigError
from turneval.manifest import RunManifest
from turneval.runs._sink import Rows
from turneval.store import RunRecorder, RunStore, file_digest

__all__ = ["StoreSink"]


class StoreSink:
    """Keeps a run in a run store as its rows finish.

    Args:
        store: The store, or its URL or path (opened here; closed when the run ends).
        name: The run's name in the store (``turneval store list``, the viewer).
        out_dir: The run folder a streamed run writes (with ``resume``, the stored run of
            that folder is continued).
        resume: Continue the newest stored run of ``out_dir`` (a new one when there is none).
        details: Whether rows encoded here keep each result's details.
        streamed: Write each batch from a thread of the recorder's own while the next is
            scored, and flush at every :meth:`add` (a streamed run's chunks).

    Attributes:
        store: The store.
        run_id: The run's id in the store (None until it starts).
    """

    def __init__(
        self,
        store: RunStore | str | os.PathLike[str],
        *,
        name: str,
        out_dir: str | os.PathLike[str] | None = None,
        resume: bool = False,
        details: bool = True,
        streamed: bool = False,
    ) -> None:
        """Open the store (a URL or path: closed when the run ends); nothing is written yet."""
        opened = RunStore.coerce(store)
        if opened is None:
            raise ConfigError("StoreSink needs a run store, its URL or its path")
        self.store = opened
        self.name, self.out_dir, self.resume = name, out_dir, resume
        self.details, self.streamed = details, streamed
        self.recorder: RunRecorder | None = None

    @property
    def run_id(self) -> str | None:
        """The run's id in the store (None until it starts)."""
        return None if self.recorder is None else self.recorder.run_id

    def start(self, manifest: RunManifest) -> None:
        """Record the run (status ``running``): its metrics, judge and input.

        The input is its path and, for a file, the SHA-256 of the whole file.
        """
        dataset = manifest.dataset
        path = None if dataset is None else dataset.path
        digest = None if dataset is None else dataset.sha256
        known = None if dataset is None or dataset.version is None else dataset.version
        if known is not None and known.get("digest"):
            digest = str(known["digest"])  # the whole file's, as the manifest records it
        elif path is not None and os.path.isfile(path):
            digest = file_digest(path)
        self.recorder = self.store.start_run(
            name=self.name,
            manifest=manifest,
            dataset_path=None if path is None else str(Path(path).resolve()),
            dataset_digest=digest,
            out_dir=self.out_dir,
            resume=self.resume,
            details=self.details,
        )

    def sync(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Make the stored rows those of a resumed run's file (its finished rows)."""
        self._recorder().sync(records)

    def add(self, rows: Rows) -> None:
        """Hand the rows (lines and samples) to the recorder; written in batches."""
        recorder = self._recorder()
        if self.streamed:
            recorder.in_background()  # stored while the next chunks are scored
        recorder.expect(rows.samples)
        recorder.add_rows(rows.keys, rows.lines)  # the rows as written, not re-read
        if self.streamed:
            recorder.flush()

    def flush(self) -> None:
        """Write the rows buffered so far."""
        self._recorder().flush()

    def finish(
        self, summary: Mapping[str, Any] | None, status: str, error: str | None = None
    ) -> None:
        """Write what is buffered and end the run: its summary, status and error.

        A failed or interrupted run is ended even when the store itself fails then (the
        run's own error is the one that counts).
        """
        recorder = self._recorder()
        if status == "finished":
            recorder.finish(summary, status=status, error=error)
            return
        try:
            recorder.finish(summary, status=status, error=error)
        except Exception:
            recorder.abandon()

    def _recorder(self) -> RunRecorder:
        if self.recorder is None:
            raise ConfigError("the store sink has not started: call start(manifest) first")
        return self.recorder

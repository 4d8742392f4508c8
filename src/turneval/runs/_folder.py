"""The folder sink: a run folder's ``run.json``, ``results.jsonl`` and ``summary.json``.

``run.json`` (the :class:`~turneval.manifest.RunManifest`) is written before the first row;
the rows are appended to ``results.jsonl`` in the order they are added, each line flushed (or,
``durable``, fsync'd whole or not at all); ``summary.json`` is written when the run finishes
with a summary. With ``source``, the folder also records how much of the input file the run
has read (the digest of its first lines, growing as :meth:`FolderSink.read_to` is told) and
the dataset version it reads (the whole file's digest, unless the manifest names the version
already: :attr:`~turneval.manifest.DatasetSpec.version`), so that a resumed run
(``append=True``) continues only the run it was started as: the metrics with their
configurations (but for fields that change no score, :data:`~turneval.manifest.NOT_SCORING`),
the judge and the input read so far must be the same, or :meth:`FolderSink.start` refuses,
naming the first difference.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from turneval._files import AppendLog, naming
from turneval.errors import ConfigError
from turneval.manifest import RUN_FILE, DatasetSpec, RunManifest, dataset_version
from turneval.runs._sink import Rows

__all__ = ["FolderSink"]


class _InputDigest:
    """The SHA-256 of an input file's first lines, as far as the run has read it."""

    def __init__(self, source: Path) -> None:
        self.source = source
        self.digest = hashlib.sha256()
        self.lines = self.bytes = 0
        self._handle: IO[bytes] | None = None

    def advance(self, line: int) -> None:
        """Read (and digest) the input up to ``line`` (1-based; fewer when it ends sooner)."""
        if self._handle is None:
            self._handle = self.source.open("rb")
        while self.lines < line:
            raw = self._handle.readline()
            if not raw:
                break
            self.digest.update(raw)
            self.lines += 1
            self.bytes += len(raw)

    def dataset(self, version: dict[str, Any] | None) -> DatasetSpec:
        return DatasetSpec(
            str(self.source), self.digest.hexdigest(), self.lines, self.bytes, version
        )

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


class FolderSink:
    """Writes a run into a folder: ``run.json``, ``results.jsonl`` and ``summary.json``.

    Args:
        folder: The run folder (created if missing).
        source: The input file the run reads, whose part read so far ``run.json`` records
            (:meth:`read_to`); None for samples given in memory.
        resume: Continue the folder's run: its ``run.json`` must record the same run
            (checked by :meth:`start`), and rows are appended to its results.jsonl.
        append: Append rows to the folder's results.jsonl without checking its run.json
            (``turneval watch``, whose folder outlives restarts). Without ``resume`` or
            ``append``, results.jsonl is replaced.
        durable: Each :meth:`add` is fsync'd, and a failed write (a full disk) is cut back off
            the file, never leaving a torn line between whole ones (``turneval watch``).
        keep_previous: A ``run.json`` already there that records another run is kept as
            ``run.json.previous`` (``turneval watch``, whose folder outlives restarts).

    Attributes:
        manifest: The run's manifest (None until it starts).
        unchecked: True when ``resume`` found no ``run.json`` to check (a folder of a
            turneval from before it): the run continues without the check.
    """

    def __init__(
        self,
        folder: str | os.PathLike[str],
        *,
        source: str | os.PathLike[str] | None = None,
        resume: bool = False,
        append: bool = False,
        durable: bool = False,
        keep_previous: bool = False,
    ) -> None:
        """Describe the folder; nothing is read or written until :meth:`start`."""
        self.folder = Path(folder)
        self.results_path = self.folder / "results.jsonl"
        self.resume, self.append = resume, append or resume
        self.durable, self.keep_previous = durable, keep_previous
        self.manifest: RunManifest | None = None
        self.unchecked = False
        self._input = None if source is None else _InputDigest(Path(source))
        self._version: dict[str, Any] | None = None
        self._handle: IO[str] | None = None
        self._log: AppendLog | None = None

    # -- the sink ------------------------------------------------------------------------

    def start(self, manifest: RunManifest) -> None:
        """Write ``run.json`` (or, resuming, check the folder's and keep it up to date).

        Raises:
            ConfigError: resuming, the folder's run.json records another run (one line
                naming the first difference: the metrics, a metric's configuration, the
                judge, or the input read so far), or is no run record.
        """
        self.folder.mkdir(parents=True, exist_ok=True)
        self.manifest = manifest
        if self._input is not None:
            given = manifest.dataset
            self._version = (
                given.version
                if given is not None and given.version is not None
                else dataset_version(self._input.source)
            )
            manifest.dataset = self._input.dataset(self._version)
        if self.resume:
            self._continue(manifest)
            return
        if self.keep_previous:
            self._keep_previous(manifest)
        self._save()
        if not self.append:
            with naming(self.results_path):
                self.results_path.open("w", encoding="utf-8").close()

    def add(self, rows: Rows) -> None:
        """Append the rows' lines to results.jsonl (each flushed; durable: fsync'd whole)."""
        if self.durable:
            if self._log is None:
                self._log = AppendLog(self.results_path)
            self._log.write("".join(line + "\n" for line in rows.lines).encode("utf-8"))
            return
        handle = self._open()
        with naming(self.results_path):
            for line in rows.lines:
                handle.write(line + "\n")
                handle.flush()

    def finish(
        self, summary: Mapping[str, Any] | None, status: str, error: str | None = None
    ) -> None:
        """Close results.jsonl; write ``summary.json`` when there is a summary."""
        self.close()
        if summary is not None:
            target = self.folder / "summary.json"
            with naming(target):
                target.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")

    # -- the input read so far -----------------------------------------------------------

    def read_to(self, line: int) -> None:
        """The run has read the input up to ``line`` (1-based): record its digest so far.

        Call it before the rows of those lines are added, so that every row in results.jsonl
        comes from input a resumed run checks.
        """
        if self._input is not None and line > self._input.lines:
            self._input.advance(line)
            self._save()

    def close(self) -> None:
        """Close results.jsonl and the input (the folder stays as written)."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._input is not None:
            self._input.close()

    # -- inside --------------------------------------------------------------------------

    def _open(self) -> IO[str]:
        if self._handle is None:
            with naming(self.results_path):
                self._handle = self.results_path.open("a", encoding="utf-8")
        return self._handle

    def _save(self) -> None:
        assert self.manifest is not None
        if self._input is not None:
            self.manifest.dataset = self._input.dataset(self._version)
        self.manifest.write(self.folder / RUN_FILE)

    def _keep_previous(self, manifest: RunManifest) -> None:
        path = self.folder / RUN_FILE
        try:
            before = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            before = None
        if before is not None and before != manifest.to_dict():
            os.replace(path, self.folder / (RUN_FILE + ".previous"))

    def _continue(self, manifest: RunManifest) -> None:
        stored = RunManifest.find(self.folder)
        if stored is None:  # a folder from before run.json: from now on it records this run
            self.unchecked = True
            self._save()
            return
        problem = next(iter(stored.changes(manifest)), "") or self._input_change(stored)
        if problem:
            raise ConfigError(
                f"cannot resume {self.folder}: {problem}; rerun without --resume "
                "(--overwrite) or into another --out folder"
            )
        manifest.turneval_version = stored.turneval_version
        self._save()

    def _input_change(self, stored: RunManifest) -> str:
        """How the input differs from the part the stored run read ("" when it does not)."""
        if self._input is None:
            return ""
        dataset = stored.dataset or DatasetSpec()
        if dataset.lines_read is None:  # an exported or in-memory run: nothing to continue
            return (
                "its run.json records no part of an input read (not the folder of a streamed run)"
            )
        lines = dataset.lines_read
        self._input.advance(lines)
        if self._input.lines < lines or self._input.digest.hexdigest() != dataset.sha256:
            short = "it has fewer lines" if self._input.lines < lines else "they differ"
            return (
                f"the input changed: the run had read lines 1-{lines} of "
                f"{dataset.path or '?'}; {short} in {self._input.source}"
            )
        return ""

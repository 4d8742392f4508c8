"""Runs in: :func:`open_run` reads a run from wherever it was kept, with its manifest.

A run is a folder (``--out``: results.jsonl, summary.json, run.json), its ``results.jsonl``,
its ``summary.json`` (the means alone when no rows sit beside it) or a run kept in a run store
(its id, or a unique prefix of it). Every command that takes a run (``compare``, ``plan``,
``calibrate``, ``clusters``, ``labels export``, ``regrade``, ``store export``) reads it here;
:meth:`OpenedRun.write` sends it into sinks (a stored run exported to a folder, a folder
imported into a store).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from turneval.errors import ConfigError
from turneval.manifest import RunManifest
from turneval.results import EvaluationResult
from turneval.results_codec import metric_names
from turneval.runs._sink import Rows, RunSink, end_status

if TYPE_CHECKING:
    from turneval.store import RunStore, StoredRun

__all__ = [
    "OpenedRun",
    "open_run",
]

_Kind = Literal["folder", "results", "summary", "store"]  # what a run was read from

_BATCH = 1000  # rows handed to a sink at a time when a run is written out


@dataclass
class OpenedRun:
    """A run read back: its rows, manifest and summary, from a folder, a file or a store.

    Attributes:
        ref: What the run was named by (a path, or a stored run's id).
        kind: ``folder``, ``results`` (a results.jsonl), ``summary`` (a summary.json) or
            ``store``.
        manifest: What the run was started with (None: a run from before ``run.json``, or
            a run.json that is no run record: see :attr:`manifest_error`).
        summary: Its summary document (summary.json, or the store's; None when there is
            none).
        path: The results.jsonl (or, means only, the summary.json) read; None for a stored
            run.
        store: The store a stored run was read from.
        stored: The stored run (None for a run on disk).
        manifest_error: Why the folder's run.json could not be read (None: it could, or
            there is none).
    """

    ref: str
    kind: _Kind
    manifest: RunManifest | None = None
    summary: dict[str, Any] | None = None
    path: Path | None = None
    store: RunStore | None = None
    stored: StoredRun | None = None
    manifest_error: str | None = None
    _owns_store: bool = field(default=False, repr=False)

    @property
    def has_rows(self) -> bool:
        """Whether the run has rows (False: a lone summary.json, its means only)."""
        return self.stored is not None or (self.path is not None and self.path.suffix != ".json")

    @property
    def label(self) -> str:
        """How messages name the run: its path, or ``run <id>`` for a stored one."""
        if self.stored is not None:
            return f"run {self.stored.id[:12]}"
        return str(self.path if self.path is not None else self.ref)

    @cached_property
    def result(self) -> EvaluationResult:
        """The run's rows with its manifest (its metrics rebuilt where they can be).

        See :meth:`~turneval.results.EvaluationResult.from_jsonl`.

        Raises:
            ConfigError: the run has no rows (a lone summary.json), or its results file does
                not read (naming the file and line).
        """
        if self.stored is not None:
            assert self.store is not None
            return EvaluationResult.from_records(
                self.store.records(self.stored.id), manifest=self.manifest
            )
        if not self.has_rows or self.path is None:
            raise ConfigError(f"{self.ref}: a summary.json alone holds means, no rows")
        try:
            return EvaluationResult.from_jsonl(
                self.path, manifest=self.manifest, find_manifest=False
            )
        except ConfigError:  # it names the file and line
            raise
        except (ValueError, TypeError) as exc:
            detail = " ".join(str(exc).split())
            raise ConfigError(f"{self.path}: not a results file ({detail})") from exc

    @property
    def metric_names(self) -> list[str]:
        """The run's metrics: its manifest's, else its summary's or its rows' columns."""
        if self.manifest is not None:
            return self.manifest.metric_names
        if not self.has_rows:
            return list(self.means())
        return self.result.metric_names

    def means(self) -> dict[str, float | None]:
        """Each metric's mean: from its rows, or its summary.json when it has no rows.

        Raises:
            ConfigError: a summary.json that is not turneval's (naming the file and field).
        """
        if self.has_rows:
            return {name: s.mean for name, s in self.result.summary().items()}
        assert self.path is not None
        return _summary_means(self.path, self.summary)

    def lines(self) -> Iterator[str]:
        """The run's results.jsonl lines as written (no newline), in order."""
        if self.stored is not None:
            assert self.store is not None
            yield from self.store.record_lines(self.stored.id)
            return
        if not self.has_rows or self.path is None:
            return
        with self.path.open(encoding="utf-8") as handle:
            for line in handle:
                text = line.rstrip("\r\n")
                if text.strip():
                    yield text

    def write(self, *sinks: RunSink, status: str = "finished") -> None:
        """Send the run into ``sinks``: its manifest, its rows as written and its summary.

        The rows go in batches, with the stored samples of a stored run. A run without a
        manifest starts the sinks with an empty one.
        """
        manifest = self.manifest or RunManifest()
        names = manifest.metric_names
        started: list[RunSink] = []
        try:
            for sink in sinks:
                sink.start(manifest)
                started.append(sink)
            batch: list[str] = []
            for text in self.lines():
                if not names:  # a run from before the manifest: its reason columns
                    names = metric_names(json.loads(text))
                batch.append(text)
                if len(batch) >= _BATCH:
                    self._send(sinks, batch, names)
                    batch = []
            if batch:
                self._send(sinks, batch, names)
        except BaseException as exc:
            ended, error = end_status(exc)
            for sink in started:
                with contextlib.suppress(Exception):  # the error to raise is the copy's
                    sink.finish(None, ended, error)
            raise
        for sink in sinks:
            sink.finish(self.summary, status)

    def _send(self, sinks: tuple[RunSink, ...], lines: list[str], names: list[str]) -> None:
        rows = Rows.encoded(lines, names)
        if self.stored is not None and self.store is not None:
            found = self.store.samples(self.stored.id, [key[0] for key in rows.keys])
            rows = Rows.encoded(
                lines,
                names,
                keys=rows.keys,
                inputs=[
                    None if found.get(key[0]) is None else json.dumps(found[key[0]])
                    for key in rows.keys
                ],
            )
        for sink in sinks:
            sink.add(rows)

    def close(self) -> None:
        """Close the store, if it was opened here from a URL."""
        if self._owns_store and self.store is not None:
            self.store.close()

    def __enter__(self) -> OpenedRun:
        """The run itself; closed on exit."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the store opened here."""
        self.close()


def open_run(
    ref: str | os.PathLike[str], store: RunStore | str | os.PathLike[str] | None = None
) -> OpenedRun:
    """Read a run: a folder, a ``results.jsonl``, a ``summary.json`` or a stored run's id.

    An existing path is read from disk: a run folder (its results.jsonl; summary.json and
    run.json beside it when they are there), a results file (a run folder's
    ``results.jsonl`` with its run.json; another file alone), or a ``.json`` summary (the
    results.jsonl beside it when there is one, else its means alone). Anything else is a run
    in ``store`` (a :class:`~turneval.store.RunStore`, or its URL or path), named by its id
    or a unique prefix of it. The rows are read when first asked for
    (:attr:`OpenedRun.result`).

    Raises:
        ConfigError: no such file or folder (and no store to look in), a folder without
            results.jsonl, no such stored run (or several), or a summary.json that is not
            turneval's.
    """
    text = os.fspath(ref)
    path = Path(text)
    if path.exists():
        return _from_disk(text, path)
    if store is None:
        raise ConfigError(
            f"{text}: no such file or folder (a stored run's id needs a run store: --store, or "
            "TURNEVAL_STORE)"
        )
    from turneval.store import RunStore  # a stored run: the store is loaded for it alone

    owns = not isinstance(store, RunStore)
    opened = RunStore.coerce(store)
    assert opened is not None
    try:
        stored = opened.run(text)
    except BaseException:
        if owns:
            opened.close()
        raise
    return OpenedRun(
        text,
        "store",
        stored.manifest,
        stored.summary,
        store=opened,
        stored=stored,
        _owns_store=owns,
    )


def _from_disk(ref: str, path: Path) -> OpenedRun:
    if path.is_dir():
        if not (path / "results.jsonl").is_file():
            raise ConfigError(f"{path}: a run folder holds results.jsonl; there is none")
        kind: _Kind = "folder"
        results, folder = path / "results.jsonl", path
    elif path.suffix == ".json":
        kind, folder = "summary", path.parent
        results = folder / "results.jsonl"
        if not results.is_file():
            run = OpenedRun(ref, kind, summary=_read_summary(path), path=path)
            _attach_manifest(run, folder)
            return run
    else:
        kind, results, folder = "results", path, path.parent
    run = OpenedRun(ref, kind, path=results)
    if results.name == "results.jsonl":  # a run folder's: its summary and run.json beside it
        beside = folder / "summary.json"
        run.summary = _read_summary(beside) if beside.is_file() else None
        _attach_manifest(run, folder)
    return run


def _attach_manifest(run: OpenedRun, folder: Path) -> None:
    try:
        run.manifest = RunManifest.find(folder)
    except ConfigError as exc:
        run.manifest_error = str(exc)


def _read_summary(path: Path) -> dict[str, Any]:
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:  # a JSON error gives its line and column; UTF-8 its byte
        raise ConfigError(f"{path}: not a turneval summary.json ({exc})") from exc
    if not isinstance(summary, dict) or not isinstance(summary.get("metrics"), dict):
        raise ConfigError(f'{path}: not a turneval summary.json (no "metrics" object)')
    return summary


def _summary_means(path: Path, summary: dict[str, Any] | None) -> dict[str, float | None]:
    document = summary if summary is not None else _read_summary(path)
    means: dict[str, float | None] = {}
    for name, entry in document["metrics"].items():
        mean = entry.get("mean", ...) if isinstance(entry, dict) else ...
        if mean is not None and (isinstance(mean, bool) or not isinstance(mean, int | float)):
            raise ConfigError(
                f"{path}: not a turneval summary.json (metrics.{name}: expected a number or "
                f'null under "mean", got {"nothing" if mean is ... else repr(mean)})'
            )
        means[name] = None if mean is None else float(mean)
    return means

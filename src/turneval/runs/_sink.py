"""Where a run's rows go: the :class:`RunSink` protocol, :class:`Rows`, and the memory sink.

A sink is told a run starts (:meth:`RunSink.start`, with its
:class:`~turneval.manifest.RunManifest`), receives its finished rows in batches
(:meth:`RunSink.add`) and is told how it ended (:meth:`RunSink.finish`, with the summary
document summary.json holds). Every front end writes through sinks: the memory sink
(:class:`MemorySink`), the folder sink (:class:`~turneval.runs.FolderSink`: results.jsonl,
summary.json, run.json) and the store sink (:class:`~turneval.runs.StoreSink`); any object
with these three methods is one too (``evaluate(..., sinks=[MySink()])``).

:class:`Rows` hands a batch of rows over in whichever form its writer has: row objects (in
memory) or their results.jsonl lines (a streamed chunk, encoded once, in worker processes);
the other form is made only when a sink asks for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from turneval._rows import SampleResult, json_line
from turneval.manifest import RunManifest
from turneval.results import EvaluationResult
from turneval.results_codec import decode, encode

__all__ = [
    "MemorySink",
    "RowKey",
    "Rows",
    "RunSink",
    "STATUSES",
    "end_status",
    "row_key",
]

STATUSES = ("finished", "failed", "interrupted")
"""How a run ends (:meth:`RunSink.finish`): every row done; stopped by an error (or
``fail_on_error``); stopped on purpose (Ctrl-C, SIGTERM, a cancellation, ``stop``)."""

RowKey = tuple[int, int | None, str | None, bool]
"""What a store indexes a row by: ``(index, input line, sample id, failed)``."""


def row_key(record: Mapping[str, Any], names: Sequence[str]) -> RowKey:
    """A results.jsonl record's :data:`RowKey` (failed: a metric's or the agent's error)."""
    sample_id = record.get("id")
    line = record.get("line")
    failed = bool(record.get("agent_error")) or any(record.get(f"{n}_error") for n in names)
    return (
        int(record["index"]),
        None if line is None else int(line),
        None if sample_id is None else str(sample_id),
        failed,
    )


class Rows:
    """A batch of finished rows, as row objects or as their results.jsonl lines.

    Build it with :meth:`of` (row objects: the lines are encoded when a sink asks) or
    :meth:`encoded` (lines: the rows are decoded when a sink asks, without samples).

    Attributes:
        names: The run's metric names (the columns of the lines).
        details: Whether encoded lines keep each result's details.
    """

    __slots__ = ("_inputs", "_keys", "_lines", "_results", "_samples", "details", "names")

    def __init__(
        self,
        names: Sequence[str],
        *,
        results: Sequence[SampleResult] | None = None,
        lines: Sequence[str] | None = None,
        keys: Sequence[RowKey] | None = None,
        samples: Sequence[str | None] | None = None,
        inputs: Sequence[str | bytes | None] | None = None,
        details: bool = True,
    ) -> None:
        """Hold rows in either form (one of ``results`` and ``lines`` is needed).

        ``samples`` are the rows' samples as JSON text, or ``inputs`` the input lines they
        were read from (decoded when asked); ``keys`` the rows' :data:`RowKey` (computed from
        the lines when not given).
        """
        if results is None and lines is None:
            raise ValueError("Rows needs results or lines")
        self.names, self.details = list(names), details
        self._results = None if results is None else list(results)
        self._lines = None if lines is None else list(lines)
        self._keys = None if keys is None else list(keys)
        self._samples = None if samples is None else list(samples)
        self._inputs = inputs

    @classmethod
    def of(
        cls, results: Sequence[SampleResult], names: Sequence[str], *, details: bool = True
    ) -> Rows:
        """Rows from row objects (their samples included, where they have them)."""
        return cls(names, results=results, details=details)

    @classmethod
    def encoded(
        cls,
        lines: Sequence[str],
        names: Sequence[str],
        *,
        keys: Sequence[RowKey] | None = None,
        inputs: Sequence[str | bytes | None] | None = None,
    ) -> Rows:
        """Rows from their results.jsonl lines (no newline), with their input lines if known."""
        return cls(names, lines=lines, keys=keys, inputs=inputs)

    def __len__(self) -> int:
        """How many rows."""
        return len(self._lines if self._lines is not None else self._results or ())

    @property
    def results(self) -> list[SampleResult]:
        """The rows (decoded from the lines when given as lines: no samples)."""
        if self._results is None:
            assert self._lines is not None
            import json

            self._results = [
                decode(json.loads(line), self.names, number)
                for number, line in enumerate(self._lines, start=1)
            ]
        return self._results

    @property
    def lines(self) -> list[str]:
        """The results.jsonl lines (encoded from the rows when given as rows)."""
        if self._lines is None:
            assert self._results is not None
            self._lines = [
                json_line(encode(row, self.names, details=self.details)) for row in self._results
            ]
        return self._lines

    @property
    def keys(self) -> list[RowKey]:
        """Each row's :data:`RowKey`."""
        if self._keys is None:
            if self._results is not None:
                self._keys = [
                    (row.index, row.line, row.sample_id, bool(row.failures))
                    for row in self._results
                ]
            else:
                import json

                self._keys = [row_key(json.loads(line), self.names) for line in self.lines]
        return self._keys

    @property
    def samples(self) -> list[str | None]:
        """Each row's sample as JSON text (None where it is not known)."""
        if self._samples is None:
            if self._inputs is not None:
                self._samples = [
                    None
                    if text is None
                    else text.decode("utf-8", "replace")
                    if isinstance(text, bytes)
                    else str(text)
                    for text in self._inputs
                ]
            elif self._results is not None:
                self._samples = [
                    None if row.sample is None else row.sample.model_dump_json(exclude_none=True)
                    for row in self._results
                ]
            else:
                self._samples = [None] * len(self)
        return self._samples


@runtime_checkable
class RunSink(Protocol):
    """Where a run's rows go: told it starts, given its rows, told how it ended.

    A front end calls :meth:`start` once before the first row, :meth:`add` with each batch
    of finished rows (in completion order in memory, input order when streamed; a row's
    ``index`` is its place) and :meth:`finish` once at the end, also when the run fails.
    A sink that raises stops the run (the error is the run's).
    """

    def start(self, manifest: RunManifest) -> None:
        """The run starts: what it was started with."""
        ...

    def add(self, rows: Rows) -> None:
        """Finished rows."""
        ...

    def finish(
        self, summary: Mapping[str, Any] | None, status: str, error: str | None = None
    ) -> None:
        """The run ended: its summary, status (one of :data:`STATUSES`) and error.

        The summary is the summary.json document (None when the run failed before one); the
        error says why it did not finish (one line; None when it did).
        """
        ...


def end_status(exc: BaseException) -> tuple[str, str]:
    """``(status, error)`` of a run stopped by ``exc``.

    ``interrupted`` for Ctrl-C, SIGTERM's ``SystemExit`` or a cancellation, else ``failed``;
    the error as one line.
    """
    stopped = isinstance(exc, (KeyboardInterrupt, SystemExit, asyncio.CancelledError))
    message = f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:2000]
    return ("interrupted" if stopped else "failed"), message


class MemorySink:
    """Keeps a run in memory: its manifest, rows (in index order), summary and status.

    Attributes:
        manifest: What the run was started with (None until it starts).
        rows: The rows received, by index.
        summary: The summary document (None until it finishes with one).
        status: ``running`` until it finishes, then one of :data:`STATUSES`.
        error: Why it did not finish (None when it did).
    """

    def __init__(self, on_row: Callable[[SampleResult], None] | None = None) -> None:
        """Empty; ``on_row`` is called with each row received."""
        self.manifest: RunManifest | None = None
        self.rows: dict[int, SampleResult] = {}
        self.summary: dict[str, Any] | None = None
        self.status = "running"
        self.error: str | None = None
        self._on_row = on_row

    def start(self, manifest: RunManifest) -> None:
        """Keep the manifest."""
        self.manifest = manifest

    def add(self, rows: Rows) -> None:
        """Keep the rows (a later row of an index replaces the earlier)."""
        for row in rows.results:
            self.rows[row.index] = row
            if self._on_row is not None:
                self._on_row(row)

    def finish(
        self, summary: Mapping[str, Any] | None, status: str, error: str | None = None
    ) -> None:
        """Keep the summary, the status and the error."""
        self.summary = None if summary is None else dict(summary)
        self.status, self.error = status, error

    def result(self) -> EvaluationResult:
        """The rows kept, in index order, with the manifest (its metrics rebuilt)."""
        names = [] if self.manifest is None else self.manifest.metric_names
        rows = [self.rows[index] for index in sorted(self.rows)]
        return EvaluationResult.with_manifest(rows, names, self.manifest)

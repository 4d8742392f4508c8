"""The state of ``turneval watch``: spans in, conversations out, nothing acknowledged lost.

Every accepted span is appended to ``spool.jsonl`` (and fsync'd) before the receiver answers,
and a request is taken whole or not at all: its spans are read and checked first, then
written; only once they are on disk does the watcher's state take them (a request refused,
for a bad span or a spool that cannot be written, leaves nothing behind, so its resend is new).
A conversation about to be scored is claimed in ``ledger.jsonl`` (its index and trace ids, and
its estimated judge cost under a budget); its row goes to ``results.jsonl`` (or the run store).
A restart replays the spool, drops the traces the ledger holds whose row was written, and
scores the others: each accepted conversation is scored exactly once.

Each of the three files is appended whole or not at all (``_logs.Log``): a write or an fsync
that fails (a full disk) is cut back off the file, so no torn line is left between whole ones.

The watcher's parts: ``_intake`` reads a request, ``_logs`` keeps the three files, ``_scoring``
decides and scores the complete conversations and ``_budget`` keeps the judge budget's
accounts; :class:`Watcher` holds the state they share, recovers it at start and takes each
request.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from turneval.errors import ConfigError
from turneval.manifest import RunManifest
from turneval.runs import FolderSink, StoreSink
from turneval.traces import SESSION_KEYS, Span, from_otlp_span
from turneval.watch._alerts import Alerts, OtelSink, ScoreHistograms

from ._budget import Budget, Spend
from ._intake import (
    Group,
    GroupBy,
    QueueFullError,
    RequestPlan,
    SpoolUnavailableError,
    read_request,
)
from ._logs import Log, cut_torn, read_lines
from ._scoring import SKIP_REASONS, Scoring

__all__ = ["Watcher"]


def _event_logger(endpoint: str) -> tuple[Any, Any]:
    """A logger provider exporting to ``endpoint`` (OTLP/HTTP, protobuf) and its logger."""
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

    url = endpoint.rstrip("/")
    url = url if url.endswith("/v1/logs") else f"{url}/v1/logs"
    provider = LoggerProvider()
    provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter(endpoint=url)))
    return provider, provider.get_logger("turneval.watch")


class Watcher(Scoring):
    """Spans accepted, assembled into conversations, and scored once each is complete.

    Args:
        metrics: The run's metrics (resolved).
        state: The folder of the spool, the ledger and (without a store) results.jsonl.
        store: A run store: rows go there (a run named ``watch``), and so does each skipped
            conversation with its reason; else rows go to results.jsonl.
        options: The run options (judge, concurrency, cache) of the scoring.
        group_by: One conversation per trace or per session.
        idle: Seconds without a new span after which a conversation is complete.
        max_queue: Spans held waiting at most; past it exports are refused (503).
        sample: The share of conversations scored (by a hash of their id).
        filters: ``(key, value)`` pairs a conversation's resource or span attributes must hold.
        budget: The judge budget, or None. Its period's spend is kept in the ledger, so a
            restart goes on counting where it stopped.
        prices: Judge prices (for a USD budget: input and output tokens), or None.
        export_to: An OTLP/HTTP endpoint (``http://host:4318``) the scores are sent to as
            ``gen_ai.evaluation.result`` events (:func:`~turneval.traces.to_otel_events`),
            parented to the traces they score; None sends nothing.
        alerts: Alert rules evaluated on the rows as they are written
            (:class:`~turneval.watch.Alerts`); with ``export_to``, their events are sent
            there too (``turneval.alert``).
    """

    def __init__(
        self,
        metrics: Sequence[Any],
        state: str | os.PathLike[str],
        *,
        store: Any = None,
        options: Any = None,
        group_by: GroupBy = "trace",
        idle: float = 30.0,
        max_queue: int = 100_000,
        sample: float = 1.0,
        filters: Sequence[tuple[str, str]] = (),
        budget: Budget | None = None,
        prices: Any = None,
        export_to: str | None = None,
        alerts: Alerts | None = None,
    ) -> None:
        from turneval.pipeline import RunOptions

        if group_by not in ("trace", "session"):
            raise ConfigError(f"group_by must be 'trace' or 'session', got {group_by!r}")
        if budget is not None and budget.unit == "USD" and prices is None:
            raise ConfigError("a USD budget needs the judge prices (--price-input, --price-output)")
        self.metrics = list(metrics)
        self.names = [metric.name for metric in self.metrics]
        self.options = options if options is not None else RunOptions()
        self.group_by, self.idle, self.max_queue = group_by, idle, max_queue
        self.rate, self.filters, self.budget, self.prices = sample, list(filters), budget, prices
        self.state = Path(state)
        self.state.mkdir(parents=True, exist_ok=True)
        self.lock = threading.RLock()
        self.counts: dict[str, float] = {
            "spans_accepted": 0,
            "spans_duplicate": 0,
            "spans_late": 0,
            "spans_invalid": 0,
            "requests_rejected": 0,
            "requests_unspooled": 0,
            "requests_bad": 0,
            "requests_too_large": 0,
            "requests_failed": 0,
            "connections_timed_out": 0,
            "connections_refused": 0,
            "conversations_complete": 0,
            "conversations_sampled": 0,
            "conversations_scored": 0,
            "rows_failed": 0,
            "judge_spend": 0.0,
            "errors": 0,
        }
        self.skipped = dict.fromkeys(SKIP_REASONS, 0)
        self._spans: dict[str, list[Span]] = {}  # trace id -> its spans
        self._resource: dict[str, dict[str, Any]] = {}  # trace id -> resource attributes
        self._key: dict[str, str] = {}  # trace id -> its conversation
        self._groups: dict[str, Group] = {}
        self._seen: set[tuple[str, str]] = set()
        # trace ids of conversations decided (scored or skipped), oldest first: a late span of
        # one is dropped; past DONE_KEPT per queue slot the oldest are forgotten (memory stays
        # bounded), while a restart reads every decision from the ledger
        self._done: dict[str, None] = {}
        self._queued = 0
        self._next = 0
        self._spend = Spend()  # the budget's current period
        self._periods: dict[float, float] = {}  # the ledger's spend by period start (restart)
        # what the judge spent against what was estimated (the next estimates learn from it)
        self._seen_spend = {"estimated_input": 0.0, "input": 0.0, "output": 0.0, "calls": 0.0}
        self._unwritten: list[Any] = []  # rows scored whose write failed: written next tick
        self._write_lock = threading.Lock()
        self.clock = time.time  # the wall clock budget periods follow (replaceable in tests)
        self.store = store
        self._recorder: Any = None  # the store sink (rows go to the store)
        self._folder = FolderSink(self.state, append=True, durable=True, keep_previous=True)
        self._provenance()
        if store is not None:
            self._recorder = StoreSink(
                store, name="watch", out_dir=self.state, resume=True, details=self.options.details
            )
            self._recorder.start(self._manifest)
        owner = self.state / "owner"
        if not owner.exists():
            import uuid

            owner.write_text(uuid.uuid4().hex)
        self.owner = owner.read_text().strip()
        self._events = None if export_to is None else _event_logger(export_to)
        # issue 49: every metric's scores for /metrics, and the alerts on them
        self.scores, self.alerts = ScoreHistograms(), alerts
        if alerts is not None:
            alerts.check_metrics(self.names)
            if self._events is not None:
                alerts.sinks.append(OtelSink(self._events[1]))
        self._recover()
        self._spool = Log(self.state / "spool.jsonl")
        self._ledger = Log(self.state / "ledger.jsonl")

    def _provenance(self) -> None:
        """``run.json`` in the state folder: turneval version, metrics and judge of the rows.

        Rewritten at each start (the configuration a restart runs with), after the previous
        one is kept as ``run.json.previous`` when it differs (the folder sink's ``start``).
        """
        self._manifest = RunManifest.of(
            self.metrics,
            self.options.llm,
            source="turneval watch",
            extra={"group_by": self.group_by, "sample": self.rate},
        )
        self._folder.start(self._manifest)

    # -- recovery ------------------------------------------------------------------------

    def _written(self) -> set[int]:
        """The indexes whose row was written (results.jsonl or the store)."""
        if self._recorder is None:
            return {int(r["index"]) for r in read_lines(self.state / "results.jsonl")}
        written: set[int] = self._recorder.store.stored_indexes(self._recorder.run_id)
        return written

    def _recover(self) -> None:
        for name in ("spool.jsonl", "ledger.jsonl", "results.jsonl"):
            cut_torn(self.state / name)
        written = self._written()
        for claim in read_lines(self.state / "ledger.jsonl"):
            if "spend" in claim:  # what a scored batch cost, against its estimate
                self._learn(claim)
                self._count_spend(claim.get("at"), claim["spend"] - claim.get("reserved", 0.0))
                continue
            index = claim.get("index")
            if index is None or int(index) in written:
                self._done.update(dict.fromkeys(claim["trace_ids"]))
                if claim.get("skipped"):
                    self.skipped[claim["skipped"]] = self.skipped.get(claim["skipped"], 0) + 1
                else:
                    self.counts["conversations_scored"] += 1
            if index is not None:
                self._next = max(self._next, int(index) + 1)
            self._count_spend(claim.get("at"), claim.get("cost", 0.0))
        if written:
            self._next = max(self._next, max(written) + 1)
        spool = self.state / "spool.jsonl"
        kept = [self._replay(document) for document in read_lines(spool)]
        compact = Log(self.state / "spool.jsonl.tmp")
        try:  # the spans still waiting, the scored ones left out
            os.ftruncate(compact.fd, 0)
            compact.size = 0
            compact.append(document for document in kept if document["resourceSpans"])
        finally:
            compact.close()
        os.replace(compact.path, spool)
        self._forget()

    def _replay(self, document: dict[str, Any]) -> dict[str, Any]:
        """Ingest a spooled request again; returns it without the spans already scored."""
        for resource in document.get("resourceSpans") or ():
            for scope in resource.get("scopeSpans") or ():
                scope["spans"] = [
                    raw
                    for raw in scope.get("spans") or ()
                    if from_otlp_span(raw).trace_id not in self._done
                ]
        self._commit(self._plan(read_request(document)), time.monotonic())
        document["resourceSpans"] = [
            resource
            for resource in document.get("resourceSpans") or ()
            if any(scope["spans"] for scope in resource.get("scopeSpans") or ())
        ]
        return document

    # -- receiving -----------------------------------------------------------------------

    def _plan(
        self, read: list[tuple[list[Any], dict[str, Any], list[tuple[Any, Span]]]]
    ) -> RequestPlan:
        """Which spans of a request read are new (call under the lock; changes nothing)."""
        plan = RequestPlan()
        counts = dict.fromkeys(("spans_invalid", "spans_duplicate", "spans_late"), 0)
        here: set[tuple[str, str]] = set()
        for raw_attributes, attributes, spans in read:
            kept: list[Any] = []
            for raw, span in spans:
                identity = (span.trace_id, span.span_id)
                if span.trace_id == "":
                    counts["spans_invalid"] += 1
                elif identity in self._seen or identity in here:
                    counts["spans_duplicate"] += 1
                elif span.trace_id in self._done:
                    counts["spans_late"] += 1
                else:
                    here.add(identity)
                    kept.append((raw, span))
            plan.spans.append((attributes, kept))
            plan.resources.append(raw_attributes)
        plan.counts = counts
        return plan

    def _commit(self, plan: RequestPlan, now: float) -> None:
        """Take a planned request's spans (its spool line is written): nothing here fails."""
        for name, value in plan.counts.items():
            self.counts[name] += value
        for attributes, spans in plan.spans:
            for _, span in spans:
                self._seen.add((span.trace_id, span.span_id))
                self._add(span, attributes, now)

    def _add(self, span: Span, resource: dict[str, Any], now: float) -> None:
        trace = span.trace_id
        self._spans.setdefault(trace, []).append(span)
        self._queued += 1
        self._resource.setdefault(trace, {}).update(resource)
        self.counts["spans_accepted"] += 1
        key = self._key.get(trace) or f"trace:{trace}"
        if self.group_by == "session":
            session = next(
                (span.attributes[k] for k in SESSION_KEYS if span.attributes.get(k)), None
            )
            if session is not None and key != f"session:{session}":
                old = self._groups.pop(key, None)
                key = f"session:{session}"
                if old is not None:
                    self._groups.setdefault(key, Group()).traces.update(old.traces)
        self._key[trace] = key
        group = self._groups.setdefault(key, Group())
        group.traces.add(trace)
        group.last = now

    @property
    def queued(self) -> int:
        """Spans held, waiting for their conversation to complete and be scored."""
        return self._queued

    def accept(self, document: dict[str, Any]) -> int:
        """Accept a decoded ``ExportTraceServiceRequest`` (OTLP/JSON form); returns new spans.

        All or nothing: when this returns, the request's new spans are in the spool
        (fsync'd); when it raises, nothing of the request was taken (a resend is new).

        Raises:
            BadRequestError: ``document`` is no request, or one of its spans is unreadable.
            QueueFullError: the queue has no room for its spans.
            SpoolUnavailableError: the spool cannot be written (a full disk).
        """
        read = read_request(document)
        with self.lock:
            plan = self._plan(read)
            incoming = plan.new
            if incoming and self.queued + incoming > self.max_queue:
                self.counts["requests_rejected"] += 1
                raise QueueFullError(f"{self.queued} spans wait (the queue holds {self.max_queue})")
            if incoming:
                try:
                    self._spool.append([plan.line()])
                except OSError as exc:
                    self.counts["requests_unspooled"] += 1
                    raise SpoolUnavailableError(
                        f"the spool cannot be written ({exc.strerror or exc}): "
                        "nothing of this request was taken; send it again later"
                    ) from exc
            self._commit(plan, time.monotonic())
            return incoming

    def __enter__(self) -> Watcher:
        """The watcher itself; closed on leaving."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close it."""
        self.close()

    def close(self) -> None:
        """Close the spool, the ledger and the results (the run stays ``running``)."""
        for handle in (self._spool, self._ledger):
            handle.close()
        self._folder.close()
        if self._recorder is not None:
            with contextlib.suppress(Exception):  # rows not written are scored after a restart
                self._recorder.flush()
        if self.alerts is not None:
            self.alerts.close()  # the webhooks under way are delivered
        if self._events is not None:
            self._events[0].shutdown()  # the events not yet sent are sent now

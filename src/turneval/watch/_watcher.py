"""The state of ``turneval watch``: spans in, conversations out, nothing accepted lost.

Every accepted span is appended to ``spool.jsonl`` (and fsync'd) before the receiver answers;
a conversation about to be scored is claimed in ``ledger.jsonl`` (its index and trace ids);
its row goes to ``results.jsonl`` (or the run store). A restart replays the spool, drops the
traces the ledger holds whose row was written, and scores the others: each accepted
conversation is scored exactly once.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from turneval._version import VERSION
from turneval.errors import ConfigError
from turneval.traces import (
    SESSION_KEYS,
    Span,
    from_otlp_span,
    otlp_attributes,
    trace_conversation,
)

GroupBy = Literal["trace", "session"]
DONE_KEPT = 10  # decided trace ids remembered per queue slot (for dropping late spans)
SKIP_REASONS = ("no_conversation", "filtered", "sampled_out", "elsewhere", "budget")


class QueueFullError(Exception):
    """More spans wait than the queue holds: the receiver answers 503 with ``Retry-After``."""


class BadRequestError(ValueError):
    """A body that is no ``ExportTraceServiceRequest``: the receiver answers 400 with the reason."""


def sampled(conversation_id: str, rate: float) -> bool:
    """Whether a conversation is in a ``rate`` sample: deterministic, a hash of its id.

    The id is the row's (the trace id, or the session id with ``group_by="session"``); the
    first 8 bytes of its SHA-256, read big-endian and divided by 2**64, must be below ``rate``.
    Every receiver and every restart makes the same choice.
    """
    if rate >= 1:
        return True
    digest = hashlib.sha256(conversation_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < rate


def parse_filter(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` (a resource or span attribute and its value)."""
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise ConfigError(f"filter {text!r} is not KEY=VALUE (e.g. service.name=checkout)")
    return key.strip(), value.strip()


@dataclass(frozen=True)
class Budget:
    """A judge budget: ``amount`` of ``unit`` (``USD`` or ``tokens``) per ``period`` seconds."""

    amount: float
    unit: Literal["USD", "tokens"]
    period: float

    @classmethod
    def parse(cls, text: str) -> Budget:
        """``20USD/day``, ``100000tokens/hour`` (periods: minute, hour, day)."""
        import re

        found = re.fullmatch(r"\s*([0-9.]+)\s*(USD|\$|tokens?)\s*/\s*(minute|hour|day)\s*", text)
        if found is None:
            raise ConfigError(
                f"budget {text!r} is not AMOUNT UNIT/PERIOD (e.g. 20USD/day or 100000tokens/hour)"
            )
        unit: Literal["USD", "tokens"] = "tokens" if found[2].startswith("token") else "USD"
        period = {"minute": 60.0, "hour": 3600.0, "day": 86400.0}[found[3]]
        return cls(float(found[1]), unit, period)


@dataclass
class _Group:
    traces: set[str] = field(default_factory=set)
    last: float = 0.0


def _torn(path: Path) -> None:
    """Cut a last line a crash left without its newline."""
    if not path.exists():
        return
    with path.open("rb+") as handle:
        data = handle.read()
        if data and not data.endswith(b"\n"):
            handle.truncate(data.rfind(b"\n") + 1)


def _lines(path: Path) -> Iterator[dict[str, Any]]:
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


def _append(handle: Any, records: Iterable[Any]) -> None:
    handle.write(b"".join(_dumps(r) + b"\n" for r in records))
    handle.flush()
    os.fsync(handle.fileno())


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


class Watcher:
    """Spans accepted, assembled into conversations, and scored once each is complete.

    Args:
        metrics: The run's metrics (resolved).
        state: The folder of the spool, the ledger and (without a store) results.jsonl.
        store: A run store: rows go there (a run named ``watch``), else to results.jsonl.
        options: The run options (judge, concurrency, cache) of the scoring.
        group_by: One conversation per trace or per session.
        idle: Seconds without a new span after which a conversation is complete.
        max_queue: Spans held waiting at most; past it exports are refused (503).
        sample: The share of conversations scored (by a hash of their id).
        filters: ``(key, value)`` pairs a conversation's resource or span attributes must hold.
        budget: The judge budget, or None.
        prices: Judge prices (for a USD budget), or None.
        export_to: An OTLP/HTTP endpoint (``http://host:4318``) the scores are sent to as
            ``gen_ai.evaluation.result`` events (:func:`~turneval.traces.to_otel_events`),
            parented to the traces they score; None sends nothing.
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
        self._groups: dict[str, _Group] = {}
        self._seen: set[tuple[str, str]] = set()
        # trace ids of conversations decided (scored or skipped), oldest first: a late span of
        # one is dropped; past DONE_KEPT per queue slot the oldest are forgotten (memory stays
        # bounded), while a restart reads every decision from the ledger
        self._done: dict[str, None] = {}
        self._queued = 0
        self._next = 0
        self._period: tuple[float, float] = (0.0, 0.0)  # (period start, spent in it)
        self.clock = time.time  # the wall clock budget periods follow (replaceable in tests)
        self.store = store
        self._recorder: Any = None
        if store is not None:
            self._recorder = store.start_run(
                name="watch",
                metrics=self.metrics,
                llm=self.options.llm,
                out_dir=self.state,
                resume=True,
                details=self.options.details,
            )
        self._provenance()
        owner = self.state / "owner"
        if not owner.exists():
            import uuid

            owner.write_text(uuid.uuid4().hex)
        self.owner = owner.read_text().strip()
        self._events = None if export_to is None else _event_logger(export_to)
        self._recover()
        self._spool = (self.state / "spool.jsonl").open("ab")
        self._ledger = (self.state / "ledger.jsonl").open("ab")
        self._results = None if store is not None else (self.state / "results.jsonl").open("ab")

    def _provenance(self) -> None:
        """``run.json`` in the state folder: turneval version, metrics and judge of the rows.

        Rewritten at each start (the configuration a restart runs with), after the previous
        one is kept as ``run.json.previous`` when it differs.
        """
        from turneval.store import judge_model, metric_configs

        document = {
            "source": "turneval watch",
            "turneval_version": VERSION,
            "metrics": metric_configs(self.metrics),
            "judge": {"model": judge_model(self.options.llm), "prompt_version": None},
            "group_by": self.group_by,
            "sample": self.rate,
        }
        path = self.state / "run.json"
        text = json.dumps(document, indent=2, sort_keys=True) + "\n"
        if path.exists() and path.read_text() != text:
            os.replace(path, self.state / "run.json.previous")
        path.write_text(text)

    # -- recovery ------------------------------------------------------------------------

    def _written(self) -> set[int]:
        """The indexes whose row was written (results.jsonl or the store)."""
        if self._recorder is None:
            return {int(r["index"]) for r in _lines(self.state / "results.jsonl")}
        written: set[int] = self.store.stored_indexes(self._recorder.run_id)
        return written

    def _recover(self) -> None:
        for name in ("spool.jsonl", "ledger.jsonl", "results.jsonl"):
            _torn(self.state / name)
        written = self._written()
        for claim in _lines(self.state / "ledger.jsonl"):
            index = claim.get("index")
            if index is None or int(index) in written:
                self._done.update(dict.fromkeys(claim["trace_ids"]))
                if claim.get("skipped"):
                    self.skipped[claim["skipped"]] += 1
                else:
                    self.counts["conversations_scored"] += 1
            if index is not None:
                self._next = max(self._next, int(index) + 1)
        if written:
            self._next = max(self._next, max(written) + 1)
        spool = self.state / "spool.jsonl"
        kept = [self._replay(document) for document in _lines(spool)]
        compact = self.state / "spool.jsonl.tmp"
        with compact.open("wb") as handle:  # the spans still waiting, the scored ones left out
            _append(handle, [document for document in kept if document["resourceSpans"]])
        os.replace(compact, spool)
        self._forget()

    def _forget(self) -> None:
        """Keep the newest ``DONE_KEPT * max_queue`` decided trace ids."""
        extra = len(self._done) - DONE_KEPT * self.max_queue
        if extra > 0:
            for trace in list(itertools.islice(self._done, extra)):
                del self._done[trace]

    def _replay(self, document: dict[str, Any]) -> dict[str, Any]:
        """Ingest a spooled request again; returns it without the spans already scored."""
        for resource in document.get("resourceSpans") or ():
            for scope in resource.get("scopeSpans") or ():
                scope["spans"] = [
                    raw
                    for raw in scope.get("spans") or ()
                    if from_otlp_span(raw).trace_id not in self._done
                ]
        self._ingest(document, time.monotonic())
        document["resourceSpans"] = [
            resource
            for resource in document.get("resourceSpans") or ()
            if any(scope["spans"] for scope in resource.get("scopeSpans") or ())
        ]
        return document

    # -- receiving -----------------------------------------------------------------------

    def _ingest(self, document: dict[str, Any], now: float) -> list[tuple[Any, list[Any]]]:
        """Add the new spans of a decoded request; returns them by resource, as received.

        Every span is read before any is added: one that cannot be read refuses the request
        (``ValueError`` and the like) and leaves the state as it was.
        """
        read = [
            (
                (resource.get("resource") or {}).get("attributes") or [],
                [
                    (raw, from_otlp_span(raw))
                    for scope in resource.get("scopeSpans") or ()
                    for raw in scope.get("spans") or ()
                ],
            )
            for resource in document.get("resourceSpans") or ()
        ]
        new: list[tuple[Any, list[Any]]] = []
        for attributes, spans in read:
            kept: list[Any] = []
            for raw, span in spans:
                if span.trace_id == "":
                    self.counts["spans_invalid"] += 1
                    continue
                if (span.trace_id, span.span_id) in self._seen:
                    self.counts["spans_duplicate"] += 1
                    continue
                if span.trace_id in self._done:
                    self.counts["spans_late"] += 1
                    continue
                self._seen.add((span.trace_id, span.span_id))
                self._add(span, otlp_attributes(attributes), now)
                kept.append(raw)
            if kept:
                new.append((attributes, kept))
        return new

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
                    self._groups.setdefault(key, _Group()).traces.update(old.traces)
        self._key[trace] = key
        group = self._groups.setdefault(key, _Group())
        group.traces.add(trace)
        group.last = now

    @property
    def queued(self) -> int:
        """Spans held, waiting for their conversation to complete and be scored."""
        return self._queued

    def accept(self, document: dict[str, Any]) -> int:
        """Accept a decoded ``ExportTraceServiceRequest`` (OTLP/JSON form); returns new spans.

        The new spans are in the spool (fsync'd) when this returns.

        Raises:
            BadRequestError: ``document`` is no request.
            QueueFullError: the queue has no room for its spans (nothing is accepted).
        """
        if not isinstance(document, dict) or not isinstance(
            document.get("resourceSpans", []), list
        ):
            raise BadRequestError("expected an object with a 'resourceSpans' list")
        with self.lock:
            incoming = sum(
                len(scope.get("spans") or ())
                for resource in document.get("resourceSpans") or ()
                for scope in resource.get("scopeSpans") or ()
            )
            if self.queued + incoming > self.max_queue:
                self.counts["requests_rejected"] += 1
                raise QueueFullError(f"{self.queued} spans wait (the queue holds {self.max_queue})")
            try:
                new = self._ingest(document, time.monotonic())
            except (ValueError, TypeError, KeyError, AttributeError) as exc:
                raise BadRequestError(f"unreadable span: {type(exc).__name__}: {exc}") from exc
            if new:
                line = {
                    "resourceSpans": [
                        {"resource": {"attributes": attrs}, "scopeSpans": [{"spans": spans}]}
                        for attrs, spans in new
                    ]
                }
                _append(self._spool, [line])
            return sum(len(spans) for _, spans in new)

    # -- scoring -------------------------------------------------------------------------

    def _complete(self, now: float, force: bool) -> list[tuple[str, list[str]]]:
        ready = [
            key for key, group in self._groups.items() if force or now - group.last >= self.idle
        ]
        return [(key, sorted(self._groups.pop(key).traces)) for key in ready]

    def _matches(self, traces: list[str], spans: list[Span]) -> bool:
        for key, value in self.filters:
            resources = (self._resource.get(t, {}) for t in traces)
            values = [*(r.get(key) for r in resources), *(s.attributes.get(key) for s in spans)]
            if value not in {str(v) for v in values if v is not None}:
                return False
        return True

    def _cost(self, sample: Any) -> float:
        from turneval.estimate import estimate

        assert self.budget is not None
        found = estimate([sample], self.metrics, llm=self.options.llm)
        if self.budget.unit == "tokens":
            return float(found.total_prompt_tokens)
        return float(found.input_cost(self.prices))

    def _within_budget(self, sample: Any) -> bool:
        if self.budget is None:
            return True
        cost = self._cost(sample)
        start, spent = self._period
        now = self.clock()
        if now - start >= self.budget.period:
            start, spent = now - now % self.budget.period, 0.0
        if spent + cost > self.budget.amount:
            self._period = (start, spent)
            return False
        self._period = (start, spent + cost)
        self.counts["judge_spend"] += cost
        return True

    def _claim(self, key: str) -> bool:
        """Whether this watch scores ``key``: True without a store, or once it holds the claim.

        Several watch processes sharing a store (a conversation sent to more than one) claim it
        in the store's ``claims`` table; the first insert wins, and a restarted process finds
        its own claims again.
        """
        if self.store is None:
            return True
        return bool(self.store.claim(key, self.owner, self._recorder.run_id))

    def tick(self, *, force: bool = False) -> int:
        """Score the conversations complete now (all of them with ``force``); returns how many."""
        with self.lock:
            ready = self._complete(time.monotonic(), force)
            batch: list[tuple[dict[str, Any], Any]] = []
            skips: list[dict[str, Any]] = []
            for key, traces in ready:
                spans = [span for trace in traces for span in self._spans.get(trace, ())]
                self.counts["conversations_complete"] += 1
                sample = trace_conversation(spans, self.group_by, False, None)
                reason = None
                if sample is None:
                    reason = "no_conversation"
                elif not self._matches(traces, spans):
                    reason = "filtered"
                elif not sampled(key.split(":", 1)[1], self.rate):
                    reason = "sampled_out"
                elif not self._claim(key):
                    reason = "elsewhere"
                else:
                    self.counts["conversations_sampled"] += 1
                    if not self._within_budget(sample):
                        reason = "budget"
                claim: dict[str, Any] = {"id": key, "trace_ids": traces}
                if reason is None:
                    claim["index"] = self._next
                    self._next += 1
                    batch.append((claim, sample))
                else:
                    claim["skipped"] = reason
                    self.skipped[reason] += 1
                    skips.append(claim)
            if batch or skips:
                _append(self._ledger, [claim for claim, _ in batch] + skips)
            for _, traces in ready:
                for trace in traces:
                    held = self._spans.pop(trace, [])
                    self._queued -= len(held)
                    for span in held:
                        self._seen.discard((trace, span.span_id))
                    self._resource.pop(trace, None)
                    self._key.pop(trace, None)
                    self._done[trace] = None
            self._forget()
        if batch:
            self._score(batch)
        return len(batch)

    def _score(self, batch: list[tuple[dict[str, Any], Any]]) -> None:
        from turneval.pipeline import score_batch
        from turneval.results import json_line
        from turneval.results_codec import encode

        samples = [sample for _, sample in batch]
        first = int(batch[0][0]["index"])
        judge = self.options.judge_run()
        rows = score_batch(
            samples, self.metrics, options=self.options, start_index=first, judge=judge
        )
        if self.prices is not None:
            self.counts["judge_spend_usd"] = self.counts.get("judge_spend_usd", 0.0) + float(
                self.prices.cost(judge.usage)
            )
        if self._recorder is not None:
            for row in rows:
                self._recorder.add(row)
            self._recorder.flush()
        else:
            assert self._results is not None
            lines = [
                json_line(encode(row, self.names, details=self.options.details)) for row in rows
            ]
            self._results.write("".join(line + "\n" for line in lines).encode())
            self._results.flush()
            os.fsync(self._results.fileno())
        if self._events is not None:
            from turneval.results import EvaluationResult
            from turneval.traces import to_otel_events

            result = EvaluationResult(rows, self.names, judge.usage)
            to_otel_events(result, logger=self._events[1])  # sent in the background
        with self.lock:
            self.counts["conversations_scored"] += len(rows)
            self.counts["rows_failed"] += sum(1 for row in rows if row.failures)

    def __enter__(self) -> Watcher:
        """The watcher itself; closed on leaving."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close it."""
        self.close()

    def close(self) -> None:
        """Close the spool, the ledger and the results (the run stays ``running``)."""
        for handle in (self._spool, self._ledger, self._results):
            if handle is not None:
                handle.close()
        if self._recorder is not None:
            self._recorder.flush()
        if self._events is not None:
            self._events[0].shutdown()  # the events not yet sent are sent now

"""The state of ``turneval watch``: spans in, conversations out, nothing acknowledged lost.

Every accepted span is appended to ``spool.jsonl`` (and fsync'd) before the receiver answers,
and a request is taken whole or not at all: its spans are read and checked first, then
written; only once they are on disk does the watcher's state take them (a request refused,
for a bad span or a spool that cannot be written, leaves nothing behind, so its resend is new).
A conversation about to be scored is claimed in ``ledger.jsonl`` (its index and trace ids, and
its estimated judge cost under a budget); its row goes to ``results.jsonl`` (or the run store).
A restart replays the spool, drops the traces the ledger holds whose row was written, and
scores the others: each accepted conversation is scored exactly once.

Each of the three files is appended whole or not at all (:class:`_Log`): a write or an fsync
that fails (a full disk) is cut back off the file, so no torn line is left between whole ones.
"""

from __future__ import annotations

import contextlib
import errno
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

from turneval.errors import ConfigError
from turneval.manifest import RunManifest
from turneval.runs import FolderSink, Rows, StoreSink
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
DEFAULT_OUTPUT_TOKENS = 400
"""Output tokens a judge request is expected to spend, before any was seen (budget estimates)."""


class QueueFullError(Exception):
    """More spans wait than the queue holds: the receiver answers 503 with ``Retry-After``."""


class BadRequestError(ValueError):
    """A body that is no ``ExportTraceServiceRequest``: the receiver answers 400 with the reason."""


class BodyTooLargeError(ValueError):
    """A body over the receiver's limit, as sent or once decompressed: answered 413."""


class SpoolUnavailableError(Exception):
    """The spool cannot be written (a full disk, say): answered 503 with ``Retry-After``.

    Nothing of the request was accepted: the exporter's retry is taken once the spool writes.
    """


class _Log:
    """An append-only JSON Lines file whose appends are on disk whole, or not in it at all.

    Each append is written with ``os.write`` and fsync'd; when either fails, the bytes written
    past the last whole append are cut off again (and, should that fail too, before the next
    append), so a full disk never leaves a torn line between whole ones.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.size = os.fstat(self.fd).st_size
        self._dirty = False

    def append(self, records: Iterable[Any]) -> None:
        """Append ``records`` as JSON lines, fsync'd; raises ``OSError`` with nothing appended."""
        self.write(b"".join(_dumps(record) + b"\n" for record in records))

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


@dataclass
class _Plan:
    """What a request brings, read and checked, before anything of it is taken."""

    spans: list[tuple[dict[str, Any], list[Any]]] = field(default_factory=list)
    """Per resource: its attributes (read) and its new spans as ``(raw, span)``."""
    resources: list[list[Any]] = field(default_factory=list)
    """Per resource: its attributes as received (written to the spool)."""
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def new(self) -> int:
        return sum(len(spans) for _, spans in self.spans)

    def line(self) -> dict[str, Any]:
        """The spool line: the new spans, by resource, as received."""
        return {
            "resourceSpans": [
                {
                    "resource": {"attributes": attributes},
                    "scopeSpans": [{"spans": [raw for raw, _ in spans]}],
                }
                for attributes, (_, spans) in zip(self.resources, self.spans, strict=True)
                if spans
            ]
        }


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _listed(owner: dict[str, Any], key: str, where: str) -> list[Any]:
    """``owner[key]``: a list (absent or null: empty); else a 400 naming the place."""
    value = owner.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadRequestError(f"{where}{key} must be a list, got {_kind(value)}")
    return value


def _objects(items: list[Any], where: str) -> Iterator[tuple[int, dict[str, Any]]]:
    for position, item in enumerate(items):
        if not isinstance(item, dict):
            raise BadRequestError(f"{where}[{position}] must be an object, got {_kind(item)}")
        yield position, item


def _request_spans(document: Any) -> list[tuple[list[Any], list[dict[str, Any]]]]:
    """A request's shape checked: per resource, its attributes and its spans (every scope's).

    The request is an ``ExportTraceServiceRequest`` in its OTLP/JSON form.

    Raises:
        BadRequestError: the document is not of that shape, naming the place
            (``resourceSpans[0].scopeSpans[1].spans[2] must be an object, got int``).
    """
    if not isinstance(document, dict):
        raise BadRequestError(
            f"expected an object with a 'resourceSpans' list, got {_kind(document)}"
        )
    out: list[tuple[list[Any], list[dict[str, Any]]]] = []
    for r, resource in _objects(_listed(document, "resourceSpans", ""), "resourceSpans"):
        where = f"resourceSpans[{r}]."
        inner = resource.get("resource")
        if inner is not None and not isinstance(inner, dict):
            raise BadRequestError(f"{where}resource must be an object, got {_kind(inner)}")
        attributes = _listed(inner or {}, "attributes", f"{where}resource.")
        spans: list[dict[str, Any]] = []
        for s, scope in _objects(_listed(resource, "scopeSpans", where), f"{where}scopeSpans"):
            spans_where = f"{where}scopeSpans[{s}]."
            items = _listed(scope, "spans", spans_where)
            spans += [span for _, span in _objects(items, f"{spans_where}spans")]
        out.append((attributes, spans))
    return out


@dataclass
class _Spend:
    """The budget's period: when it started, and what is counted against it."""

    start: float = -1.0
    spent: float = 0.0
    at: float = 0.0  # the moment the decisions are made at


class Watcher:
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
        self._groups: dict[str, _Group] = {}
        self._seen: set[tuple[str, str]] = set()
        # trace ids of conversations decided (scored or skipped), oldest first: a late span of
        # one is dropped; past DONE_KEPT per queue slot the oldest are forgotten (memory stays
        # bounded), while a restart reads every decision from the ledger
        self._done: dict[str, None] = {}
        self._queued = 0
        self._next = 0
        self._spend = _Spend()  # the budget's current period
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
        self._recover()
        self._spool = _Log(self.state / "spool.jsonl")
        self._ledger = _Log(self.state / "ledger.jsonl")

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
            return {int(r["index"]) for r in _lines(self.state / "results.jsonl")}
        written: set[int] = self.store.stored_indexes(self._recorder.run_id)
        return written

    def _recover(self) -> None:
        for name in ("spool.jsonl", "ledger.jsonl", "results.jsonl"):
            _torn(self.state / name)
        written = self._written()
        for claim in _lines(self.state / "ledger.jsonl"):
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
        kept = [self._replay(document) for document in _lines(spool)]
        compact = _Log(self.state / "spool.jsonl.tmp")
        try:  # the spans still waiting, the scored ones left out
            os.ftruncate(compact.fd, 0)
            compact.size = 0
            compact.append(document for document in kept if document["resourceSpans"])
        finally:
            compact.close()
        os.replace(compact.path, spool)
        self._forget()

    def _count_spend(self, at: Any, amount: float) -> None:
        """Count ``amount`` against the budget period holding the moment ``at`` (the ledger's)."""
        if self.budget is None or at is None or not amount:
            return
        start = float(at) - float(at) % self.budget.period
        self._periods[start] = self._periods.get(start, 0.0) + float(amount)

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
        self._commit(self._plan(self._read(document)), time.monotonic())
        document["resourceSpans"] = [
            resource
            for resource in document.get("resourceSpans") or ()
            if any(scope["spans"] for scope in resource.get("scopeSpans") or ())
        ]
        return document

    # -- receiving -----------------------------------------------------------------------

    @staticmethod
    def _read(document: Any) -> list[tuple[list[Any], dict[str, Any], list[tuple[Any, Span]]]]:
        """Every span of a request read, no state looked at.

        Per resource: its attributes as received and as read, and its spans as ``(raw, span)``.

        Raises:
            BadRequestError: the request is not of the OTLP shape, or a span or an attribute
                cannot be read (the whole request is refused).
        """
        try:
            return [
                (
                    raw_attributes,
                    otlp_attributes(raw_attributes),
                    [(r, from_otlp_span(r)) for r in raws],
                )
                for raw_attributes, raws in _request_spans(document)
            ]
        except BadRequestError:
            raise
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
            raise BadRequestError(f"unreadable span: {type(exc).__name__}: {exc}") from exc

    def _plan(self, read: list[tuple[list[Any], dict[str, Any], list[tuple[Any, Span]]]]) -> _Plan:
        """Which spans of a request read are new (call under the lock; changes nothing)."""
        plan = _Plan()
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

    def _commit(self, plan: _Plan, now: float) -> None:
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
                    self._groups.setdefault(key, _Group()).traces.update(old.traces)
        self._key[trace] = key
        group = self._groups.setdefault(key, _Group())
        group.traces.add(trace)
        group.last = now

    @property
    def period_spend(self) -> float:
        """What is counted against the budget in its current period (0 without a budget)."""
        if self.budget is None:
            return 0.0
        with self.lock:
            return self._period(self.clock()).spent

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
        read = self._read(document)
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

    # -- scoring -------------------------------------------------------------------------

    def _unmatched(self, traces: list[str], spans: list[Span]) -> str | None:
        """The first filter the conversation does not hold (``KEY=VALUE``), or None."""
        for key, value in self.filters:
            resources = (self._resource.get(t, {}) for t in traces)
            values = [*(r.get(key) for r in resources), *(s.attributes.get(key) for s in spans)]
            if value not in {str(v) for v in values if v is not None}:
                return f"{key}={value}"
        return None

    def _output_per_call(self) -> float:
        """Output tokens a judge request is counted for: the judge's cap, else what was seen."""
        llm = self.options.llm
        for name in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
            cap = getattr(llm, name, None)
            if isinstance(cap, int) and cap > 0:
                return float(cap)
        seen = self._seen_spend
        return seen["output"] / seen["calls"] if seen["calls"] else float(DEFAULT_OUTPUT_TOKENS)

    def _cost(self, sample: Any) -> tuple[float, float]:
        """A conversation's estimated judge cost in the budget's unit, and its input estimate.

        Input tokens are the dry run's estimate (raised by the share the judge really spent
        over it, when more); output tokens are the judge's ``max_tokens`` per request, else
        the mean seen so far (``DEFAULT_OUTPUT_TOKENS`` before any).
        """
        from turneval.estimate import estimate

        assert self.budget is not None
        found = estimate([sample], self.metrics, llm=self.options.llm)
        seen = self._seen_spend
        ratio = max(1.0, seen["input"] / seen["estimated_input"]) if seen["estimated_input"] else 1
        estimated = float(found.total_prompt_tokens)
        tokens_in = estimated * ratio
        tokens_out = found.total_calls * self._output_per_call()
        if self.budget.unit == "tokens":
            return tokens_in + tokens_out, estimated
        price_in, price_out = self.prices.input_per_million, self.prices.output_per_million
        return (tokens_in * price_in + tokens_out * price_out) / 1e6, estimated

    def _period(self, at: float) -> _Spend:
        """The budget period holding ``at``, with what is spent in it (a copy)."""
        assert self.budget is not None
        start = at - at % self.budget.period
        if start != self._spend.start:
            return _Spend(start, self._periods.get(start, 0.0), at)
        return _Spend(start, self._spend.spent, at)

    def _learn(self, line: dict[str, Any]) -> None:
        for name in self._seen_spend:
            self._seen_spend[name] += float(line.get(name) or 0)

    def _claim(self, key: str) -> bool:
        """Whether this watch scores ``key``: True without a store, or once it holds the claim.

        Several watch processes sharing a store (a conversation sent to more than one) claim it
        in the store's ``claims`` table; the first insert wins, and a restarted process finds
        its own claims again.
        """
        if self.store is None:
            return True
        return bool(self.store.claim(key, self.owner, self._recorder.run_id))

    def _decide(self, key: str, spend: _Spend) -> tuple[dict[str, Any], Any]:
        """A complete conversation's claim, and its sample when it is scored (None: skipped).

        A claim to score has no index yet; one skipped has its reason and why. Under a budget
        the conversation's estimated cost is added to ``spend`` when it fits.
        """
        traces = sorted(self._groups[key].traces)
        spans = [span for trace in traces for span in self._spans.get(trace, ())]
        claim: dict[str, Any] = {"id": key, "trace_ids": traces}
        why: dict[str, int] = {}
        sample = trace_conversation(spans, self.group_by, False, why)
        if sample is None:
            detail = f"{', '.join(why) or 'no conversation'} in {len(spans)} spans"
            return claim | {"skipped": "no_conversation", "detail": detail}, None
        missing = self._unmatched(traces, spans)
        if missing is not None:
            return claim | {"skipped": "filtered", "detail": f"no {missing}"}, None
        if not sampled(key.split(":", 1)[1], self.rate):
            return claim | {
                "skipped": "sampled_out",
                "detail": f"not in the {self.rate:g} sample",
            }, None
        if not self._claim(key):
            detail = "claimed by another watch sharing the store"
            return claim | {"skipped": "elsewhere", "detail": detail}, None
        if self.budget is not None:
            cost, estimated = self._cost(sample)
            if spend.spent + cost > self.budget.amount:
                detail = (
                    f"estimated {cost:.6g} {self.budget.unit}; {spend.spent:.6g} of "
                    f"{self.budget.amount:g} spent in this period"
                )
                return claim | {"skipped": "budget", "detail": detail}, None
            spend.spent += cost
            if cost:
                claim.update(cost=cost, estimated_input=estimated, at=spend.at)
        return claim, sample

    def tick(self, *, force: bool = False) -> int:
        """Score the conversations complete now (all of them with ``force``); returns how many.

        The decisions are made, then claimed in the ledger (and the skipped ones recorded in
        the store): when either write fails, nothing was decided and the next tick decides
        again. Rows scored whose write failed are written at the next tick.
        """
        self._write_rows([])
        with self.lock:
            now = time.monotonic()
            ready = [key for key, g in self._groups.items() if force or now - g.last >= self.idle]
            if not ready:
                return 0
            at = self.clock()
            spend = self._period(at) if self.budget is not None else _Spend()
            index, sampled_count = self._next, 0
            batch: list[tuple[dict[str, Any], Any]] = []
            skips: list[dict[str, Any]] = []
            for key in ready:
                claim, sample = self._decide(key, spend)
                if sample is not None or claim.get("skipped") == "budget":
                    sampled_count += 1
                if sample is None:
                    skips.append(claim)
                else:
                    claim["index"] = index
                    index += 1
                    batch.append((claim, sample))
            if skips and self._recorder is not None:  # recorded again after a failure: kept once
                from turneval.store import StoredSkip

                recorded = [
                    StoredSkip(c["id"], c["skipped"], c["detail"], tuple(c["trace_ids"]))
                    for c in skips
                ]
                self.store.add_skipped(self._recorder.run_id, recorded)
            self._ledger.append([claim for claim, _ in batch] + skips)
            # decided: from here on nothing fails
            self._next, self._spend = index, spend
            self.counts["conversations_complete"] += len(ready)
            self.counts["conversations_sampled"] += sampled_count
            for claim in skips:
                self.skipped[claim["skipped"]] += 1
            for key in ready:
                for trace in self._groups.pop(key).traces:
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
        if self.budget is not None:
            self._spent(batch, judge.usage)
        self._write_rows(rows)
        if self._events is not None:
            from turneval.results import EvaluationResult
            from turneval.traces import to_otel_events

            result = EvaluationResult(rows, self.names, judge.usage)
            to_otel_events(result, logger=self._events[1])  # sent in the background

    def _spent(self, batch: list[tuple[dict[str, Any], Any]], usage: Any) -> None:
        """Count what a scored batch really cost in place of its estimate (and keep it)."""
        assert self.budget is not None
        if self.budget.unit == "tokens":
            actual = float(usage.input_tokens + usage.output_tokens)
        else:
            actual = float(self.prices.cost(usage))
        reserved = sum(claim.get("cost", 0.0) for claim, _ in batch)
        at = next((claim["at"] for claim, _ in batch if "at" in claim), None)
        line = {
            "spend": actual,
            "reserved": reserved,
            "at": self.clock() if at is None else at,
            "estimated_input": sum(claim.get("estimated_input", 0.0) for claim, _ in batch),
            "input": usage.input_tokens,
            "output": usage.output_tokens,
            "calls": usage.calls,
            "indexes": [claim["index"] for claim, _ in batch],
        }
        with self.lock:
            self.counts["judge_spend"] += actual
            self._learn(line)
            self._count_spend(line["at"], actual - reserved)
            if self._spend.start == line["at"] - line["at"] % self.budget.period:
                self._spend.spent += actual - reserved
            try:
                self._ledger.append([line])
            except OSError:  # the estimate stays counted (a restart reads it from the claims)
                self.counts["errors"] += 1

    def _write_rows(self, rows: list[Any]) -> None:
        """Write scored rows, and those an earlier write failed to (a full disk, say).

        Raises what the write raised; the rows are kept and written at the next tick.
        """
        with self._write_lock:
            retrying = bool(self._unwritten)
            self._unwritten += rows
            todo = self._unwritten
            if not todo:
                return
            if self._recorder is not None:
                if retrying:  # what an earlier, failed write stored (or left buffered)
                    self._recorder.flush()
                    stored = self._recorder.store.stored_indexes(self._recorder.run_id)
                    todo = [row for row in todo if row.index not in stored]
                self._recorder.add(Rows.of(todo, self.names, details=self.options.details))
                self._recorder.flush()
            else:  # appended whole (fsync'd) or not at all
                self._folder.add(Rows.of(todo, self.names, details=self.options.details))
            written, self._unwritten = self._unwritten, []
        with self.lock:
            self.counts["conversations_scored"] += len(written)
            self.counts["rows_failed"] += sum(1 for row in written if row.failures)

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
        if self._events is not None:
            self._events[0].shutdown()  # the events not yet sent are sent now

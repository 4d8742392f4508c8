"""One span record for every source: OpenTelemetry SDK spans and OTLP/JSON, read and written."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

from turneval.errors import ConfigError
from turneval.jsonl import refuse_compressed, utf8_problem

try:  # orjson (a langsmith dependency, so nearly always present) parses about 2x faster
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover
    _fast_loads = json.loads  # type: ignore[assignment]


def loads(text: str | bytes) -> Any:
    """Parse JSON; raises ``json.JSONDecodeError`` (orjson's error is a subclass)."""
    return _fast_loads(text)


_STATUS = {0: "UNSET", 1: "OK", 2: "ERROR", "STATUS_CODE_UNSET": "UNSET"}
_STATUS.update({"STATUS_CODE_OK": "OK", "STATUS_CODE_ERROR": "ERROR"})
_HEX = re.compile(r"[0-9a-fA-F]{16}|[0-9a-fA-F]{32}")
_TRACE_ID = re.compile(r'"traceId"\s*:\s*"([^"]*)"')


@dataclass(slots=True)
class Span:
    """A finished span, whatever it was read from."""

    trace_id: str
    span_id: str
    parent_id: str | None
    name: str
    start: int  # ns since the epoch
    end: int
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    status: str = "UNSET"
    status_message: str | None = None
    line: int | None = None  # the OTLP/JSON line it came from
    error: str | None = None  # why the span could not be read (its trace then fails alone)
    # A span read with ``trace_id == ""`` had no valid trace id: it is an error row of its
    # own (``error`` says why), never part of a trace.


def from_readable(span: Any) -> Span:
    """Read an OpenTelemetry SDK ``ReadableSpan``.

    Raises:
        ConfigError: ``span`` is not a span (a file path or a dict, say), naming what it is.
    """
    if not callable(getattr(span, "get_span_context", None)):
        raise ConfigError(
            f"expected OpenTelemetry SDK spans (ReadableSpan), got {type(span).__name__}: "
            "read OTLP/JSON files with from_otlp_json(path)"
        )
    context = span.get_span_context()
    parent = span.parent
    status = span.status
    return Span(
        trace_id=format(context.trace_id, "032x"),
        span_id=format(context.span_id, "016x"),
        parent_id=format(parent.span_id, "016x") if parent is not None else None,
        name=span.name,
        start=span.start_time or 0,
        end=span.end_time or span.start_time or 0,
        attributes=dict(span.attributes or {}),
        events=[(event.name, dict(event.attributes or {})) for event in span.events],
        status=status.status_code.name,
        status_message=status.description,
    )


def _hex_id(value: Any) -> str:
    """OTLP/JSON ids are hex; some writers use protobuf's base64: accept both."""
    text = str(value or "")
    if _HEX.fullmatch(text):
        return text.lower()
    try:
        return base64.b64decode(text, validate=True).hex()
    except (binascii.Error, ValueError):
        return text


def _trace_id(value: Any) -> tuple[str, str | None]:
    """``(trace id in hex, None)``, or ``("", why it is no trace id)``.

    OTLP/JSON writes a trace id as 32 hex digits (16 bytes; all zeros is the invalid id); the
    base64 that protobuf's JSON mapping gives bytes is accepted too.
    """
    if value is None or value == "":
        return "", "traceId missing"
    if not isinstance(value, str):
        return "", f"traceId is {type(value).__name__} {value!r}, not a string"
    if len(value) == 32 and _HEX.fullmatch(value):
        trace_id = value.lower()
    else:
        try:
            decoded = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            decoded = b""
        if len(decoded) != 16:
            shown = value if len(value) <= 40 else value[:40] + "..."
            return "", f"traceId {shown!r} is not 32 hex digits"
        trace_id = decoded.hex()
    if trace_id == "0" * 32:
        return "", "traceId is all zeros (the invalid trace id)"
    return trace_id, None


def _without_trace(raw: dict[str, Any], line: int | None, position: int, why: str) -> Span:
    """A span that belongs to no trace: its own error row, never part of a sample."""
    span_id = _hex_id(raw.get("spanId")) if isinstance(raw.get("spanId"), str) else ""
    name = raw.get("name")
    named = f" ({name!r})" if isinstance(name, str) and name else ""
    where = f"span {span_id}" if span_id else f"span #{position} of the line"
    problem = f"{where}{named} without a trace id ({why})"
    return Span(
        "", span_id or f"#{position}", None, str(name or ""), 0, 0, {}, line=line, error=problem
    )


def any_value(value: dict[str, Any]) -> Any:
    """Decode an OTLP ``AnyValue`` (``{"stringValue": ...}``, ``{"intValue": "3"}``, ...)."""
    text = value.get("stringValue")
    if text is not None:
        return text
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "arrayValue" in value:
        return tuple(any_value(item) for item in value["arrayValue"].get("values", ()))
    if "kvlistValue" in value:
        items = value["kvlistValue"].get("values", ())  # proto3 JSON omits an empty list
        return {kv["key"]: any_value(kv.get("value", {})) for kv in items}
    if "bytesValue" in value:
        return value["bytesValue"]
    return None


def otlp_attributes(items: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """OTLP/JSON ``KeyValue`` items as a plain dict (strings as they are, other values decoded)."""
    out: dict[str, Any] = {}
    for item in items:
        value = item.get("value") or {}
        text = value.get("stringValue")
        out[item["key"]] = text if text is not None else any_value(value)
    return out


def from_otlp_span(raw: dict[str, Any], line: int | None = None, position: int = 1) -> Span:
    """Read one span of an OTLP/JSON ``ExportTraceServiceRequest``.

    A span without a valid trace id is read as one with ``trace_id == ""`` and an ``error``
    naming the span and why (``position``: its place on the line, naming a span without id).
    """
    trace_id, why = _trace_id(raw.get("traceId"))
    if why is not None:
        return _without_trace(raw, line, position, why)
    status = raw.get("status") or {}
    parent = raw.get("parentSpanId")
    return Span(
        trace_id=trace_id,
        span_id=_hex_id(raw.get("spanId")),
        parent_id=_hex_id(parent) if parent else None,
        name=str(raw.get("name", "")),
        start=int(raw.get("startTimeUnixNano") or 0),
        end=int(raw.get("endTimeUnixNano") or raw.get("startTimeUnixNano") or 0),
        attributes=otlp_attributes(raw.get("attributes") or ()),
        events=[
            (str(event.get("name", "")), otlp_attributes(event.get("attributes") or ()))
            for event in raw.get("events") or ()
        ],
        status=_STATUS.get(status.get("code", 0), "UNSET"),
        status_message=status.get("message") or None,
        line=line,
    )


def spans_of_request(document: Any, line: int | None = None) -> Iterator[Span]:
    """The spans of one decoded ``ExportTraceServiceRequest``."""
    if not isinstance(document, dict):
        raise ValueError(f"expected an object with 'resourceSpans', got {type(document).__name__}")
    if "resourceSpans" not in document:  # e.g. a sample line in a file detected as OTLP
        keys = ", ".join(repr(key) for key in list(document)[:5]) or "none"
        raise ValueError(f"expected an object with 'resourceSpans', got one with keys {keys}")
    position = 0
    for resource in document.get("resourceSpans") or ():
        for scope in (
            resource.get("scopeSpans") or resource.get("instrumentationLibrarySpans") or ()
        ):
            for raw in scope.get("spans") or ():
                position += 1
                try:
                    yield from_otlp_span(raw, line, position)
                except (ValueError, TypeError, KeyError, AttributeError) as exc:
                    yield _unreadable(raw, line, position, exc)


def _unreadable(raw: Any, line: int | None, position: int, exc: Exception) -> Span:
    """A span that could not be read, kept as its trace's error (the line's other traces stay).

    Raises the error again when the span is not even an object (then the whole line is one
    error row, as a line that is not OTLP/JSON is).
    """
    if not isinstance(raw, dict):
        raise exc
    trace_id, why = _trace_id(raw.get("traceId"))
    if why is not None:
        return _without_trace(raw, line, position, why)
    span_id = _hex_id(raw.get("spanId"))
    problem = f"span {span_id or '?'} could not be read ({type(exc).__name__}: {exc})"
    return Span(
        trace_id, span_id, None, str(raw.get("name", "")), 0, 0, {}, line=line, error=problem
    )


@dataclass(frozen=True, slots=True)
class Undecodable:
    """A line of an OTLP/JSON file that is not UTF-8: what :func:`documents` gives for it."""

    problem: str  # "not valid UTF-8 in FILE (byte 0xff at byte offset 12)"


def _undecodable(raw: bytes, path: str | PathLike[str]) -> Undecodable | None:
    """None if ``raw`` is UTF-8; else the problem, naming the file and the first bad byte."""
    where = utf8_problem(raw)
    return None if where is None else Undecodable(f"not valid UTF-8 in {path} ({where})")


def documents(path: str | PathLike[str]) -> Iterator[tuple[int, str | Undecodable]]:
    """``(line number, text)`` of each request: one per line, or the whole file as one.

    The file is one pretty-printed document when its first line does not end an object and
    the next non-blank line does not start one (a torn first line of a JSONL file is followed
    by whole requests: it is one bad line, and the others are read). A line that is not UTF-8
    gives :class:`Undecodable` instead of its text (a whole document: the line of its first bad
    byte), so that one bad byte costs one row, never the file.
    """
    source = Path(path)
    refuse_compressed(source)
    with source.open("rb") as handle:
        first = handle.readline().removeprefix(b"\xef\xbb\xbf")
        ahead: list[bytes] = []
        if first.strip() and not first.rstrip().endswith(b"}"):
            line = handle.readline()
            while line and not line.strip():
                ahead.append(line)
                line = handle.readline()
            ahead.append(line)
            if not line.lstrip().startswith(b"{"):  # one pretty-printed document
                whole = [first, *ahead, *handle]
                for number, raw in enumerate(whole, start=1):
                    bad = _undecodable(raw, path)
                    if bad is not None:
                        yield number, bad
                        return
                yield 1, b"".join(whole).decode("utf-8")
                return
        number = 1
        for raw in (first, *ahead, *handle):
            if raw.strip():
                bad = _undecodable(raw, path)
                yield number, raw.decode("utf-8") if bad is None else bad
            number += 1


def is_contiguous(path: str | PathLike[str]) -> bool:
    """Whether every trace's spans sit in one run of lines (a cheap scan of the trace ids)."""
    done: set[str] = set()
    current: str | None = None
    for _, text in documents(path):
        if isinstance(text, Undecodable):
            continue
        for trace_id in _TRACE_ID.findall(text):
            if trace_id != current:
                if trace_id in done:
                    return False
                if current is not None:
                    done.add(current)
                current = trace_id
    return True


def _value(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [_value(item) for item in value]}}
    return {"stringValue": str(value)}


def _kvs(attributes: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": key, "value": _value(value)} for key, value in attributes.items()]


def to_otlp_request(spans: Iterable[Span]) -> dict[str, Any]:
    """One OTLP/JSON ``ExportTraceServiceRequest`` holding ``spans``."""
    codes = {"UNSET": 0, "OK": 1, "ERROR": 2}
    out = []
    for span in spans:
        raw: dict[str, Any] = {
            "traceId": span.trace_id,
            "spanId": span.span_id,
            "name": span.name,
            "kind": 1,
            "startTimeUnixNano": str(span.start),
            "endTimeUnixNano": str(span.end),
            "attributes": _kvs(span.attributes),
            "status": {"code": codes.get(span.status, 0)},
        }
        if span.parent_id:
            raw["parentSpanId"] = span.parent_id
        if span.status_message:
            raw["status"]["message"] = span.status_message
        if span.events:
            raw["events"] = [
                {"timeUnixNano": str(span.end), "name": name, "attributes": _kvs(attributes)}
                for name, attributes in span.events
            ]
        out.append(raw)
    scope = {"scope": {"name": "turneval"}, "spans": out}
    return {"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [scope]}]}


def dumps_request(spans: Iterable[Span]) -> str:
    """One JSON line of OTLP/JSON."""
    return json.dumps(to_otlp_request(spans), ensure_ascii=False, separators=(",", ":"))

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

from turneval.dataset import _refuse_compressed
from turneval.errors import ConfigError

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


def _attributes(items: Iterable[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        value = item.get("value") or {}
        text = value.get("stringValue")
        out[item["key"]] = text if text is not None else any_value(value)
    return out


def from_otlp_span(raw: dict[str, Any], line: int | None = None) -> Span:
    """Read one span of an OTLP/JSON ``ExportTraceServiceRequest``."""
    status = raw.get("status") or {}
    parent = raw.get("parentSpanId")
    return Span(
        trace_id=_hex_id(raw.get("traceId")),
        span_id=_hex_id(raw.get("spanId")),
        parent_id=_hex_id(parent) if parent else None,
        name=str(raw.get("name", "")),
        start=int(raw.get("startTimeUnixNano") or 0),
        end=int(raw.get("endTimeUnixNano") or raw.get("startTimeUnixNano") or 0),
        attributes=_attributes(raw.get("attributes") or ()),
        events=[
            (str(event.get("name", "")), _attributes(event.get("attributes") or ()))
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
    for resource in document.get("resourceSpans") or ():
        for scope in (
            resource.get("scopeSpans") or resource.get("instrumentationLibrarySpans") or ()
        ):
            for raw in scope.get("spans") or ():
                try:
                    yield from_otlp_span(raw, line)
                except (ValueError, TypeError, KeyError, AttributeError) as exc:
                    yield _unreadable(raw, line, exc)


def _unreadable(raw: Any, line: int | None, exc: Exception) -> Span:
    """A span that could not be read, kept as its trace's error (the line's other traces stay).

    Raises the error again when not even the span's trace can be told (then the whole line is
    one error row, as a line that is not OTLP/JSON is).
    """
    trace_id = _hex_id(raw.get("traceId")) if isinstance(raw, dict) else ""
    if not trace_id:
        raise exc
    span_id = _hex_id(raw.get("spanId"))
    problem = f"span {span_id or '?'} could not be read ({type(exc).__name__}: {exc})"
    return Span(
        trace_id, span_id, None, str(raw.get("name", "")), 0, 0, {}, line=line, error=problem
    )


def documents(path: str | PathLike[str]) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of each request: one per line, or the whole file as one.

    The file is one pretty-printed document when its first line does not end an object and
    the next non-blank line does not start one (a torn first line of a JSONL file is followed
    by whole requests: it is one bad line, and the others are read).
    """
    source = Path(path)
    _refuse_compressed(source)
    with source.open(encoding="utf-8") as handle:
        first = handle.readline()
        ahead: list[str] = []
        if first.strip() and not first.rstrip().endswith("}"):
            line = handle.readline()
            while line and not line.strip():
                ahead.append(line)
                line = handle.readline()
            ahead.append(line)
            if not line.lstrip().startswith("{"):  # one pretty-printed document
                yield 1, first + "".join(ahead) + handle.read()
                return
        number = 1
        for line in (first, *ahead):
            if line.strip():
                yield number, line
            number += 1
        line = handle.readline()
        while line:
            if line.strip():
                yield number, line
            number += 1
            line = handle.readline()


def is_contiguous(path: str | PathLike[str]) -> bool:
    """Whether every trace's spans sit in one run of lines (a cheap scan of the trace ids)."""
    done: set[str] = set()
    current: str | None = None
    for _, text in documents(path):
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

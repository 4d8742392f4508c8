"""An OTLP/HTTP request body decoded: gunzipped within a limit, read as protobuf or JSON.

:func:`decode_body` turns a ``POST /v1/traces`` body into the OTLP/JSON document the span
reader takes, never holding more than ``max_body`` bytes (a gzip bomb included) nor nesting
deeper than :data:`MAX_JSON_DEPTH`; a body it cannot read raises the receiver's errors
(``400``, ``413``).
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import zlib
from typing import Any

from turneval.jsonl import jiter_from_json, strict_json_problem
from turneval.watch._intake import BadRequestError, BodyTooLargeError

__all__ = ["MAX_BODY", "MAX_JSON_DEPTH", "decode_body", "gunzip"]

MAX_BODY = 64 * 2**20
"""Bytes a body may hold, as sent and once decompressed (more: ``413``)."""
MAX_JSON_DEPTH = 64
"""Levels of nesting a JSON body may have (more: ``400``); OTLP needs about ten."""

_GZIP = 16 + zlib.MAX_WBITS  # zlib's window bits for the gzip format


def gunzip(body: bytes, limit: int = MAX_BODY) -> bytes:
    """``body`` gzip-decompressed (every member), never more than ``limit`` bytes of it.

    Decompressed as a stream, ``limit + 1`` bytes at most: a small body that would expand to
    gigabytes (a gzip bomb) costs no more memory than ``limit``.

    Raises:
        BodyTooLargeError: it decompresses to more than ``limit`` bytes.
        BadRequestError: it is not gzip, or is cut short.
    """
    parts: list[bytes] = []
    size = 0
    data = body
    try:
        while True:
            decompressor = zlib.decompressobj(_GZIP)
            while not decompressor.eof:
                fed = bool(data)
                chunk = decompressor.decompress(data, limit - size + 1)
                size += len(chunk)
                if size > limit:
                    raise BodyTooLargeError(f"the body decompresses to more than {limit} bytes")
                parts.append(chunk)
                data = decompressor.unconsumed_tail
                if not fed and not chunk and not decompressor.eof:  # all read, and no end
                    raise BadRequestError("Content-Encoding gzip but the body is cut short")
            data = decompressor.unused_data
            if not data:
                return b"".join(parts)
    except zlib.error as exc:
        raise BadRequestError(f"Content-Encoding gzip but the body is not gzip: {exc}") from exc


def _unfit(document: Any, limit: int) -> str | None:
    """Why ``document`` may not be taken; None when it may.

    It may not nest past ``limit`` levels, nor hold a number too large for a double (``1e400``).
    """
    stack: list[tuple[Any, int]] = [(document, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            if isinstance(child, (dict, list)):
                if depth >= limit:
                    return f"the JSON body is nested more than {limit} levels deep"
                stack.append((child, depth + 1))
            elif isinstance(child, float) and not math.isfinite(child):
                return "the JSON body is not strict JSON: a number too large for a double"
    return None


def _named(body: bytes, problem: str) -> str:
    """``problem``, or for a number that is not finite the stdlib's words naming its key."""
    if problem.endswith("too large for a double"):
        named = strict_json_problem(body)
        if named is not None:
            return f"the JSON body is not strict JSON: {named}"
    return problem


def _json_document(body: bytes) -> dict[str, Any]:
    """A JSON body read strictly (as ``evaluate`` reads JSON): an object, bounded in depth.

    One parse by jiter (strict: no ``NaN`` or ``Infinity``, no duplicate key) where it is
    installed; a body it refuses is read again by the stdlib to say why, naming the key.
    """
    document: Any = None
    if jiter_from_json is not None:
        with contextlib.suppress(ValueError):  # the stdlib names the problem below
            document = jiter_from_json(
                body, allow_inf_nan=False, catch_duplicate_keys=True, cache_mode=False
            )
    if document is None:
        try:
            document = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise BadRequestError(f"the JSON body is not valid JSON: {exc}") from exc
        except RecursionError:
            raise BadRequestError(
                f"the JSON body is nested more than {MAX_JSON_DEPTH} levels deep"
            ) from None
        problem = strict_json_problem(body) if isinstance(document, dict) else None
        if problem is not None:
            raise BadRequestError(f"the JSON body is not strict JSON: {problem}")
    if not isinstance(document, dict):
        raise BadRequestError(f"expected a JSON object, got {type(document).__name__}")
    problem = _unfit(document, MAX_JSON_DEPTH)
    if problem is not None:
        raise BadRequestError(_named(body, problem))
    return document


def decode_body(
    body: bytes, content_type: str, encoding: str, *, limit: int = MAX_BODY
) -> dict[str, Any]:
    """An export body (protobuf or JSON, maybe gzip) as its OTLP/JSON dict.

    JSON is read strictly (no ``NaN`` or ``Infinity``, no duplicate key), at most
    :data:`MAX_JSON_DEPTH` levels deep; a gzip body is decompressed to ``limit`` bytes at most.

    Raises:
        BadRequestError: the body cannot be read, saying why.
        BodyTooLargeError: it decompresses to more than ``limit`` bytes.
    """
    encoding = encoding.strip().lower()
    if encoding == "gzip":
        body = gunzip(body, limit)
    elif encoding not in ("", "identity"):
        raise BadRequestError(f"Content-Encoding {encoding!r} is not supported (gzip or none)")
    kind = content_type.split(";")[0].strip().lower()
    if kind == "application/x-protobuf":
        from google.protobuf.message import DecodeError
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        try:
            message = ExportTraceServiceRequest.FromString(body)
        except (DecodeError, ValueError, RecursionError) as exc:
            raise BadRequestError(
                f"the protobuf body is no ExportTraceServiceRequest: {exc}"
            ) from exc
        try:
            return _request_dict(message)
        except (ValueError, TypeError, AttributeError, RecursionError) as exc:
            raise BadRequestError(f"unreadable span in the protobuf body: {exc}") from exc
    if kind == "application/json":
        return _json_document(body)
    raise BadRequestError(
        f"Content-Type {content_type!r} is not supported "
        "(application/x-protobuf or application/json)"
    )


_ANY = {
    "string_value": "stringValue",
    "bool_value": "boolValue",
    "int_value": "intValue",
    "double_value": "doubleValue",
    "bytes_value": "bytesValue",
}


def _any(value: Any) -> dict[str, Any]:
    """An ``AnyValue`` message as OTLP/JSON (what ``MessageToDict`` gives, several times faster)."""
    kind = value.WhichOneof("value")
    if kind is None:
        return {}
    if kind == "array_value":
        return {"arrayValue": {"values": [_any(item) for item in value.array_value.values]}}
    if kind == "kvlist_value":
        return {"kvlistValue": {"values": _kvs(value.kvlist_value.values)}}
    found = getattr(value, kind)
    if kind == "int_value":
        found = str(found)
    elif kind == "bytes_value":
        found = base64.b64encode(found).decode()
    elif kind == "double_value" and not math.isfinite(found):
        found = str(found).replace("inf", "Infinity").replace("nan", "NaN")  # the JSON mapping
    return {_ANY[kind]: found}


def _kvs(items: Any) -> list[dict[str, Any]]:
    return [{"key": item.key, "value": _any(item.value)} for item in items]


def _span(span: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "traceId": span.trace_id.hex(),
        "spanId": span.span_id.hex(),
        "name": span.name,
        "kind": span.kind,
        "startTimeUnixNano": str(span.start_time_unix_nano),
        "endTimeUnixNano": str(span.end_time_unix_nano),
        "attributes": _kvs(span.attributes),
        "status": {"code": span.status.code},
    }
    if span.parent_span_id:
        raw["parentSpanId"] = span.parent_span_id.hex()
    if span.status.message:
        raw["status"]["message"] = span.status.message
    if span.events:
        raw["events"] = [
            {
                "timeUnixNano": str(event.time_unix_nano),
                "name": event.name,
                "attributes": _kvs(event.attributes),
            }
            for event in span.events
        ]
    return raw


def _request_dict(message: Any) -> dict[str, Any]:
    """An ``ExportTraceServiceRequest`` as the OTLP/JSON dict the span reader takes."""
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": _kvs(resource.resource.attributes)},
                "scopeSpans": [
                    {"spans": [_span(span) for span in scope.spans]}
                    for scope in resource.scope_spans
                ],
            }
            for resource in message.resource_spans
        ]
    }

"""The OTLP/HTTP receiver of ``turneval watch``: ``POST /v1/traces``, ``/healthz``, ``/metrics``."""

from __future__ import annotations

import base64
import gzip
import json
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from turneval.watch._watcher import BadRequestError, QueueFullError, Watcher

MAX_BODY = 64 * 2**20
RETRY_AFTER_SECONDS = 5


def decode_body(body: bytes, content_type: str, encoding: str) -> dict[str, Any]:
    """An export body (protobuf or JSON, maybe gzip) as its OTLP/JSON dict.

    Raises:
        BadRequestError: the body cannot be read, saying why.
    """
    encoding = encoding.strip().lower()
    if encoding == "gzip":
        try:
            body = gzip.decompress(body)
        except (OSError, EOFError, zlib.error) as exc:
            raise BadRequestError(f"Content-Encoding gzip but the body is not gzip: {exc}") from exc
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
        except (DecodeError, ValueError) as exc:
            raise BadRequestError(
                f"the protobuf body is no ExportTraceServiceRequest: {exc}"
            ) from exc
        try:
            return _request_dict(message)
        except (ValueError, TypeError, AttributeError) as exc:
            raise BadRequestError(f"unreadable span in the protobuf body: {exc}") from exc
    if kind == "application/json":
        try:
            document = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise BadRequestError(f"the JSON body is not valid JSON: {exc}") from exc
        if not isinstance(document, dict):
            raise BadRequestError(f"expected a JSON object, got {type(document).__name__}")
        return document
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


class _Handler(BaseHTTPRequestHandler):
    server: WatchServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the counters at /metrics say what happened."""

    def _answer(
        self, code: int, body: bytes, kind: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _error(self, code: int, message: str, headers: dict[str, str] | None = None) -> None:
        body = json.dumps({"code": code, "message": message}).encode()
        self._answer(code, body, "application/json", headers)

    def _body(self) -> bytes | None:
        """The request body (``Content-Length`` or chunked); None when over ``MAX_BODY``."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts: list[bytes] = []
            size = 0
            while True:
                line = self.rfile.readline(1024)
                try:
                    length = int(line.split(b";")[0].strip(), 16)
                except ValueError:
                    raise BadRequestError(f"bad chunk size line {line[:40]!r}") from None
                if length == 0:
                    while self.rfile.readline(1024).strip():  # trailers, then the blank line
                        pass
                    return b"".join(parts)
                size += length
                if size > MAX_BODY:
                    return None
                parts.append(self.rfile.read(length))
                self.rfile.readline(1024)
        text = self.headers.get("Content-Length") or "0"
        if not text.strip().isdigit():
            raise BadRequestError(f"Content-Length {text!r} is not a number")
        if int(text) > MAX_BODY:
            return None
        return bytes(self.rfile.read(int(text)))

    def do_GET(self) -> None:
        """``/healthz`` and ``/metrics``."""
        if self.path == "/healthz":
            self._answer(200, b"ok\n", "text/plain")
        elif self.path == "/metrics":
            body, kind = self.server.metrics_text()
            self._answer(200, body, kind)
        else:
            self._error(404, f"no {self.path}: POST /v1/traces, GET /healthz, GET /metrics")

    def do_POST(self) -> None:
        """``/v1/traces``: the spans are in the spool when the answer is 200."""
        if self.path.split("?")[0] != "/v1/traces":
            self._error(404, f"no {self.path}: POST /v1/traces")
            return
        watcher = self.server.watcher
        try:
            body = self._body()
        except BadRequestError as exc:
            self.close_connection = True  # what is left of the body cannot be skipped
            self._error(400, str(exc))
            return
        if body is None:
            self.close_connection = True
            self._error(413, f"the body is over {MAX_BODY} bytes")
            return
        try:
            document = decode_body(
                body,
                self.headers.get("Content-Type", ""),
                self.headers.get("Content-Encoding", ""),
            )
            watcher.accept(document)
        except BadRequestError as exc:
            with watcher.lock:
                watcher.counts["requests_bad"] = watcher.counts.get("requests_bad", 0) + 1
            self._error(400, str(exc))
            return
        except QueueFullError as exc:
            self._error(503, str(exc), {"Retry-After": str(RETRY_AFTER_SECONDS)})
            return
        except Exception as exc:  # a bug or a full disk: answered, counted; the receiver goes on
            with watcher.lock:
                watcher.counts["errors"] += 1
            self._error(500, f"{type(exc).__name__}: {exc}")
            return
        if "json" in self.headers.get("Content-Type", ""):
            self._answer(200, b"{}", "application/json")
        else:
            self._answer(200, b"", "application/x-protobuf")  # an empty ExportTraceServiceResponse


class WatchServer(ThreadingHTTPServer):
    """The receiver, and the thread that scores complete conversations."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], watcher: Watcher, *, tick: float = 1.0) -> None:
        super().__init__(address, _Handler)
        self.watcher = watcher
        self.tick = tick
        self._stop = threading.Event()
        self._scorer = threading.Thread(target=self._score_loop, name="turneval-watch", daemon=True)

    def metrics_text(self) -> tuple[bytes, str]:
        """The Prometheus exposition of the counters."""
        from turneval.watch._metrics import exposition

        return exposition(self.watcher)

    def _score_loop(self) -> None:
        while not self._stop.wait(self.tick):
            try:
                self.watcher.tick()
            except Exception:  # the store unreachable, say: counted; the claims stay in the
                with self.watcher.lock:  # ledger and a restart scores those conversations
                    self.watcher.counts["errors"] += 1

    def serve(self) -> None:
        """Receive and score until :meth:`stop`."""
        self._scorer.start()
        self.serve_forever(poll_interval=0.2)

    def stop(self) -> None:
        """Stop receiving and scoring (call from another thread); a batch being scored ends."""
        self._stop.set()
        self.shutdown()
        if self._scorer.is_alive() and self._scorer is not threading.current_thread():
            self._scorer.join()

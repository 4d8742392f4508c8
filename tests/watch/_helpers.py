"""Conversations as real SDK spans, a receiver on a free port, and reading what it wrote."""

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from turneval.watch import Watcher, WatchServer


def _messages(*messages: dict[str, Any]) -> str:
    return json.dumps(list(messages))


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "content": text}]}


def _assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "parts": [{"type": "text", "content": text}]}


def conversation(
    calls: int, *, service: str = "shop", session: str | None = None
) -> list[ReadableSpan]:
    """The spans of one trace: an agent span holding ``calls`` chat calls (one turn each)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests")
    extra = {} if session is None else {"gen_ai.conversation.id": session}
    with tracer.start_as_current_span("invoke_agent", attributes=extra):
        history: list[dict[str, Any]] = []
        for turn in range(calls):
            history.append(_user(f"question {turn}"))
            answer = _assistant(f"answer {turn}")
            attributes = {
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": _messages(*history),
                "gen_ai.output.messages": _messages(answer),
                **extra,
            }
            with tracer.start_as_current_span("chat", attributes=attributes):
                pass
            history.append(answer)
    return list(exporter.get_finished_spans())


def trace_id(spans: list[ReadableSpan]) -> str:
    context = spans[0].context
    assert context is not None
    return format(context.trace_id, "032x")


def post(port: int, body: bytes, kind: str = "application/x-protobuf", **headers: str) -> Any:
    """POST to /v1/traces; returns (status, headers, body) whatever the status."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/traces",
        data=body,
        headers={"Content-Type": kind, **headers},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, dict(answer.headers), answer.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def protobuf(spans: list[ReadableSpan]) -> bytes:
    """The SDK exporter's own encoding of ``spans``."""
    return bytes(encode_spans(spans).SerializeToString())


@contextmanager
def receiver(watcher: Watcher, **options: Any) -> Iterator[WatchServer]:
    """The receiver serving on a free port (scoring every 50 ms), with ``options``; then closed."""
    server = WatchServer(("127.0.0.1", 0), watcher, tick=0.05, **options)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.stop()
        server.server_close()
        thread.join(5)
        watcher.close()


@contextmanager
def serving(watcher: Watcher, **options: Any) -> Iterator[int]:
    """The receiver on a free port (its scoring loop ticking every 50 ms), with ``options``."""
    with receiver(watcher, **options) as server:
        yield int(server.server_address[1])


def results(folder: Path) -> list[dict[str, Any]]:
    path = folder / "results.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def wait_for(check: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)

"""Hand-built spans of the exact shapes the conventions document, on the real SDK."""

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


class Recorder:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = provider.get_tracer("tests")

    @contextmanager
    def span(self, name: str, **attributes: Any) -> Iterator[Any]:
        clean = {k.replace("__", "."): v for k, v in attributes.items()}
        with self.tracer.start_as_current_span(name, attributes=clean) as span:
            yield span

    def spans(self) -> list[Any]:
        return list(self.exporter.get_finished_spans())


def genai_messages(*messages: dict[str, Any]) -> str:
    return json.dumps(list(messages))


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"type": "text", "content": text}]}


def assistant(text: str = "", *calls: dict[str, Any]) -> dict[str, Any]:
    parts = ([{"type": "text", "content": text}] if text else []) + [
        {"type": "tool_call", **call} for call in calls
    ]
    return {"role": "assistant", "parts": parts}


def tool_result(call_id: str, result: Any, key: str = "response") -> dict[str, Any]:
    return {"role": "tool", "parts": [{"type": "tool_call_response", "id": call_id, key: result}]}


def chat(
    recorder: Recorder, inputs: list[dict[str, Any]], outputs: list[dict[str, Any]], **extra: Any
) -> None:
    attributes = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": genai_messages(*inputs),
        "gen_ai.output.messages": genai_messages(*outputs),
        **{k.replace("__", "."): v for k, v in extra.items()},
    }
    with recorder.tracer.start_as_current_span("chat model", attributes=attributes):
        pass


def no_trace_ids(messages: list[Any]) -> list[dict[str, Any]]:
    return [m.model_dump(exclude={"metadata"}, exclude_none=True) for m in messages]


def trace_hex(span: Any) -> str:
    return format(span.context.trace_id, "032x")


def span_hex(span: Any) -> str:
    return format(span.context.span_id, "016x")


__all__ = ["Recorder", "trace"]

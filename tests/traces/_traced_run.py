"""Run the test LangGraph agent (two user turns, parallel calls) under one instrumentation.

Run in a fresh process: opentelemetry-instrumentation-langchain 0.62.4 records no LLM or tool
spans after an uninstrument() and a second instrument() in the same process, so each test
session instruments in its own interpreter.

    python -m tests.traces._traced_run openinference|openllmetry OUTDIR
"""

import json
import sys
from pathlib import Path
from typing import Any

import anyio
from langchain_core.messages import BaseMessage
from langchain_core.messages import HumanMessage as LcHuman
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.test_agents import graph
from turneval.messages import from_langchain, messages_to_json
from turneval.traces import from_otel_spans, write_otlp_json

TURNS = ["Set both rooms please", "what is it"]  # parallel calls, then one call


def _instrumentor(name: str) -> Any:
    if name == "openinference":
        from openinference.instrumentation.langchain import LangChainInstrumentor

        return LangChainInstrumentor()
    from opentelemetry.instrumentation.langchain import LangchainInstrumentor

    return LangchainInstrumentor()


async def _run(session: bool) -> list[list[BaseMessage]]:
    agent = graph()
    states: list[list[BaseMessage]] = []
    messages: list[BaseMessage] = []
    for turn in TURNS:
        request = {"messages": [*messages, LcHuman(content=turn)]}
        if session:  # OpenInference records session.id from its context manager
            from openinference.instrumentation import using_session

            with using_session("conversation-1"):
                state = await agent.ainvoke(request)
        else:
            state = await agent.ainvoke(request)
        messages = state["messages"]
        states.append(messages)
    return states


def main(name: str, out: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _instrumentor(name).instrument(tracer_provider=provider)
    states = anyio.run(_run, name == "openinference")
    spans = exporter.get_finished_spans()
    write_otlp_json(spans, out / "spans.jsonl")
    from_otel_spans(spans).to_jsonl(out / "memory.jsonl")
    from_otel_spans(spans, group_by="session").to_jsonl(out / "memory_session.jsonl")
    (out / "states.json").write_text(
        json.dumps([json.loads(messages_to_json(from_langchain(s))) for s in states])
    )


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))

"""Run the test LangGraph agent (two user turns, parallel calls) under one instrumentation.

Run in a fresh process: opentelemetry-instrumentation-langchain 0.62.4 records no LLM or tool
spans after an uninstrument() and a second instrument() in the same process, so each test
session instruments in its own interpreter.

Before the run, an agent is built with LangGraph's prebuilt factory (``create_react_agent``,
as LangGraph's tutorials do): OpenLLMetry records that construction as a trace of its own with
no LLM span, which is no conversation (skipped and counted in ``skipped.json``).

    python -m tests.traces._traced_run openinference|openllmetry OUTDIR [OTLP_TRACES_URL]

With OTLP_TRACES_URL, every span is also sent there as it ends, by the SDK's OTLP/HTTP
exporter (protobuf), as a production agent exports to ``turneval watch``.
"""

import json
import sys
import warnings
from pathlib import Path
from typing import Any

import anyio
import langgraph.prebuilt
from langchain_core.messages import BaseMessage
from langchain_core.messages import HumanMessage as LcHuman
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.test_agents import get_temperature, graph, policy
from turneval.messages import from_langchain, messages_to_json
from turneval.testing import ScriptedChatModel
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


def main(name: str, out: Path, endpoint: str | None = None) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    if endpoint is not None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    _instrumentor(name).instrument(tracer_provider=provider)
    with warnings.catch_warnings():  # LangGraph 1.x deprecates it; tutorials still use it
        warnings.simplefilter("ignore")
        # looked up here, after instrument() wrapped it
        langgraph.prebuilt.create_react_agent(
            ScriptedChatModel(responses=[policy]), [get_temperature]
        )
    states = anyio.run(_run, name == "openinference")
    spans = exporter.get_finished_spans()
    write_otlp_json(spans, out / "spans.jsonl")
    memory = from_otel_spans(spans)
    memory.to_jsonl(out / "memory.jsonl")
    (out / "skipped.json").write_text(json.dumps(memory.skipped_traces))
    from_otel_spans(spans, group_by="session").to_jsonl(out / "memory_session.jsonl")
    (out / "states.json").write_text(
        json.dumps([json.loads(messages_to_json(from_langchain(s))) for s in states])
    )


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)

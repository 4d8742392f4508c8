"""Run a LangGraph supervisor (langgraph-supervisor, scripted models) under one instrumentation.

Run in a fresh process, as ``_traced_run.py`` explains; writes the spans as OTLP/JSON, the
conversations ``from_otel_spans`` rebuilds from them, and the messages of the same team run
with ``output_mode="full_history"`` (every worker's own steps in the supervisor's history).

    python -m tests.traces._traced_supervisor openinference|openllmetry OUTDIR
"""

import sys
from pathlib import Path

from langchain_core.messages import HumanMessage as LcHuman
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.test_multi_agent import supervisor_graph
from tests.traces._traced_run import _instrumentor
from turneval.messages import from_langchain, messages_to_json
from turneval.traces import from_otel_spans, write_otlp_json

QUESTION = "Paris population plus 1M?"


def main(name: str, out: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    _instrumentor(name).instrument(tracer_provider=provider)
    supervisor_graph().invoke({"messages": [LcHuman(content=QUESTION)]})
    spans = exporter.get_finished_spans()
    write_otlp_json(spans, out / "spans.jsonl")
    from_otel_spans(spans).to_jsonl(out / "memory.jsonl")
    full = supervisor_graph("full_history").invoke({"messages": [LcHuman(content=QUESTION)]})
    (out / "full_history.json").write_text(messages_to_json(from_langchain(full["messages"])))


if __name__ == "__main__":
    main(sys.argv[1], Path(sys.argv[2]))

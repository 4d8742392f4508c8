"""A real LangGraph agent traced by OpenInference and by OpenLLMetry, rebuilt from its spans."""

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from langchain_core.messages import BaseMessage
from langchain_core.messages import HumanMessage as LcHuman
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.test_agents import USAGE, graph
from turneval import EvaluationDataset, MultiTurnSample, ToolCall, evaluate
from turneval.messages import Message, from_langchain
from turneval.metrics import ToolCallAccuracy, ToolCallF1, TrajectoryExactMatch
from turneval.traces import from_otel_spans, from_otlp_json, write_otlp_json

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
        if session:
            from openinference.instrumentation import using_session

            with using_session("conversation-1"):
                state = await agent.ainvoke({"messages": [*messages, LcHuman(content=turn)]})
        else:
            state = await agent.ainvoke({"messages": [*messages, LcHuman(content=turn)]})
        messages = state["messages"]
        states.append(messages)
    return states


@pytest.fixture(scope="module", params=["openinference", "openllmetry"])
def traced(
    request: pytest.FixtureRequest,
) -> Iterator[tuple[str, list[Any], list[list[BaseMessage]]]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = _instrumentor(request.param)
    instrumentor.instrument(tracer_provider=provider)
    try:
        states = anyio.run(_run, request.param == "openinference")
    finally:
        instrumentor.uninstrument()
    yield request.param, list(exporter.get_finished_spans()), states


def _plain(messages: list[Message]) -> list[dict[str, Any]]:
    return [m.model_dump(exclude={"metadata"}) for m in messages]


def test_rebuilt_conversations_equal_the_agents_own_messages(traced: Any) -> None:
    _, spans, states = traced
    dataset = from_otel_spans(spans)
    assert len(dataset) == 2  # one trace per user turn, in order of first span start
    for sample, state in zip(dataset, states, strict=True):
        assert isinstance(sample, MultiTurnSample)
        assert _plain(sample.user_input) == _plain(from_langchain(state))
    last = dataset[1].user_input
    assert [m.type for m in last] == [
        "human",
        "ai",
        "tool",
        "tool",
        "ai",
        "human",
        "ai",
        "tool",
        "ai",
    ]
    assert last[1].tool_calls == [  # type: ignore[union-attr]
        ToolCall(name="set_temperature", args={"location": "Kitchen", "temperature": 19}, id="p1"),
        ToolCall(name="set_temperature", args={"location": "Office", "temperature": 22}, id="p2"),
    ]
    trace_ids = {span.context.trace_id for span in spans}
    span_ids = {format(span.context.span_id, "016x") for span in spans}
    for message in last:
        assert message.metadata is not None
        assert int(message.metadata["trace_id"], 16) in trace_ids
        assert message.metadata["span_id"] in span_ids


def test_trace_metadata_and_run_columns(traced: Any) -> None:
    _, spans, _ = traced
    dataset = from_otel_spans(spans)
    meta = dataset[1].metadata
    assert meta is not None
    assert meta["input_tokens"] == 2 * USAGE["input_tokens"]  # two LLM calls in turn 2
    assert meta["output_tokens"] == 2 * USAGE["output_tokens"]
    assert meta["latency_in_seconds"] > 0 and meta["status"] != "ERROR"
    assert "conversion_error" not in meta
    result = evaluate(
        [s.model_copy(update={"reference_tool_calls": []}) for s in dataset],
        ["trajectory_precision"],
        show_progress=False,
    )
    row = result.rows[1]
    assert row.latency_s == meta["latency_in_seconds"] and row.failure == 0
    assert row.agent_usage is not None and row.agent_usage.input_tokens == 100
    assert row.steps == 4  # AI messages of the whole conversation


def test_otlp_json_export_gives_the_same_samples(traced: Any, tmp_path: Path) -> None:
    _, spans, _ = traced
    path = tmp_path / "traces.jsonl"
    assert write_otlp_json(spans, path) == len(spans)
    assert from_otlp_json(path).samples == from_otel_spans(spans).samples


def test_tool_call_metrics_score_the_same_from_either_source(traced: Any) -> None:
    _, spans, states = traced
    reference = [
        ToolCall(name="set_temperature", args={"location": "Kitchen", "temperature": 19}),
        ToolCall(name="get_temperature", args={"location": "Office"}),
    ]
    from_traces = from_otel_spans(spans)[1].model_copy(update={"reference_tool_calls": reference})
    from_agent = MultiTurnSample(
        user_input=from_langchain(states[1]), reference_tool_calls=reference
    )
    metrics = [ToolCallF1(), ToolCallAccuracy(), TrajectoryExactMatch()]
    scores = [
        evaluate(EvaluationDataset([sample]), metrics, show_progress=False).rows[0]
        for sample in (from_traces, from_agent)
    ]
    # 3 predicted calls, 1 matches: P = 1/3, R = 1/2, F1 = 2PR/(P+R) = 0.4; names differ -> 0, 0.
    expected = {"tool_call_f1": 0.4, "tool_call_accuracy": 0.0, "trajectory_exact_match": 0.0}
    for row in scores:
        assert {name: row.score(name) for name in expected} == pytest.approx(expected)


def test_session_grouping_joins_the_turns(traced: Any) -> None:
    name, spans, states = traced
    dataset = from_otel_spans(spans, group_by="session")
    if name == "openinference":  # session.id set with openinference's using_session
        assert len(dataset) == 1
        assert dataset[0].metadata["session_id"] == "conversation-1"  # type: ignore[index]
        assert len(dataset[0].metadata["trace_ids"]) == 2  # type: ignore[index]
        assert _plain(dataset[0].user_input) == _plain(from_langchain(states[1]))
    else:  # no conversation id recorded: each trace is its own sample
        assert len(dataset) == 2

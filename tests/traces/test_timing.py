"""A trace's timing and usage reach the conversation: turn latency, first token, tools, cost."""

from __future__ import annotations

import json
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from turneval import MultiTurnSample
from turneval.metrics import ConversationCost, TokensPerTurn, ToolLatency, TurnLatency
from turneval.provenance import turn_timings
from turneval.results import ToolTiming, TurnTiming
from turneval.traces import from_otel_spans

from .._builders import as_type
from ._spans import assistant, tool_result, user

T0 = 1_700_000_000_000_000_000  # ns since the epoch


def at(seconds: float) -> int:
    return T0 + int(seconds * 1e9)


def _span(tracer: Any, name: str, start: float, end: float, **attributes: Any) -> None:
    span = tracer.start_span(name, attributes=attributes, start_time=at(start))
    span.end(end_time=at(end))


def two_turns() -> list[Any]:
    """One agent invocation: a tool-using first turn, then a second turn (times in s)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests")
    call = {"id": "c1", "name": "search", "arguments": {"q": "x"}}
    first = [user("find x")]
    asked = assistant("", call)
    answered = assistant("x is here")
    root = tracer.start_span("invoke_agent", start_time=at(0.0))
    with trace.use_span(root, end_on_exit=False):
        _span(
            tracer,
            "chat",
            0.1,
            0.9,
            **{
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": json.dumps(first),
                "gen_ai.output.messages": json.dumps([asked]),
                "gen_ai.response.model": "gpt-4o-mini",
                "gen_ai.usage.input_tokens": 1000,
                "gen_ai.usage.output_tokens": 50,
                "ai.response.msToFirstChunk": 200,
            },
        )
        _span(
            tracer,
            "execute_tool search",
            1.0,
            1.5,
            **{
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "search",
                "gen_ai.tool.call.id": "c1",
                "gen_ai.tool.call.result": "found",
            },
        )
        _span(
            tracer,
            "chat",
            1.6,
            2.0,
            **{
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": json.dumps([*first, asked, tool_result("c1", "found")]),
                "gen_ai.output.messages": json.dumps([answered]),
                "gen_ai.response.model": "gpt-4o-mini",
                "gen_ai.usage.input_tokens": 1200,
                "gen_ai.usage.output_tokens": 30,
            },
        )
        history = [*first, asked, tool_result("c1", "found"), answered, user("thanks")]
        _span(
            tracer,
            "chat",
            3.0,
            3.4,
            **{
                "gen_ai.operation.name": "chat",
                "gen_ai.input.messages": json.dumps(history),
                "gen_ai.output.messages": json.dumps([assistant("welcome")]),
                "gen_ai.response.model": "gpt-4o-mini",
                "gen_ai.usage.input_tokens": 1300,
                "gen_ai.usage.output_tokens": 10,
                "langfuse.observation.completion_start_time": "2023-11-14T22:13:23.250000Z",
            },
        )
    root.end(end_time=at(3.5))
    return list(exporter.get_finished_spans())


def test_turn_timings_from_spans_by_hand() -> None:
    sample = as_type(MultiTurnSample, from_otel_spans(two_turns()).samples[0])
    assert [m.type for m in sample.user_input] == ["human", "ai", "tool", "ai", "human", "ai"]
    timings = turn_timings(sample)
    # turn 1: sent at the root's start (0.0), answered when the second chat ends (2.0); first
    # token 0.1 + 0.2 = 0.3; the tool span ran 1.0 -> 1.5
    # turn 2: sent when turn 1 ended (2.0, within the one invocation), answered at 3.4; its
    # first token at Langfuse's completion start: T0 + 3.25 s (1700000003.25 s is 22:13:23.25)
    assert timings is not None and len(timings) == 2
    first, second = timings
    assert first.latency_s == pytest.approx(2.0)
    assert first.first_token_s == pytest.approx(0.3)
    assert first.tools == (ToolTiming("search", pytest.approx(0.5)),)  # type: ignore[arg-type]
    assert second.latency_s == pytest.approx(1.4)
    assert second.first_token_s == pytest.approx(1.25)
    assert second.tools == ()
    assert TurnLatency(statistic="max").score(sample).value == pytest.approx(2.0)
    assert TurnLatency(first_token=True, statistic="mean").score(sample).value == pytest.approx(
        (0.3 + 1.25) / 2
    )
    assert ToolLatency().score(sample).value == pytest.approx(0.5)


def test_each_model_calls_usage_and_model_are_on_its_message() -> None:
    sample = as_type(MultiTurnSample, from_otel_spans(two_turns()).samples[0])
    # turn 1: 1000 + 50 + 1200 + 30 = 2280; turn 2: 1310
    assert TokensPerTurn().score(sample).value == pytest.approx((2280 + 1310) / 2)
    cost = ConversationCost().score(sample)
    # gpt-4o-mini: 0.15 in, 0.60 out per million
    assert cost.value == pytest.approx((3500 * 0.15 + 90 * 0.60) / 1e6)
    assert cost.details["models"]["gpt-4o-mini"]["input_tokens"] == 3500


def test_a_turn_whose_tool_result_has_no_tool_span_has_its_tools_untimed() -> None:
    spans = [s for s in two_turns() if s.name != "execute_tool search"]
    sample = as_type(MultiTurnSample, from_otel_spans(spans).samples[0])
    timings = turn_timings(sample)
    assert timings is not None
    assert timings[0] == TurnTiming(pytest.approx(2.0), pytest.approx(0.3), None)  # type: ignore[arg-type]

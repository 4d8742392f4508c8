"""Traces of several agents: every agent named, the conversation the union of their views.

A real LangGraph supervisor (langgraph-supervisor, scripted models) runs under OpenInference and
under OpenLLMetry in a fresh process each (``_traced_supervisor.py``); its spans, read back from
OTLP/JSON, give the conversation the same team gives with ``output_mode="full_history"``. Hand-built
spans of the documented shapes cover GenAI message names, the OpenAI Agents SDK's agent and
handoff spans (as OpenInference exports them) and a single agent's trace (no names, as before).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests._builders import metadata_of
from turneval import AIMessage, MultiTurnSample, SystemMessage
from turneval.messages import Message, messages_from_json
from turneval.metrics import HandoffAccuracy, ToolCallF1
from turneval.traces import from_otel_spans, from_otlp_json

from ._spans import Recorder, assistant, chat, tool_result, user

ROOT = Path(__file__).resolve().parents[2]


def shape(messages: list[Message]) -> list[tuple[str, str | None, str, list[str]]]:
    """What is compared: type, agent, text and tool-call names (ids are random per run)."""
    return [
        (
            m.type,
            m.name if isinstance(m, AIMessage) else None,
            m.content,
            [c.name for c in m.tool_calls or ()] if isinstance(m, AIMessage) else [],
        )
        for m in messages
    ]


@pytest.fixture(scope="module", params=["openinference", "openllmetry"])
def traced(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    out = tmp_path_factory.mktemp(f"supervisor-{request.param}")
    subprocess.run(
        [sys.executable, "-m", "tests.traces._traced_supervisor", request.param, str(out)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=120,
    )
    return out


def test_a_traced_supervisor_gives_every_agents_steps_and_names(traced: Path) -> None:
    (sample,) = from_otlp_json(traced / "spans.jsonl").samples
    assert isinstance(sample, MultiTurnSample)
    assert metadata_of(sample).get("conversion_error") is None
    full = messages_from_json((traced / "full_history.json").read_text())
    messages = sample.user_input
    assert isinstance(messages[0], SystemMessage)  # the supervisor's prompt, recorded by its call
    # With the default output_mode the supervisor never saw the workers' own tool calls; the
    # trace did: the conversation is the one a full_history supervisor keeps.
    assert shape(messages[1:]) == shape(full)
    assert [m.name for m in messages if isinstance(m, AIMessage)] == [
        "supervisor",
        "research_expert",
        "research_expert",
        "research_expert",
        "supervisor",
        "math_expert",
        "math_expert",
        "math_expert",
        "supervisor",
    ]
    assert [h.handoff.pretty_repr() for h in sample.handoffs] == [
        "supervisor -> research_expert",
        "research_expert -> supervisor",
        "supervisor -> math_expert",
        "math_expert -> supervisor",
    ]
    # in memory as from the file
    assert shape(from_otel_spans_file(traced)) == shape(messages)


def from_otel_spans_file(folder: Path) -> list[Message]:
    (sample,) = [json.loads(line) for line in (folder / "memory.jsonl").read_text().splitlines()]
    return messages_from_json(json.dumps(sample["user_input"]))


async def test_a_traced_team_is_scored_per_agent(traced: Path) -> None:
    (sample,) = from_otlp_json(traced / "spans.jsonl").samples
    assert isinstance(sample, MultiTurnSample)
    from turneval import AgentSpec, Handoff, ToolCall

    scored = sample.model_copy(
        update={
            "agents": [
                AgentSpec(
                    name="research_expert",
                    reference_tool_calls=[ToolCall(name="web_search", args={"query": "paris"})],
                ),
                AgentSpec(
                    name="math_expert",
                    reference_tool_calls=[ToolCall(name="add", args={"a": 2.1, "b": 1})],
                ),
            ],
            "reference_handoffs": [
                Handoff(source="supervisor", target="research_expert"),
                Handoff(source="supervisor", target="math_expert"),
            ],
        }
    )
    f1 = await ToolCallF1(by_agent=True).ascore(scored)
    # each worker: its call and its handoff back: P = 1/2, R = 1/1, F1 = 2/3; the supervisor
    # has no reference of its own and is not scored
    assert f1.details["by_agent"] == pytest.approx({"research_expert": 2 / 3, "math_expert": 2 / 3})
    assert list(f1.details["not_scored"]) == ["supervisor"]
    handoffs = await HandoffAccuracy(strict_order=False).ascore(scored)
    assert handoffs.value == pytest.approx(2 * (2 / 4) * 1 / (2 / 4 + 1))


def test_genai_message_names_of_two_agents_are_kept() -> None:
    r = Recorder()
    planner = {
        **assistant("", {"id": "p1", "name": "transfer_to_writer", "arguments": {}}),
        "name": "planner",
    }
    with r.span("workflow", gen_ai__operation__name="invoke_agent"):
        chat(r, [user("write a poem")], [planner])
        chat(
            r,
            [user("write a poem"), planner, tool_result("p1", "ok")],
            [{**assistant("Roses are red."), "name": "writer"}],
        )
    (sample,) = from_otel_spans(r.spans())
    assert isinstance(sample, MultiTurnSample)
    assert [(m.type, getattr(m, "name", None)) for m in sample.user_input] == [
        ("human", None),
        ("ai", "planner"),
        ("tool", None),
        ("ai", "writer"),
    ]


def test_a_single_named_agent_converts_as_before_without_names() -> None:
    r = Recorder()
    with r.span("agent", gen_ai__operation__name="invoke_agent", gen_ai__agent__name="helper"):
        chat(r, [user("hi")], [{**assistant("hello"), "name": "helper"}])
    (sample,) = from_otel_spans(r.spans())
    assert isinstance(sample, MultiTurnSample)
    assert [m.model_dump(exclude={"metadata"}, exclude_none=True) for m in sample.user_input] == [
        {"type": "human", "content": "hi"},
        {"type": "ai", "content": "hello"},
    ]
    assert metadata_of(sample)["agent_name"] == "helper"


def _oi_llm(
    r: Recorder, inputs: list[tuple[str, str]], output: tuple[str, str, str | None]
) -> None:
    """An OpenInference LLM span: (role, content) inputs, one (role, content, tool call) output."""
    attributes: dict[str, Any] = {"openinference__span__kind": "LLM"}
    for i, (role, content) in enumerate(inputs):
        attributes[f"llm__input_messages__{i}__message__role"] = role
        attributes[f"llm__input_messages__{i}__message__content"] = content
    role, content, called = output
    attributes["llm__output_messages__0__message__role"] = role
    attributes["llm__output_messages__0__message__content"] = content
    if called is not None:
        prefix = "llm__output_messages__0__message__tool_calls__0__tool_call__"
        attributes[f"{prefix}id"] = "h1"
        attributes[f"{prefix}function__name"] = called
    with r.span("response", **attributes):
        pass


def test_openai_agents_sdk_agent_and_handoff_spans_name_the_agents() -> None:
    # The SDK's spans as OpenInference exports them: an AGENT span per agent (named after it),
    # its model calls under it, and a TOOL span "handoff to <agent>".
    r = Recorder()
    with r.span("Agent workflow", openinference__span__kind="AGENT"):
        with r.span("Triage", openinference__span__kind="AGENT"):
            _oi_llm(r, [("user", "refund me")], ("assistant", "", "transfer_to_billing"))
            with r.span("handoff to Billing", openinference__span__kind="TOOL"):
                pass
        with r.span("Billing", openinference__span__kind="AGENT"):
            _oi_llm(r, [("user", "refund me")], ("assistant", "Refunded.", None))
    (sample,) = from_otel_spans(r.spans())
    assert isinstance(sample, MultiTurnSample)
    assert [(m.type, getattr(m, "name", None)) for m in sample.user_input] == [
        ("human", None),
        ("ai", "Triage"),
        ("ai", "Billing"),
    ]
    assert [h.handoff.pretty_repr() for h in sample.handoffs] == ["Triage -> Billing"]

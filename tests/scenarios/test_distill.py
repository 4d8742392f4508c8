"""Distillation: real spans of an instrumented LangGraph agent, stored runs, personal data."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from turneval import (
    AIMessage,
    EvaluationDataset,
    HumanMessage,
    MultiTurnSample,
    ToolCall,
    ToolMessage,
    evaluate,
)
from turneval.scenarios import from_conversations, from_stored_run, from_traces, generate
from turneval.testing import ScriptedChatModel

from ._helpers import record

ROOT = Path(__file__).resolve().parents[2]


def distilled(**fields: Any) -> dict[str, Any]:
    return {
        "scenario": {
            "goal": fields.get("goal", "Set both rooms to a comfortable temperature."),
            "persona": fields.get("persona", "a home owner who writes tersely"),
            "persona_type": "cooperative",
            "difficulty": "easy",
            "user_facts": fields.get("user_facts", [{"name": "rooms", "value": "both"}]),
            "first_message": fields.get("first_message", "Set both rooms please"),
            "reference": fields.get("reference", "Both rooms are set."),
        }
    }


def echo_model(**fields: Any) -> ScriptedChatModel:
    return ScriptedChatModel(responses=[json.dumps(distilled(**fields))])


@pytest.fixture(scope="module")
def spans(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The spans of the test LangGraph agent's two-turn run, traced by OpenInference."""
    out = tmp_path_factory.mktemp("traced")
    subprocess.run(
        [sys.executable, "-m", "tests.traces._traced_run", "openinference", str(out)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        timeout=120,
    )
    return out


def test_one_scenario_per_traced_conversation(spans: Path) -> None:
    memory = EvaluationDataset.from_jsonl(spans / "memory.jsonl")
    model = echo_model()
    source = from_traces(spans / "spans.jsonl")
    result = generate(source, llm=model, seed=2, dedup_threshold=None)
    assert model.calls == len(memory) == result.requests == len(result.scenarios) >= 1
    for prompt, sample in zip(model.prompts, memory, strict=True):
        asked = str(prompt[-1].content)
        for message in sample.user_input:  # type: ignore[union-attr]
            if isinstance(message, HumanMessage):
                assert message.content in asked  # the conversation, as the judges see it
        assert "<conversation>" in asked and "Distill it into one test scenario" in asked
    called = {
        call.name
        for sample in memory
        for message in sample.user_input  # type: ignore[union-attr]
        if isinstance(message, AIMessage)
        for call in message.tool_calls or []
    }
    assert called  # the agent called tools: they are what its scenarios exercise
    assert set(result.coverage.tools) == called
    scenario = result.scenarios[0]
    assert scenario.goal == "Set both rooms to a comfortable temperature."
    assert (
        scenario.user_facts == {"rooms": "both"}
        and scenario.first_message == "Set both rooms please"
    )
    found = record(scenario)
    assert found["source"] == "traces" and found["kind"] == "distilled" and found["seed"] == 2
    assert found["origin"]["conversation"] == 0


def test_session_grouping_and_conversion_errors(spans: Path, tmp_path: Path) -> None:
    by_session = from_traces(spans / "spans.jsonl", group_by="session")
    assert len(by_session.conversations) == 1  # the two turns, one session
    broken = tmp_path / "broken.jsonl"
    broken.write_text((spans / "spans.jsonl").read_text() + "not json\n")
    source = from_traces(broken)
    assert any("line" in reason for reason in source.skipped)


PERSONAL = [
    HumanMessage(
        content="Hi, my name is Dana Whitfield, mail dana.w@corp.example.io or call 415-555-2671."
    ),
    AIMessage(
        content="",
        tool_calls=[ToolCall(name="lookup", args={"email": "dana.w@corp.example.io"}, id="1")],
    ),
    ToolMessage(
        content='{"card": "4111 1111 1111 1111", "owner": "Dana Whitfield"}', tool_call_id="1"
    ),
    AIMessage(content="Thanks Dana, I found your card ending 1111."),
]


def test_personal_data_never_reaches_the_generator_nor_the_scenario() -> None:
    sample = MultiTurnSample(user_input=PERSONAL, metadata={"id": "dana.w@corp.example.io"})
    leaky = echo_model(
        goal="Dana wants her order status; she is dana.w@corp.example.io",
        user_facts=[
            {"name": "email", "value": "dana.w@corp.example.io"},
            {"name": "phone", "value": "415 555 2671"},
        ],
        persona="Dana Whitfield, a busy buyer",
    )
    result = generate(from_conversations([sample], names=["Dana Whitfield"]), llm=leaky)
    (prompt,) = leaky.prompts
    sent = " ".join(str(m.content) for m in prompt)
    for secret in ("Dana", "Whitfield", "dana.w@corp", "415-555-2671", "4111 1111 1111 1111"):
        assert secret not in sent
    assert "user1@example.com" in sent and "+1 202-555-0100" in sent and "[CARD 1]" in sent
    (scenario,) = result.scenarios
    dumped = scenario.model_dump_json()
    for secret in ("Dana", "Whitfield", "dana.w@corp", "415 555 2671"):
        assert secret not in dumped
    # the same stand-ins as in the prompt: the facts still agree with the conversation
    assert scenario.user_facts == {"email": "user1@example.com", "phone": "+1 202-555-0100"}
    assert scenario.persona == "Alex Morgan, a busy buyer"
    found = record(scenario)
    assert found["origin"] == {"conversation": 0, "id": "user1@example.com"}
    assert found["personal_data_replaced"] == {"name": 1, "email": 1, "phone": 1, "card": 1}


def test_a_stored_run_is_distilled(tmp_path: Path) -> None:
    samples = [
        MultiTurnSample(
            user_input=[HumanMessage(content=f"book {city}"), AIMessage(content="booked")]
        )
        for city in ("Rome", "Oslo")
    ]
    store = tmp_path / "runs.db"
    result = evaluate(samples, ["tool_call_f1"], store=str(store), show_progress=False)
    assert result.store_run is not None
    model = echo_model()
    generated = generate(
        from_stored_run(str(store), result.store_run), llm=model, dedup_threshold=None
    )
    assert model.calls == 2 and len(generated.scenarios) == 2
    assert "book Oslo" in str(model.prompts[1][-1].content)
    assert record(generated.scenarios[0])["source"] == "store"
    one = generate(from_stored_run(str(store), result.store_run), llm=echo_model(), n=1, seed=5)
    assert len(one.scenarios) == 1 and one.requests == 1


def test_inputs_that_are_no_conversation_are_skipped_with_the_reason() -> None:
    broken = MultiTurnSample(
        user_input=[HumanMessage(content="x")], metadata={"conversion_error": "trace t1: no span"}
    )
    source = from_conversations([broken, "text", MultiTurnSample(user_input=PERSONAL[:1])])
    assert source.skipped == ["input 0: trace t1: no span", "input 1: not a conversation (str)"]
    assert [index for index, _ in source.conversations] == [2]


def test_the_same_conversation_twice_is_asked_once() -> None:
    sample = MultiTurnSample(
        user_input=[HumanMessage(content="book Rome"), AIMessage(content="ok")]
    )
    model = echo_model()
    result = generate(from_conversations([sample, sample]), llm=model)
    assert model.calls == 1 and result.requests == 1 and len(result.scenarios) == 1
    assert result.skipped == ["conversation 1: the same request as conversation 0 (asked once)"]

"""TraceJudge: the judge reads the conversation with tools, in a bounded, counted, cached loop."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage as LCAIMessage
from langchain_core.messages import BaseMessage
from langchain_openai import ChatOpenAI

from turneval import AIMessage, HumanMessage, MultiTurnSample, ToolCall, ToolMessage, evaluate
from turneval.errors import ConfigError
from turneval.judge import SQLiteCache
from turneval.judge.trace_judge import TraceTools
from turneval.metrics import (
    AgentGoalAccuracyWithoutReference,
    KnowledgeRetention,
    ToolCallF1,
    TraceJudge,
)

from .._fakes import ScriptedChatModel
from .._openai_stub import OpenAIStub, Reply

SECRET = "the code is 4417"


def sample() -> MultiTurnSample:
    filler = [
        m
        for i in range(30)
        for m in (HumanMessage(content=f"question {i}"), AIMessage(content=f"answer {i}"))
    ]
    call = ToolCall(name="lookup", args={"q": "code"}, id="c1")
    return MultiTurnSample(
        user_input=[
            HumanMessage(content="Find my door code."),
            *filler,
            AIMessage(content="", tool_calls=[call]),
            ToolMessage(content=f"record: {SECRET}", tool_call_id="c1", metadata={"span_id": "s9"}),
            AIMessage(content="Your door code is 4417."),
        ]
    )


VERDICT = {
    "user_goal": "get the door code",
    "end_state": "the AI gave code 4417, as the tool said",
    "reason": "found by search",
    "achieved": True,
}


def call(name: str, args: dict[str, Any], n: int) -> LCAIMessage:
    return LCAIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"t{n}"}])


def test_the_tools_list_read_and_search_a_conversation() -> None:
    tools = TraceTools(sample())
    listed = tools.call("list_turns", {"start": 0, "count": 3})
    assert listed.splitlines()[0].startswith("[0] human (")
    assert len(listed.splitlines()) == 3
    assert "[62] tool span=s9" in tools.call("list_turns", {"start": 62, "count": 1})
    assert tools.call("search", {"query": "4417"}).splitlines()[0].startswith("[62]")
    assert SECRET in tools.call("read_turn", {"index": 62, "offset": 0})
    assert tools.call("list_spans", {}) == "span s9: messages [62]"
    assert "no message 99" in tools.call("read_turn", {"index": 99, "offset": 0})
    assert "bad arguments" in tools.call("read_turn", {})
    long = TraceTools(MultiTurnSample(user_input=[HumanMessage(content="x" * 9000)]))
    first = long.call("read_turn", {"index": 0, "offset": 0})
    assert "more characters: read_turn(0, 4000)" in first


def test_a_scripted_judge_searches_reads_and_answers_the_same_schema() -> None:
    def script(messages: list[BaseMessage]) -> LCAIMessage:
        rounds = sum(1 for m in messages if isinstance(m, LCAIMessage))
        if rounds == 0:
            assert "is not shown here" in str(messages[1].content)  # no transcript sent
            assert "answer 29" not in str(messages[1].content)
            return call("search", {"query": "code"}, 0)
        if rounds == 1:
            assert "[62]" in str(messages[-1].content)  # the search result came back
            return call("read_turn", {"index": 62, "offset": 0}, 1)
        assert SECRET in str(messages[-1].content)
        return call("InferredGoalVerdict", VERDICT, 2)

    model = ScriptedChatModel(responses=[script])
    judge = TraceJudge(metric=AgentGoalAccuracyWithoutReference(), llm=model)
    assert judge.name == "agent_goal_accuracy_without_reference_trace"
    row = evaluate([sample()], [judge], show_progress=False).rows[0]
    scored = row.results[judge.name]
    assert scored.value == 1.0 and "4417" in (scored.reason or "")
    [trace] = scored.details["trace"]
    assert trace["rounds"] == 3 and trace["forced"] is False
    assert trace["tool_calls"] == ["search", "read_turn"] and trace["tool_tokens"] > 0
    assert scored.usage is not None and scored.usage.calls == 3 == model.calls


def test_the_loop_is_bounded_and_forced_to_answer(openai_stub: OpenAIStub) -> None:
    reads = [Reply(content=None, tool_calls=[("list_turns", {"start": 0, "count": 50})])] * 2
    openai_stub.reset(*reads, Reply(content=None, tool_calls=[("InferredGoalVerdict", VERDICT)]))
    llm = ChatOpenAI(model="gpt-4", base_url=openai_stub.url, api_key="k", max_retries=0)
    judge = TraceJudge(metric=AgentGoalAccuracyWithoutReference(), llm=llm, max_rounds=2)
    row = evaluate([sample()], [judge], show_progress=False).rows[0]
    [trace] = row.results[judge.name].details["trace"]
    assert trace["rounds"] == 3 and trace["forced"] is True
    # two rounds of reading, then the verdict tool alone, and the judge must call it
    last = openai_stub.requests[-1]
    assert [t["function"]["name"] for t in last["tools"]] == ["InferredGoalVerdict"]
    assert last["tool_choice"] == {"type": "function", "function": {"name": "InferredGoalVerdict"}}
    assert all(len(body["tools"]) == 5 for body in openai_stub.requests[:2])


def test_a_judge_that_never_answers_fails_the_row_clearly() -> None:
    model = ScriptedChatModel(responses=[call("list_turns", {"start": 0, "count": 5}, 0)])
    judge = TraceJudge(metric=AgentGoalAccuracyWithoutReference(), llm=model, max_rounds=2)
    row = evaluate([sample()], [judge], show_progress=False).rows[0]
    failure = row.failures[judge.name]
    assert failure.error_type == "JudgeOutputError"
    assert "within 3 round(s)" in failure.message
    assert model.calls == 3  # bounded: max_rounds + the forced round


def test_a_verdict_that_does_not_validate_is_shown_to_the_judge() -> None:
    bad = call("InferredGoalVerdict", {"user_goal": "x"}, 0)
    model = ScriptedChatModel(responses=[bad, call("InferredGoalVerdict", VERDICT, 1)])
    judge = TraceJudge(metric=AgentGoalAccuracyWithoutReference(), llm=model)
    row = evaluate([sample()], [judge], show_progress=False).rows[0]
    assert row.results[judge.name].value == 1.0
    feedback = str(model.prompts[1][-1].content)
    assert "could not be used" in feedback and "end_state" in feedback


def test_a_per_turn_judge_through_tools_rates_each_turn() -> None:
    talk = sample()
    turns = [i for i, m in enumerate(talk.user_input) if isinstance(m, AIMessage) and m.content]
    answer = {"turns": {f"message_{i}": {"reason": "ok", "verdict": "retained"} for i in turns}}
    model = ScriptedChatModel(responses=[call("RetentionVerdict", answer, 0)])
    judge = TraceJudge(metric=KnowledgeRetention(), llm=model)
    row = evaluate([talk], [judge], show_progress=False).rows[0]
    assert row.results[judge.name].value == 1.0
    assert [t["message_index"] for t in row.results[judge.name].details["turns"]] == turns


def test_trace_judge_refuses_what_it_cannot_wrap() -> None:
    from turneval.metrics import Groundedness

    with pytest.raises(ConfigError, match="does not judge multi-turn samples"):
        TraceJudge(metric=Groundedness())
    with pytest.raises(ConfigError, match="needs a judged metric"):
        TraceJudge(metric=ToolCallF1())


def test_through_chat_openai_every_round_is_counted_and_cached(
    openai_stub: OpenAIStub, tmp_path: Path
) -> None:
    script = [
        Reply(content=None, tool_calls=[("search", {"query": "code"})]),
        Reply(content=None, tool_calls=[("read_turn", {"index": 62, "offset": 0})]),
        Reply(content=None, tool_calls=[("InferredGoalVerdict", VERDICT)]),
    ]
    openai_stub.reset(*script)
    llm = ChatOpenAI(model="gpt-4", base_url=openai_stub.url, api_key="k", max_retries=0)
    judge = TraceJudge(metric=AgentGoalAccuracyWithoutReference(), llm=llm)
    cache = SQLiteCache(tmp_path / "cache.sqlite")
    first = evaluate([sample()], [judge], cache=cache, show_progress=False)
    scored = first.rows[0].results[judge.name]
    assert scored.value == 1.0 and scored.usage is not None and scored.usage.calls == 3
    assert len(openai_stub.requests) == 3
    bodies = openai_stub.requests
    assert {t["function"]["name"] for t in bodies[0]["tools"]} == {
        "list_turns", "list_spans", "read_turn", "search", "InferredGoalVerdict"
    }  # fmt: skip
    assert bodies[0]["tool_choice"] == "required"
    assert SECRET in json.dumps(bodies[2]["messages"])  # the tool's result went back
    second = evaluate([sample()], [judge], cache=cache, show_progress=False)
    again = second.rows[0].results[judge.name]
    assert again.value == 1.0 and again.usage is not None
    assert again.usage.calls == 0 and again.usage.cached_calls == 3
    assert len(openai_stub.requests) == 3  # nothing new was sent

"""Long conversations: every judge request within its budget, items judged once, linear cost.

The stub counts every prompt with tiktoken (cl100k_base, as OpenAI counts ``gpt-4``) and
rejects those over its limit, as a real server would: a request the judge planned wrongly
would show up there, not only in our own arithmetic.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_openai import ChatOpenAI

from turneval import AIMessage, HumanMessage, MultiTurnSample, evaluate
from turneval.estimate import estimate
from turneval.judge import JudgeRun, judge_run
from turneval.judge.context import SUMMARY_SLOT
from turneval.metrics import (
    AgentGoalAccuracyWithoutReference,
    ConversationCompleteness,
    JudgedMetric,
    KnowledgeRetention,
    PointwiseMetric,
    RoleAdherence,
    ToolOutputGroundedness,
    TopicAdherenceScore,
    TrajectoryJudge,
    TurnRelevancy,
)
from turneval.metrics._conversation import ai_turns

from .._long_conversations import long_conversation
from .._openai_stub import OpenAIStub, Reply
from ..conftest import TIKTOKEN_OFFLINE

pytestmark = pytest.mark.skipif(not TIKTOKEN_OFFLINE, reason="cl100k_base is not available")

PER_ITEM = {"RetentionVerdict": "knowledge_retention", "RoleVerdict": "role_adherence",
            "RelevancyVerdict": "turn_relevancy"}  # fmt: skip


def metrics(limit: int) -> list[JudgedMetric[Any]]:
    """Judges of every policy: per-item (windowed) and whole-conversation (compacted)."""
    options: dict[str, Any] = {"context_tokens": limit}
    return [
        KnowledgeRetention(**options),
        RoleAdherence(**options),
        TurnRelevancy(**options),
        AgentGoalAccuracyWithoutReference(**options),
        ConversationCompleteness(**options),
        TopicAdherenceScore(**options),
        TrajectoryJudge(**options),
        PointwiseMetric(
            name="clarity_per_turn",
            criteria="Is the AI turn clear?",
            rating_rubric={"1": "unclear", "2": "clear"},
            per_turn=True,
            **options,
        ),
        ToolOutputGroundedness(**options),
    ]


def judge_at(stub: OpenAIStub, limit: int, seed: int) -> ChatOpenAI:
    stub.reset(default=Reply(from_schema=True), schema_seed=seed, max_context=limit)
    return ChatOpenAI(model="gpt-4", base_url=stub.url, api_key="k", max_retries=0)


def judged_items(stub: OpenAIStub) -> dict[str, Counter[int]]:
    """Per per-item schema, how many requests rated each message (read from the stub)."""
    seen: dict[str, Counter[int]] = {name: Counter() for name in PER_ITEM.values()}
    for body in stub.requests:
        sent = body["response_format"]["json_schema"]
        metric = PER_ITEM.get(sent["name"])
        if metric is not None:
            keys = sent["schema"]["properties"]["turns"]["properties"]
            seen[metric].update(int(key.removeprefix("message_")) for key in keys)
    return seen


@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    turns=st.integers(min_value=1, max_value=90),
    tool_chars=st.integers(min_value=60, max_value=30_000),
    big_every=st.sampled_from([0, 3, 7]),
    limit=st.sampled_from([4096, 8192, 16384]),
    seed=st.integers(min_value=0, max_value=10_000),
)
def test_no_request_over_budget_and_every_item_judged_once(
    openai_stub_server: OpenAIStub,
    turns: int,
    tool_chars: int,
    big_every: int,
    limit: int,
    seed: int,
) -> None:
    stub = openai_stub_server
    llm = judge_at(stub, limit, seed)
    sample = long_conversation(
        turns, seed=seed, max_tool_chars=tool_chars, big_every=big_every, big_chars=60_000
    )
    judges = metrics(limit)
    result = evaluate([sample], judges, llm=llm, show_progress=False, max_llm_concurrency=8)
    assert stub.rejected == []  # counted at the stub: nothing was over its limit
    assert max(stub.prompt_tokens) <= limit
    row = result.rows[0]
    for metric in judges:  # every row scored, or failed naming the limit
        failure = row.failures.get(metric.name)
        if failure is not None:
            assert failure.error_type == "ContextBudgetError", failure.message
            assert f"{limit:,} tokens" in failure.message
        else:
            seen = row.results[metric.name].details["context"]
            assert seen["context"] in ("full", "windowed", "compacted")
            assert seen["largest_prompt"] <= limit
    items = ai_turns(KnowledgeRetention(), sample)
    counted = judged_items(stub)
    for name in ("knowledge_retention", "role_adherence"):
        if name in row.results:
            assert counted[name] == Counter(items), name  # each AI turn rated exactly once
            rated = [t["message_index"] for t in row.results[name].details["turns"]]
            assert rated == items
    if "turn_relevancy" in row.results:
        assert counted["turn_relevancy"] == Counter(i for i in items if i > 0)


def test_a_judged_turn_too_long_for_the_window_fails_before_any_request(
    openai_stub: OpenAIStub,
) -> None:
    llm = judge_at(openai_stub, 4096, 0)
    sample = MultiTurnSample(
        user_input=[
            HumanMessage(content="Tell me everything."),
            AIMessage(content="All of it. " * 3000),  # about 9,000 tokens: the item itself
        ]
    )
    result = evaluate([sample], [KnowledgeRetention(context_tokens=4096)], llm=llm,
                      show_progress=False)  # fmt: skip
    failure = result.rows[0].failures["knowledge_retention"]
    assert failure.error_type == "ContextBudgetError"
    assert "message 1 (an item to judge)" in failure.message
    assert "context window of 4,096 tokens" in failure.message
    assert openai_stub.requests == []  # nothing was paid


def test_a_long_conversation_is_windowed_and_compacted_as_recorded(
    openai_stub: OpenAIStub,
) -> None:
    limit = 8192
    llm = judge_at(openai_stub, limit, 3)
    sample = long_conversation(120, seed=3, max_tool_chars=4000, big_every=4, big_chars=200_000,
                               repeat_every=5)  # fmt: skip
    judges: list[JudgedMetric[Any]] = [KnowledgeRetention(), AgentGoalAccuracyWithoutReference()]
    result = evaluate([sample], judges, llm=llm, show_progress=False)
    row = result.rows[0]
    retention = row.results["knowledge_retention"].details["context"]
    goal = row.results["agent_goal_accuracy_without_reference"].details["context"]
    assert retention["context"] == "windowed" and goal["context"] == "compacted"
    assert retention["summaries"] >= 1 and goal["summaries"] >= 1
    assert sum(retention["items_per_request"]) == len(ai_turns(KnowledgeRetention(), sample))
    assert retention["counter"] == "tiktoken:cl100k_base" and retention["context_tokens"] == limit
    assert openai_stub.rejected == []
    prompts = [m["content"] for body in openai_stub.requests for m in body["messages"]]
    assert not any(SUMMARY_SLOT in text for text in prompts)  # every slot was filled
    assert any("cut from the middle of this tool output" in text for text in prompts)
    assert any("[same output as message " in text for text in prompts)
    assert any("Summary of messages 0-" in text for text in prompts)
    # The summaries are the same requests for both judges.
    summaries = [
        json.dumps(body["messages"], sort_keys=True)
        for body in openai_stub.requests
        if body["response_format"]["json_schema"]["name"] == "SummaryVerdict"
    ]
    # The run asked each summary once, shared by both judges.
    assert len(summaries) == len(set(summaries)) == retention["summaries"]
    # The dry run states the same requests and counts each prompt as the judge did.
    with judge_run(JudgeRun(llm=llm)):
        planned = {m.name: len(m.judge_requests(sample)) for m in judges}
    dry = estimate([sample], judges, llm=llm)
    assert dry.calls["knowledge_retention"] == planned["knowledge_retention"]
    assert dry.calls["agent_goal_accuracy_without_reference"] == goal["requests"]  # shared
    assert dry.total_calls == len(openai_stub.requests)
    assert dry.contexts == {
        "knowledge_retention": {"windowed": 1},
        "agent_goal_accuracy_without_reference": {"compacted": 1},
    }
    sent = sum(openai_stub.prompt_tokens)
    assert sent <= dry.total_prompt_tokens <= 1.2 * sent  # summaries are counted at their cap


@pytest.mark.parametrize("policy", ["windowed", "compacted", "per_turn"])
def test_judge_tokens_grow_linearly_with_the_conversation(
    openai_stub: OpenAIStub, policy: str
) -> None:
    limit = 8192
    judges: dict[str, JudgedMetric[Any]] = {
        "windowed": KnowledgeRetention(),
        "compacted": ConversationCompleteness(),
        "per_turn": PointwiseMetric(
            name="clarity_per_turn",
            criteria="clear?",
            rating_rubric={"1": "no", "2": "yes"},
            per_turn=True,
        ),
    }
    judge = judges[policy]
    per_turn = []
    for turns in (60, 240):
        llm = judge_at(openai_stub, limit, 0)
        sample = long_conversation(turns, seed=1, max_tool_chars=1500)
        result = evaluate([sample], [judge], llm=llm, show_progress=False)
        assert judge.name in result.rows[0].results
        assert openai_stub.rejected == []
        per_turn.append(sum(openai_stub.prompt_tokens) / turns)
    small, large = per_turn
    if policy == "compacted":  # one request of at most the window, plus the summaries
        assert large <= 1.3 * small
    else:
        assert 0.6 * small <= large <= 1.4 * small, per_turn

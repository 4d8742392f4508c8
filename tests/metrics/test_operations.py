"""Operational metrics: latency, cost, tokens and tool time, from what the run recorded."""

from __future__ import annotations

import math
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage as LcAI
from langchain_core.messages import BaseMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from turneval import AIMessage, EvalTask, HumanMessage, MultiTurnSample, ToolCall, ToolMessage
from turneval.errors import InvalidSampleError
from turneval.metrics import ConversationCost, TokensPerTurn, ToolLatency, TurnLatency
from turneval.metrics.operations import price_for
from turneval.provenance import turn_timings
from turneval.results import Prices

from .._fakes import ScriptedChatModel


def timed(*turns: dict[str, Any], messages: list[Any] | None = None) -> MultiTurnSample:
    """A conversation of one answered turn per timing, with those timings recorded."""
    conversation = messages
    if conversation is None:
        conversation = []
        for number, _ in enumerate(turns):
            conversation += [HumanMessage(content=f"q{number}"), AIMessage(content=f"a{number}")]
    return MultiTurnSample(user_input=conversation, metadata={"turn_timings": list(turns)})


def ai(
    text: str = "",
    *,
    model: str | None = None,
    tokens: tuple[int, int] | None = None,
    calls: list[ToolCall] | None = None,
) -> AIMessage:
    meta: dict[str, Any] = {}
    if tokens is not None:
        meta["usage_metadata"] = {
            "input_tokens": tokens[0],
            "output_tokens": tokens[1],
            "total_tokens": sum(tokens),
        }
    if model is not None:
        meta["response_metadata"] = {"model_name": model}
    return AIMessage(content=text, tool_calls=calls, metadata=meta or None)


# -- TurnLatency --------------------------------------------------------------------------------


def test_turn_latency_percentiles_by_hand() -> None:
    sample = timed(*({"latency_s": s} for s in (4.0, 1.0, 3.0, 2.0)))
    # sorted 1, 2, 3, 4; type 7: p50 at h = 0.5 * 3 = 1.5 -> 2 + 0.5 * (3 - 2) = 2.5
    # p95 at h = 0.95 * 3 = 2.85 -> 3 + 0.85 * (4 - 3) = 3.85
    assert TurnLatency().score(sample).value == pytest.approx(2.5)
    assert TurnLatency(statistic="p95").score(sample).value == pytest.approx(3.85)
    assert TurnLatency(statistic="max").score(sample).value == 4.0
    assert TurnLatency(statistic="mean").score(sample).value == pytest.approx(2.5)
    result = TurnLatency(statistic="p95").score(sample)
    assert result.details["turns_s"] == [4.0, 1.0, 3.0, 2.0]
    assert result.reason == "p95 turn latency over 4 turns = 3.850 s (turns: 4, 1, 3, 2 s)"


def _type7(values: list[float], q: float) -> float:
    """Hyndman and Fan's type 7, written out: what the docs promise."""
    ordered = sorted(values)
    h = (len(ordered) - 1) * q / 100
    low = math.floor(h)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (h - low) * (ordered[high] - ordered[low])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0, 1e4, allow_nan=False), min_size=1, max_size=30),
    st.sampled_from(["p50", "p95"]),
)
def test_turn_latency_is_the_documented_percentile(values: list[float], statistic: str) -> None:
    sample = timed(*({"latency_s": v} for v in values))
    got = TurnLatency.model_validate({"statistic": statistic}).score(sample).value
    assert got == pytest.approx(_type7(values, float(statistic[1:])), rel=1e-9, abs=1e-9)


def test_first_token_where_the_trace_has_it() -> None:
    sample = timed(
        {"latency_s": 2.0, "first_token_s": 0.4},
        {"latency_s": 3.0},
        {"latency_s": 1.0, "first_token_s": 0.2},
    )
    result = TurnLatency(first_token=True, statistic="max").score(sample)
    assert result.value == 0.4 and result.details["first_token_s"] == [0.4, 0.2]
    assert "time to first token over 2 turns" in result.reason
    with pytest.raises(InvalidSampleError, match="first token"):
        TurnLatency(first_token=True).score(timed({"latency_s": 1.0}))


def test_a_sample_without_timings_fails_naming_the_field() -> None:
    plain = MultiTurnSample(user_input=[HumanMessage(content="hi"), AIMessage(content="yo")])
    with pytest.raises(InvalidSampleError, match="turn_timings") as caught:
        TurnLatency().score(plain)
    assert caught.value.field == "metadata.turn_timings"
    bad = timed({"latency_s": -1.0})
    with pytest.raises(InvalidSampleError, match=r"turn_timings\[0\]: latency_s must be"):
        TurnLatency().score(bad)


def test_the_summary_gives_the_rows_and_the_turns_percentiles() -> None:
    rows = [
        TurnLatency().score(timed({"latency_s": 1.0}, {"latency_s": 3.0})),  # p50 2.0
        TurnLatency().score(timed({"latency_s": 5.0})),  # p50 5.0
    ]
    extras = TurnLatency().summary_extras(rows)
    # rows: 2, 5 -> p50 3.5, p95 2 + 0.95 * 3 = 4.85; turns: 1, 3, 5 -> h = 1.9: 3 + 0.9 * 2 = 4.8
    assert extras == pytest.approx(
        {
            "rows_p50": 3.5,
            "rows_p95": 4.85,
            "rows_max": 5.0,
            "turns_p50": 3.0,
            "turns_p95": 4.8,
            "turns_max": 5.0,
        }
    )


# -- TokensPerTurn -------------------------------------------------------------------------------


def test_tokens_per_turn_by_hand() -> None:
    call = ToolCall(name="search", args={"q": "x"}, id="c1")
    sample = MultiTurnSample(
        user_input=[
            HumanMessage(content="find x"),
            ai(tokens=(100, 20), calls=[call]),
            ToolMessage(content="found", tool_call_id="c1"),
            ai("x is here", tokens=(150, 30)),
            HumanMessage(content="thanks"),
            ai("welcome", tokens=(200, 40)),
            HumanMessage(content="unanswered"),
        ]
    )
    # turn 1: 100+20+150+30 = 300; turn 2: 240; the last turn has no answer
    assert TokensPerTurn().score(sample).value == 270.0
    assert TokensPerTurn(tokens="output").score(sample).value == (50 + 40) / 2
    result = TokensPerTurn().score(sample)
    assert result.reason == "total tokens per turn = 540 / 2 turns = 270.0"
    no_usage = MultiTurnSample(user_input=[HumanMessage(content="q"), AIMessage(content="a")])
    with pytest.raises(InvalidSampleError, match="usage_metadata"):
        TokensPerTurn().score(no_usage)


# -- ConversationCost -----------------------------------------------------------------------------


def test_cost_of_the_agent_and_of_the_simulated_user_by_hand() -> None:
    sample = MultiTurnSample(
        user_input=[
            HumanMessage(content="q"),
            ai("a", model="gpt-4o-mini-2024-07-18", tokens=(1000, 500)),
            HumanMessage(content="q2"),
            ai("b", model="house-model", tokens=(2000, 100)),
            AIMessage(content="no usage recorded"),
        ],
        metadata={
            "user_usage": {"input_tokens": 3000, "output_tokens": 200},
            "user_model": "sim",
        },
    )
    metric = ConversationCost(prices={"house-model": [1.0, 2.0], "sim": Prices(0.5, 1.5)})
    result = metric.score(sample)
    agent = (1000 * 0.15 + 500 * 0.60) / 1e6 + (2000 * 1.0 + 100 * 2.0) / 1e6  # 0.00265
    user = (3000 * 0.5 + 200 * 1.5) / 1e6  # 0.0018
    assert result.value == pytest.approx(agent + user)
    assert result.details["agent_cost"] == pytest.approx(agent)
    assert result.details["user_cost"] == pytest.approx(user)
    assert result.details["messages_without_usage"] == 1
    assert "judges not included" in result.reason
    alone = ConversationCost(prices={"house-model": [1.0, 2.0]}, include_user=False).score(sample)
    assert alone.value == pytest.approx(agent)


def test_a_model_without_a_price_or_a_name_fails_the_row_naming_it() -> None:
    sample = MultiTurnSample(
        user_input=[HumanMessage(content="q"), ai("a", model="mystery-1", tokens=(10, 1))]
    )
    with pytest.raises(InvalidSampleError, match="no price for the agent's model 'mystery-1'"):
        ConversationCost().score(sample)
    unnamed = MultiTurnSample(user_input=[HumanMessage(content="q"), ai("a", tokens=(10, 1))])
    with pytest.raises(InvalidSampleError, match="agent_model"):
        ConversationCost().score(unnamed)
    assert ConversationCost(agent_model="gpt-4o").score(unnamed).value == pytest.approx(
        (10 * 2.5 + 1 * 10.0) / 1e6
    )


def test_prices_go_by_the_longest_name_a_model_starts_with() -> None:
    table = {"gpt-4o": Prices(2.5, 10), "gpt-4o-mini": Prices(0.15, 0.6)}
    assert price_for("gpt-4o-mini-2024-07-18", table) == table["gpt-4o-mini"]
    assert price_for("gpt-4o-2024-08-06", table) == table["gpt-4o"]
    assert price_for("openai/gpt-4o-mini", table) == table["gpt-4o-mini"]
    assert price_for("claude", table) is None


# -- ToolLatency ------------------------------------------------------------------------------------


def tool_turns() -> MultiTurnSample:
    calls = [ToolCall(name="search", args={}, id="s1"), ToolCall(name="book", args={}, id="b1")]
    messages = [
        HumanMessage(content="book"),
        AIMessage(content="", tool_calls=calls),
        ToolMessage(content="r", tool_call_id="s1"),
        ToolMessage(content="r", tool_call_id="b1"),
        AIMessage(content="done"),
        HumanMessage(content="again"),
        AIMessage(content="", tool_calls=[ToolCall(name="search", args={}, id="s2")]),
        ToolMessage(content="r", tool_call_id="s2"),
        AIMessage(content="done"),
    ]
    return timed(
        {
            "latency_s": 3.0,
            "tools": [{"name": "search", "latency_s": 0.5}, {"name": "book", "latency_s": 1.5}],
        },
        {"latency_s": 2.0, "tools": [{"name": "search", "latency_s": 1.0}]},
        messages=messages,
    )


def test_tool_latency_total_and_per_tool_by_hand() -> None:
    sample = tool_turns()
    assert ToolLatency().score(sample).value == pytest.approx(3.0)  # 0.5 + 1.5 + 1.0
    assert ToolLatency(tool="search").score(sample).value == pytest.approx(1.5)
    assert ToolLatency(tool="search", statistic="mean").score(sample).value == pytest.approx(0.75)
    assert ToolLatency(statistic="max").score(sample).value == 1.5
    by_tool = ToolLatency().score(sample).details["by_tool"]
    # search: 0.5, 1.0 -> p50 0.75, p95 0.5 + 0.95 * 0.5 = 0.975
    assert by_tool["search"] == pytest.approx(
        {"calls": 2, "total_s": 1.5, "p50_s": 0.75, "p95_s": 0.975, "max_s": 1.0}
    )
    assert ToolLatency(tool="search").subject_tool == "search"
    extras = ToolLatency().summary_extras([ToolLatency().score(sample)])
    assert extras["search_calls"] == 2 and extras["search_p95"] == pytest.approx(0.975)


def test_no_tool_call_is_zero_seconds_untimed_tools_fail() -> None:
    plain = MultiTurnSample(user_input=[HumanMessage(content="q"), AIMessage(content="a")])
    assert ToolLatency().score(plain).value == 0.0
    with pytest.raises(InvalidSampleError, match="no tool calls in this conversation"):
        ToolLatency(statistic="p95").score(plain)
    untimed = tool_turns()
    assert untimed.metadata is not None
    untimed.metadata["turn_timings"] = [{"latency_s": 3.0}, {"latency_s": 2.0}]
    with pytest.raises(InvalidSampleError, match="turn 1's tool calls were not timed"):
        ToolLatency().score(untimed)


def test_every_operational_metric_says_lower_is_better() -> None:
    for cls in (TurnLatency, ConversationCost, TokensPerTurn, ToolLatency):
        assert cls.higher_is_better is False
        assert cls().scale == (0.0, math.inf)


# -- recorded by the run: EvalTask over a callable and over a graph --------------------------------


def test_evaltask_records_each_turn_for_turn_latency() -> None:
    def slow(messages: list[Any]) -> list[AIMessage]:
        time.sleep(0.05)
        return [AIMessage(content="ok")]

    samples = [MultiTurnSample(user_input=[HumanMessage(content="a"), HumanMessage(content="b")])]
    result = EvalTask(samples, [TurnLatency(statistic="max")]).evaluate(slow)
    row = result.rows[0]
    assert row.agent is not None and len(row.agent.turns) == 2
    assert all(0.05 <= turn.latency_s < 5 for turn in row.agent.turns)
    assert all(turn.tools is None for turn in row.agent.turns)  # a callable's tools: untimed
    assert turn_timings(row.sample) == row.agent.turns
    assert result.scores("turn_latency")[0] == max(t.latency_s for t in row.agent.turns)


@tool
def slow_search(query: str) -> str:
    """Search slowly."""
    time.sleep(0.05)
    return f"found {query}"


def _searcher(messages: list[BaseMessage]) -> LcAI:
    if messages[-1].type == "tool":
        return LcAI(
            content="here",
            usage_metadata={"input_tokens": 5, "output_tokens": 2, "total_tokens": 7},
        )
    call = {"name": "slow_search", "args": {"query": "x"}, "id": "c1", "type": "tool_call"}
    return LcAI(content="", tool_calls=[call])


def test_a_graphs_tool_calls_are_timed_from_its_steps() -> None:
    model = ScriptedChatModel(responses=[_searcher]).bind_tools([slow_search])

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([slow_search]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    samples = [MultiTurnSample(user_input=[HumanMessage(content="find x")])]
    result = EvalTask(samples, [ToolLatency(), TokensPerTurn()]).evaluate(builder.compile())
    row = result.rows[0]
    assert row.agent is not None
    (turn,) = row.agent.turns
    assert turn.tools is not None and [t.name for t in turn.tools] == ["slow_search"]
    assert 0.05 <= turn.tools[0].latency_s <= turn.latency_s
    assert result.scores("tool_latency")[0] == turn.tools[0].latency_s
    assert result.scores("tokens_per_turn")[0] == 7.0


async def test_a_simulated_conversation_records_its_turns_and_its_users_model(
    openai_stub: Any,
) -> None:
    from langchain_openai import ChatOpenAI

    from turneval.simulation import Scenario, SimulatedUser, asimulate
    from turneval.usage import Usage

    from .._openai_stub import Reply

    openai_stub.reset(
        Reply(content='{"message": "Where is A1?", "done": false}'),
        Reply(content='{"message": "And B2?", "done": false}'),
        Reply(content='{"message": "thanks", "done": true}'),
    )

    def agent(messages: list[Any]) -> list[AIMessage]:
        return [ai("shipped", model="gpt-4o-mini", tokens=(100, 10))]

    llm = ChatOpenAI(model="user-model", base_url=openai_stub.url, api_key="k", max_retries=0)
    data = await asimulate(agent, [Scenario(goal="track A1 and B2")], user=SimulatedUser(llm))
    sample = data[0]
    assert isinstance(sample, MultiTurnSample) and sample.metadata is not None
    assert sample.metadata["user_model"] == "user-model"
    timings = turn_timings(sample)
    assert timings is not None and len(timings) == sample.metadata["turns"] == 2
    user = Usage.from_dict(sample.metadata["user_usage"])
    assert user.total_tokens > 0
    cost = await ConversationCost(prices={"user-model": [1.0, 2.0]}).ascore(sample)
    agent_cost = 2 * (100 * 0.15 + 10 * 0.60) / 1e6
    user_cost = (user.input_tokens * 1.0 + user.output_tokens * 2.0) / 1e6
    assert cost.details["agent_cost"] == pytest.approx(agent_cost)
    assert cost.value == pytest.approx(agent_cost + user_cost)
    assert cost.details["user"]["model"] == "user-model"

"""One conversation: stop reasons, the opening turn, failures kept, a real LangGraph agent."""

from typing import Any

import anyio
import pytest
from langchain_core.messages import AIMessage as LcAI
from langchain_core.messages import BaseMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from turneval import AIMessage, EvalTask
from turneval.judge import Usage
from turneval.metrics import CustomMetric
from turneval.simulation import (
    BaseUser,
    Scenario,
    ScriptedUser,
    UserTurn,
    asimulate,
    simulate,
)
from turneval.testing import ScriptedChatModel

from .._builders import messages_of, metadata_of
from ._helpers import echo


async def test_agent_error_keeps_the_conversation_and_fails_the_row() -> None:
    def flaky(messages: list[Any]) -> list[Any]:
        if len(messages) > 2:
            raise RuntimeError("order service down")
        return [AIMessage(content="which order?")]

    metric = CustomMetric(name="always_one", metric_function=lambda instance: 1.0)
    result = await EvalTask([Scenario(id="s", goal="g")], [metric]).aevaluate(
        runnable=flaky, user=ScriptedUser(["cancel it", "A1"])
    )
    row = result.rows[0]
    assert [m.content for m in messages_of(row.sample)] == ["cancel it", "which order?", "A1"]
    assert metadata_of(row.sample)["stop_reason"] == "agent_error"
    assert row.agent_error == "RuntimeError: order service down" and row.failure == 1
    assert row.failures["always_one"].error_type == "AgentRunError"  # not scored as a success
    record = result.records()[0]
    assert (record["scenario_id"], record["trial"], record["stop_reason"]) == (
        "s",
        0,
        "agent_error",
    )
    assert result.summary()["always_one"].extra == {
        "pass^1": 0.0,
        "pass@1": 0.0,
        "success_rate": 0.0,
    }


async def test_timeout_keeps_the_conversation() -> None:
    async def slow_second_turn(messages: list[Any]) -> list[Any]:
        if len(messages) > 1:
            await anyio.sleep(10)
        return [AIMessage(content="ok")]

    data = await asimulate(
        slow_second_turn, [{"goal": "g"}], user=ScriptedUser(["one", "two"]), agent_timeout=0.3
    )
    meta = data[0].metadata or {}
    assert meta["stop_reason"] == "timeout"
    assert meta["error"] == "TimeoutError: the conversation did not finish within 0.3s"
    assert [m.content for m in messages_of(data[0])] == ["one", "ok", "two"]


async def slow_second_turn(messages: list[Any]) -> list[Any]:
    if len(messages) > 1:
        await anyio.sleep(10)
    return [AIMessage(content="ok")]


async def test_timeout_is_the_old_name_of_agent_timeout_with_a_warning() -> None:
    # timeout= is the scoring limit everywhere; a simulation's limit is agent_timeout=
    with pytest.warns(
        DeprecationWarning, match=r"asimulate\(timeout=\.\.\.\) is deprecated: pass ag"
    ):
        data = await asimulate(
            slow_second_turn,
            [{"goal": "g"}],
            user=ScriptedUser(["one", "two"]),
            timeout=0.3,  # type: ignore[call-arg]
        )
    assert (data[0].metadata or {})["stop_reason"] == "timeout"  # it limited the conversation
    with pytest.raises(TypeError, match="both timeout= .* and agent_timeout="):
        await asimulate(
            slow_second_turn,
            [{"goal": "g"}],
            user=ScriptedUser(["one"]),
            timeout=0.3,  # type: ignore[call-arg]
            agent_timeout=0.3,
        )


def test_simulate_takes_the_old_timeout_name_with_a_warning() -> None:
    with pytest.warns(DeprecationWarning, match=r"simulate\(timeout=\.\.\.\) is deprecated"):
        data = simulate(
            slow_second_turn,
            [{"goal": "g"}],
            user=ScriptedUser(["one", "two"]),
            timeout=0.3,  # type: ignore[call-arg]
        )
    assert (data[0].metadata or {})["stop_reason"] == "timeout"


class Shy(BaseUser):
    """Says it is done ``refusals`` times before its first message, then speaks once."""

    def __init__(self, refusals: int) -> None:
        self.refusals = refusals

    async def next_turn(
        self, scenario: Scenario, conversation: Any, *, trial: int, seed: int | None
    ) -> tuple[UserTurn, Usage]:
        if conversation:
            return UserTurn(message="", done=True), Usage(calls=1)
        if self.refusals:
            self.refusals -= 1
            return UserTurn(message="", done=True), Usage(calls=1)
        return UserTurn(message="hello", done=False), Usage(calls=1)


async def test_a_user_done_before_its_first_message_is_asked_again() -> None:
    data = await asimulate(echo, [{"goal": "g"}], user=Shy(refusals=2))
    meta = metadata_of(data[0])
    assert (meta["stop_reason"], meta["error"], meta["turns"]) == ("user_done", None, 1)
    assert meta["user_usage"]["calls"] == 4  # asked twice more, then its turn and "done"
    # Done every time asked: not a trial of the agent (no stop reason), the user failed.
    never = await asimulate(echo, [{"goal": "g"}], user=Shy(refusals=99))
    meta = metadata_of(never[0])
    assert meta["stop_reason"] is None and meta["user_usage"]["calls"] == 3
    assert meta["error"] == (
        "SimulationError: the simulated user failed: it ended the conversation before its "
        "first message (3 times asked)"
    )


async def test_a_user_ending_before_its_first_message_is_no_user_done() -> None:
    # The user said "done" before saying anything: the row fails, so the trial cannot report
    # that the user's goal was reached (it did: user_done); like any user failure, no reason.
    metric = CustomMetric(name="always_one", metric_function=lambda instance: 1.0)
    task = EvalTask([Scenario(id="s", goal="g"), Scenario(id="t", goal="g")], [metric])
    result = await task.aevaluate(runnable=echo, user=ScriptedUser([]))
    for row in result.rows:
        assert metadata_of(row.sample)["stop_reason"] is None
        assert row.failures["always_one"].error_type == "SimulationError"
    assert [r["stop_reason"] for r in result.records()] == [None, None]
    assert result.trial_outcomes("always_one") == {"s": [None], "t": [None]}  # unknown


ORDERS = {"A1": "shipped", "B2": "processing"}


@tool
def order_status(order_id: str) -> str:
    """Look an order up."""
    return ORDERS.get(order_id, "unknown order")


def support_policy(messages: list[BaseMessage]) -> LcAI:
    last = messages[-1]
    if "loop" in str([m for m in messages if m.type == "human"][-1].content):
        call = {"name": "order_status", "args": {"order_id": "A1"}, "id": "c2", "type": "tool_call"}
        return LcAI(content="", tool_calls=[call])  # a broken agent that never stops
    if last.type == "tool":
        return LcAI(content=f"Your order is {last.content}.")
    text = str(last.content)
    if text in ORDERS:
        call = {"name": "order_status", "args": {"order_id": text}, "id": "c1", "type": "tool_call"}
        return LcAI(content="", tool_calls=[call])
    return LcAI(content="What is your order number?")


def support_graph(checkpointer: Any = None) -> Any:
    model = ScriptedChatModel(responses=[support_policy]).bind_tools([order_status])

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([order_status]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


async def test_checkpointed_graph_gets_one_thread_per_trial() -> None:
    saver = InMemorySaver()
    graph = support_graph(saver)
    scenario = Scenario(id="where", goal="find order", first_message="Where is my order?")
    data = await asimulate(graph, [scenario], user=ScriptedUser(["A1"]), trials=2)
    kinds = [m.type for m in messages_of(data[0])]
    assert kinds == ["human", "ai", "human", "ai", "tool", "ai"]
    assert messages_of(data[0])[-1].content == "Your order is shipped."
    threads = [metadata_of(sample)["thread_id"] for sample in data]
    assert len(set(threads)) == 2
    for thread, sample in zip(threads, data, strict=True):
        state = await graph.aget_state({"configurable": {"thread_id": thread}})
        # Only the new turn was sent each time: the thread holds each message exactly once.
        assert [m.content for m in state.values["messages"]] == [
            m.content for m in messages_of(sample)
        ]
    meta = data[1].metadata or {}
    assert meta["trial"] == 1 and meta["steps"] == 3 and meta["stop_reason"] == "user_done"


async def test_a_graph_that_trims_its_history_hears_every_scripted_turn_once() -> None:
    from ..test_agents_contract import trimming_graph

    script = ["u0", "u1", "u2", "u3"]
    data = await asimulate(trimming_graph(), [{"goal": "g"}], user=ScriptedUser(script))
    said = [(m.type, m.content) for m in messages_of(data[0])]
    assert [text for kind, text in said if kind == "human"] == script  # u2 is not skipped
    assert [text for kind, text in said if kind == "ai"] == [
        "held 1: u0",
        "held 3: u1",
        "held 4: u2",
        "held 4: u3",
    ]
    assert metadata_of(data[0])["stop_reason"] == "user_done"


async def test_per_turn_step_limit_stops_a_looping_agent() -> None:
    data = await asimulate(
        support_graph(), [{"goal": "g"}], user=ScriptedUser(["loop forever"]), max_steps=3
    )
    meta = data[0].metadata or {}
    assert meta["stop_reason"] == "agent_error"
    assert meta["error"] == (
        "AgentRunError: the agent took 4 steps answering one user turn, over the per-turn "
        "step limit of 3 (max_steps)"
    )
    assert meta["steps"] == 4  # the messages up to the limit are kept

    def chatty(messages: list[Any]) -> list[Any]:
        return [AIMessage(content=str(i)) for i in range(30)]

    data = await asimulate(chatty, [{"goal": "g"}], user=ScriptedUser(["hi"]))
    assert "took 30 steps" in metadata_of(data[0])["error"]
    assert "limit of 25" in metadata_of(data[0])["error"]

"""Running real LangGraph graphs (and other agents) over a dataset, and converting their messages."""

import json
import time
from typing import Any

import anyio
import pytest
from langchain_core.messages import AIMessage as LcAI
from langchain_core.messages import BaseMessage
from langchain_core.messages import HumanMessage as LcHuman
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from turneval import (
    AIMessage,
    ConfigError,
    HumanMessage,
    InvalidSampleError,
    MultiTurnSample,
    ToolCall,
)
from turneval.agents import EvalTask
from turneval.messages import from_langchain, from_openai, to_langchain
from turneval.testing import ScriptedChatModel

from ._builders import as_type, messages_of

IN_FLIGHT = {"now": 0, "max": 0}
THERMOSTAT: dict[str, float] = {}


@tool
async def set_temperature(location: str, temperature: float) -> str:
    """Set a room's target temperature."""
    IN_FLIGHT["now"] += 1
    IN_FLIGHT["max"] = max(IN_FLIGHT["max"], IN_FLIGHT["now"])
    await anyio.sleep(0.02)
    IN_FLIGHT["now"] -= 1
    THERMOSTAT[location] = temperature
    return f"{location} set to {temperature}"


@tool
def get_temperature(location: str) -> str:
    """Read a room's target temperature."""
    return f"{location} is at {THERMOSTAT.get(location, 20.0)}"


@tool
def broken_sensor(location: str) -> str:
    """A tool that always fails."""
    raise RuntimeError(f"sensor offline in {location}")


USAGE = {"input_tokens": 50, "output_tokens": 10, "total_tokens": 60}


def call(name: str, call_id: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def policy(messages: list[BaseMessage]) -> LcAI:
    """A rule-based 'model': acts on the last human turn, answers after tool results."""
    last = messages[-1]
    if last.type == "tool":
        results = [m.content for m in messages if m.type == "tool"][-2:]
        return LcAI(content="Done: " + "; ".join(map(str, results)), usage_metadata=USAGE)
    text = str(last.content).lower()
    if "both rooms" in text:  # parallel calls in one message
        calls = [
            call("set_temperature", "p1", location="Kitchen", temperature=19),
            call("set_temperature", "p2", location="Office", temperature=22),
        ]
    elif "sensor" in text:
        calls = [call("broken_sensor", "s1", location="Garage")]
    elif "what" in text:
        calls = [call("get_temperature", "g1", location="Living Room")]
    else:
        calls = [call("set_temperature", "t1", location="Living Room", temperature=21)]
    return LcAI(content="", tool_calls=calls, usage_metadata=USAGE)


def looping(messages: list[BaseMessage]) -> LcAI:
    """A 'model' that never stops reading the thermostat."""
    seen = sum(message.type == "tool" for message in messages)
    calls = [call("get_temperature", f"g{seen}", location="Living Room")]
    return LcAI(content="", tool_calls=calls, usage_metadata=USAGE)


def graph(
    delay: float = 0.0,
    handle_tool_errors: bool = False,
    model_policy: Any = policy,
    checkpointer: Any = None,
) -> Any:
    model = ScriptedChatModel(responses=[model_policy], delay=delay)
    tools = [set_temperature, get_temperature, broken_sensor]
    bound = model.bind_tools(tools)

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    node = ToolNode(tools, handle_tool_errors=True) if handle_tool_errors else ToolNode(tools)
    builder.add_node("tools", node)
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def sample(*turns: str, reference: list[ToolCall] | None = None) -> MultiTurnSample:
    return MultiTurnSample(
        user_input=[HumanMessage(content=t) for t in turns], reference_tool_calls=reference
    )


async def test_round_trip_on_messages_a_real_graph_produced() -> None:
    state = await graph().ainvoke({"messages": [LcHuman(content="Set both rooms please")]})
    produced: list[BaseMessage] = state["messages"]
    ours = from_langchain(produced)
    assert [m.type for m in ours] == ["human", "ai", "tool", "tool", "ai"]
    calls = as_type(AIMessage, ours[1]).tool_calls or []
    assert [c.name for c in calls] == ["set_temperature", "set_temperature"]
    assert ours[1].metadata is not None and ours[1].metadata["usage_metadata"] == USAGE
    back = to_langchain(ours)
    for original, restored in zip(produced, back, strict=True):
        assert (
            type(original) is type(restored)
            and original.content == restored.content
            and original.id == restored.id
        )
        assert getattr(original, "tool_calls", None) == getattr(restored, "tool_calls", None)
        assert getattr(original, "tool_call_id", None) == getattr(restored, "tool_call_id", None)
        assert getattr(original, "usage_metadata", None) == getattr(
            restored, "usage_metadata", None
        )
    assert from_langchain(back) == ours


def test_conversion_of_blocks_chunks_invalid_calls_and_errors() -> None:
    from langchain_core.messages import AIMessageChunk, SystemMessage, ToolMessage

    messages = [
        SystemMessage(content="be brief"),
        LcHuman(
            content=[
                {"type": "text", "text": "Look at "},
                {"type": "image_url", "image_url": {"url": "data:x"}},
                {"type": "text", "text": "this"},
            ]
        ),
        AIMessageChunk(
            content="ok",
            tool_calls=[{"name": "f", "args": {"a": [1, {"b": None}]}, "id": "c1"}],
            invalid_tool_calls=[{"name": "g", "args": "{oops", "id": "c2", "error": "bad JSON"}],
        ),
        ToolMessage(content="fine", tool_call_id="c1", status="error"),
    ]
    ours = from_langchain(messages)
    assert ours[1].content == "Look at [image_url]this"
    assert as_type(AIMessage, ours[2]).tool_calls == [
        ToolCall(name="f", args={"a": [1, {"b": None}]}, id="c1")
    ]
    assert ours[2].metadata is not None
    assert ours[2].metadata["invalid_tool_calls"][0]["error"] == "bad JSON"
    back = to_langchain(ours)
    assert (
        back[1].content == messages[1].content
        and as_type(LcAI, back[2]).invalid_tool_calls
        == as_type(LcAI, messages[2]).invalid_tool_calls
    )
    assert back[3].status == "error"
    with pytest.raises(
        InvalidSampleError, match="message 1: ToolMessage .* answers no preceding tool call"
    ) as info:
        from_langchain([LcHuman(content="hi"), ToolMessage(content="x", tool_call_id="c9")])
    assert info.value.field == "tool_call_id"


def test_from_openai() -> None:
    messages = [
        {"role": "developer", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {
                        "name": "weather",
                        "arguments": '{"city": "Paris", "days": [1, 2]}',
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "assistant", "content": "Sunny."},
    ]
    ours = from_openai(messages)
    assert [m.type for m in ours] == ["system", "human", "ai", "tool", "ai"]
    assert as_type(AIMessage, ours[2]).tool_calls == [
        ToolCall(name="weather", args={"city": "Paris", "days": [1, 2]}, id="c1")
    ]
    MultiTurnSample(user_input=ours)  # a valid conversation
    bad_args = [
        messages[1],
        {
            "role": "assistant",
            "tool_calls": [{"id": "c1", "function": {"name": "w", "arguments": "{nope"}}],
        },
    ]
    with pytest.raises(
        InvalidSampleError, match=r"message 1: arguments are not valid JSON"
    ) as info:
        from_openai(bad_args)
    assert info.value.field == "tool_calls[0].function.arguments"
    with pytest.raises(InvalidSampleError, match="message 0: unknown role 'robot'"):
        from_openai([{"role": "robot", "content": "x"}])
    with pytest.raises(
        InvalidSampleError, match="message 1: tool result .* answers no preceding tool call"
    ):
        from_openai([messages[1], {"role": "tool", "tool_call_id": "c1", "content": "x"}])


def test_eval_task_runs_a_graph_and_scores_its_trajectory() -> None:
    dataset = [
        sample(
            "Set the living room to 21",
            reference=[
                ToolCall(
                    name="set_temperature", args={"location": "Living Room", "temperature": 21}
                )
            ],
        ),
        sample(
            "Set both rooms please",
            reference=[
                ToolCall(name="set_temperature", args={"location": "Office", "temperature": 22}),
                ToolCall(name="set_temperature", args={"location": "Kitchen", "temperature": 19}),
            ],
        ),
        sample(
            "Check the sensor",
            reference=[ToolCall(name="broken_sensor", args={"location": "Garage"})],
        ),
    ]
    result = EvalTask(dataset, ["tool_call_f1", "trajectory_exact_match"]).evaluate(
        runnable=graph(handle_tool_errors=True)
    )
    assert result.scores("tool_call_f1") == [1.0, 1.0, 1.0]
    assert result.scores("trajectory_exact_match") == [
        1.0,
        0.0,
        1.0,
    ]  # parallel calls came in another order
    sensor = result.rows[2]
    assert sensor.failure == 0  # the tool raised, ToolNode reported it, the agent answered
    # LangGraph's default ToolNode re-raises the tool's error: the run fails, the row records it.
    failed = EvalTask(dataset[2:], ["tool_call_f1"]).evaluate(runnable=graph()).rows[0]
    assert failed.failure == 1 and failed.agent_error == "RuntimeError: sensor offline in Garage"
    assert failed.failures["tool_call_f1"].error_type == "AgentRunError"
    tool_message = messages_of(sensor.sample)[2]
    assert (
        "sensor offline in Garage" in tool_message.content
        and tool_message.metadata is not None
        and tool_message.metadata["status"] == "error"
    )
    assert [row.steps for row in result.rows] == [2, 2, 2]
    assert result.rows[1].agent_usage is not None and result.rows[1].agent_usage.input_tokens == 100
    record = result.records()[0]
    assert (
        record["failure"] == 0
        and record["agent_total_tokens"] == 120
        and record["latency_in_seconds"] > 0
    )
    summary = result.summary()
    assert summary["failure"].mean == 0.0 and summary["latency_in_seconds"].count == 3
    assert summary["agent_total_tokens"].mean == 120


def test_multi_turn_script_is_replayed_turn_by_turn() -> None:
    task = EvalTask(
        [sample("Set the living room to 21", "What is it now?")], ["trajectory_in_order_match"]
    )
    row = task.evaluate(runnable=graph()).rows[0]
    kinds = [(m.type, m.content[:12]) for m in messages_of(row.sample)]
    assert [k for k, _ in kinds] == ["human", "ai", "tool", "ai", "human", "ai", "tool", "ai"]
    assert kinds[4] == ("human", "What is it n")
    single = EvalTask(
        [sample("Set the living room to 21", "What is it now?")], ["tool_call_f1"], multi_turn=False
    )
    assert len(messages_of(single.evaluate(runnable=graph()).rows[0].sample)) == 4


def test_a_hanging_or_raising_agent_is_a_failed_row() -> None:
    dataset = [sample("Set the living room to 21", reference=[]), sample("x", reference=[])]
    start = time.monotonic()
    result = EvalTask(dataset, ["tool_call_f1"], agent_timeout=0.2).evaluate(
        runnable=graph(delay=5.0)
    )
    assert time.monotonic() - start < 3.0
    assert [row.failure for row in result.rows] == [1, 1]
    assert result.rows[0].agent_error == "TimeoutError: the agent did not finish within 0.2s"
    assert result.rows[0].failures["tool_call_f1"].error_type == "AgentRunError"
    assert result.summary()["failure"].mean == 1.0

    def crashing(messages: list[Any]) -> list[Any]:
        raise ValueError("model endpoint down")

    crashed = EvalTask(dataset, ["tool_call_f1"]).evaluate(runnable=crashing)
    assert [row.agent_error for row in crashed.rows] == ["ValueError: model endpoint down"] * 2


@pytest.mark.parametrize("checkpointer", [None, InMemorySaver()], ids=["plain", "checkpointed"])
def test_a_looping_graph_stops_at_the_step_limit_with_its_calls_kept(checkpointer: Any) -> None:
    """The replay streams each turn: a failing turn keeps what the agent did before failing."""
    dataset = [sample("What is it now?", "Thanks", reference=[])]
    task = EvalTask(dataset, ["tool_call_f1"])
    agent = graph(model_policy=looping, checkpointer=checkpointer)
    row = task.evaluate(runnable=agent, max_steps=3).rows[0]
    assert row.failure == 1
    assert row.agent_error == (
        "AgentRunError: the agent took 4 steps answering one user turn, over the per-turn "
        "step limit of 3 (max_steps)"
    )
    # the 4th AI message crossed the limit: 4 calls, 3 answered; the second turn was not sent
    kinds = [message.type for message in messages_of(row.sample)]
    assert kinds == ["human"] + ["ai", "tool"] * 3 + ["ai"]
    assert row.steps == 4
    assert row.agent_usage is not None and row.agent_usage.total_tokens == 4 * 60
    assert row.failures["tool_call_f1"].error_type == "AgentRunError"

    # The default limit (25 steps a turn) is reached before LangGraph's recursion limit,
    # which is raised to let it count.
    row = task.evaluate(runnable=graph(model_policy=looping)).rows[0]
    assert row.agent_error is not None and "took 26 steps" in row.agent_error
    assert "limit of 25" in row.agent_error and row.steps == 26


def test_a_graph_failing_mid_turn_keeps_the_turn_so_far() -> None:
    """LangGraph's own recursion limit (set in the config) and a raising node keep it too."""
    dataset = [sample("What is it now?", reference=[])]
    limited = EvalTask(dataset, ["tool_call_f1"], config={"recursion_limit": 6})
    row = limited.evaluate(runnable=graph(model_policy=looping)).rows[0]
    assert row.agent_error is not None
    assert row.agent_error.startswith("GraphRecursionError: Recursion limit of 6 reached")
    # six supersteps: agent, tools, agent, tools, agent, tools
    assert [message.type for message in messages_of(row.sample)] == ["human"] + ["ai", "tool"] * 3

    # The default ToolNode re-raises the tool's error: the call that failed is kept.
    sensor = EvalTask([sample("Check the sensor", reference=[])], ["tool_call_f1"])
    row = sensor.evaluate(runnable=graph()).rows[0]
    assert row.agent_error == "RuntimeError: sensor offline in Garage"
    kept = messages_of(row.sample)
    assert [message.type for message in kept] == ["human", "ai"]
    assert [c.name for c in as_type(AIMessage, kept[1]).tool_calls or []] == ["broken_sensor"]


def test_max_steps_is_checked_before_the_replay() -> None:
    task = EvalTask([sample("hi", reference=[])], ["tool_call_f1"])
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ConfigError, match="max_steps must be an integer >= 1"):
            task.evaluate(runnable=graph(), max_steps=bad)  # type: ignore[arg-type]


def test_plain_callables_and_runnables() -> None:
    async def echo(messages: list[Any]) -> list[Any]:
        return [
            AIMessage(
                content=f"you said {messages[-1].content}",
                tool_calls=[ToolCall(name="log", args={})],
            )
        ]

    def full_history(messages: list[Any]) -> list[Any]:
        return [*messages, AIMessage(content="ok")]

    dataset = [sample("hello", reference=[ToolCall(name="log")])]
    assert EvalTask(dataset, ["tool_call_f1"]).evaluate(runnable=echo).scores("tool_call_f1") == [
        1.0
    ]
    rows = EvalTask(dataset, ["tool_call_f1"]).evaluate(runnable=full_history).rows
    assert [m.type for m in messages_of(rows[0].sample)] == ["human", "ai"]
    chat = ScriptedChatModel(responses=["plain answer"])  # a chat model is a Runnable
    row = EvalTask([sample("hi", reference=[])], ["tool_call_f1"]).evaluate(runnable=chat).rows[0]
    assert messages_of(row.sample)[-1].content == "plain answer"
    assert row.agent_usage is not None and row.agent_usage.total_tokens == 120


def test_concurrency_is_bounded() -> None:
    IN_FLIGHT.update(now=0, max=0)
    dataset = [sample(f"Set the living room to 21 #{i}", reference=[]) for i in range(8)]
    EvalTask(dataset, ["tool_call_f1"], max_concurrency=3).evaluate(runnable=graph())
    assert IN_FLIGHT["max"] == 3


def test_without_an_agent_the_dataset_is_scored_as_is() -> None:
    conversation = MultiTurnSample(
        user_input=[HumanMessage(content="hi"), AIMessage(tool_calls=[ToolCall(name="a")])],
        reference_tool_calls=[ToolCall(name="a")],
    )
    result = EvalTask([conversation], ["tool_call_f1"]).evaluate()
    assert result.scores("tool_call_f1") == [1.0] and result.rows[0].latency_s is None
    assert "failure" not in result.summary()
    json.dumps(result.records())

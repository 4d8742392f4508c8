"""EvalTask with checkpointed LangGraph graphs, run configs, every agent return shape, and
agent summaries that leave failed rows out."""

from collections import Counter
from typing import Any

import pytest
from langchain_core.messages import AIMessage as LcAI
from langchain_core.messages import BaseMessage, RemoveMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

from turneval import AIMessage, HumanMessage, MultiTurnSample, ToolCall
from turneval.agents import EvalTask, arun_agent
from turneval.testing import ScriptedChatModel

from ._builders import as_type, messages_of

USAGE = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}


def echo(messages: list[BaseMessage]) -> LcAI:
    humans = [m for m in messages if m.type == "human"]
    return LcAI(
        content=f"{len(messages)} messages; last: {humans[-1].content}", usage_metadata=USAGE
    )


def checkpointed_graph(seen: list[dict[str, Any]]) -> Any:
    model = ScriptedChatModel(responses=[echo])

    async def agent(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        seen.append(dict(config.get("configurable", {})))
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    return builder.compile(checkpointer=InMemorySaver())


def two_turns(tag: str) -> MultiTurnSample:
    return MultiTurnSample(
        user_input=[HumanMessage(content=f"{tag} one"), HumanMessage(content=f"{tag} two")],
        reference_tool_calls=[],
    )


def test_a_checkpointed_graph_gets_a_thread_per_sample_and_only_new_turns() -> None:
    seen: list[dict[str, Any]] = []
    graph = checkpointed_graph(seen)
    result = EvalTask([two_turns("a"), two_turns("b")], ["tool_call_f1"]).evaluate(runnable=graph)
    assert [row.failure for row in result.rows] == [0, 0]
    conversation = [(m.type, m.content) for m in messages_of(result.rows[0].sample)]
    # The thread holds the history: turn two sees 3 messages, none duplicated.
    assert conversation == [
        ("human", "a one"),
        ("ai", "1 messages; last: a one"),
        ("human", "a two"),
        ("ai", "3 messages; last: a two"),
    ]
    threads = [c["thread_id"] for c in seen]  # one fresh thread per sample, two turns each
    assert len(threads) == 4 and sorted(Counter(threads).values()) == [2, 2]
    for thread in set(threads):
        state = graph.get_state({"configurable": {"thread_id": thread}})
        assert len(state.values["messages"]) == 4
    assert [row.steps for row in result.rows] == [2, 2]


def trimming_graph() -> Any:
    """A checkpointed graph that keeps only its last two messages before answering."""

    def reply(state: MessagesState) -> dict[str, Any]:
        held = state["messages"]
        trimmed = [RemoveMessage(id=m.id) for m in held[:-2] if m.id] if len(held) > 2 else []
        return {"messages": [*trimmed, LcAI(content=f"held {len(held)}: {held[-1].content}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    return builder.compile(checkpointer=InMemorySaver())


def test_an_agent_that_trims_its_history_gives_the_conversation_as_it_happened() -> None:
    sample = MultiTurnSample(
        user_input=[HumanMessage(content=f"u{n}") for n in range(4)], reference_tool_calls=[]
    )
    row = EvalTask([sample], ["tool_call_f1"]).evaluate(runnable=trimming_graph()).rows[0]
    assert row.failure == 0
    # The thread holds 1, 3, 4, 4 messages when each turn is answered (u0; u0 a0 u1; then
    # trimmed to the last two before each answer, plus that answer and the new turn): the
    # conversation is each turn and its answer, nothing repeated.
    assert [(m.type, m.content) for m in messages_of(row.sample)] == [
        ("human", "u0"),
        ("ai", "held 1: u0"),
        ("human", "u1"),
        ("ai", "held 3: u1"),
        ("human", "u2"),
        ("ai", "held 4: u2"),
        ("human", "u3"),
        ("ai", "held 4: u3"),
    ]


@pytest.mark.parametrize("checkpointer", [None, InMemorySaver()])
def test_a_system_prompt_a_graph_adds_to_its_state_is_not_a_turn(checkpointer: Any) -> None:
    def prompt(state: MessagesState) -> dict[str, Any]:
        if any(m.type == "system" for m in state["messages"]):
            return {}
        return {"messages": [SystemMessage(content="You are helpful.")]}

    def reply(state: MessagesState) -> dict[str, Any]:
        return {"messages": [LcAI(content=f"answer to {state['messages'][-2].content}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("prompt", prompt)
    builder.add_node("reply", reply)
    builder.add_edge(START, "prompt")
    builder.add_edge("prompt", "reply")
    graph = builder.compile(checkpointer=checkpointer)
    row = EvalTask([two_turns("s")], ["tool_call_f1"]).evaluate(runnable=graph).rows[0]
    assert row.failure == 0 and row.agent_error is None  # was: SystemMessage only at index 0
    kinds = [m.type for m in messages_of(row.sample)]
    assert kinds == ["human", "ai", "human", "ai"] and row.steps == 2


def test_config_and_config_fn_reach_the_graph() -> None:
    seen: list[dict[str, Any]] = []
    graph = checkpointed_graph(seen)
    EvalTask([two_turns("a")], ["tool_call_f1"], config={"configurable": {"user": "u1"}}).evaluate(
        runnable=graph
    )
    assert seen[0]["user"] == "u1" and seen[0]["thread_id"]  # a thread was added
    seen.clear()
    EvalTask(
        [two_turns("x"), two_turns("y")],
        ["tool_call_f1"],
        config_fn=lambda s: {"configurable": {"thread_id": messages_of(s)[0].content}},
    ).evaluate(runnable=graph)
    assert sorted(c["thread_id"] for c in seen) == ["x one", "x one", "y one", "y one"]
    with pytest.raises(Exception, match="config= or config_fn="):
        EvalTask([two_turns("a")], ["tool_call_f1"], config={}, config_fn=lambda s: {})


@pytest.mark.parametrize(
    "returned",
    [
        "plain text",
        LcAI(content="plain text"),
        [LcAI(content="plain text")],
        AIMessage(content="plain text"),
        [AIMessage(content="plain text")],
        {"role": "assistant", "content": "plain text"},
        [{"role": "assistant", "content": "plain text"}],
        {"messages": [{"role": "assistant", "content": "plain text"}]},
        {"messages": [LcAI(content="plain text")]},
        {"output": "plain text"},
    ],
)
async def test_every_return_shape_is_accepted(returned: Any) -> None:
    run = await arun_agent(lambda messages: returned, two_turns("a"))
    assert run.error is None
    assert [(m.type, m.content) for m in run.messages] == [
        ("human", "a one"),
        ("ai", "plain text"),
        ("human", "a two"),
        ("ai", "plain text"),
    ]


async def test_openai_tool_calls_and_full_history_in_openai_format() -> None:
    def agent(messages: list[Any]) -> list[dict[str, Any]]:
        history = [
            {"role": m.type.replace("human", "user"), "content": m.content} for m in messages
        ]
        return [
            *history,
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            {"role": "assistant", "content": "done"},
        ]

    sample = MultiTurnSample(user_input=[HumanMessage(content="go")])
    run = await arun_agent(agent, sample)
    assert run.error is None
    assert [m.type for m in run.messages] == ["human", "ai", "tool", "ai"]
    assert as_type(AIMessage, run.messages[1]).tool_calls == [ToolCall(name="f", args={}, id="c1")]


async def test_none_and_junk_name_the_contract() -> None:
    run = await arun_agent(lambda messages: None, two_turns("a"))
    assert run.error is not None and run.error.startswith("AgentRunError: the agent returned None")
    assert "a string, messages" in run.error
    junk = await arun_agent(lambda messages: 42, two_turns("a"))
    assert junk.error is not None and "returned int" in junk.error


def test_agent_summaries_leave_failed_rows_out() -> None:
    calls = {"n": 0}

    def flaky(messages: list[Any]) -> Any:
        calls["n"] += 1
        if "fail" in messages[-1].content:
            raise RuntimeError("boom")
        return LcAI(content="ok", usage_metadata=USAGE)

    dataset = [
        MultiTurnSample(user_input=[HumanMessage(content=text)], reference_tool_calls=[])
        for text in ("fine", "fail now", "fine again")
    ]
    summary = EvalTask(dataset, ["tool_call_f1"]).evaluate(runnable=flaky).summary()
    assert summary["failure"].mean == pytest.approx(1 / 3) and summary["failure"].count == 3
    for name in ("latency_in_seconds", "agent_total_tokens", "steps"):
        assert summary[name].count == 2 and summary[name].failed == 1, name
    assert summary["agent_total_tokens"].mean == 15 and summary["steps"].mean == 1


def test_a_failing_config_fn_fails_its_row_only() -> None:
    def config_fn(sample: Any) -> dict[str, Any]:
        if "b" in sample.user_input[0].content:
            raise KeyError("tenant")
        return {}

    result = EvalTask(
        [two_turns("a"), two_turns("b")], ["tool_call_f1"], config_fn=config_fn
    ).evaluate(runnable=lambda messages: "ok")
    assert [row.failure for row in result.rows] == [0, 1]
    assert result.rows[1].agent_error == "AgentRunError: config_fn failed: KeyError: 'tenant'"

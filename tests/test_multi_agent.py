"""Agents in the data model: AIMessage.name, AgentSpec, handoffs, and every converter.

Conversations of a supervisor, a swarm and agents handing off keep every agent's name and tool
set through LangChain, OpenAI chat dicts, JSON lines, pandas and CSV; real LangGraph supervisor
and swarm graphs (with scripted models) give named messages whose handoffs are found; a
single-agent conversation's JSON is what it was before agents existed.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core import messages as lc
from pydantic import ValidationError

from turneval import (
    AgentSpec,
    AIMessage,
    EvaluationDataset,
    Handoff,
    HumanMessage,
    MultiTurnSample,
    SystemMessage,
    ToolCall,
    ToolMessage,
)
from turneval.messages import (
    Message,
    find_handoffs,
    from_langchain,
    from_openai,
    handoff_target,
    message_agents,
    messages_from_json,
    messages_to_json,
    to_langchain,
    to_openai,
)
from turneval.testing import ScriptedChatModel


def supervisor_conversation() -> list[Message]:
    """A supervisor hands off to a researcher and a coder, who hand back (LangGraph's shape)."""
    return [
        SystemMessage(content="You manage a researcher and a coder."),
        HumanMessage(content="Population of Paris plus one million?"),
        AIMessage(name="supervisor", tool_calls=[ToolCall(name="transfer_to_researcher", id="s1")]),
        ToolMessage(content="Successfully transferred to researcher", tool_call_id="s1"),
        AIMessage(
            name="researcher",
            tool_calls=[ToolCall(name="web_search", args={"q": "Paris population"}, id="r1")],
        ),
        ToolMessage(content="2.1 million", tool_call_id="r1"),
        AIMessage(name="researcher", content="Paris has 2.1 million people."),
        AIMessage(
            name="researcher",
            content="Transferring back to supervisor",
            tool_calls=[ToolCall(name="transfer_back_to_supervisor", id="b1")],
        ),
        ToolMessage(content="Successfully transferred back to supervisor", tool_call_id="b1"),
        AIMessage(
            name="supervisor",
            tool_calls=[ToolCall(name="transfer_to_coder", args={"task": "add"}, id="s2")],
        ),
        ToolMessage(content="Successfully transferred to coder", tool_call_id="s2"),
        AIMessage(
            name="coder",
            tool_calls=[
                ToolCall(name="python", args={"code": "2.1 + 1"}, id="c1"),
                ToolCall(name="python", args={"code": "print(3.1)"}, id="c2"),
            ],
        ),
        ToolMessage(content="3.1", tool_call_id="c1"),
        ToolMessage(content="3.1", tool_call_id="c2"),
        AIMessage(name="coder", content="3.1 million"),
        AIMessage(name="supervisor", content="About 3.1 million."),
    ]


AGENTS = [
    AgentSpec(name="supervisor", description="routes", tools=[], handoffs=["researcher", "coder"]),
    AgentSpec(name="researcher", tools=["web_search"], handoffs=["supervisor"]),
    AgentSpec(
        name="coder",
        tools=["python"],
        reference_tool_calls=[ToolCall(name="python", args={"code": "2.1 + 1"})],
    ),
]


def swarm_conversation() -> list[Message]:
    """Agents of a swarm hand off to each other; the active agent keeps talking to the user."""
    return [
        HumanMessage(content="I want a refund and a new booking"),
        AIMessage(name="triage", tool_calls=[ToolCall(name="transfer_to_refunds", id="t1")]),
        ToolMessage(content="Successfully transferred to refunds", tool_call_id="t1"),
        AIMessage(name="refunds", content="Refund issued."),
        HumanMessage(content="thanks, and the booking?"),
        AIMessage(
            name="refunds",
            tool_calls=[ToolCall(name="transfer_to_Bookings Desk", args={"why": "new"}, id="t2")],
        ),
        ToolMessage(content="Successfully transferred to Bookings Desk", tool_call_id="t2"),
        AIMessage(name="Bookings Desk", content="Booked for Friday."),
    ]


def test_single_agent_json_has_no_agent_fields() -> None:
    sample = MultiTurnSample(
        user_input=[HumanMessage(content="hi"), AIMessage(content="hello")],
        reference_tool_calls=[],
    )
    text = sample.model_dump_json(exclude_none=True)
    # the exact bytes a sample without agents was written as before AIMessage.name existed
    assert text == (
        '{"user_input":[{"content":"hi","type":"human"},{"content":"hello","type":"ai"}],'
        '"reference_tool_calls":[]}'
    )


def test_named_messages_print_their_agent_and_round_trip_json() -> None:
    messages = supervisor_conversation()
    assert messages_from_json(messages_to_json(messages)) == messages
    assert messages[2].pretty_repr() == "AI (supervisor):\nTools:\n  transfer_to_researcher({})"
    assert messages[6].pretty_repr() == "AI (researcher): Paris has 2.1 million people."
    assert AIMessage(content="hi").pretty_repr() == "AI: hi"  # unnamed: as before
    wire = json.loads(messages_to_json(messages))
    assert wire[6] == {
        "type": "ai",
        "content": "Paris has 2.1 million people.",
        "name": "researcher",
    }


def test_tool_calls_and_results_belong_to_the_calling_agent() -> None:
    agents = message_agents(supervisor_conversation())
    assert agents == [
        None,
        None,
        "supervisor",
        "supervisor",
        "researcher",
        "researcher",
        "researcher",
        "researcher",
        "researcher",
        "supervisor",
        "supervisor",
        "coder",
        "coder",
        "coder",
        "coder",
        "supervisor",
    ]


def test_handoffs_from_handoff_tools_and_changes_of_speaker() -> None:
    found = find_handoffs(supervisor_conversation())
    assert [(h.handoff.pretty_repr(), h.message_index, h.explicit) for h in found] == [
        ("supervisor -> researcher", 2, True),
        ("researcher -> supervisor", 7, True),
        ('supervisor -> coder {"task": "add"}', 9, True),
        ("coder -> supervisor", 15, False),  # the supervisor took control back silently
    ]
    swarm = find_handoffs(swarm_conversation())
    assert [h.handoff.pretty_repr() for h in swarm] == [
        "triage -> refunds",
        'refunds -> Bookings Desk {"why": "new"}',  # matched to the agent by its key
    ]
    assert handoff_target("transfer_to_bookings_desk", ["Bookings Desk"]) == "Bookings Desk"
    assert handoff_target("transfer_to_ghost", ["a"]) == "ghost"
    assert handoff_target("search") is None


def test_agent_specs_validate_and_name_their_index() -> None:
    with pytest.raises(ValidationError, match=r"agents\[1\]: agent name 'a' is declared twice"):
        MultiTurnSample(
            user_input=[HumanMessage(content="x")],
            agents=[AgentSpec(name="a"), AgentSpec(name="a")],
        )
    with pytest.raises(ValidationError):
        AgentSpec(name="")
    with pytest.raises(ValidationError):
        AgentSpec.model_validate({"name": "a", "toolz": ["x"]})
    sample = MultiTurnSample(user_input=supervisor_conversation(), agents=AGENTS[1:])
    assert sample.agent_names() == ["researcher", "coder", "supervisor"]
    assert sample.agent("coder") == AGENTS[2] and sample.agent("supervisor") is None
    assert [h.handoff.target for h in sample.handoffs] == [
        "researcher",
        "supervisor",
        "coder",
        "supervisor",
    ]


def test_langchain_round_trip_keeps_names_both_ways() -> None:
    for conversation in (supervisor_conversation(), swarm_conversation()):
        native = to_langchain(conversation)
        ai_names = [m.name for m in native if isinstance(m, lc.AIMessage)]
        assert ai_names == [m.name for m in conversation if isinstance(m, AIMessage)]
        assert from_langchain(native) == conversation
        assert to_langchain(from_langchain(native)) == native
    # A human or tool message's own name is kept in its metadata and given back.
    named = [lc.HumanMessage(content="hi", name="alice"), lc.AIMessage(content="yo", name="bot")]
    converted = from_langchain(named)
    assert converted[0].metadata == {"name": "alice"} and converted[1] == AIMessage(
        content="yo", name="bot"
    )
    assert to_langchain(converted) == named


def test_openai_round_trip_keeps_names_both_ways() -> None:
    for conversation in (supervisor_conversation(), swarm_conversation()):
        chat = to_openai(conversation)
        assert from_openai(chat) == conversation
        assert to_openai(from_openai(chat)) == chat
    chat = to_openai(supervisor_conversation())
    assert chat[2] == {
        "role": "assistant",
        "content": "",
        "name": "supervisor",
        "tool_calls": [
            {
                "id": "s1",
                "type": "function",
                "function": {"name": "transfer_to_researcher", "arguments": "{}"},
            }
        ],
    }
    assert from_openai([{"role": "user", "content": "x", "name": "bob"}])[0].metadata == {
        "name": "bob"
    }


def _dataset() -> EvaluationDataset:
    return EvaluationDataset(
        [
            MultiTurnSample(
                user_input=supervisor_conversation(),
                agents=AGENTS,
                reference_handoffs=[
                    Handoff(source="supervisor", target="researcher"),
                    Handoff(target="coder", args={"task": "add"}),
                ],
            ),
            MultiTurnSample(user_input=swarm_conversation()),
        ]
    )


def test_jsonl_pandas_and_csv_keep_agents_and_handoffs(tmp_path: Path) -> None:
    data = _dataset()
    data.to_jsonl(tmp_path / "d.jsonl")
    assert EvaluationDataset.from_jsonl(tmp_path / "d.jsonl").samples == data.samples
    assert EvaluationDataset.from_pandas(data.to_pandas()).samples == data.samples
    data.to_csv(tmp_path / "d.csv")
    assert EvaluationDataset.from_csv(tmp_path / "d.csv").samples == data.samples
    assert EvaluationDataset.from_list(data.to_list()).samples == data.samples


names = st.sampled_from([None, "supervisor", "Research Expert", "coder", "é agent </x>"])
texts = st.text(max_size=20)


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    """Random conversations of named agents: text turns, handoff and tool calls with results."""
    messages: list[Message] = [HumanMessage(content=draw(texts))]
    for turn in range(draw(st.integers(0, 6))):
        name = draw(names)
        if draw(st.booleans()):
            tools = draw(
                st.lists(
                    st.sampled_from(["search", "transfer_to_coder", "transfer_back_to_supervisor"]),
                    min_size=1,
                    max_size=3,
                )
            )
            calls = [
                ToolCall(name=tool, args={"q": draw(texts)}, id=f"c{turn}.{i}")
                for i, tool in enumerate(tools)
            ]
            messages.append(AIMessage(name=name, content=draw(texts), tool_calls=calls))
            messages += [ToolMessage(content=draw(texts), tool_call_id=c.id) for c in calls]
        else:
            messages.append(AIMessage(name=name, content=draw(texts)))
        if draw(st.booleans()):
            messages.append(HumanMessage(content=draw(texts)))
    return messages


@settings(max_examples=60)
@given(conversations())
def test_random_agent_conversations_round_trip_every_converter(messages: list[Message]) -> None:
    assert from_langchain(to_langchain(messages)) == messages
    assert from_openai(to_openai(messages)) == messages
    assert messages_from_json(messages_to_json(messages)) == messages
    # The owners of tool results are their callers, whatever the converter.
    assert message_agents(from_openai(to_openai(messages))) == message_agents(messages)
    sample = MultiTurnSample(user_input=messages)
    assert EvaluationDataset.from_list([sample.model_dump(mode="json")]).samples == [sample]


# -- real LangGraph graphs, scripted models ----------------------------------------------------


def _tools() -> tuple[Any, Any]:
    from langchain_core.tools import tool

    @tool
    def web_search(query: str) -> str:
        """Search the web."""
        return "Paris has 2.1M people."

    @tool
    def add(a: float, b: float) -> float:
        """Add two numbers."""
        return a + b

    return web_search, add


def call(name: str, call_id: str, **args: Any) -> lc.AIMessage:
    return lc.AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])


def supervisor_graph(output_mode: Literal["full_history", "last_message"] = "last_message") -> Any:
    """A LangGraph supervisor (langgraph-supervisor) over two ReAct agents (subgraphs)."""
    from langgraph.prebuilt import create_react_agent
    from langgraph_supervisor import create_supervisor

    web_search, add = _tools()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LangGraph 1.x deprecates create_react_agent
        research = create_react_agent(
            ScriptedChatModel(
                responses=[call("web_search", "r1", query="paris"), lc.AIMessage(content="2.1M")]
            ),
            [web_search],
            name="research_expert",
        )
        math = create_react_agent(
            ScriptedChatModel(
                responses=[call("add", "m1", a=2.1, b=1), lc.AIMessage(content="3.1")]
            ),
            [add],
            name="math_expert",
        )
        supervisor = ScriptedChatModel(
            responses=[
                call("transfer_to_research_expert", "s1"),
                call("transfer_to_math_expert", "s2"),
                lc.AIMessage(content="About 3.1M."),
            ]
        )
        return create_supervisor(
            [research, math], model=supervisor, prompt="You manage.", output_mode=output_mode
        ).compile()


def test_a_langgraph_supervisor_run_names_every_agent_and_its_handoffs() -> None:
    state = supervisor_graph("full_history").invoke(
        {"messages": [lc.HumanMessage(content="Paris population plus 1M?")]}
    )
    messages = from_langchain(state["messages"])
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
    sample = MultiTurnSample(user_input=messages)
    assert [h.handoff.pretty_repr() for h in sample.handoffs] == [
        "supervisor -> research_expert",
        "research_expert -> supervisor",
        "supervisor -> math_expert",
        "math_expert -> supervisor",
    ]
    worker_calls = [
        c.name
        for m in messages
        if isinstance(m, AIMessage) and m.name != "supervisor"
        for c in m.tool_calls or ()
    ]
    assert worker_calls == [
        "web_search",
        "transfer_back_to_supervisor",
        "add",
        "transfer_back_to_supervisor",
    ]
    assert to_langchain(messages) == state["messages"]  # back to the graph's own messages


def test_a_langgraph_swarm_run_names_the_active_agents() -> None:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.prebuilt import create_react_agent
    from langgraph_swarm import create_handoff_tool, create_swarm

    _, add = _tools()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alice = create_react_agent(
            ScriptedChatModel(responses=[call("transfer_to_bob", "a1")]),
            [add, create_handoff_tool(agent_name="bob")],
            name="alice",
        )
        bob = create_react_agent(
            ScriptedChatModel(responses=[call("add", "b1", a=1, b=2), lc.AIMessage(content="3")]),
            [add, create_handoff_tool(agent_name="alice")],
            name="bob",
        )
    graph = create_swarm([alice, bob], default_active_agent="alice").compile(
        checkpointer=InMemorySaver()
    )
    config: Any = {"configurable": {"thread_id": "1"}}
    state = graph.invoke({"messages": [lc.HumanMessage(content="add 1 and 2")]}, config)
    messages = from_langchain(state["messages"])
    assert [
        (m.name, [c.name for c in m.tool_calls or ()]) for m in messages if isinstance(m, AIMessage)
    ] == [
        ("alice", ["transfer_to_bob"]),
        ("bob", ["add"]),
        ("bob", []),
    ]
    assert [h.handoff.pretty_repr() for h in MultiTurnSample(user_input=messages).handoffs] == [
        "alice -> bob"
    ]
    assert to_langchain(messages) == state["messages"]


OLD_MESSAGE_KEYS = {"type", "content", "tool_calls", "tool_call_id", "metadata"}
OLD_SAMPLE_KEYS = {
    "user_input",
    "reference",
    "reference_tool_calls",
    "reference_topics",
    "rubrics",
    "metadata",
}


@settings(max_examples=60)
@given(conversations(), st.booleans())
def test_single_agent_jsonl_is_written_as_before_agents_existed(
    messages: list[Message], with_reference: bool
) -> None:
    single = [
        m.model_copy(update={"name": None}) if isinstance(m, AIMessage) else m for m in messages
    ]
    sample = MultiTurnSample(
        user_input=single,
        reference_tool_calls=[ToolCall(name="search")] if with_reference else None,
    )
    line = EvaluationDataset([sample]).to_list()[0]
    assert set(line) <= OLD_SAMPLE_KEYS
    assert all(set(message) <= OLD_MESSAGE_KEYS for message in line["user_input"])
    # the line is the JSON of those fields alone, in their order: what was written before
    expected = {key: line[key] for key in ("user_input", "reference_tool_calls") if key in line}
    assert sample.model_dump_json(exclude_none=True) == json.dumps(
        expected, ensure_ascii=False, separators=(",", ":")
    )

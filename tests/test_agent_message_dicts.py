"""An agent may return its messages as dicts: LangChain's, turneval's or OpenAI's.

LangChain writes a message as ``messages_to_dict``'s ``{"type": "ai", "data": {...}}`` or as a
message's flat ``model_dump()``; turneval's own JSON is ``{"type": "ai", "content": ...}``. Any
of them must give the conversation the same messages as objects give (it was "unknown role
None": every dict was read as an OpenAI message).
"""

from collections.abc import Callable
from typing import Any

import anyio
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core import messages as lc

from turneval import AIMessage, HumanMessage, MultiTurnSample, ToolCall, ToolMessage
from turneval.agents import arun_agent
from turneval.formats import from_langchain, to_langchain

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.text(max_size=8)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)
texts = st.text(max_size=24)
contents: st.SearchStrategy[str | list[str | dict[Any, Any]]] = texts | st.lists(
    st.builds(lambda text: {"type": "text", "text": text}, texts), min_size=1, max_size=2
)
ids = st.none() | st.text(alphabet="abcdef0123456789", min_size=4, max_size=8)
usages = st.none() | st.builds(
    lambda i, o: {"input_tokens": i, "output_tokens": o, "total_tokens": i + o},
    st.integers(0, 5000),
    st.integers(0, 5000),
)


@st.composite
def ai_with_tools(draw: st.DrawFn, turn: int, step: int) -> list[lc.BaseMessage]:
    """An AI message calling 1-2 tools, then each tool's result."""
    count = draw(st.integers(1, 2))
    calls = [
        {
            "name": draw(st.sampled_from(["search", "book", "cancel"])),
            "args": draw(st.dictionaries(st.text(min_size=1, max_size=5), json_values, max_size=3)),
            "id": f"call-{turn}-{step}-{n}",
        }
        for n in range(count)
    ]
    ai = lc.AIMessage(
        content=draw(texts),
        tool_calls=calls,
        id=draw(ids),
        usage_metadata=draw(usages),
        response_metadata=draw(st.sampled_from([{}, {"model_name": "m", "finish": "tool_calls"}])),
    )
    results: list[lc.BaseMessage] = [
        lc.ToolMessage(
            content=draw(contents),
            tool_call_id=call["id"],
            status=draw(st.sampled_from(["success", "error"])),
            name=draw(st.none() | st.just(call["name"])),
        )
        for call in calls
    ]
    return [ai, *results]


@st.composite
def replies(draw: st.DrawFn, turn: int) -> list[lc.BaseMessage]:
    """What an agent answers one human turn: tool steps, then a final AI message."""
    messages: list[lc.BaseMessage] = []
    for step in range(draw(st.integers(0, 2))):
        messages.extend(draw(ai_with_tools(turn, step)))
    messages.append(lc.AIMessage(content=draw(contents), id=draw(ids), usage_metadata=draw(usages)))
    return messages


@st.composite
def conversations(
    draw: st.DrawFn, max_turns: int
) -> tuple[list[str], list[list[lc.BaseMessage]], bool]:
    """Human turns, the agent's reply to each, and whether it returns the whole history."""
    turns = draw(st.integers(1, max_turns))
    humans = [draw(texts) for _ in range(turns)]
    return humans, [draw(replies(turn)) for turn in range(turns)], draw(st.booleans())


FORMS: dict[str, Callable[[list[lc.BaseMessage]], Any]] = {
    "objects": lambda messages: messages,
    "messages_to_dict": lc.messages_to_dict,
    "model_dump": lambda messages: [message.model_dump() for message in messages],
    "turneval json": lambda messages: [
        message.model_dump(exclude_none=True) for message in from_langchain(messages)
    ],
}


def agent_in(form: str, answers: list[list[lc.BaseMessage]], whole: bool) -> Any:
    """A fake agent giving ``answers`` in turn, as ``form`` writes them."""
    write = FORMS[form]

    def agent(history: list[Any]) -> Any:
        turn = sum(isinstance(message, HumanMessage) for message in history) - 1
        said = [*to_langchain(history), *answers[turn]] if whole else answers[turn]
        return write(said)

    return agent


@settings(max_examples=60, deadline=None)
@given(conversations(max_turns=3))
def test_langchain_message_dicts_give_the_same_conversation_as_objects(
    conversation: tuple[list[str], list[list[lc.BaseMessage]], bool],
) -> None:
    humans, answers, whole = conversation
    sample = MultiTurnSample(user_input=[HumanMessage(content=text) for text in humans])
    expected: list[Any] = []
    for text, answer in zip(humans, answers, strict=True):
        expected += [HumanMessage(content=text), *from_langchain(answer)]
    for form in FORMS:
        run = anyio.run(arun_agent, agent_in(form, answers, whole), sample)
        assert run.error is None, (form, run.error)
        assert run.messages == expected, form


async def test_turneval_message_dicts_with_tool_calls_are_accepted() -> None:
    """The outside check's agent: turneval's JSON, a tool call and its result."""

    def agent(history: list[Any]) -> list[dict[str, Any]]:
        return [
            {
                "type": "ai",
                "content": "",
                "tool_calls": [{"name": "f", "args": {"q": 1}, "id": "c1"}],
            },
            {"type": "tool", "content": "ok", "tool_call_id": "c1"},
            {"type": "ai", "content": "done"},
        ]

    run = await arun_agent(agent, MultiTurnSample(user_input=[HumanMessage(content="go")]))
    assert run.error is None
    assert run.messages == [
        HumanMessage(content="go"),
        AIMessage(content="", tool_calls=[ToolCall(name="f", args={"q": 1}, id="c1")]),
        ToolMessage(content="ok", tool_call_id="c1"),
        AIMessage(content="done"),
    ]


async def test_a_single_typed_dict_is_a_message() -> None:
    run = await arun_agent(
        lambda history: {"type": "ai", "content": "hi"},
        MultiTurnSample(user_input=[HumanMessage(content="go")]),
    )
    assert run.error is None and run.messages[-1] == AIMessage(content="hi")


async def test_a_dict_of_no_known_shape_names_the_shapes() -> None:
    sample = MultiTurnSample(user_input=[HumanMessage(content="go")])
    untyped = await arun_agent(lambda history: [{"content": "hi"}], sample)
    assert untyped.error is not None
    assert untyped.error.startswith(
        "AgentRunError: the agent returned a message dict with neither 'role' nor 'type' "
        "(keys: ['content'])"
    )
    assert (
        "LangChain's messages_to_dict" in untyped.error and "{'role': 'assistant'" in untyped.error
    )
    no_call = [{"type": "tool", "content": "x", "status": "error"}]  # LangChain's, no call id
    wrong = await arun_agent(lambda history: no_call, sample)
    assert wrong.error is not None
    assert wrong.error.startswith(
        "InvalidSampleError: message 0: 'tool' message dict not read (no 'tool_call_id'); "
        "expected a LangChain message dict: messages_to_dict's"
    )
    robot = await arun_agent(lambda history: {"type": "robot", "content": "x"}, sample)
    assert robot.error is not None and "'robot' message dict not read" in robot.error

"""turneval.formats: every entry point applies the one open-tool-call rule alike."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core import messages as lc
from pydantic import ValidationError

from turneval.errors import InvalidSampleError
from turneval.formats import OpenToolCalls, from_langchain, from_openai
from turneval.messages import AIMessage, HumanMessage, Message, ToolCall, ToolMessage
from turneval.samples import MultiTurnSample

# A conversation as (kind, payload): ("user", text), ("ai", [call ids]), ("tool", call id).
Turn = tuple[str, Any]

CASES: list[tuple[str, list[Turn], bool]] = [
    ("answered by id", [("user", "q"), ("ai", ["c1"]), ("tool", "c1")], True),
    (
        "two calls, two results",
        [("user", "q"), ("ai", ["c1", "c2"]), ("tool", "c2"), ("tool", "c1")],
        True,
    ),
    ("result without an id", [("user", "q"), ("ai", ["c1"]), ("tool", None)], True),
    ("calls without ids", [("user", "q"), ("ai", [None]), ("tool", "c7")], True),
    ("no call before", [("user", "q"), ("tool", "c1")], False),
    ("wrong id", [("user", "q"), ("ai", ["c1"]), ("tool", "c9")], False),
    ("call-less AI message", [("user", "q"), ("ai", []), ("tool", "c1")], False),
    (
        "closed by a user turn",
        [("user", "q"), ("ai", ["c1"]), ("user", "more"), ("tool", "c1")],
        False,
    ),
]


def as_openai(turns: list[Turn]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for kind, payload in turns:
        if kind == "user":
            out.append({"role": "user", "content": payload})
        elif kind == "ai":
            calls = [
                {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}
                for i in payload
            ]
            out.append({"role": "assistant", "content": "", "tool_calls": calls})
        else:
            out.append({"role": "tool", "content": "r", "tool_call_id": payload})
    return out


def as_turneval(turns: list[Turn]) -> list[Message]:
    out: list[Message] = []
    for kind, payload in turns:
        if kind == "user":
            out.append(HumanMessage(content=payload))
        elif kind == "ai":
            calls = [ToolCall(name="f", args={}, id=i) for i in payload]
            out.append(AIMessage(content="", tool_calls=calls or None))
        else:
            out.append(ToolMessage(content="r", tool_call_id=payload))
    return out


def as_langchain(turns: list[Turn]) -> list[lc.BaseMessage]:
    out: list[lc.BaseMessage] = []
    for kind, payload in turns:
        if kind == "user":
            out.append(lc.HumanMessage(content=payload))
        elif kind == "ai":
            calls = [{"name": "f", "args": {}, "id": i, "type": "tool_call"} for i in payload]
            out.append(lc.AIMessage(content="", tool_calls=calls))
        else:
            out.append(lc.ToolMessage(content="r", tool_call_id=payload or ""))
    return out


def verdicts(turns: list[Turn]) -> dict[str, bool]:
    """Accepted (True) or rejected (False) by each entry point."""

    def accepted(build: Any) -> bool:
        try:
            build()
        except (InvalidSampleError, ValidationError):
            return False
        return True

    return {
        "from_openai": accepted(lambda: from_openai(as_openai(turns))),
        "from_langchain": accepted(lambda: from_langchain(as_langchain(turns))),
        "MultiTurnSample(messages)": accepted(
            lambda: MultiTurnSample(user_input=as_turneval(turns))
        ),
        "MultiTurnSample(langchain)": accepted(
            lambda: MultiTurnSample(user_input=as_langchain(turns))
        ),
        "MultiTurnSample(from_openai)": accepted(
            lambda: MultiTurnSample(user_input=from_openai(as_openai(turns)))
        ),
    }


@pytest.mark.parametrize(("turns", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_every_entry_point_gives_the_same_verdict(turns: list[Turn], expected: bool) -> None:
    found = verdicts(turns)
    assert found == dict.fromkeys(found, expected)


def test_the_rule_names_the_open_ids() -> None:
    rule = OpenToolCalls()
    assert rule.answer("c1") is not None  # nothing open yet
    rule.ai(AIMessage(content="", tool_calls=[ToolCall(name="f", id="c1")]))
    assert rule.answer("c1") is None
    assert rule.answer("c2", "ToolMessage") == (
        "ToolMessage.tool_call_id='c2' answers no preceding tool call (ids: 'c1')"
    )
    rule.close()
    assert rule.answer(None) == (
        "tool result must follow an AIMessage with tool_calls (or another tool result); "
        "this one (tool_call_id=None) answers no preceding tool call"
    )


def test_old_converter_paths_are_the_formats_ones() -> None:
    import turneval.messages as messages

    assert messages.from_openai is from_openai
    assert messages.from_langchain is from_langchain
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = messages.nope  # type: ignore[attr-defined]


def test_the_converters_older_module_paths_still_import() -> None:
    from turneval.formats._langchain import from_langchain as old_from_langchain
    from turneval.formats._openai import from_openai as old_from_openai

    assert old_from_langchain is from_langchain and old_from_openai is from_openai

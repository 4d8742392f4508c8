import json

import pytest
from pydantic import ValidationError

from turneval import AIMessage, HumanMessage, SystemMessage, ToolCall, ToolMessage
from turneval.messages import Message, MessageList, messages_from_json, messages_to_json


def test_message_types_and_defaults() -> None:
    assert HumanMessage(content="hi").type == "human"
    assert AIMessage().type == "ai" and AIMessage().content == "" and AIMessage().tool_calls is None
    assert ToolMessage(content="x").type == "tool"
    assert SystemMessage(content="be brief").type == "system"
    assert ToolCall(name="f").args == {} and ToolCall(name="f").id is None


def test_json_round_trip_is_lossless_with_nested_args_and_nulls() -> None:
    messages: list[Message] = [
        SystemMessage(content="sys"),
        HumanMessage(content="set it", metadata={"turn": 1}),
        AIMessage(
            content="",
            tool_calls=[
                ToolCall(
                    name="set_device_info",
                    args={
                        "device_id": "d2",
                        "updates": {"status": "OFF", "level": None},
                        "tags": [1, 2.5, True, None, {"k": []}],
                    },
                    id="call_1",
                )
            ],
        ),
        ToolMessage(content="done", tool_call_id="call_1"),
        AIMessage(content="Turned off."),
    ]
    text = messages_to_json(messages)
    assert messages_from_json(text) == messages
    # The wire form is the documented one: type-tagged, None fields left out, nulls in args kept.
    wire = json.loads(text)
    assert wire[2] == {
        "type": "ai",
        "content": "",
        "tool_calls": [
            {
                "name": "set_device_info",
                "args": {
                    "device_id": "d2",
                    "updates": {"status": "OFF", "level": None},
                    "tags": [1, 2.5, True, None, {"k": []}],
                },
                "id": "call_1",
            }
        ],
    }
    assert MessageList.validate_python(wire) == messages


def test_pretty_repr() -> None:
    assert HumanMessage(content="hello").pretty_repr() == "Human: hello"
    assert ToolMessage(content="42").pretty_repr() == "ToolOutput: 42"
    assert SystemMessage(content="s").pretty_repr() == "System: s"
    ai = AIMessage(
        content="Checking.", tool_calls=[ToolCall(name="weather", args={"city": "Paris"})]
    )
    assert ai.pretty_repr() == 'AI: Checking.\nTools:\n  weather({"city": "Paris"})'
    only_calls = AIMessage(tool_calls=[ToolCall(name="f", args={"n": 1})])
    assert only_calls.pretty_repr() == 'Tools:\n  f({"n": 1})'


def test_unknown_type_and_unknown_field_are_rejected() -> None:
    with pytest.raises(ValidationError, match="does not match any of the expected tags"):
        MessageList.validate_python([{"type": "robot", "content": "x"}])
    with pytest.raises(ValidationError, match="tool_call\n"):
        AIMessage.model_validate({"content": "x", "tool_call": []})


def test_args_must_be_json_values() -> None:
    with pytest.raises(ValidationError, match="args"):
        ToolCall(name="f", args={"when": object()})

"""Sample builders shared by the tests, and typed accessors for what the tests inspect."""

from __future__ import annotations

from typing import Any, TypeVar

from turneval import AIMessage, HumanMessage, MultiTurnSample, ToolCall, ToolMessage
from turneval.messages import Message
from turneval.samples import Sample

T = TypeVar("T")


def call(name: str, **args: Any) -> ToolCall:
    return ToolCall(name=name, args=args)


def conversation(
    *turns: list[ToolCall],
    reference: list[ToolCall] | None = None,
    with_outputs: bool = True,
) -> MultiTurnSample:
    """A human prompt, then one AI message per item of ``turns`` (its tool calls), each
    followed by one ToolMessage per call, then a final AI answer."""
    messages: list[Any] = [HumanMessage(content="please help")]
    for calls in turns:
        messages.append(AIMessage(content="", tool_calls=calls or None))
        if with_outputs:
            messages.extend(ToolMessage(content="ok") for _ in calls)
    messages.append(AIMessage(content="done"))
    return MultiTurnSample(user_input=messages, reference_tool_calls=reference)


def as_type(cls: type[T], value: object) -> T:
    """``value``, which the test expects to be a ``cls`` (the assertion says so if not)."""
    assert isinstance(value, cls), f"expected a {cls.__name__}, got {value!r}"
    return value


def messages_of(sample: Sample | None) -> list[Message]:
    """The conversation of ``sample``, which the test expects to be a multi-turn sample."""
    return as_type(MultiTurnSample, sample).user_input


def metadata_of(item: Sample | Message | None) -> dict[str, Any]:
    """The metadata of a sample or message, which the test expects to have some."""
    assert item is not None and item.metadata is not None, f"no metadata on {item!r}"
    return item.metadata

"""Sample builders shared by the tests."""

from __future__ import annotations

from typing import Any

from turneval import AIMessage, HumanMessage, MultiTurnSample, ToolCall, ToolMessage


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

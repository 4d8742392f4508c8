"""The message model: what a human, an AI, a tool and the system said.

A conversation is a list of :data:`Message` values, a union discriminated on ``type``, so a
message list round-trips through JSON losslessly::

    {"type": "ai", "content": "...", "tool_calls": [{"name": "...", "args": {...}}]}
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, TypeAlias, Union

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter

__all__ = [
    "AIMessage",
    "HumanMessage",
    "Message",
    "MessageBase",
    "MessageList",
    "SystemMessage",
    "ToolCall",
    "ToolMessage",
    "messages_from_json",
    "messages_to_json",
]

_CONFIG = ConfigDict(extra="forbid")


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=False)


class ToolCall(BaseModel):
    """A call of one tool by the AI.

    Attributes:
        name: The tool's name.
        args: The arguments, any JSON values (nested objects, lists, numbers, null).
        id: The provider's call id, used to link a :class:`ToolMessage` to its call.
    """

    model_config = _CONFIG

    name: str
    args: dict[str, JsonValue] = Field(default_factory=dict)
    id: str | None = None

    def pretty_repr(self) -> str:
        """Render the call as ``name({"arg": value})`` for prompts and reports."""
        return f"{self.name}({_json(self.args)})"


class MessageBase(BaseModel):
    """What every message has: its text and optional metadata (the classes below add their own).

    :data:`Message` is the union a conversation holds; this base class is the type a list of
    mixed messages is inferred as, which functions taking messages accept too.
    """

    model_config = _CONFIG

    content: str
    metadata: dict[str, Any] | None = None


class SystemMessage(MessageBase):
    """The system prompt; allowed only first in a conversation."""

    type: Literal["system"] = "system"

    def pretty_repr(self) -> str:
        """Render the message for prompts and reports."""
        return f"System: {self.content}"


class HumanMessage(MessageBase):
    """A turn of the human user."""

    type: Literal["human"] = "human"

    def pretty_repr(self) -> str:
        """Render the message for prompts and reports."""
        return f"Human: {self.content}"


class AIMessage(MessageBase):
    """A turn of the AI: text, tool calls, or both.

    Attributes:
        content: The text.
        tool_calls: The tools it called (None or empty: none).
        name: The agent that produced it, in a conversation of several agents (a supervisor
            and its workers, a swarm); None for a single agent. LangChain and OpenAI messages
            carry it as ``name``. Its tool calls, and the tool results that answer them,
            belong to the same agent (:func:`turneval.messages.message_agents`).
    """

    type: Literal["ai"] = "ai"
    content: str = ""
    tool_calls: list[ToolCall] | None = None
    name: str | None = None

    def pretty_repr(self) -> str:
        """Render the message, with one line per tool call, for prompts and reports.

        A named agent's message reads ``AI (researcher): ...``.
        """
        speaker = f"AI ({self.name})" if self.name else "AI"
        lines = [f"{speaker}: {self.content}"] if self.content or not self.tool_calls else []
        if self.name and not lines:
            lines.append(f"{speaker}:")
        if self.tool_calls:
            lines.append("Tools:")
            lines.extend(f"  {call.pretty_repr()}" for call in self.tool_calls)
        return "\n".join(lines)


class ToolMessage(MessageBase):
    """The output of a tool, answering a preceding :class:`ToolCall`."""

    type: Literal["tool"] = "tool"
    tool_call_id: str | None = None

    def pretty_repr(self) -> str:
        """Render the message for prompts and reports."""
        return f"ToolOutput: {self.content}"


Message: TypeAlias = Annotated[
    Union[SystemMessage, HumanMessage, AIMessage, ToolMessage],  # noqa: UP007
    Field(discriminator="type"),
]
"""Any message, discriminated on its ``type`` field."""

MessageList: TypeAdapter[list[Message]] = TypeAdapter(list[Message])
"""Validates and serialises a list of messages (``MessageList.validate_python(data)``)."""


def messages_to_json(messages: list[Message]) -> str:
    """Serialise messages to a JSON array (``None`` fields left out)."""
    return MessageList.dump_json(messages, exclude_none=True).decode()


def messages_from_json(data: str | bytes) -> list[Message]:
    """Parse a JSON array written by :func:`messages_to_json` (or by hand)."""
    return MessageList.validate_json(data)

"""Conversation messages: what a human, an AI, a tool and the system said.

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
    "MessageList",
    "SystemMessage",
    "ToolCall",
    "ToolMessage",
    "from_langchain",
    "from_openai",
    "messages_from_json",
    "messages_to_json",
    "to_langchain",
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


class _BaseMessage(BaseModel):
    model_config = _CONFIG

    content: str
    metadata: dict[str, Any] | None = None


class SystemMessage(_BaseMessage):
    """The system prompt; allowed only first in a conversation."""

    type: Literal["system"] = "system"

    def pretty_repr(self) -> str:
        """Render the message for prompts and reports."""
        return f"System: {self.content}"


class HumanMessage(_BaseMessage):
    """A turn of the human user."""

    type: Literal["human"] = "human"

    def pretty_repr(self) -> str:
        """Render the message for prompts and reports."""
        return f"Human: {self.content}"


class AIMessage(_BaseMessage):
    """A turn of the AI: text, tool calls, or both."""

    type: Literal["ai"] = "ai"
    content: str = ""
    tool_calls: list[ToolCall] | None = None

    def pretty_repr(self) -> str:
        """Render the message, with one line per tool call, for prompts and reports."""
        lines = [f"AI: {self.content}"] if self.content or not self.tool_calls else []
        if self.tool_calls:
            lines.append("Tools:")
            lines.extend(f"  {call.pretty_repr()}" for call in self.tool_calls)
        return "\n".join(lines)


class ToolMessage(_BaseMessage):
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


# -- converters ------------------------------------------------------------------------------

_KEPT = (
    "id",
    "content_blocks",
    "invalid_tool_calls",
    "usage_metadata",
    "response_metadata",
    "status",
    "name",
)


def _blocks_text(content: Any) -> tuple[str, list[Any] | None]:
    """Text of a message's content, and the original blocks when it was a list."""
    if isinstance(content, str):
        return content, None
    if content is None:
        return "", None
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            kind = block.get("type", "block")
            if kind == "text":
                parts.append(str(block.get("text", "")))
            elif kind not in {"tool_use", "tool_call", "function_call"}:  # those are tool_calls
                parts.append(f"[{kind}]")
    return "".join(parts), list(content)


def _sample_error(index: int, field: str, message: str) -> Exception:
    from turneval.errors import InvalidSampleError

    return InvalidSampleError(f"message {index}: {message}", sample_id=index, field=field)


def _jsonable(value: Any) -> Any:
    from pydantic_core import to_jsonable_python

    return to_jsonable_python(value, fallback=str)


def from_langchain(messages: Any) -> list[Message]:
    """Convert LangChain messages (including chunks) to turneval messages, losslessly.

    Tool calls are read from ``AIMessage.tool_calls`` (LangChain's normalised field, filled by
    every current provider), with their ids; ``invalid_tool_calls`` are kept in
    ``metadata["invalid_tool_calls"]``; list-of-blocks content becomes its text joined (other
    blocks described as ``[image_url]`` ...) with the blocks kept in ``metadata``; message ids,
    usage and response metadata are kept too, so :func:`to_langchain` restores the messages.

    Raises:
        InvalidSampleError: naming the message index and field, for an unsupported message
            type, a tool result with no preceding tool call, or arguments that are not JSON.
    """
    from langchain_core import messages as lc

    converted: list[Message] = []
    open_ids: list[str | None] | None = None
    for index, message in enumerate(messages):
        if not isinstance(message, lc.BaseMessage):
            raise _sample_error(
                index, "type", f"expected a LangChain BaseMessage, got {type(message).__name__}"
            )
        text, blocks = _blocks_text(message.content)
        metadata: dict[str, Any] = dict(message.additional_kwargs.get("turneval_metadata") or {})
        if message.id:
            metadata["id"] = message.id
        if blocks is not None:
            metadata["content_blocks"] = _jsonable(blocks)
        if isinstance(message, lc.SystemMessage):
            converted.append(SystemMessage(content=text, metadata=metadata or None))
            open_ids = None
        elif isinstance(message, lc.HumanMessage):
            converted.append(HumanMessage(content=text, metadata=metadata or None))
            open_ids = None
        elif isinstance(message, lc.AIMessage):
            ai = _from_langchain_ai(index, message, text, metadata)
            converted.append(ai)
            open_ids = [call.id for call in ai.tool_calls] if ai.tool_calls else None
        elif isinstance(message, lc.ToolMessage):
            if open_ids is None:
                raise _sample_error(
                    index,
                    "tool_call_id",
                    f"ToolMessage (tool_call_id={message.tool_call_id!r}) answers no preceding tool call",
                )
            if message.status != "success":
                metadata["status"] = message.status
            if message.name:
                metadata["name"] = message.name
            converted.append(
                ToolMessage(
                    content=text,
                    tool_call_id=message.tool_call_id or None,
                    metadata=metadata or None,
                )
            )
        else:
            raise _sample_error(
                index,
                "type",
                f"unsupported message type {type(message).__name__!r}; expected system, human, ai or tool messages",
            )
    return converted


def _from_langchain_ai(index: int, message: Any, text: str, metadata: dict[str, Any]) -> AIMessage:
    from pydantic import ValidationError

    calls = []
    for position, call in enumerate(message.tool_calls):
        try:
            calls.append(ToolCall(name=call["name"], args=call["args"], id=call.get("id")))
        except ValidationError as exc:
            raise _sample_error(
                index,
                f"tool_calls[{position}].args",
                f"arguments are not JSON values ({exc.errors()[0]['msg']})",
            ) from exc
    if message.invalid_tool_calls:
        metadata["invalid_tool_calls"] = _jsonable([dict(c) for c in message.invalid_tool_calls])
    if message.usage_metadata:
        metadata["usage_metadata"] = _jsonable(dict(message.usage_metadata))
    if message.response_metadata:
        metadata["response_metadata"] = _jsonable(message.response_metadata)
    return AIMessage(content=text, tool_calls=calls or None, metadata=metadata or None)


def to_langchain(messages: Any) -> list[Any]:
    """Convert turneval messages to LangChain messages (the inverse of :func:`from_langchain`)."""
    from langchain_core import messages as lc

    converted: list[Any] = []
    for message in messages:
        metadata = dict(message.metadata or {})
        kept = {key: metadata.pop(key) for key in _KEPT if key in metadata}
        extra = {"turneval_metadata": metadata} if metadata else {}
        content: Any = kept.get("content_blocks", message.content)
        common: dict[str, Any] = {"content": content, "additional_kwargs": extra}
        if "id" in kept:
            common["id"] = kept["id"]
        if isinstance(message, SystemMessage):
            converted.append(lc.SystemMessage(**common))
        elif isinstance(message, HumanMessage):
            converted.append(lc.HumanMessage(**common))
        elif isinstance(message, AIMessage):
            calls = [
                {"name": call.name, "args": call.args, "id": call.id, "type": "tool_call"}
                for call in message.tool_calls or []
            ]
            converted.append(
                lc.AIMessage(
                    **common,
                    tool_calls=calls,
                    invalid_tool_calls=kept.get("invalid_tool_calls", []),
                    usage_metadata=kept.get("usage_metadata"),
                    response_metadata=kept.get("response_metadata", {}),
                )
            )
        else:
            converted.append(
                lc.ToolMessage(
                    **common,
                    tool_call_id=message.tool_call_id or "",
                    status=kept.get("status", "success"),
                    name=kept.get("name"),
                )
            )
    return converted


def from_openai(messages: Any) -> list[Message]:
    """Convert OpenAI chat-format dicts (``role``, ``content``, ``tool_calls``, ``tool_call_id``).

    ``tool_calls[].function.arguments`` is a JSON string; the legacy ``function_call`` and
    ``function`` role are accepted too; ``developer`` is a system message; content may be a
    string or a list of parts.

    Raises:
        InvalidSampleError: naming the message index and field, for an unknown role, arguments
            that do not decode to a JSON object, or a tool result with no preceding call.
    """
    converted: list[Message] = []
    open_ids: list[str | None] | None = None
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise _sample_error(index, "role", f"expected an object, got {type(message).__name__}")
        role = message.get("role")
        text, _ = _blocks_text(message.get("content"))
        if role in ("system", "developer"):
            converted.append(SystemMessage(content=text))
            open_ids = None
        elif role == "user":
            converted.append(HumanMessage(content=text))
            open_ids = None
        elif role == "assistant":
            raw_calls = list(message.get("tool_calls") or [])
            if message.get("function_call"):
                raw_calls.append({"function": message["function_call"], "id": None})
            calls = []
            for position, raw in enumerate(raw_calls):
                function = raw.get("function") or {}
                field = f"tool_calls[{position}].function.arguments"
                arguments = function.get("arguments") or "{}"
                try:
                    args = json.loads(arguments) if isinstance(arguments, str) else arguments
                except json.JSONDecodeError as exc:
                    raise _sample_error(
                        index,
                        field,
                        f"arguments are not valid JSON ({exc.msg} at column {exc.colno})",
                    ) from exc
                if not isinstance(args, dict):
                    raise _sample_error(
                        index,
                        field,
                        f"arguments must decode to a JSON object, got {type(args).__name__}",
                    )
                if not function.get("name"):
                    raise _sample_error(
                        index, f"tool_calls[{position}].function.name", "a tool call needs a name"
                    )
                calls.append(ToolCall(name=function["name"], args=args, id=raw.get("id")))
            converted.append(AIMessage(content=text, tool_calls=calls or None))
            open_ids = [call.id for call in calls] if calls else None
        elif role in ("tool", "function"):
            call_id = message.get("tool_call_id")
            ids = [i for i in open_ids or [] if i]
            if open_ids is None or (call_id and ids and call_id not in ids):
                raise _sample_error(
                    index,
                    "tool_call_id",
                    f"tool result (tool_call_id={call_id!r}) answers no preceding tool call",
                )
            converted.append(ToolMessage(content=text, tool_call_id=call_id))
        else:
            raise _sample_error(
                index,
                "role",
                f"unknown role {role!r}; expected system, developer, user, assistant or tool",
            )
    return converted

"""OpenAI chat-format dicts <-> turneval messages."""

from __future__ import annotations

import json
from typing import Any

from turneval.messages._common import blocks_text, sample_error
from turneval.messages._model import (
    AIMessage,
    HumanMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
)
from turneval.messages._tool_results import OpenToolCalls

__all__ = ["from_openai", "to_openai"]


def from_openai(messages: Any) -> list[Message]:
    """Convert OpenAI chat-format dicts (``role``, ``content``, ``tool_calls``, ``tool_call_id``).

    ``tool_calls[].function.arguments`` is a JSON string; the legacy ``function_call`` and
    ``function`` role are accepted too; ``developer`` is a system message; content may be a
    string or a list of parts. An assistant message's ``name`` (the agent that wrote it)
    becomes :attr:`AIMessage.name <turneval.messages.AIMessage.name>`; another message's is
    kept in ``metadata["name"]``.

    Raises:
        InvalidSampleError: naming the message index and field, for an unknown role, arguments
            that do not decode to a JSON object, or a tool result with no preceding call.
    """
    converted: list[Message] = []
    rule = OpenToolCalls()
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise sample_error(index, "role", f"expected an object, got {type(message).__name__}")
        role = message.get("role")
        text, _ = blocks_text(message.get("content"))
        name = message.get("name") or None
        if name is not None and not isinstance(name, str):
            raise sample_error(index, "name", f"expected a string, got {type(name).__name__}")
        metadata = {"name": name} if name is not None and role != "assistant" else None
        if role in ("system", "developer"):
            converted.append(SystemMessage(content=text, metadata=metadata))
            rule.close()
        elif role == "user":
            converted.append(HumanMessage(content=text, metadata=metadata))
            rule.close()
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
                    raise sample_error(
                        index,
                        field,
                        f"arguments are not valid JSON ({exc.msg} at column {exc.colno})",
                    ) from exc
                if not isinstance(args, dict):
                    raise sample_error(
                        index,
                        field,
                        f"arguments must decode to a JSON object, got {type(args).__name__}",
                    )
                if not function.get("name"):
                    raise sample_error(
                        index, f"tool_calls[{position}].function.name", "a tool call needs a name"
                    )
                calls.append(ToolCall(name=function["name"], args=args, id=raw.get("id")))
            ai = AIMessage(content=text, tool_calls=calls or None, name=name)
            converted.append(ai)
            rule.ai(ai)
        elif role in ("tool", "function"):
            call_id = message.get("tool_call_id")
            problem = rule.answer(call_id or None)
            if problem is not None:
                raise sample_error(index, "tool_call_id", problem)
            converted.append(ToolMessage(content=text, tool_call_id=call_id, metadata=metadata))
        else:
            raise sample_error(
                index,
                "role",
                f"unknown role {role!r}; expected system, developer, user, assistant or tool",
            )
    return converted


def to_openai(messages: Any) -> list[dict[str, Any]]:
    """Convert turneval messages to OpenAI chat-format dicts (the inverse of :func:`from_openai`).

    ``role``, ``content`` and, where they apply, ``name`` (an AI message's agent, another
    message's ``metadata["name"]``), ``tool_calls`` (``function.arguments`` as a JSON string)
    and ``tool_call_id``. Other metadata has no place in the format and is left out.
    """
    roles = {"system": "system", "human": "user", "ai": "assistant", "tool": "tool"}
    converted: list[dict[str, Any]] = []
    for message in messages:
        item: dict[str, Any] = {"role": roles[message.type], "content": message.content}
        name = message.name if isinstance(message, AIMessage) else None
        if name is None and not isinstance(message, AIMessage):
            name = (message.metadata or {}).get("name")
        if name is not None:
            item["name"] = name
        if isinstance(message, AIMessage) and message.tool_calls:
            item["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {
                        "name": call.name,
                        "arguments": json.dumps(call.args, ensure_ascii=False),
                    },
                }
                for call in message.tool_calls
            ]
        if isinstance(message, ToolMessage):
            item["tool_call_id"] = message.tool_call_id
        converted.append(item)
    return converted

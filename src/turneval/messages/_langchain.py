"""LangChain messages <-> turneval messages, losslessly."""

from __future__ import annotations

from typing import Any

from turneval.messages._common import KEPT, blocks_text, jsonable, sample_error
from turneval.messages._model import (
    AIMessage,
    HumanMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
)
from turneval.messages._tool_results import OpenToolCalls

__all__ = ["from_langchain", "to_langchain"]


def from_langchain(messages: Any) -> list[Message]:
    """Convert LangChain messages (including chunks) to turneval messages, losslessly.

    A message may also be given as the dict LangChain writes for it: ``messages_to_dict``'s
    ``{"type": "ai", "data": {...}}``, or the flat ``{"type": "ai", "content": ...}`` of a
    message's ``model_dump()``; LangChain's ``messages_from_dict`` reads it back.

    Tool calls are read from ``AIMessage.tool_calls`` (LangChain's normalised field, filled by
    every current provider), with their ids; ``invalid_tool_calls`` are kept in
    ``metadata["invalid_tool_calls"]``; list-of-blocks content becomes its text joined (other
    blocks described as ``[image_url]`` ...) with the blocks kept in ``metadata``; message ids,
    usage and response metadata are kept too, so :func:`to_langchain` restores the messages.
    An AI message's ``name`` (the agent that produced it, as LangGraph's supervisor and swarm
    set it) becomes :attr:`AIMessage.name <turneval.messages.AIMessage.name>`; another
    message's is kept in ``metadata["name"]``.

    Raises:
        InvalidSampleError: naming the message index and field, for an unsupported message
            type or dict, a tool result with no preceding tool call, or arguments that are not
            JSON.
    """
    from langchain_core import messages as lc

    converted: list[Message] = []
    rule = OpenToolCalls()
    for index, item in enumerate(messages):
        message = _from_dict(index, item) if isinstance(item, dict) else item
        if not isinstance(message, lc.BaseMessage):
            raise sample_error(
                index,
                "type",
                f"expected a LangChain BaseMessage or its dict, got {type(message).__name__}",
            )
        text, blocks = blocks_text(message.content)
        metadata: dict[str, Any] = dict(message.additional_kwargs.get("turneval_metadata") or {})
        if message.id:
            metadata["id"] = message.id
        if blocks is not None:
            metadata["content_blocks"] = jsonable(blocks)
        if message.name and not isinstance(message, lc.AIMessage):  # an AI's is its agent
            metadata["name"] = message.name
        if message.response_metadata and not isinstance(message, lc.AIMessage):
            # e.g. LangGraph's handoff results: {"__handoff_destination": "research_expert"}
            metadata["response_metadata"] = jsonable(message.response_metadata)
        if isinstance(message, lc.SystemMessage):
            converted.append(SystemMessage(content=text, metadata=metadata or None))
            rule.close()
        elif isinstance(message, lc.HumanMessage):
            converted.append(HumanMessage(content=text, metadata=metadata or None))
            rule.close()
        elif isinstance(message, lc.AIMessage):
            ai = _from_langchain_ai(index, message, text, metadata)
            converted.append(ai)
            rule.ai(ai)
        elif isinstance(message, lc.ToolMessage):
            problem = rule.answer(message.tool_call_id or None, "ToolMessage")
            if problem is not None:
                raise sample_error(index, "tool_call_id", problem)
            if message.status != "success":
                metadata["status"] = message.status
            converted.append(
                ToolMessage(
                    content=text,
                    tool_call_id=message.tool_call_id or None,
                    metadata=metadata or None,
                )
            )
        else:
            raise sample_error(
                index,
                "type",
                f"unsupported message type {type(message).__name__!r}; expected system, human, ai or tool messages",
            )
    return converted


_DICT_SHAPES = (
    "expected a LangChain message dict: messages_to_dict's {'type': 'ai', 'data': {...}} or a "
    "message's model_dump() {'type': 'ai', 'content': ...}, with type human, ai, system or tool"
)


def _from_dict(index: int, message: dict[str, Any]) -> Any:
    """The LangChain message a dict describes (``messages_to_dict`` or ``model_dump`` shape)."""
    from langchain_core.messages import messages_from_dict
    from pydantic import ValidationError

    kind = message.get("type")
    if not isinstance(kind, str):
        raise sample_error(
            index, "type", f"no 'type' (keys: {sorted(map(str, message))}); {_DICT_SHAPES}"
        )
    wrapped = set(message) == {"type", "data"} and isinstance(message["data"], dict)
    data = message["data"] if wrapped else message
    field = "type"
    try:
        return messages_from_dict([{"type": kind, "data": data}])[0]
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"]) or "type"
        problem = f"{field}: {first['msg']}"
    except KeyError as exc:  # a field LangChain reads before validating
        field = str(exc.args[0]) if exc.args else "type"
        problem = f"no {field!r}"
    except (ValueError, TypeError) as exc:
        problem = " ".join(str(exc).split())
    raise sample_error(index, field, f"{kind!r} message dict not read ({problem}); {_DICT_SHAPES}")


def _from_langchain_ai(index: int, message: Any, text: str, metadata: dict[str, Any]) -> AIMessage:
    from pydantic import ValidationError

    calls = []
    for position, call in enumerate(message.tool_calls):
        try:
            calls.append(ToolCall(name=call["name"], args=call["args"], id=call.get("id")))
        except ValidationError as exc:
            raise sample_error(
                index,
                f"tool_calls[{position}].args",
                f"arguments are not JSON values ({exc.errors()[0]['msg']})",
            ) from exc
    if message.invalid_tool_calls:
        metadata["invalid_tool_calls"] = jsonable([dict(c) for c in message.invalid_tool_calls])
    if message.usage_metadata:
        metadata["usage_metadata"] = jsonable(dict(message.usage_metadata))
    if message.response_metadata:
        metadata["response_metadata"] = jsonable(message.response_metadata)
    return AIMessage(
        content=text, tool_calls=calls or None, metadata=metadata or None, name=message.name or None
    )


def to_langchain(messages: Any) -> list[Any]:
    """Convert turneval messages to LangChain messages (the inverse of :func:`from_langchain`)."""
    from langchain_core import messages as lc

    converted: list[Any] = []
    for message in messages:
        metadata = dict(message.metadata or {})
        ai = isinstance(message, AIMessage)
        kept = {
            key: metadata.pop(key)
            for key in KEPT
            if key in metadata and not (ai and key == "name")  # an AI's name is a field
        }
        extra = {"turneval_metadata": metadata} if metadata else {}
        content: Any = kept.get("content_blocks", message.content)
        common: dict[str, Any] = {"content": content, "additional_kwargs": extra}
        if "id" in kept:
            common["id"] = kept["id"]
        name = message.name if isinstance(message, AIMessage) else kept.get("name")
        if name is not None:
            common["name"] = name
        if "response_metadata" in kept and not ai:
            common["response_metadata"] = kept["response_metadata"]
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
                )
            )
    return converted

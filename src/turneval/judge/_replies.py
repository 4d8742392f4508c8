"""A judge's answers: their text and tokens, parsed into a verdict, repaired, cached.

What :class:`~turneval.judge._core.Judge` does with a model's reply: read its text and billed
tokens, parse JSON (in text or a tool call's arguments) into the verdict's schema, describe a
parse error for the model to repair, and keep or read a verdict (or a tool round) in the cache.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from turneval.usage import Usage

if TYPE_CHECKING:  # LangChain is imported when a judge is used, not with turneval
    from langchain_core.messages import BaseMessage

__all__ = [
    "JSON_INSTRUCTIONS",
    "Bound",
    "JudgeReply",
    "OutputProblem",
    "ToolRound",
    "cached_verdict",
    "describe_parse_error",
    "json_schema",
    "message_text",
    "message_tokens",
    "parse_json_reply",
    "raw_from",
    "structured_arguments",
    "tool_spec",
    "with_feedback",
]

T = TypeVar("T", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class JudgeReply(Generic[T]):
    """A validated verdict with its raw text and usage."""

    parsed: T
    raw: str
    usage: Usage
    cached: bool = False
    message: Any = None  # the model's last raw message (None from the cache)
    prompt_tokens: int | None = None  # the prompt's tokens as the judge counted them


_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)

JSON_INSTRUCTIONS = (
    "Answer with one JSON object only, no prose and no code fence, matching this JSON schema:\n"
)


def message_tokens(message: Any) -> Usage:
    """The tokens billed for ``message`` (its request is counted when sent)."""
    metadata = getattr(message, "usage_metadata", None) or {}
    return Usage(
        int(metadata.get("input_tokens", 0) or 0), int(metadata.get("output_tokens", 0) or 0)
    )


def message_text(message: Any) -> str:
    """The text of a chat model's reply (its content, or the text parts of a list of blocks)."""
    content = getattr(message, "content", message)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part if isinstance(part, str) else str(part.get("text", "")) for part in content
        )
    return str(content)


def parse_json_reply(text: str, schema: type[T]) -> T:
    """Parse ``text`` (JSON, possibly in a code fence or with prose around it) into ``schema``."""
    match = _JSON_OBJECT.search(text)
    if match is None:
        raise ValueError("no JSON object found in the answer")
    return schema.model_validate_json(match.group(0))


@functools.lru_cache(maxsize=256)
def json_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """``schema``'s JSON schema, built once per verdict class (part of every cache key)."""
    return schema.model_json_schema()


def cached_verdict(hit: dict[str, Any] | None, schema: type[T]) -> T | None:
    """The verdict stored in ``hit``, or None when it is missing or no valid ``schema``."""
    if hit is None or not isinstance(hit.get("raw"), str):
        return None
    try:
        return schema.model_validate(hit["parsed"])
    except (KeyError, ValidationError):
        return None


class ToolRound(BaseModel):
    """A tool-calling round as the cache keeps it: the model's text and tool calls."""

    content: str
    tool_calls: list[dict[str, Any]]


class Bound:
    """A model bound to tools, answering like a structured runnable (``{"raw": message}``)."""

    def __init__(self, bound: Any) -> None:
        self.bound = bound

    async def ainvoke(self, messages: list[BaseMessage]) -> dict[str, Any]:
        return {"raw": await self.bound.ainvoke(messages), "parsed": None}


def tool_spec(tool: Any) -> Any:
    """A tool as the cache key names it (its OpenAI function spec)."""
    if isinstance(tool, dict):
        return tool
    from langchain_core.utils.function_calling import convert_to_openai_tool

    return convert_to_openai_tool(tool)


class OutputProblem(Exception):
    """An answer the client parsed and rejected inside the request (its raw text, what is wrong)."""

    def __init__(self, raw: str, detail: str) -> None:
        super().__init__(detail)
        self.raw = raw
        self.detail = detail


def raw_from(error: Exception) -> str:
    """The model's raw answer that ``error`` (a parse or validation error) rejected, or ''."""
    output = getattr(error, "llm_output", None)
    if isinstance(output, str):
        return output
    if isinstance(error, ValidationError):
        for item in error.errors(include_url=False):
            if isinstance(item.get("input"), str):
                return str(item["input"])
    return ""


def with_feedback(messages: list[BaseMessage], raw: str, detail: str) -> list[BaseMessage]:
    """The conversation so far, the model's unusable answer, and what was wrong with it."""
    from langchain_core.messages import AIMessage, HumanMessage

    return [
        *messages,
        AIMessage(content=raw or "(empty answer)"),
        HumanMessage(
            content=f"That answer could not be used: {detail}. Answer again with only a JSON "
            "object that matches the schema."
        ),
    ]


def describe_parse_error(error: Exception) -> str:
    """A parse error as the model should read it: each invalid field and why."""
    if isinstance(error, ValidationError):
        return "; ".join(
            f"{'.'.join(str(part) for part in item['loc']) or 'answer'}: {item['msg']}"
            for item in error.errors(include_url=False)
        )
    return str(error) or type(error).__name__


def structured_arguments(message: Any) -> str | None:
    """The JSON arguments of a tool-calling structured answer, when the model used a tool."""
    calls = getattr(message, "tool_calls", None) or []
    if calls:
        return json.dumps(calls[0].get("args", {}))
    return None

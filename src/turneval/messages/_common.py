"""Helpers shared by the converters."""

from __future__ import annotations

from typing import Any

KEPT = (
    "id",
    "content_blocks",
    "invalid_tool_calls",
    "usage_metadata",
    "response_metadata",
    "status",
    "name",
)


def blocks_text(content: Any) -> tuple[str, list[Any] | None]:
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


def sample_error(index: int, field: str, message: str) -> Exception:
    from turneval.errors import InvalidSampleError

    return InvalidSampleError(f"message {index}: {message}", sample_id=index, field=field)


def jsonable(value: Any) -> Any:
    from pydantic_core import to_jsonable_python

    return to_jsonable_python(value, fallback=str)

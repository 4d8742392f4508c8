"""The one rule for tool results, shared by every converter and by sample validation.

A tool result answers the *open* tool calls: those of the nearest preceding AI message with
tool calls, as long as only tool results came in between (a system, human or call-less AI
message closes them). A tool result is rejected when no call is open, or when it names a
``tool_call_id`` while the open calls carry ids and none of them is that id. A result without
an id, or answering calls without ids, is accepted (nothing to check it against).
"""

from __future__ import annotations

from collections.abc import Sequence

from turneval.messages._model import AIMessage, ToolCall

__all__ = ["OpenToolCalls"]


class OpenToolCalls:
    """Tracks the open tool calls along a conversation and checks each tool result.

    Feed every message in order: :meth:`ai` for an AI message, :meth:`close` for a system or
    human message, :meth:`answer` for a tool result (it returns the reason it is rejected, or
    None). The caller turns a reason into its own error type, naming its own position.
    """

    __slots__ = ("calls",)

    def __init__(self) -> None:
        """Start with no call open."""
        self.calls: Sequence[ToolCall] | None = None

    def ai(self, message: AIMessage) -> None:
        """An AI message: its tool calls are now the open ones (none when it has none)."""
        self.calls = message.tool_calls or None

    def close(self) -> None:
        """A system or human message: no call is open any more."""
        self.calls = None

    def answer(self, tool_call_id: str | None, what: str = "tool result") -> str | None:
        """Why a tool result with ``tool_call_id`` answers no open call, or None when it does.

        ``what`` names the result in the reason: a class name (``"ToolMessage"``) or words
        (``"tool result"``).
        """
        if self.calls is None:
            return (
                f"{what} must follow an AIMessage with tool_calls (or another {what}); "
                f"this one (tool_call_id={tool_call_id!r}) answers no preceding tool call"
            )
        ids = [call.id for call in self.calls if call.id is not None]
        if tool_call_id is not None and ids and tool_call_id not in ids:
            subject = (
                f"{what}.tool_call_id={tool_call_id!r}"
                if what.isidentifier()
                else f"{what} (tool_call_id={tool_call_id!r})"
            )
            return f"{subject} answers no preceding tool call (ids: {', '.join(map(repr, ids))})"
        return None

"""What the agent-behaviour metrics read off a conversation.

Calls with their results and turns, and the tools the sample says the agent had
(``metadata["tools"]``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from turneval.errors import ConfigError, InvalidSampleError
from turneval.messages import AIMessage, HumanMessage, ToolCall, ToolMessage
from turneval.samples import MultiTurnSample

if TYPE_CHECKING:
    from turneval.metrics.arg_rules import RuleBook
    from turneval.metrics.base import Metric

__all__ = ["CallRecord", "ToolSpec", "call_records", "check_rule_tools", "sample_tools"]


@dataclass(slots=True)
class CallRecord:
    """One predicted call where it happened.

    Attributes:
        message: Index of its AIMessage in ``user_input``.
        turn: How many human messages came before it (calls of one turn share it).
        call: The call.
        result: The content of the ToolMessage answering it, None when there is none.
    """

    message: int
    turn: int
    call: ToolCall
    result: str | None = None


def call_records(metric: Metric, sample: MultiTurnSample) -> list[CallRecord]:
    """Every predicted call, in order, with its message index, turn and result.

    A ToolMessage answers the call whose ``id`` it names; without ids, the k-th ToolMessage
    after an AIMessage answers its k-th call.

    Raises:
        InvalidSampleError: a call has an empty name.
    """
    records: list[CallRecord] = []
    turn = 0
    open_calls: list[CallRecord] = []
    answered = 0
    for index, message in enumerate(sample.user_input):
        kind = type(message)
        if kind is AIMessage:
            calls = message.tool_calls  # type: ignore[union-attr]
            open_calls, answered = [], 0
            if calls:
                for position, call in enumerate(calls):
                    if not call.name:
                        raise InvalidSampleError(
                            f"metric {metric.name!r}: user_input[{index}].tool_calls[{position}] "
                            "has an empty name; expected the tool's name",
                            field=f"user_input[{index}].tool_calls[{position}].name",
                        )
                    record = CallRecord(index, turn, call)
                    open_calls.append(record)
                records += open_calls
        elif kind is ToolMessage:
            _answer(open_calls, answered, message)  # type: ignore[arg-type]
            answered += 1
        elif kind is HumanMessage:
            turn += 1
            open_calls = []
    return records


def _answer(open_calls: list[CallRecord], answered: int, message: ToolMessage) -> None:
    if message.tool_call_id is not None:
        for record in open_calls:
            if record.call.id == message.tool_call_id:
                record.result = message.content
                return
    if answered < len(open_calls) and open_calls[answered].result is None:
        open_calls[answered].result = message.content


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool the agent had: its name, description and parameters' JSON schema."""

    name: str
    description: str = ""
    parameters: Any = None


def sample_tools(sample: MultiTurnSample) -> list[ToolSpec] | None:
    """The tools in ``metadata["tools"]``, or None when the sample does not say.

    Accepted items: a tool name, ``{"name", "description", "parameters"}`` or OpenAI's
    ``{"type": "function", "function": {...}}``.

    Raises:
        InvalidSampleError: ``metadata["tools"]`` is not a list of those.
    """
    raw = (sample.metadata or {}).get("tools")
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise InvalidSampleError(
            f"metadata['tools'] must be a list of tool names or tool definitions, "
            f"got {type(raw).__name__}",
            field="metadata.tools",
        )
    tools = []
    for position, item in enumerate(raw):
        if isinstance(item, dict) and isinstance(item.get("function"), dict):
            item = item["function"]
        if isinstance(item, str) and item:
            tools.append(ToolSpec(item))
        elif isinstance(item, dict) and isinstance(item.get("name"), str) and item["name"]:
            description = item.get("description") or ""
            tools.append(ToolSpec(item["name"], str(description), item.get("parameters")))
        else:
            raise InvalidSampleError(
                f"metadata['tools'][{position}] must be a tool name or a dict with a 'name', "
                f"got {item!r}",
                field=f"metadata.tools[{position}]",
            )
    return tools


def check_rule_tools(metric: Metric, book: RuleBook, sample: MultiTurnSample) -> None:
    """Raise ConfigError when ``arg_rules`` name a tool the sample's tool list lacks."""
    tools = sample_tools(sample)
    if tools is None or not book.tools:
        return
    names = {tool.name for tool in tools}
    unknown = sorted(book.tools - names)
    if unknown:
        raise ConfigError(
            f"metric {metric.name!r}: arg_rules name tool(s) {unknown} that are not among the "
            f"sample's tools (metadata['tools']: {sorted(names)})"
        )

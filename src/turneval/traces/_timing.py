"""What a trace says of a conversation's operation: each turn's timing, each model call's usage.

A conversation rebuilt from spans (:mod:`turneval.traces._convert`) keeps, on every message,
the span it was read from (``metadata["span_id"]``). From those spans:

* **Turn timing** (:class:`~turneval.results.TurnTiming`, one per user turn with an answer):
  the user's message is *sent* when its trace's root span starts (the agent's invocation) or,
  for later turns of one trace, when the previous turn ended, and never after the first model
  call that read it; the turn *ends* when the span of its last AI message ends. Its *first
  token* is the first AI message's span start plus the time to the first chunk, where the
  instrumentation recorded one (:data:`FIRST_TOKEN_MS`, :data:`FIRST_TOKEN_TIME`). Its
  *tools* are the tool results read from tool spans, each with its span's duration; a turn
  with a tool result no tool span recorded has its tools untimed (None).
* **Usage per model call**: the last AI message of each LLM span gets the span's tokens and
  model as a LangChain message carries them (``usage_metadata``, ``response_metadata``'s
  ``model_name``), so a conversation's cost reads alike from a trace and from an agent run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from turneval._rows import ToolTiming, TurnTiming
from turneval.messages import AIMessage, HumanMessage, Message, ToolMessage
from turneval.traces import _genai as g
from turneval.traces._spans import Span

FIRST_TOKEN_MS = "ai.response.msToFirstChunk"
"""Milliseconds from a model call's start to its first chunk (the Vercel AI SDK's streaming
spans)."""

FIRST_TOKEN_TIME = "langfuse.observation.completion_start_time"
"""When a model call's completion started (Langfuse's attribute): an ISO 8601 time or
nanoseconds since the epoch."""


def _span_of(message: Message, by_id: dict[str, Span]) -> Span | None:
    span_id = (message.metadata or {}).get("span_id")
    return by_id.get(span_id) if isinstance(span_id, str) else None


def _roots(spans: Sequence[Span]) -> dict[str, int]:
    """Each trace's start: its earliest span without a parent among these spans."""
    ids = {span.span_id for span in spans}
    starts: dict[str, int] = {}
    for span in spans:
        if span.parent_id is None or span.parent_id not in ids:
            known = starts.get(span.trace_id)
            starts[span.trace_id] = span.start if known is None else min(known, span.start)
    return starts


def _first_token(span: Span) -> int | None:
    """When the model call's first chunk arrived (ns since the epoch), where recorded."""
    attributes = span.attributes
    millis = attributes.get(FIRST_TOKEN_MS)
    if isinstance(millis, int | float) and not isinstance(millis, bool) and millis >= 0:
        return span.start + int(millis * 1e6)
    moment = attributes.get(FIRST_TOKEN_TIME)
    if isinstance(moment, int) and not isinstance(moment, bool) and moment > 0:
        return moment
    if isinstance(moment, str) and moment:
        try:
            parsed = datetime.fromisoformat(moment.replace("Z", "+00:00"))
        except ValueError:
            return None
        if parsed.tzinfo is None:
            return None
        return int(parsed.timestamp() * 1e9)
    return None


def _tools(
    turn: Sequence[Message],
    by_id: dict[str, Span],
    tool_spans: Mapping[str, Span],
    tool_name: Callable[[Span], str],
) -> tuple[ToolTiming, ...] | None:
    """The turn's tool results timed by their tool spans (None: one has no tool span).

    A result read from a tool span is timed by it; one read from a model call's input by the
    tool span of its call id.
    """
    timed = []
    own = {span.span_id for span in tool_spans.values()}
    for message in turn:
        if not isinstance(message, ToolMessage):
            continue
        span = _span_of(message, by_id)
        if span is None or span.span_id not in own:
            span = tool_spans.get(message.tool_call_id or "")
        if span is None:
            return None
        timed.append(ToolTiming(tool_name(span), max(0, span.end - span.start) / 1e9))
    return tuple(timed)


def turn_timings(
    conversation: Sequence[Message],
    spans: Sequence[Span],
    tool_spans: Mapping[str, Span],
    tool_name: Callable[[Span], str],
) -> list[TurnTiming]:
    """Each answered user turn's timing, from the spans its messages were read from.

    ``tool_spans`` are the tool spans by the call id they answer (or their own id, for one
    without a call id); ``tool_name`` names a tool span's tool. Empty when a turn's messages
    name no span.
    """
    by_id = {span.span_id: span for span in spans}
    roots = _roots(spans)
    humans = [i for i, message in enumerate(conversation) if isinstance(message, HumanMessage)]
    timings: list[TurnTiming] = []
    previous_end = 0
    for number, position in enumerate(humans):
        stop = humans[number + 1] if number + 1 < len(humans) else len(conversation)
        turn = conversation[position + 1 : stop]
        read_by = _span_of(conversation[position], by_id)
        answers = [m for m in turn if isinstance(m, AIMessage)]
        answer_spans = [_span_of(m, by_id) for m in answers]
        if read_by is None or not answers or any(span is None for span in answer_spans):
            return timings if number else []
        sent = min(read_by.start, max(roots.get(read_by.trace_id, read_by.start), previous_end))
        end = max(span.end for span in answer_spans if span is not None)
        first_span = answer_spans[0]
        first = _first_token(first_span) if first_span is not None else None
        tools = _tools(turn, by_id, tool_spans, tool_name)
        timings.append(
            TurnTiming(
                max(0, end - sent) / 1e9,
                None if first is None else max(0, first - sent) / 1e9,
                tools,
            )
        )
        previous_end = end
    return timings


def with_call_usage(
    conversation: list[Message], calls: Sequence[tuple[Span, Any, Any]], tokens: Any
) -> list[Message]:
    """The conversation with each LLM span's tokens and model on its last AI message.

    ``tokens(span, keys)`` reads a token count (the converter's, which names a malformed one).
    """
    usage: dict[str, dict[str, Any]] = {}
    for span, _inputs, outputs in calls:
        said = [m for m in outputs if isinstance(m, AIMessage)]
        span_id = (said[-1].metadata or {}).get("span_id") if said else None
        if not isinstance(span_id, str):
            continue
        given = tokens(span, (*g.INPUT_TOKENS, g.OI_PROMPT_TOKENS))
        taken = tokens(span, (*g.OUTPUT_TOKENS, g.OI_COMPLETION_TOKENS))
        model = next((v for key in g.MODEL_KEYS if (v := span.attributes.get(key))), None)
        record: dict[str, Any] = {}
        if given or taken:
            record["usage_metadata"] = {
                "input_tokens": given,
                "output_tokens": taken,
                "total_tokens": given + taken,
            }
        if model:
            record["response_metadata"] = {"model_name": str(model)}
        if record:
            usage[span_id] = record
    if not usage:
        return conversation
    last = {}
    for position, message in enumerate(conversation):
        span_id = (message.metadata or {}).get("span_id")
        if isinstance(message, AIMessage) and span_id in usage:
            last[span_id] = position
    out = list(conversation)
    for span_id, position in last.items():
        message = out[position]
        out[position] = message.model_copy(
            update={"metadata": {**(message.metadata or {}), **usage[span_id]}}
        )
    return out

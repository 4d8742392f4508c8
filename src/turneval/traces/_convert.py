"""Rebuild one conversation from the spans of a trace (or of a session)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from turneval._rows import TurnTiming
from turneval.messages import AIMessage, HumanMessage, Message, ToolCall, ToolMessage
from turneval.provenance import with_turn_timings
from turneval.samples import MultiTurnSample
from turneval.traces import _genai as g
from turneval.traces._agents import Team
from turneval.traces._reader import (
    SpanReader,
    TraceError,
    UnreadableSpan,
    as_text,
    first_of,
    kind,
    optional_id,
    skip_reason,
)
from turneval.traces._spans import Span
from turneval.traces._timing import turn_timings, with_call_usage

__all__ = ["PLACEHOLDER", "TraceError", "convert", "skip_reason"]

PLACEHOLDER = "[trace not converted: see metadata.conversion_error]"
"""The one message of a trace's sample when it could not be converted."""


def _ancestor_llm(span: Span, by_id: dict[str, Span], llm_ids: set[str]) -> str | None:
    parent = span.parent_id
    seen = 0
    while parent is not None and parent in by_id and seen < 1000:
        if parent in llm_ids:
            return parent
        parent = by_id[parent].parent_id
        seen += 1
    return None


def _calls(spans: list[Span], trace_id: str) -> list[tuple[Span, list[Message], list[Message]]]:
    """Each LLM call's messages; a wrapper LLM span over a provider span counts once."""
    by_id = {span.span_id: span for span in spans}
    llm = [span for span in spans if kind(span) == "llm"]
    if not llm:
        kinds = sorted(
            {str(kind(s) or s.attributes.get(g.OPERATION_NAME) or "unknown") for s in spans}
        )
        raise TraceError(
            spans[0],
            trace_id,
            f"{g.OPERATION_NAME} / {g.OI_SPAN_KIND}",
            f"no LLM span (none has {g.OPERATION_NAME} in {sorted(g.OP_CHAT)} or "
            f"{g.OI_SPAN_KIND}={g.OI_LLM}); span kinds seen: {', '.join(kinds)}",
        )
    llm_ids = {span.span_id for span in llm}
    read = {span.span_id: SpanReader(span, trace_id).read() for span in llm}
    wrapped: dict[str, str] = {}  # wrapper span -> the innermost LLM span under it
    for span in llm:
        outer = _ancestor_llm(span, by_id, llm_ids)
        if outer is not None:
            wrapped[outer] = span.span_id
    calls = []
    for span in llm:
        if span.span_id in wrapped:
            continue
        messages = read[span.span_id]
        outer = _ancestor_llm(span, by_id, llm_ids)
        while messages is None and outer is not None:  # the provider span captured nothing
            messages = read[outer]
            outer = _ancestor_llm(by_id[outer], by_id, llm_ids)
        if messages is None:
            raise TraceError(
                span,
                trace_id,
                f"{g.INPUT_MESSAGES} / {g.OI_INPUT_MESSAGES}N.* / {g.PROMPT_PREFIX}N.*",
                "message content was not captured (it is opt-in: set "
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true, TRACELOOP_TRACE_CONTENT=true "
                "or leave OpenInference's OPENINFERENCE_HIDE_INPUT_MESSAGES unset)",
            )
        calls.append((span, *messages))
    return calls


def _signature(message: Message) -> str:
    """A message's type and tool-call ids: what positions are checked by (never the text)."""
    if isinstance(message, AIMessage) and message.tool_calls:
        return f"ai calling {', '.join(str(call.id) for call in message.tool_calls)}"
    if isinstance(message, ToolMessage):
        return f"tool answering {message.tool_call_id}"
    return message.type


def _merge(
    calls: list[tuple[Span, list[Message], list[Message]]], notes: list[str]
) -> list[Message]:
    """Histories are cumulative: each call's input extends the conversation so far, by position."""
    conversation: list[Message] = []
    for span, inputs, outputs in calls:
        if not inputs:  # e.g. OPENINFERENCE_HIDE_INPUT_MESSAGES: the output alone was recorded
            notes.append(
                f"span {span.span_id}: its input messages were not captured, only its output; "
                "the conversation lacks them"
            )
            conversation += outputs
            continue
        # A system prompt recorded on one call only (system instructions) does not shift the rest.
        offset = int(
            bool(conversation)
            and conversation[0].type == "system"
            and (not inputs or inputs[0].type != "system")
        )
        known = len(conversation) - offset
        if len(inputs) >= known:
            for index in range(known):
                if _signature(inputs[index]) != _signature(conversation[index + offset]):
                    notes.append(
                        f"span {span.span_id}: input message {index} "
                        f"({_signature(inputs[index])}) differs from the earlier calls' "
                        f"({_signature(conversation[index + offset])}); this later input wins"
                    )
                    conversation = conversation[:offset] + inputs[:known]
                    break
            conversation += inputs[known:]
        else:  # the history restarted (a memoryless call): append it, without a second system
            start = 1 if inputs and inputs[0].type == "system" and conversation else 0
            conversation += inputs[start:]
            notes.append(
                f"span {span.span_id}: input does not extend the earlier history; appended"
            )
        conversation += outputs
    return conversation


def _tool_span(span: Span, trace_id: str) -> tuple[str, str | None, str | None, str]:
    """``(name, call id, result, attribute of the id)`` of an execute_tool / TOOL span."""
    attributes = span.attributes
    name = str(first_of(attributes, (g.TOOL_NAME, g.OI_TOOL_NAME)) or "")
    call_id = optional_id(attributes.get(g.TOOL_CALL_ID))
    id_attribute = g.TOOL_CALL_ID
    result = first_of(attributes, (g.TOOL_CALL_RESULT, g.OI_OUTPUT_VALUE))
    if isinstance(result, str) and result.startswith("{"):
        try:  # LangChain instrumentations record the ToolMessage itself
            decoded = json.loads(result)
        except json.JSONDecodeError:
            decoded = None
        if isinstance(decoded, dict):
            decoded = decoded.get("output", decoded)
            message = (
                decoded.get("kwargs") or decoded.get("data") if isinstance(decoded, dict) else None
            )
            if isinstance(message, dict) and "tool_call_id" in message:
                result = as_text(message.get("content"))
                if call_id is None:
                    call_id = optional_id(message.get("tool_call_id"))
                    id_attribute = (
                        g.TOOL_CALL_RESULT
                        if g.TOOL_CALL_RESULT in attributes
                        else g.OI_OUTPUT_VALUE
                    )
    return name, call_id, None if result is None else as_text(result), id_attribute


def _tool_name(span: Span) -> str:
    """The tool a tool span ran (its name attribute, else the span's name)."""
    return str(first_of(span.attributes, (g.TOOL_NAME, g.OI_TOOL_NAME)) or span.name)


def _attach_tools(
    conversation: list[Message], tools: list[Span], trace_id: str, notes: list[str]
) -> list[Message]:
    """Pair tool spans with calls (by id, else by name and order) and add missing results."""
    calls: dict[str, tuple[int, ToolCall]] = {}
    for index, message in enumerate(conversation):
        if isinstance(message, AIMessage):
            for call in message.tool_calls or ():
                if call.id is not None:
                    calls[call.id] = (index, call)
        elif isinstance(message, ToolMessage) and message.tool_call_id is not None:
            if message.tool_call_id not in calls:
                span_id = (message.metadata or {}).get("span_id")
                raise TraceError(
                    None,
                    trace_id,
                    "tool_call_id",
                    f"span {span_id}: tool result tool_call_id={message.tool_call_id!r} "
                    f"matches no call (ids: {', '.join(map(repr, calls)) or 'none'})",
                )
    answered = {m.tool_call_id for m in conversation if isinstance(m, ToolMessage)}
    unanswered = [
        (index, call)
        for index, message in enumerate(conversation)
        if isinstance(message, AIMessage)
        for call in message.tool_calls or ()
        if call.id is None or call.id not in answered
    ]
    additions: list[tuple[int, ToolMessage]] = []
    for span in tools:
        name, call_id, result, id_attribute = _tool_span(span, trace_id)
        if call_id is not None:
            if call_id not in calls:
                raise TraceError(
                    span,
                    trace_id,
                    id_attribute,
                    f"tool result for call id {call_id!r} matches no call "
                    f"(ids: {', '.join(map(repr, calls)) or 'none'})",
                )
            match = next((item for item in unanswered if item[1].id == call_id), None)
        else:
            match = next((item for item in unanswered if item[1].name == name), None)
            if match is not None:
                notes.append(
                    f"span {span.span_id}: tool {name!r} paired with its call by name and order"
                )
        if match is None or result is None:
            continue
        unanswered.remove(match)
        meta = {"trace_id": trace_id, "span_id": span.span_id}
        additions.append(
            (match[0], ToolMessage(content=result, tool_call_id=match[1].id, metadata=meta))
        )
    for index, message in sorted(additions, key=lambda item: item[0], reverse=True):
        position = index + 1
        while position < len(conversation) and isinstance(conversation[position], ToolMessage):
            position += 1
        conversation.insert(position, message)
    return conversation


def _tokens(span: Span, trace_id: str, keys: Sequence[str]) -> int:
    """A span's token count under the first of ``keys`` it has (0 without one)."""
    for key in keys:
        value = span.attributes.get(key)
        if value is not None and value != "":
            try:
                return int(value)
            except (TypeError, ValueError):
                problem = f"expected a token count, got {value!r}"
                raise TraceError(span, trace_id, key, problem) from None
    return 0


def _metadata(
    spans: list[Span], calls: Sequence[tuple[Span, Any, Any]], group: str
) -> dict[str, Any]:
    ids = {span.span_id for span in spans}
    roots = [span for span in spans if span.parent_id is None or span.parent_id not in ids]
    trace_ids = list(dict.fromkeys(span.trace_id for span in spans))

    def first(keys: Sequence[str]) -> Any:
        return next((v for s in spans if (v := first_of(s.attributes, keys)) is not None), None)

    model = next(
        (v for s, _, _ in reversed(calls) if (v := first_of(s.attributes, g.MODEL_KEYS))), None
    )
    input_tokens = output_tokens = 0
    for span, _, _ in calls:
        input_tokens += _tokens(span, trace_ids[0], (*g.INPUT_TOKENS, g.OI_PROMPT_TOKENS))
        output_tokens += _tokens(span, trace_ids[0], (*g.OUTPUT_TOKENS, g.OI_COMPLETION_TOKENS))
    errors = [span for span in spans if span.status == "ERROR"]
    latency = sum(root.end - root.start for root in roots) / 1e9 if roots else None
    session = first(g.SESSION_KEYS)
    return {
        "source": "otel",
        # The row's name in results.jsonl, labels and resumed runs: the session or the trace.
        "id": str(session) if group == "session" and session is not None else trace_ids[0],
        "trace_id": trace_ids[0],
        "trace_ids": trace_ids if len(trace_ids) > 1 else None,
        "root_span_id": roots[0].span_id if roots else None,
        "session_id": session,
        "agent_name": first(g.AGENT_KEYS),
        "model": model,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "latency_in_seconds": latency,
        "status": "ERROR" if errors else (roots[0].status if roots else "UNSET"),
        "error": (
            f"span {errors[0].span_id} ({errors[0].name!r}): {errors[0].status_message or 'error'}"
            if errors
            else None
        ),
        "group": group,
        "start_time_unix_nano": spans[0].start,
    }


def convert(spans: list[Span], group: str) -> MultiTurnSample:
    """One sample from the spans of one trace or session; never raises for bad input.

    A trace that cannot be converted gives a one-message placeholder sample whose
    ``metadata["conversion_error"]`` names the trace, span and attribute; the runner records that
    error for every metric instead of scoring the placeholder.
    """
    spans = sorted(spans, key=lambda span: span.start)
    trace_id = spans[0].trace_id
    notes: list[str] = []
    calls: list[tuple[Span, list[Message], list[Message]]] = []
    error: str | None = None
    conversation: list[Message] = []
    timings: list[TurnTiming] = []
    unreadable = next((span.error for span in spans if span.error is not None), None)
    try:
        if unreadable is not None:
            raise UnreadableSpan(f"trace {trace_id}: {unreadable}")
        calls = _calls(spans, trace_id)
        team = Team.of(spans, calls)
        if team.several:  # each agent sees its own view: the conversation is all of them
            conversation = team.merge(calls)
        else:
            conversation = _merge(calls, notes)
        tools = [span for span in spans if kind(span) == "tool"]
        conversation = _attach_tools(conversation, tools, trace_id, notes)
        conversation = team.named(conversation)
        # issue 49: each model call's tokens and model on its message, each turn's timing
        conversation = with_call_usage(
            conversation, calls, lambda span, keys: _tokens(span, trace_id, keys)
        )
        answering = {_tool_span(span, trace_id)[1] or span.span_id: span for span in tools}
        timings = turn_timings(conversation, spans, answering, _tool_name)
        if not conversation:
            raise TraceError(
                calls[0][0], trace_id, g.INPUT_MESSAGES, "the LLM calls hold no message"
            )
    except (TraceError, UnreadableSpan) as exc:
        error = str(exc)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:  # malformed values
        error = f"trace {trace_id}: malformed attribute value ({type(exc).__name__}: {exc})"
    try:
        metadata = _metadata(spans, calls, group)
    except TraceError as exc:  # a malformed figure (a token count): the trace's error
        error = error or str(exc)
        metadata = _metadata(spans, [], group)
    metadata["approximations"] = notes or None
    if error is None:
        metadata = with_turn_timings(metadata, timings)
        try:
            return MultiTurnSample(user_input=conversation, metadata=metadata)
        except ValidationError as exc:
            error = (
                f"trace {trace_id}: the rebuilt conversation is not valid: {exc.errors()[0]['msg']}"
            )
    metadata["conversion_error"] = error
    return MultiTurnSample(user_input=[HumanMessage(content=PLACEHOLDER)], metadata=metadata)

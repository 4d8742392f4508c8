"""Rebuild one conversation from the spans of a trace (or of a session)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from turneval.messages import AIMessage, HumanMessage, Message, SystemMessage, ToolCall, ToolMessage
from turneval.provenance import with_turn_timings
from turneval.rows import TurnTiming
from turneval.samples import MultiTurnSample
from turneval.traces import _genai as g
from turneval.traces._agents import Team
from turneval.traces._spans import Span, loads
from turneval.traces._timing import turn_timings, with_call_usage

PLACEHOLDER = "[trace not converted: see metadata.conversion_error]"


class TraceError(ValueError):
    """A trace cannot become a conversation; names the trace, span and attribute."""

    def __init__(self, span: Span | None, trace_id: str, attribute: str, problem: str) -> None:
        """Build the message from where the problem is and what it is."""
        where = f"trace {trace_id}"
        if span is not None:
            where += f", span {span.span_id} ({span.name!r})"
        super().__init__(f"{where}, attribute {attribute!r}: {problem}")
        self.attribute = attribute


class _UnreadableSpan(Exception):
    """A span of the trace could not be read (:attr:`Span.error`): the trace's error row."""


def kind(span: Span) -> str | None:
    """``"llm"``, ``"tool"``, ``"agent"`` or None, from attributes only (never the span name)."""
    attributes = span.attributes
    operation = attributes.get(g.OPERATION_NAME)
    if operation is not None:
        if operation in g.OP_CHAT:
            return "llm"
        if operation == g.OP_TOOL:
            return "tool"
        return "agent" if operation in g.OP_AGENT else None
    oi = attributes.get(g.OI_SPAN_KIND)
    if oi is not None:
        oi = str(oi).upper()
        return {g.OI_LLM: "llm", g.OI_TOOL: "tool", g.OI_AGENT: "agent"}.get(oi)
    if attributes.get(g.TRACELOOP_REQUEST_TYPE) in ("chat", "completion"):
        return "llm"
    return "tool" if attributes.get(g.TRACELOOP_SPAN_KIND) == "tool" else None


NO_LLM_SPAN = "no_llm_span"
"""A skip reason: the trace's GenAI spans record no model call (e.g. OpenLLMetry's agent creation)."""

NO_GENAI_SPAN = "no_genai_span"
"""A skip reason: no span of the trace is a GenAI one (an HTTP or database trace, say)."""

_GENAI_PREFIXES = ("gen_ai.", "llm.", "openinference.", "traceloop.")


def skip_reason(spans: Sequence[Span]) -> str | None:
    """Why the spans of a trace (or session) are not a conversation; None when they may be one.

    A trace with no LLM span records no model call: :data:`NO_LLM_SPAN` when some span carries
    GenAI attributes (``gen_ai.*``, OpenInference's or OpenLLMetry's; e.g. OpenLLMetry's
    ``create_agent`` trace), else :data:`NO_GENAI_SPAN`. A trace with a span that could not be
    read is never skipped: its error row says why.
    """
    if any(span.error is not None or kind(span) == "llm" for span in spans):
        return None
    genai = any(key.startswith(_GENAI_PREFIXES) for span in spans for key in span.attributes)
    return NO_LLM_SPAN if genai else NO_GENAI_SPAN


def _first(attributes: dict[str, Any], keys: Sequence[str]) -> Any:
    for key in keys:
        value = attributes.get(key)
        if value is not None and value != "":
            return value
    return None


def _decode(span: Span, trace_id: str, attribute: str, value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return loads(value)
    except json.JSONDecodeError as exc:
        shown = value if len(value) <= 60 else value[:57] + "..."
        raise TraceError(
            span, trace_id, attribute, f"not valid JSON ({exc.msg} at {exc.pos}): {shown!r}"
        ) from exc


def _args(span: Span, trace_id: str, attribute: str, value: Any) -> dict[str, Any]:
    args = _decode(span, trace_id, attribute, value) if value not in (None, "") else {}
    if not isinstance(args, dict):
        raise TraceError(
            span, trace_id, attribute, f"arguments must be a JSON object, got {type(args).__name__}"
        )
    return args


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _id(value: Any) -> str | None:
    return str(value).strip() or None if value not in (None, "") else None


class _Reader:
    """Reads the messages of one LLM span; every message keeps its (trace id, span id)."""

    def __init__(self, span: Span, trace_id: str) -> None:
        self.span, self.trace_id = span, trace_id
        self.meta = {"trace_id": trace_id, "span_id": span.span_id}

    def error(self, attribute: str, problem: str) -> TraceError:
        return TraceError(self.span, self.trace_id, attribute, problem)

    def check(self, attribute: str, text: str) -> str:
        if text == g.OI_REDACTED:
            raise self.error(attribute, "message content is redacted (a placeholder, not text)")
        return text

    def message(
        self,
        role: str,
        attribute: str,
        text: str,
        calls: list[ToolCall],
        call_id: str | None,
        name: Any = None,
    ) -> Message:
        meta = dict(self.meta)
        if role in ("system", "developer"):
            return SystemMessage(content=self.check(attribute, text), metadata=meta)
        if role == "user" or role == "human":
            return HumanMessage(content=self.check(attribute, text), metadata=meta)
        if role in ("assistant", "ai", "model"):
            return AIMessage(
                content=self.check(attribute, text),
                tool_calls=calls or None,
                metadata=meta,
                name=_id(name),  # the agent that spoke, as the instrumentation recorded it
            )
        if role in ("tool", "function"):
            return ToolMessage(
                content=self.check(attribute, text), tool_call_id=call_id, metadata=meta
            )
        raise self.error(
            attribute, f"unknown role {role!r}; expected system, user, assistant or tool"
        )

    # -- GenAI v1.37+: gen_ai.input.messages / gen_ai.output.messages (JSON) ------------------
    def genai(self, attribute: str) -> list[Message]:
        value = _decode(self.span, self.trace_id, attribute, self.span.attributes[attribute])
        if not isinstance(value, list):
            raise self.error(
                attribute, f"expected a JSON array of messages, got {type(value).__name__}"
            )
        out: list[Message] = []
        for index, item in enumerate(value):
            where = f"{attribute}[{index}]"
            if not isinstance(item, dict):
                raise self.error(where, "expected a message object with 'role' and 'parts'")
            role = str(item.get("role", ""))
            texts: list[str] = []
            calls: list[ToolCall] = []
            responses: list[ToolMessage] = []
            parts = item.get("parts")
            if parts is None and "content" in item:  # tolerated: OpenAI-style content
                parts = [{"type": "text", "content": item["content"]}]
            for position, part in enumerate(parts or ()):
                kind_ = part.get("type") if isinstance(part, dict) else None
                if kind_ == "text":
                    texts.append(self.check(where, _text(part.get("content"))))
                elif kind_ == "tool_call":
                    arguments = f"{where}.parts[{position}].arguments"
                    calls.append(
                        ToolCall(
                            name=str(part.get("name", "")),
                            args=_args(self.span, self.trace_id, arguments, part.get("arguments")),
                            id=_id(part.get("id")),
                        )
                    )
                elif kind_ == "tool_call_response":
                    result = part["response"] if "response" in part else part.get("result")
                    responses.append(
                        ToolMessage(
                            content=self.check(where, _text(result)),
                            tool_call_id=_id(part.get("id")),
                            metadata=dict(self.meta),
                        )
                    )
                elif kind_ not in ("reasoning", "thinking"):
                    texts.append(f"[{kind_}]")
            if responses:
                out.extend(responses)
            elif role or texts or calls:
                out.append(self.message(role, where, "".join(texts), calls, None, item.get("name")))
        return out

    def system_instructions(self) -> list[Message]:
        raw = self.span.attributes.get(g.SYSTEM_INSTRUCTIONS)
        if raw is None:
            return []
        value = _decode(self.span, self.trace_id, g.SYSTEM_INSTRUCTIONS, raw)
        parts = value if isinstance(value, list) else [value]
        text = "".join(_text(p.get("content")) if isinstance(p, dict) else _text(p) for p in parts)
        return [SystemMessage(content=text, metadata=dict(self.meta))]

    # -- indexed attributes: OpenInference and the pre-1.37 gen_ai.prompt.N.* -----------------
    def indexed(self, prefix: str) -> list[Message]:
        grouped: dict[int, dict[str, Any]] = {}
        for key, value in self.span.attributes.items():
            if key.startswith(prefix):
                number, _, rest = key[len(prefix) :].partition(".")
                if number.isdigit():
                    grouped.setdefault(int(number), {})[rest] = value
        out: list[Message] = []
        openinference = prefix in (g.OI_INPUT_MESSAGES, g.OI_OUTPUT_MESSAGES)
        for index in sorted(grouped):
            fields = grouped[index]
            where = f"{prefix}{index}"
            if openinference:
                role = fields.get(g.OI_ROLE, "")
                text = fields.get(g.OI_CONTENT)
                if text is None:
                    contents = {k: v for k, v in fields.items() if k.startswith(g.OI_CONTENTS)}
                    text = "".join(
                        str(v) for k, v in sorted(contents.items()) if k.endswith(g.OI_CONTENT_TEXT)
                    )
                call_id = fields.get(g.OI_TOOL_CALL_ID)
                speaker = fields.get(g.OI_NAME)
                calls_prefix, id_key = g.OI_TOOL_CALLS, g.OI_CALL_ID
                name_key, args_key = g.OI_CALL_NAME, g.OI_CALL_ARGUMENTS
            else:
                role, text = fields.get("role", ""), fields.get("content")
                call_id = fields.get("tool_call_id")
                speaker = fields.get("name")
                calls_prefix, id_key, name_key, args_key = "tool_calls.", "id", "name", "arguments"
            calls_by: dict[int, dict[str, Any]] = {}
            for key, value in fields.items():
                if key.startswith(calls_prefix):
                    position, _, rest = key[len(calls_prefix) :].partition(".")
                    if position.isdigit():
                        calls_by.setdefault(int(position), {})[rest] = value
            calls = [
                ToolCall(
                    name=str(call.get(name_key, "")),
                    args=_args(
                        self.span,
                        self.trace_id,
                        f"{where}.{calls_prefix}{position}.{args_key}",
                        call.get(args_key),
                    ),
                    id=_id(call.get(id_key)),
                )
                for position, call in sorted(calls_by.items())
            ]
            out.append(self.message(str(role), where, _text(text), calls, _id(call_id), speaker))
        return out

    def events(self) -> tuple[list[Message], list[Message]]:
        inputs: list[Message] = []
        outputs: list[Message] = []
        for name, attributes in self.span.events:
            role = g.MESSAGE_EVENTS.get(name)
            if role is None:
                continue
            where = f"event {name}"
            body = attributes
            if name == "gen_ai.choice" and "message" in attributes:
                body = _decode(self.span, self.trace_id, f"{where}.message", attributes["message"])
                body = body if isinstance(body, dict) else {"content": body}
            raw_calls = body.get("tool_calls")
            raw_calls = _decode(self.span, self.trace_id, f"{where}.tool_calls", raw_calls) or []
            calls = []
            for position, call in enumerate(raw_calls):
                function = call.get("function", call)
                calls.append(
                    ToolCall(
                        name=str(function.get("name", "")),
                        args=_args(
                            self.span,
                            self.trace_id,
                            f"{where}.tool_calls[{position}].function.arguments",
                            function.get("arguments"),
                        ),
                        id=_id(call.get("id")),
                    )
                )
            message = self.message(
                role,
                where,
                _text(body.get("content")),
                calls,
                _id(body.get("id")),
                body.get("name"),
            )
            (outputs if name == "gen_ai.choice" else inputs).append(message)
        return inputs, outputs

    def read(self) -> tuple[list[Message], list[Message]] | None:
        """The call's input and output messages; None when the span records none."""
        attributes = self.span.attributes
        if g.INPUT_MESSAGES in attributes or g.OUTPUT_MESSAGES in attributes:
            inputs = self.system_instructions()
            if g.INPUT_MESSAGES in attributes:
                inputs += self.genai(g.INPUT_MESSAGES)
            outputs = self.genai(g.OUTPUT_MESSAGES) if g.OUTPUT_MESSAGES in attributes else []
            return inputs, outputs
        inputs = self.indexed(g.OI_INPUT_MESSAGES)
        outputs = self.indexed(g.OI_OUTPUT_MESSAGES)
        if inputs or outputs:
            return inputs, outputs
        inputs = self.indexed(g.PROMPT_PREFIX)
        outputs = self.indexed(g.COMPLETION_PREFIX)
        if inputs or outputs:
            return inputs, outputs
        inputs, outputs = self.events()
        return (inputs, outputs) if inputs or outputs else None


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
    read = {span.span_id: _Reader(span, trace_id).read() for span in llm}
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
    name = str(_first(attributes, (g.TOOL_NAME, g.OI_TOOL_NAME)) or "")
    call_id = _id(attributes.get(g.TOOL_CALL_ID))
    id_attribute = g.TOOL_CALL_ID
    result = _first(attributes, (g.TOOL_CALL_RESULT, g.OI_OUTPUT_VALUE))
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
                result = _text(message.get("content"))
                if call_id is None:
                    call_id = _id(message.get("tool_call_id"))
                    id_attribute = (
                        g.TOOL_CALL_RESULT
                        if g.TOOL_CALL_RESULT in attributes
                        else g.OI_OUTPUT_VALUE
                    )
    return name, call_id, None if result is None else _text(result), id_attribute


def _tool_name(span: Span) -> str:
    """The tool a tool span ran (its name attribute, else the span's name)."""
    return str(_first(span.attributes, (g.TOOL_NAME, g.OI_TOOL_NAME)) or span.name)


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
        return next((v for s in spans if (v := _first(s.attributes, keys)) is not None), None)

    model = next(
        (v for s, _, _ in reversed(calls) if (v := _first(s.attributes, g.MODEL_KEYS))), None
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
            raise _UnreadableSpan(f"trace {trace_id}: {unreadable}")
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
    except (TraceError, _UnreadableSpan) as exc:
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

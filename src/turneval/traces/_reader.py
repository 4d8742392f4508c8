"""What one span says: its kind, and the messages of one LLM span (every convention read).

:func:`kind` tells LLM, tool and agent spans apart from their attributes; :class:`SpanReader`
reads an LLM span's input and output messages (GenAI semantic conventions, OpenInference,
OpenLLMetry, span events); a value that cannot be read raises :class:`TraceError`, naming the
trace, span and attribute. :mod:`turneval.traces._convert` builds the conversation from them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from turneval.messages import AIMessage, HumanMessage, Message, SystemMessage, ToolCall, ToolMessage
from turneval.traces import _genai as g
from turneval.traces._spans import Span, loads

__all__ = [
    "NO_GENAI_SPAN",
    "NO_LLM_SPAN",
    "SpanReader",
    "TraceError",
    "UnreadableSpan",
    "as_text",
    "first_of",
    "kind",
    "optional_id",
    "skip_reason",
]


class TraceError(ValueError):
    """A trace cannot become a conversation; names the trace, span and attribute."""

    def __init__(self, span: Span | None, trace_id: str, attribute: str, problem: str) -> None:
        """Build the message from where the problem is and what it is."""
        where = f"trace {trace_id}"
        if span is not None:
            where += f", span {span.span_id} ({span.name!r})"
        super().__init__(f"{where}, attribute {attribute!r}: {problem}")
        self.attribute = attribute


class UnreadableSpan(Exception):
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


def first_of(attributes: dict[str, Any], keys: Sequence[str]) -> Any:
    """The value of the first of ``keys`` set (not None nor empty) in ``attributes``, or None."""
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


def as_text(value: Any) -> str:
    """``value`` as message text: a string as is, anything else as JSON ('' for None)."""
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def optional_id(value: Any) -> str | None:
    """An id attribute's text, None when it is missing or blank."""
    return str(value).strip() or None if value not in (None, "") else None


class SpanReader:
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
                name=optional_id(name),  # the agent that spoke, as the instrumentation recorded it
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
                    texts.append(self.check(where, as_text(part.get("content"))))
                elif kind_ == "tool_call":
                    arguments = f"{where}.parts[{position}].arguments"
                    calls.append(
                        ToolCall(
                            name=str(part.get("name", "")),
                            args=_args(self.span, self.trace_id, arguments, part.get("arguments")),
                            id=optional_id(part.get("id")),
                        )
                    )
                elif kind_ == "tool_call_response":
                    result = part["response"] if "response" in part else part.get("result")
                    responses.append(
                        ToolMessage(
                            content=self.check(where, as_text(result)),
                            tool_call_id=optional_id(part.get("id")),
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
        text = "".join(
            as_text(p.get("content")) if isinstance(p, dict) else as_text(p) for p in parts
        )
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
                    id=optional_id(call.get(id_key)),
                )
                for position, call in sorted(calls_by.items())
            ]
            out.append(
                self.message(str(role), where, as_text(text), calls, optional_id(call_id), speaker)
            )
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
                        id=optional_id(call.get("id")),
                    )
                )
            message = self.message(
                role,
                where,
                as_text(body.get("content")),
                calls,
                optional_id(body.get("id")),
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

"""Traces of several agents: who produced each AI message, and one conversation from their views.

An AI message's agent comes, first found first, from:

1. the message itself, as the instrumentation recorded it (OpenInference's ``message.name``,
   a GenAI message's ``name``): LangGraph's supervisor and swarm name every agent's messages,
   and a later call's input gives the name an earlier call's output lacked;
2. the LLM span's agent: ``gen_ai.agent.name`` (or OpenInference's ``agent.name``) on the span
   or its nearest ancestor, or on an agent span (``invoke_agent``) right under that ancestor
   (OpenLLMetry records a LangGraph agent so, beside the agent's own spans), else the name of
   its nearest OpenInference ``AGENT`` span (the OpenAI Agents SDK names these after the
   agent), when these give at least two agents;
3. the nearest ancestor span named after an agent found so far (LangGraph names a subgraph's
   spans after its agent);
4. for a message no call produced (the framework added it: LangGraph's "Transferring back to
   supervisor"), the agent that spoke last.

Names are given only when the trace has at least two agents: a single agent's trace converts as
before, without names. The target of an OpenAI Agents SDK handoff span (``handoff to X``) is an
agent too.

Each agent's model sees its own view of the conversation (a worker sees its own tool calls; the
supervisor, with LangGraph's default ``output_mode``, only the worker's last message), so the
conversation of a multi-agent trace is the union of the views, in order: each call's input
messages already seen are matched in order (same type, text and tool-call ids), the others are
new and appended, then its output. A later agent's own system prompt is left out.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

from turneval.messages import AIMessage, Message, SystemMessage, ToolMessage
from turneval.traces import _genai as g
from turneval.traces._spans import Span

Call = tuple[Span, list[Message], list[Message]]

_HANDOFF_SPAN = re.compile(r"handoff to (.+)", re.DOTALL)
_MAX_DEPTH = 1000


def _ancestors(span: Span, by_id: dict[str, Span]) -> list[Span]:
    """The span's ancestors, nearest first."""
    found: list[Span] = []
    parent = span.parent_id
    while parent is not None and parent in by_id and len(found) < _MAX_DEPTH:
        found.append(by_id[parent])
        parent = by_id[parent].parent_id
    return found


def _declared(span: Span) -> str | None:
    for key in g.AGENT_KEYS:
        value = span.attributes.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def _is_oi_agent(span: Span) -> bool:
    return str(span.attributes.get(g.OI_SPAN_KIND, "")).upper() == g.OI_AGENT


def _key(message: Message) -> Hashable:
    """What tells messages apart across views: type, text, tool-call ids."""
    calls: tuple[str | None, ...] = ()
    if isinstance(message, AIMessage) and message.tool_calls:
        calls = tuple(call.id for call in message.tool_calls)
    answered = message.tool_call_id if isinstance(message, ToolMessage) else None
    return (message.type, message.content, calls, answered)


def _names(messages: Sequence[Message]) -> set[str]:
    return {m.name for m in messages if isinstance(m, AIMessage) and m.name}


@dataclass
class Team:
    """The agents of one trace: each LLM call's agent, the names known, whether several."""

    by_id: dict[str, Span]
    per_call: dict[str, str] = field(default_factory=dict)
    known: set[str] = field(default_factory=set)
    several: bool = False
    unproduced: set[int] = field(default_factory=set)  # ids of AI messages no call produced

    @classmethod
    def of(cls, spans: Sequence[Span], calls: Sequence[Call]) -> Team:
        """The agents of ``spans`` whose LLM calls are ``calls``."""
        by_id = {span.span_id: span for span in spans}
        named: set[str] = set()
        for _, inputs, outputs in calls:
            named |= _names(inputs) | _names(outputs)
        attached: dict[str, str] = {}  # span -> the agent of an agent span under it
        for span in spans:
            if span.parent_id and span.attributes.get(g.OPERATION_NAME) in g.OP_AGENT:
                name = _declared(span)
                if name is not None:
                    attached.setdefault(span.parent_id, name)
        declared: dict[str, str] = {}
        spanned: dict[str, str] = {}
        for span, _, _ in calls:
            lineage = [span, *_ancestors(span, by_id)]
            found = next(
                (n for s in lineage if (n := _declared(s) or attached.get(s.span_id))), None
            )
            if found is not None:
                declared[span.span_id] = found
            agent_span = next((s for s in lineage[1:] if _is_oi_agent(s)), None)
            if agent_span is not None and agent_span.name:
                spanned[span.span_id] = agent_span.name
        per_call: dict[str, str] = {}
        if len(set(declared.values())) >= 2:
            per_call = declared
        elif len(set(spanned.values())) >= 2:
            per_call = spanned
        handed = {
            match.group(1).strip()
            for span in spans
            if (match := _HANDOFF_SPAN.fullmatch(span.name)) is not None
        }
        team = cls(by_id, per_call, named | set(per_call.values()) | handed)
        team.several = len(named | set(per_call.values())) >= 2
        return team

    def _output_name(self, span: Span, message: Message) -> Message:
        if isinstance(message, AIMessage) and message.name is None:
            agent = self.per_call.get(span.span_id)
            if agent is not None:
                return message.model_copy(update={"name": agent})
        return message

    def merge(self, calls: Sequence[Call]) -> list[Message]:
        """The union of the calls' views, in order (see the module's description)."""
        conversation: list[Message] = []
        positions: dict[Hashable, list[int]] = {}

        def add(message: Message) -> None:
            positions.setdefault(_key(message), []).append(len(conversation))
            conversation.append(message)

        for span, inputs, outputs in calls:
            cursor = 0
            for message in inputs:
                if isinstance(message, SystemMessage) and conversation:
                    continue  # an agent's own prompt, or the one already first
                seen = positions.get(_key(message), [])
                found = bisect_left(seen, cursor)
                if found < len(seen):
                    index = seen[found]
                    cursor = index + 1
                    earlier = conversation[index]
                    if (
                        isinstance(message, AIMessage)
                        and isinstance(earlier, AIMessage)
                        and earlier.name is None
                        and message.name is not None
                    ):
                        conversation[index] = earlier.model_copy(update={"name": message.name})
                else:
                    add(message)
                    cursor = len(conversation)
                    if isinstance(message, AIMessage):
                        self.unproduced.add(id(message))
            for message in outputs:
                add(self._output_name(span, message))
        return conversation

    def named(self, conversation: list[Message]) -> list[Message]:
        """The conversation with its agents named: the rest by ancestors, or none for one agent."""
        if not self.several:
            return [
                m.model_copy(update={"name": None})
                if isinstance(m, AIMessage) and m.name is not None
                else m
                for m in conversation
            ]
        named: list[Message] = []
        last: str | None = None  # the agent that spoke last
        for message in conversation:
            if isinstance(message, AIMessage) and message.name is None:
                agent = None
                if id(message) in self.unproduced:
                    agent = last
                else:
                    span = self.by_id.get(str((message.metadata or {}).get("span_id")))
                    ancestors = _ancestors(span, self.by_id) if span is not None else []
                    agent = next((s.name for s in ancestors if s.name in self.known), None)
                if agent is not None:
                    message = message.model_copy(update={"name": agent})
            if isinstance(message, AIMessage) and message.name is not None:
                last = message.name
            named.append(message)
        return named

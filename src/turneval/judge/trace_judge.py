"""A judge that reads a conversation with tools instead of the whole transcript.

Instead of the transcript, the judge is told how long the conversation is and given tools to
read it, in a bounded loop:

* ``list_turns(start, count)``: one line per message (index, who, its span when the
  conversation came from a trace, its length and first words);
* ``list_spans()``: the trace's spans and the messages each produced (conversations from
  traces and from the store keep each message's span);
* ``read_turn(index, offset)``: one message's text, a page at a time;
* ``search(query)``: the messages containing a text, with a snippet around it;
* the verdict itself is a tool (its arguments are the verdict schema): calling it ends the
  loop, and its arguments are validated as any verdict is.

Every round is one request to the judge model, counted, cached and checked against the
context budget like any other (:meth:`turneval.judge.Judge.tool_round`). The loop is capped in
rounds (``max_rounds``) and in tokens of tool results (``max_tool_tokens``); past either, the
judge is asked for its verdict with the verdict tool alone. Works with any LangChain chat
model that supports ``bind_tools``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from turneval.errors import JudgeOutputError
from turneval.judge._core import Judge, JudgeReply, describe_parse_error
from turneval.samples import MultiTurnSample
from turneval.usage import Usage

__all__ = ["TRACE_NOTE", "TraceLoop", "TraceTools", "ask_with_tools"]

T = TypeVar("T", bound=BaseModel)

TRACE_NOTE = (
    "(The conversation has {messages} messages, indices 0-{last}; it is not shown here. Read "
    "it with the tools: list_turns, list_spans, read_turn and search. When you have read "
    "enough, call {verdict} with your verdict.)"
)
"""What stands in the question for the transcript."""

_PAGE = 4000
"""Characters of a message one ``read_turn`` returns."""

_TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "list_turns",
            "description": "List messages from index `start`: index, who, span, length, first words.",
            "parameters": {
                "type": "object",
                "properties": {
                    "start": {"type": "integer", "description": "First message index."},
                    "count": {"type": "integer", "description": "How many (at most 50)."},
                },
                "required": ["start", "count"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "list_spans",
            "description": "List the trace's spans and the message indices each produced.",
            "parameters": {
                "type": "object",
                "properties": {},
                "required": [],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read_turn",
            "description": f"Read message `index`, {_PAGE} characters from `offset`.",
            "parameters": {
                "type": "object",
                "properties": {
                    "index": {"type": "integer", "description": "The message index."},
                    "offset": {"type": "integer", "description": "Character offset (0 first)."},
                },
                "required": ["index", "offset"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Find the messages containing `query` (case-insensitive).",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "Text to find."}},
                "required": ["query"],
                "additionalProperties": False,
            },
        },
    },
]


class TraceTools:
    """The reading tools over one conversation (see the module docs).

    Args:
        sample: The conversation.
    """

    def __init__(self, sample: MultiTurnSample) -> None:
        """Read tools over ``sample``'s messages."""
        self.messages = list(sample.user_input)

    @property
    def specs(self) -> list[dict[str, Any]]:
        """The tools' OpenAI function specs."""
        return _TOOLS

    def call(self, name: str, args: dict[str, Any]) -> str:
        """Run tool ``name``; a bad call returns what was wrong (the judge reads it)."""
        try:
            if name == "list_turns":
                return self.list_turns(int(args.get("start", 0)), int(args.get("count", 20)))
            if name == "list_spans":
                return self.list_spans()
            if name == "read_turn":
                return self.read_turn(int(args["index"]), int(args.get("offset", 0)))
            if name == "search":
                return self.search(str(args["query"]))
        except (KeyError, TypeError, ValueError) as error:
            return f"error: bad arguments for {name}: {error!r}"
        return f"error: no tool named {name!r}"

    def _who(self, index: int) -> str:
        message = self.messages[index]
        span = (message.metadata or {}).get("span_id")
        return f"{message.type}" + (f" span={span}" if span else "")

    def list_turns(self, start: int, count: int) -> str:
        """``[index] who (N chars): first words`` for up to 50 messages from ``start``."""
        start = max(0, start)
        stop = min(len(self.messages), start + max(1, min(count, 50)))
        lines = []
        for index in range(start, stop):
            message = self.messages[index]
            text = message.pretty_repr().replace("\n", " ")
            lines.append(f"[{index}] {self._who(index)} ({len(text)} chars): {text[:100]}")
        return "\n".join(lines) or f"no messages from {start} (there are {len(self.messages)})"

    def list_spans(self) -> str:
        """Each span and the indices of the messages it produced."""
        spans: dict[str, list[int]] = {}
        for index, message in enumerate(self.messages):
            span = (message.metadata or {}).get("span_id")
            if span:
                spans.setdefault(str(span), []).append(index)
        if not spans:
            return "the conversation carries no spans (it did not come from a trace)"
        return "\n".join(f"span {span}: messages {indices}" for span, indices in spans.items())

    def read_turn(self, index: int, offset: int) -> str:
        """A page of message ``index`` from ``offset``, saying what is left."""
        if not 0 <= index < len(self.messages):
            return f"error: no message {index} (indices 0-{len(self.messages) - 1})"
        text = self.messages[index].pretty_repr()
        page = text[max(0, offset) : max(0, offset) + _PAGE]
        rest = len(text) - max(0, offset) - len(page)
        more = (
            f"\n[{rest:,} more characters: read_turn({index}, {offset + _PAGE})]"
            if rest > 0
            else ""
        )
        return f"[{index}] {page}{more}"

    def search(self, query: str) -> str:
        """Up to 20 messages containing ``query``, with a snippet around the first match."""
        needle = query.casefold().strip()
        if not needle:
            return "error: empty query"
        found = []
        for index, message in enumerate(self.messages):
            text = message.pretty_repr()
            at = text.casefold().find(needle)
            if at >= 0:
                snippet = text[max(0, at - 80) : at + len(needle) + 80].replace("\n", " ")
                found.append(f"[{index}] ...{snippet}...")
                if len(found) == 20:
                    break
        return "\n".join(found) or f"no message contains {query!r}"


@dataclass
class TraceLoop:
    """What one loop did: rounds asked, tool calls made, tokens of tool results."""

    rounds: int = 0
    tool_calls: list[str] = field(default_factory=list)
    tool_tokens: int = 0
    forced: bool = False


async def ask_with_tools(
    judge: Judge,
    system: str,
    prompt: str,
    schema: type[T],
    tools: TraceTools,
    *,
    max_rounds: int = 8,
    max_tool_tokens: int = 20_000,
    answer_tokens: int | None = None,
) -> tuple[JudgeReply[T], TraceLoop]:
    """Ask for a verdict of ``schema``, the judge reading the conversation with ``tools``.

    Returns the verdict (its usage the sum of every round's) and what the loop did.

    Raises:
        JudgeOutputError: no valid verdict within the rounds (the last problem named).
        JudgeCallError: a round could not be sent.
        ContextBudgetError: the question itself cannot fit the judge's context.
    """
    from langchain_core.messages import AIMessage as LCAIMessage
    from langchain_core.messages import HumanMessage, SystemMessage
    from langchain_core.messages import ToolMessage as LCToolMessage

    verdict_tool = schema
    name = schema.__name__
    messages: list[Any] = [SystemMessage(content=system), HumanMessage(content=prompt)]
    loop = TraceLoop()
    usage = Usage()
    cached = True
    problem = "no answer"
    budget = judge.budget
    for round_ in range(max_rounds + 1):
        forced = round_ == max_rounds or loop.tool_tokens >= max_tool_tokens
        offered: Sequence[Any] = [verdict_tool] if forced else [*tools.specs, verdict_tool]
        loop.forced = loop.forced or forced
        message, spent, was_cached = await judge.tool_round(
            messages,
            offered,
            tool_choice=name if forced else "any",
            answer_tokens=answer_tokens,
        )
        loop.rounds += 1
        usage = usage + spent
        cached = cached and was_cached
        calls = list(getattr(message, "tool_calls", None) or [])
        messages.append(
            LCAIMessage(content=getattr(message, "content", "") or "", tool_calls=calls)
        )
        if not calls:
            problem = "the judge answered without calling a tool"
            messages.append(
                HumanMessage(content=f"Call a tool; to give your verdict, call {name}.")
            )
            continue
        verdict: T | None = None
        for call in calls:
            call_id = call.get("id") or f"call_{loop.rounds}"
            if call["name"] == name:
                try:
                    verdict = schema.model_validate(call.get("args", {}))
                    raw = json.dumps(call.get("args", {}), ensure_ascii=False)
                    result = "verdict received"
                except ValidationError as error:
                    problem = describe_parse_error(error)
                    result = f"That verdict could not be used: {problem}. Call {name} again."
            else:
                loop.tool_calls.append(call["name"])
                result = tools.call(call["name"], dict(call.get("args", {})))
                if loop.tool_tokens + budget.count(result) > max_tool_tokens:
                    result = (
                        f"(tool budget of {max_tool_tokens:,} tokens spent: call {name} now "
                        "with your verdict)"
                    )
                loop.tool_tokens += budget.count(result)
            messages.append(LCToolMessage(content=result, tool_call_id=call_id))
        if verdict is not None:
            return JudgeReply(verdict, raw, usage, cached, message=message), loop
    raise JudgeOutputError(
        f"no valid verdict from the tool-reading judge within {loop.rounds} round(s): {problem}",
        raw_output=None,
    )

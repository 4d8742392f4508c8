"""Which agent said what, and who handed the conversation to whom.

In a conversation of several agents (a supervisor and its workers, a swarm, agents handing off
to each other) every :class:`~turneval.messages.AIMessage` may name the agent that produced it
(``name``). Its tool calls belong to that agent, and so do the tool results answering them
(:func:`message_agents`): the same rule of open tool calls as every converter's
(:class:`~turneval.messages.OpenToolCalls`).

A *handoff* passes control from one agent to another (:class:`Handoff`). It is found in two
ways (:func:`find_handoffs`):

* a tool call named ``transfer_to_<agent>`` or ``transfer_back_to_<agent>``: the names
  LangGraph's supervisor and swarm and the OpenAI Agents SDK give their handoff tools (the
  agent's name lower-cased, other characters as ``_``); its arguments are the handoff's;
* a change of speaker no such call announced: agent A speaks, then agent B (a graph that routes
  by its edges, or a supervisor that takes control back without a message).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from turneval.messages._model import AIMessage, MessageBase, ToolMessage

__all__ = [
    "Handoff",
    "HandoffAt",
    "agent_key",
    "find_handoffs",
    "handoff_target",
    "message_agents",
]

_HANDOFF_TOOL = re.compile(r"transfer_(?:back_)?to_(.+)", re.DOTALL)
_NOT_WORD = re.compile(r"[^0-9a-z]+")


class Handoff(BaseModel):
    """Control passed from one agent to another.

    Attributes:
        target: The agent that takes over.
        source: The agent that hands over; None when it is not known (or, in a reference
            handoff, when any agent may hand over).
        args: What the handoff carried (the handoff tool call's arguments), any JSON values.
    """

    model_config = ConfigDict(extra="forbid")

    target: str = Field(min_length=1)
    source: str | None = None
    args: dict[str, JsonValue] = Field(default_factory=dict)

    def pretty_repr(self) -> str:
        """``source -> target`` with the arguments, if any, for prompts and reports."""
        source = self.source if self.source is not None else "?"
        args = f" {json.dumps(self.args, ensure_ascii=False)}" if self.args else ""
        return f"{source} -> {self.target}{args}"


@dataclass(frozen=True, slots=True)
class HandoffAt:
    """A handoff found in a conversation, with where it was found.

    Attributes:
        handoff: The handoff.
        message_index: The index in ``user_input`` of the message that made it: the AI message
            calling the handoff tool, or the first message of the new speaker.
        explicit: True for a handoff tool call, False for a change of speaker.
    """

    handoff: Handoff
    message_index: int
    explicit: bool


def agent_key(name: str) -> str:
    """An agent's name as handoff tools spell it: lower case, other characters as ``_``."""
    return _NOT_WORD.sub("_", name.lower()).strip("_")


def handoff_target(tool_name: str, agents: Iterable[str] = ()) -> str | None:
    """The agent a tool call named ``tool_name`` hands off to; None when it is no handoff.

    ``transfer_to_research_expert`` hands off to the agent of ``agents`` whose
    :func:`agent_key` is ``research_expert`` (``"Research Expert"``), else to
    ``research_expert`` itself.
    """
    match = _HANDOFF_TOOL.fullmatch(tool_name)
    if match is None:
        return None
    wanted = match.group(1)
    key = agent_key(wanted)
    for agent in agents:
        if agent == wanted or agent_key(agent) == key:
            return agent
    return wanted


def message_agents(messages: Sequence[MessageBase]) -> list[str | None]:
    """The agent of each message, in order.

    An AI message's ``name``; a tool result's is the agent of the AI message whose call it
    answers; None for human and system messages and for AI messages without a name.
    """
    agents: list[str | None] = []
    calling: str | None = None  # the agent whose tool calls are open
    for message in messages:
        if isinstance(message, AIMessage):
            agents.append(message.name)
            calling = message.name if message.tool_calls else None
        elif isinstance(message, ToolMessage):
            agents.append(calling)
        else:
            agents.append(None)
            calling = None
    return agents


def find_handoffs(messages: Sequence[MessageBase], agents: Iterable[str] = ()) -> list[HandoffAt]:
    """The handoffs of a conversation, in order (see the module's description).

    Args:
        messages: The conversation.
        agents: The agents' names known beforehand (a sample's declared agents), so that
            ``transfer_to_research_expert`` names ``"Research Expert"``; the names of the AI
            messages are known too.

    A handoff tool call counts once: when its target speaks next, no change of speaker is
    added. A speaker that changes to someone else than the announced target is a handoff of
    its own, from the agent in control.
    """
    spoken = [m.name for m in messages if isinstance(m, AIMessage) and m.name is not None]
    known = list(dict.fromkeys([*agents, *spoken]))
    found: list[HandoffAt] = []
    current: str | None = None  # the agent in control
    announced: str | None = None  # the target of the last handoff call, until someone speaks
    for index, message in enumerate(messages):
        if not isinstance(message, AIMessage):
            continue
        speaker = message.name
        if speaker is not None:
            if current is not None and speaker != current and speaker != announced:
                found.append(HandoffAt(Handoff(target=speaker, source=current), index, False))
            current, announced = speaker, None
        for call in message.tool_calls or ():
            target = handoff_target(call.name, known)
            if target is not None:
                handoff = Handoff(target=target, source=speaker, args=call.args)
                found.append(HandoffAt(handoff, index, True))
                announced = target
    return found

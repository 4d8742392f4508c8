"""Samples: one conversation (multi-turn) or one prompt/response pair (single-turn) to score."""

from __future__ import annotations

from typing import Any, TypeAlias

from pydantic import BaseModel, ConfigDict, Field, model_validator

from turneval.messages import (
    AIMessage,
    Handoff,
    HandoffAt,
    HumanMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    find_handoffs,
)
from turneval.messages._tool_results import OpenToolCalls

__all__ = ["AgentSpec", "MultiTurnSample", "Sample", "SingleTurnSample", "sample_id"]

_CONFIG = ConfigDict(extra="forbid")


class AgentSpec(BaseModel):
    """One agent of a multi-agent conversation: its name, tools, handoffs and own reference.

    A sample may declare its agents (:attr:`MultiTurnSample.agents`); the AI messages name the
    agent that produced them (:attr:`AIMessage.name <turneval.messages.AIMessage.name>`). The
    rule-based metrics scored ``by_agent=True`` read each agent's own tools and reference
    calls here.

    Attributes:
        name: The agent's name, as its messages give it.
        description: What the agent does (shown to judges).
        tools: Shell-style patterns of the tools it may call (``"search_*"``); None: not
            declared. Per agent, :class:`~turneval.metrics.ToolPermission` allows these, and
            the sample's ``reference_tool_calls`` to these tools are this agent's share.
        handoffs: The agents it may hand off to; None: not declared.
        reference_tool_calls: The calls this agent should make (tool-call and trajectory
            metrics scored ``by_agent=True``).
    """

    model_config = _CONFIG

    name: str = Field(min_length=1)
    description: str | None = None
    tools: list[str] | None = None
    handoffs: list[str] | None = None
    reference_tool_calls: list[ToolCall] | None = None


class SingleTurnSample(BaseModel):
    """One prompt and response, with optional reference, contexts and baseline.

    Attributes:
        user_input: The prompt (Vertex: ``instruction``/``prompt``).
        response: The model's answer (Vertex: ``prediction``).
        reference: The expected answer.
        retrieved_contexts: Passages the answer may draw on (Vertex: ``context``).
        baseline_response: A baseline model's answer, for pairwise judges.
        rubrics: Named grading rubrics for judge metrics.
        metadata: Free-form data carried to the results.
    """

    model_config = _CONFIG

    user_input: str | None = None
    response: str | None = None
    reference: str | None = None
    retrieved_contexts: list[str] | None = None
    baseline_response: str | None = None
    rubrics: dict[str, str] | None = None
    metadata: dict[str, Any] | None = None


class MultiTurnSample(BaseModel):
    """A conversation to score, with what it should have done.

    Validated on construction: ``user_input`` is non-empty, a :class:`SystemMessage` may only
    come first, and every :class:`ToolMessage` follows an :class:`AIMessage` with tool calls
    (or another ToolMessage); when both sides carry ids, ``tool_call_id`` must name one of
    those calls. A violation raises a pydantic ``ValidationError`` naming the message index.

    Attributes:
        user_input: The conversation.
        reference: The outcome the conversation should reach (goal metrics).
        reference_tool_calls: The calls the AI should make (tool-call and trajectory metrics).
        reference_topics: The topics the AI should stay within (topic adherence).
        rubrics: Named grading rubrics for judge metrics.
        metadata: Free-form data carried to the results.
        agents: The agents of a multi-agent conversation, with their tools, handoffs and own
            reference calls (None for a single agent; names must be unique).
        reference_handoffs: The handoffs the agents should make, in order
            (:class:`~turneval.metrics.HandoffAccuracy`).
    """

    model_config = _CONFIG

    user_input: list[Message]
    reference: str | None = None
    reference_tool_calls: list[ToolCall] | None = None
    reference_topics: list[str] | None = None
    rubrics: dict[str, str] | None = None
    metadata: dict[str, Any] | None = None
    agents: list[AgentSpec] | None = None
    reference_handoffs: list[Handoff] | None = None

    @model_validator(mode="before")
    @classmethod
    def _accept_langchain(cls, data: Any) -> Any:
        """Convert LangChain messages in ``user_input`` (as ``from_langchain`` does)."""
        if isinstance(data, dict):
            messages = data.get("user_input")
            if isinstance(messages, (list, tuple)) and any(map(_is_langchain, messages)):
                data = {**data, "user_input": _from_langchain_mixed(list(messages))}
        return data

    @model_validator(mode="after")
    def _check_conversation(self) -> MultiTurnSample:
        messages = self.user_input
        if not messages:
            raise ValueError("user_input must hold at least one message")
        rule = OpenToolCalls()  # the converters' rule too (turneval.messages)
        for index, message in enumerate(messages):
            if isinstance(message, SystemMessage) and index:
                raise ValueError(f"user_input[{index}]: a SystemMessage is only allowed at index 0")
            if isinstance(message, ToolMessage):
                problem = rule.answer(message.tool_call_id, "ToolMessage")
                if problem is not None:
                    raise ValueError(f"user_input[{index}]: {problem}")
            elif isinstance(message, AIMessage):
                rule.ai(message)
            else:
                rule.close()
        if self.agents:
            seen: set[str] = set()
            for index, agent in enumerate(self.agents):
                if agent.name in seen:
                    raise ValueError(
                        f"agents[{index}]: agent name {agent.name!r} is declared twice"
                    )
                seen.add(agent.name)
        return self

    def agent_names(self) -> list[str]:
        """The conversation's agents: those declared, then the other names its AI messages give.

        In that order, each once; empty for a single unnamed agent.
        """
        names = [agent.name for agent in self.agents or ()]
        for message in self.user_input:
            if type(message) is AIMessage and message.name is not None:
                names.append(message.name)
        return list(dict.fromkeys(names))

    def agent(self, name: str) -> AgentSpec | None:
        """The declared agent called ``name``; None when it is not declared."""
        return next((agent for agent in self.agents or () if agent.name == name), None)

    @property
    def handoffs(self) -> list[HandoffAt]:
        """The handoffs made in the conversation (:func:`turneval.messages.find_handoffs`)."""
        return find_handoffs(self.user_input, [agent.name for agent in self.agents or ()])

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The predicted calls: every AIMessage's tool calls, flattened in order."""
        calls: list[ToolCall] = []
        for message in self.user_input:  # a hot path of every tool-call metric
            if type(message) is AIMessage:
                found = message.tool_calls
                if found:
                    calls += found
        return calls

    def pretty_repr(self) -> str:
        """Render the conversation, one message after another, for prompts and reports."""
        return "\n".join(message.pretty_repr() for message in self.user_input)


def _is_langchain(message: Any) -> bool:
    """Whether ``message`` is a LangChain message (checked without importing LangChain)."""
    return any(
        klass.__module__.startswith("langchain_core.") and klass.__name__ == "BaseMessage"
        for klass in type(message).__mro__
    )


def _from_langchain_mixed(messages: list[Any]) -> list[Any]:
    """Convert the LangChain messages of a list, losslessly; other items are left as they are."""
    from turneval.messages import from_langchain, to_langchain

    if all(map(_is_langchain, messages)):
        return from_langchain(messages)
    # Mixed lists: convert every item through LangChain so tool results keep their context.
    native = [m for m in messages if not _is_langchain(m)]
    if all(isinstance(m, (SystemMessage, HumanMessage, AIMessage, ToolMessage)) for m in native):
        return from_langchain([m if _is_langchain(m) else to_langchain([m])[0] for m in messages])
    return messages  # dicts among LangChain messages: pydantic reports the bad item


Sample: TypeAlias = SingleTurnSample | MultiTurnSample
"""Either kind of sample."""


_ID_LENGTH = 40


def sample_id(sample: Sample, position: int) -> str:
    """A readable test id: ``metadata["id"]``, else the first user message, else the position.

    The first user message is shortened to 40 characters, whitespace collapsed.
    """
    metadata = sample.metadata or {}
    if metadata.get("id") is not None:
        return str(metadata["id"])
    if isinstance(sample, MultiTurnSample):
        text = next((m.content for m in sample.user_input if m.type == "human"), "")
    else:
        text = sample.user_input or ""
    text = " ".join(text.split())
    if not text:
        return f"sample{position}"
    return text if len(text) <= _ID_LENGTH else text[: _ID_LENGTH - 3] + "..."

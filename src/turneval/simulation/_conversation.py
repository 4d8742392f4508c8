"""One conversation: the user and the agent take turns until it ends, and its sample.

:func:`converse` plays one (scenario, trial): it asks the user for each turn (a user that ends
the conversation before its first message is asked again), lets the agent answer it, and stops
on the user's word, the scenario's ``max_turns``, the agent's failure or the timeout, keeping
the conversation so far in a :class:`Conversation`. :func:`conversation_sample` makes the
sample of it (the scenario's references, the trial's figures and each turn's timing in
its metadata).
"""

from __future__ import annotations

import time
import uuid
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
from pydantic import ValidationError

from turneval.agent_driver import (
    ToolClock,
    agent_turn,
    agent_usage,
    has_checkpointer,
    recursion_limit,
    timed_turn,
)
from turneval.judge import Usage
from turneval.judge.budget import model_name
from turneval.messages import HumanMessage, Message, SystemMessage
from turneval.provenance import with_turn_timings
from turneval.results import TurnTiming
from turneval.samples import MultiTurnSample
from turneval.simulation._scenarios import Scenario
from turneval.simulation._users import BaseUser, SimulatedUser

__all__ = ["DEFAULT_MAX_STEPS", "Conversation", "StopReason", "conversation_sample", "converse"]

StopReason = Literal["user_done", "max_turns", "agent_error", "timeout"]
"""Why a simulated conversation ended (None in ``metadata`` when the user model failed)."""

DEFAULT_MAX_STEPS = 25
"""Default per-turn step limit: AI messages the agent may produce answering one user turn."""


_OPENING_ATTEMPTS = 3
"""Times a user that says it is done before its first message is asked again for one."""


@dataclass
class Conversation:
    """One simulated trial, as it happened."""

    messages: list[Message] = field(default_factory=list)
    stop_reason: StopReason | None = "user_done"
    error: str | None = None
    error_type: str | None = None
    user_usage: Usage = field(default_factory=Usage)
    agent_usage: Usage = field(default_factory=Usage)
    steps: int = 0
    turns: int = 0
    latency_s: float = 0.0
    thread_id: str | None = None
    timings: list[TurnTiming] = field(default_factory=list)  # each turn answered (issue 49)
    user_model: str | None = None  # the simulated user's model, for its cost (issue 49)


async def _next_text(
    user: BaseUser, scenario: Scenario, convo: Conversation, trial: int, seed: int | None
) -> str | None:
    """The next user message, or None when the conversation is over (reason set)."""
    if convo.turns == 0 and scenario.first_message is not None:
        return scenario.first_message
    if convo.turns >= scenario.max_turns:
        convo.stop_reason = "max_turns"
        return None
    opening = not any(isinstance(m, HumanMessage) for m in convo.messages)
    for _ in range(_OPENING_ATTEMPTS if opening else 1):
        try:
            turn, usage = await user.next_turn(
                scenario,
                list(convo.messages),
                trial=trial,
                seed=None if seed is None else seed + trial,
            )
        except Exception as exc:  # the trial fails, the run goes on
            convo.stop_reason, convo.error_type = None, type(exc).__name__
            convo.error = f"{type(exc).__name__}: the simulated user failed: {exc}"
            return None
        convo.user_usage = convo.user_usage + usage
        if not turn.done:
            return turn.message
        if not opening:
            convo.stop_reason = "user_done"
            return None
    # Done before saying anything, every time asked: the user failed, not the agent.
    convo.stop_reason, convo.error_type = None, "SimulationError"
    convo.error = (
        "SimulationError: the simulated user failed: it ended the conversation before its "
        f"first message ({_OPENING_ATTEMPTS} times asked)"
    )
    return None


async def converse(
    agent: Any,
    scenario: Scenario,
    trial: int,
    user: BaseUser,
    *,
    timeout: float | None,
    max_steps: int,
    seed: int | None,
    base: dict[str, Any] | None = None,
) -> Conversation:
    """Play one trial of ``scenario``: ``user`` and ``agent`` take turns until it ends.

    ``base`` is the caller's LangChain config (callbacks, tags, ``configurable``, ...); the
    trial's ``thread_id`` (a graph with a checkpointer) and its ``scenario_id`` and ``trial``
    metadata are added to it. Nothing raises: a failure of the user, the agent or the clock
    ends the conversation with its reason and error, the messages so far kept.
    """
    convo = Conversation()
    if isinstance(user, SimulatedUser):
        convo.user_model = model_name(user.llm) or None
    stateful = has_checkpointer(agent)
    config: dict[str, Any] = {
        "recursion_limit": recursion_limit(max_steps),  # the step limit counts, not LangGraph's
        **(base or {}),  # the user's config: callbacks, tags, recursion_limit, configurable
        "metadata": {**((base or {}).get("metadata") or {}), "scenario_id": scenario.id},
    }
    config["metadata"]["trial"] = trial
    configurable = dict((base or {}).get("configurable") or {})
    if stateful:  # one thread per trial, never reused by another run
        convo.thread_id = f"turneval-{scenario.id}-{trial}-{uuid.uuid4().hex}"
        configurable["thread_id"] = convo.thread_id
    if configurable:
        config["configurable"] = configurable
    start = time.perf_counter()
    try:
        with anyio.fail_after(timeout) if timeout is not None else nullcontext():
            while (text := await _next_text(user, scenario, convo, trial, seed)) is not None:
                convo.turns += 1
                convo.messages.append(HumanMessage(content=text))
                held = len(convo.messages) - 1 if stateful else 0  # the thread holds the rest
                clock = ToolClock()  # issue 49: each turn timed, for the operational metrics
                try:
                    await agent_turn(
                        agent, convo.messages, config, held=held, max_steps=max_steps, clock=clock
                    )
                    convo.timings.append(timed_turn(clock))
                except Exception as exc:  # the agent's failure is the trial's
                    convo.stop_reason, convo.error_type = "agent_error", "AgentRunError"
                    convo.error = f"{type(exc).__name__}: {exc}"
                    break
    except TimeoutError:
        convo.stop_reason, convo.error_type = "timeout", "TimeoutError"
        convo.error = f"TimeoutError: the conversation did not finish within {timeout:g}s"
    convo.latency_s = time.perf_counter() - start
    convo.agent_usage, convo.steps = agent_usage(convo.messages)
    if convo.error is None and not convo.messages:  # the user failed: no stop reason
        convo.stop_reason, convo.error_type = None, "SimulationError"
        convo.error = "SimulationError: the user ended the conversation before its first message"
    return convo


def conversation_sample(scenario: Scenario, trial: int, convo: Conversation) -> MultiTurnSample:
    """The sample of one played trial: its messages, the scenario's references, its figures.

    An invalid conversation (the agent's fault) is kept as it happened, unvalidated, and the
    trial becomes an ``agent_error`` (``convo`` is updated).
    """
    metadata = {
        **(scenario.metadata or {}),
        "scenario_id": scenario.id,
        "trial": trial,
        "stop_reason": convo.stop_reason,
        "turns": convo.turns,
        "steps": convo.steps,
        "latency_s": convo.latency_s,
        "user_usage": convo.user_usage.to_dict(),
        "agent_usage": convo.agent_usage.to_dict(),
        "error": convo.error,
    }
    if convo.user_model is not None:  # issue 49: the simulated user's cost needs its model
        metadata["user_model"] = convo.user_model
    metadata = with_turn_timings(metadata, convo.timings)
    if convo.thread_id is not None:
        metadata["thread_id"] = convo.thread_id
    messages: list[Message] = convo.messages or [
        SystemMessage(content=f"(no conversation: {convo.error})")
    ]
    fields: dict[str, Any] = {
        "user_input": messages,
        "reference": scenario.reference,
        "reference_tool_calls": scenario.reference_tool_calls,
        "reference_topics": scenario.reference_topics,
        "rubrics": scenario.rubrics,
        "metadata": metadata,
    }
    try:
        return MultiTurnSample(**fields)
    except ValidationError as exc:  # the agent produced an invalid conversation
        if convo.error is None:
            detail = exc.errors(include_url=False)[0]["msg"]
            convo.stop_reason, convo.error_type = "agent_error", "AgentRunError"
            convo.error = f"AgentRunError: the agent's conversation is not valid: {detail}"
            metadata.update(stop_reason=convo.stop_reason, error=convo.error)
        return MultiTurnSample.model_construct(**fields)  # kept as it happened

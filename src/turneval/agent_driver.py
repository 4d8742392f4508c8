"""The agent driver: send a conversation to an agent, turn by turn, and capture what it says.

``EvalTask`` (:mod:`turneval.agents`) replays a sample's human turns through it
(:func:`arun_agent`); the simulation (:mod:`turneval.simulation`) sends each simulated user turn
through it (:func:`agent_turn`). Both build on this module and on nothing of each other.

The agent may be:

* a LangGraph compiled graph whose state has ``messages`` (invoked with ``{"messages": ...}``;
  its turns are streamed, so a failing turn keeps the messages produced before);
* any LangChain ``Runnable`` taking a list of messages (a chat model, a chain, an agent); its
  output may be a message, a list of messages, or a dict with ``messages`` or ``output``;
* any sync or async callable taking the conversation so far (turneval messages) and returning
  the new messages, or the whole conversation (turneval or LangChain messages).

Messages may be objects or dicts: a dict with ``role`` is an OpenAI chat message; a dict with
``type`` is a turneval message's JSON (``{"type": "ai", "content": ..., "tool_calls": [...]}``)
or LangChain's (``messages_to_dict``'s ``{"type": "ai", "data": {...}}`` or a message's
``model_dump()``).
"""

from __future__ import annotations

import inspect
import time
import uuid
from collections.abc import Iterable, Sequence
from contextlib import aclosing, nullcontext
from itertools import groupby
from typing import Any

import anyio
from pydantic import ValidationError

from turneval.errors import AgentRunError, ConfigError
from turneval.messages import (
    AIMessage,
    HumanMessage,
    Message,
    MessageList,
    SystemMessage,
    ToolMessage,
    from_langchain,
    from_openai,
    to_langchain,
)
from turneval.results import AgentRun, ToolTiming, TurnTiming
from turneval.samples import MultiTurnSample
from turneval.usage import Usage

__all__ = [
    "CONTRACT",
    "ToolClock",
    "agent_turn",
    "agent_usage",
    "arun_agent",
    "has_checkpointer",
    "is_graph",
    "recursion_limit",
    "timed_turn",
]


def is_graph(agent: Any) -> bool:
    """Whether ``agent`` is a LangGraph compiled graph (False without langgraph)."""
    try:
        from langgraph.graph.state import CompiledStateGraph
    except ImportError:  # pragma: no cover - langgraph is optional
        return False
    return isinstance(agent, CompiledStateGraph)


CONTRACT = (
    "an agent must return a string, messages (LangChain or turneval messages, or their dicts: "
    "{'type': 'ai', ...} as turneval's JSON, LangChain's messages_to_dict or model_dump write "
    "them, or OpenAI-format {'role': 'assistant', ...}), or a state dict with 'messages'"
)
"""What an agent may return, quoted in the error when it returns something else."""


def _kind(item: Any) -> str:
    if isinstance(item, (SystemMessage, HumanMessage, AIMessage, ToolMessage)):
        return "turneval"
    if isinstance(item, str):
        return "text"
    if isinstance(item, dict):
        if "role" in item:
            return "openai"
        if "type" in item:
            return "typed"
        raise AgentRunError(
            f"the agent returned a message dict with neither 'role' nor 'type' "
            f"(keys: {sorted(map(str, item))}); {CONTRACT}"
        )
    if hasattr(item, "type") and hasattr(item, "additional_kwargs"):
        return "langchain"
    raise AgentRunError(f"the agent returned a list holding {type(item).__name__}; {CONTRACT}")


def _to_turneval(items: Sequence[Any]) -> list[Message]:
    """Messages from a list of any supported kind (each run of one kind converted at once)."""
    converted: list[Message] = []
    for kind, group in groupby(items, key=_kind):
        run = list(group)
        if kind == "turneval":
            converted.extend(run)
        elif kind == "text":
            converted.extend(AIMessage(content=text) for text in run)
        elif kind == "openai":
            converted.extend(from_openai(run))
        elif kind == "typed":
            converted.extend(_from_typed_dicts(run))
        else:
            converted.extend(from_langchain(run))
    return converted


def _from_typed_dicts(items: list[Any]) -> list[Message]:
    """Messages from dicts with ``type``: turneval's own JSON, else LangChain's dicts."""
    try:
        return MessageList.validate_python(items)
    except ValidationError:
        return from_langchain(items)  # its error names the message and the shapes it reads


def _as_messages(output: Any) -> list[Message]:
    """The agent's output as turneval messages, whatever supported shape it has."""
    if output is None:
        raise AgentRunError(f"the agent returned None; {CONTRACT}")
    if isinstance(output, dict):
        if "messages" in output:
            output = output["messages"]
        elif "output" in output:
            return [AIMessage(content=str(output["output"]))]
        elif "role" in output or "type" in output:
            output = [output]
        else:
            raise AgentRunError(
                f"the agent returned a dict without 'messages', 'output', 'role' or 'type' "
                f"(keys: {sorted(output)}); {CONTRACT}"
            )
    if isinstance(output, (list, tuple)):
        return _to_turneval(output)
    if isinstance(output, str) or hasattr(output, "additional_kwargs"):
        return _to_turneval([output])
    if isinstance(output, (SystemMessage, HumanMessage, AIMessage, ToolMessage)):
        return [output]
    raise AgentRunError(f"the agent returned {type(output).__name__}; {CONTRACT}")


def _new_messages(output: Any, history: list[Message]) -> list[Message]:
    """The agent's new messages, from whatever it returned."""
    messages = _as_messages(output)
    prefix = len(history)
    if len(messages) >= prefix and [m.type for m in messages[:prefix]] == [m.type for m in history]:
        if [m.content for m in messages[:prefix]] == [m.content for m in history]:
            return _turns(messages[prefix:])  # the whole conversation came back
    return _turns(messages)


def _turns(messages: list[Message]) -> list[Message]:
    """``messages`` without system messages.

    Instructions an agent adds to its own state (a graph node that injects its prompt) are not
    turns of the conversation it holds.
    """
    if not any(isinstance(message, SystemMessage) for message in messages):
        return messages
    return [message for message in messages if not isinstance(message, SystemMessage)]


def _marked(messages: list[Message]) -> tuple[list[Any], str | None]:
    """``messages`` as LangChain messages, the last given an id to find it in the state again.

    LangGraph keeps a message's id; what follows the sent turn in the returned state is the
    agent's answer, even when the agent trims or rewrites its earlier history.
    """
    converted = to_langchain(messages)
    if not converted or getattr(converted[-1], "id", None) is not None:
        return converted, None
    marker = f"turneval-{uuid.uuid4().hex}"
    converted[-1].id = marker
    return converted, marker


def _after_marker(state: Any, marker: str | None) -> list[Any] | None:
    """The state's messages after the marked one (None: not found, or no marker)."""
    messages = state.get("messages") if marker is not None and isinstance(state, dict) else None
    if not isinstance(messages, list):
        return None
    for position in range(len(messages) - 1, -1, -1):
        if getattr(messages[position], "id", None) == marker:
            return messages[position + 1 :]
    return None


def _graph_messages(state: Any, history: list[Message], marker: str | None) -> list[Message]:
    """A graph's new messages: after the sent turn, else as :func:`_new_messages` finds them."""
    after = _after_marker(state, marker)
    return _turns(_to_turneval(after)) if after is not None else _new_messages(state, history)


def has_checkpointer(agent: Any) -> bool:
    """Whether ``agent`` is a graph that keeps its threads (a checkpointer)."""
    return is_graph(agent) and getattr(agent, "checkpointer", None) not in (None, False)


def _with_thread(agent: Any, config: dict[str, Any] | None) -> dict[str, Any] | None:
    """``config``, with a fresh ``thread_id`` when the graph keeps threads and none is set."""
    if not has_checkpointer(agent):
        return config
    configurable = dict((config or {}).get("configurable") or {})
    if configurable.get("thread_id") is not None:
        return config
    configurable["thread_id"] = f"turneval-{uuid.uuid4().hex}"
    return {**(config or {}), "configurable": configurable}


def recursion_limit(max_steps: int) -> int:
    """LangGraph's ``recursion_limit`` for a per-turn limit of ``max_steps`` AI messages.

    High enough that the step limit, with its clearer error, is what stops a looping agent
    (an agent step and its tool step are two supersteps); never under LangGraph's default.
    """
    return max(25, 4 * max_steps + 4)


def _step_limit(steps: int, max_steps: int) -> AgentRunError:
    return AgentRunError(
        f"the agent took {steps} steps answering one user turn, over the per-turn step limit "
        f"of {max_steps} (max_steps)"
    )


class ToolClock:
    """Times a graph's tool calls from its streamed steps: each tool's result, as it arrives.

    A LangGraph turn is streamed one superstep at a time; a tool result that appears in a step
    took the time since the step before (its call's). Tools run in one step (a ``ToolNode``
    running calls in parallel) each get that step's time. Only graphs are timed this way: an
    agent that answers a turn in one call shows no steps (:attr:`tools` stays None).
    """

    __slots__ = ("_ids", "_last", "started", "tools")

    def __init__(self) -> None:
        """Start the clock at the user's message."""
        self.started = self._last = time.perf_counter()
        self._ids: set[str] = set()
        self.tools: list[ToolTiming] | None = None

    def step(self, tail: Sequence[Any]) -> None:
        """A streamed step whose messages after the user's are ``tail`` (LangChain's)."""
        now = time.perf_counter()
        self.tools = self.tools if self.tools is not None else []
        names = {
            call.get("id"): call.get("name")
            for message in tail
            for call in getattr(message, "tool_calls", None) or ()
            if isinstance(call, dict)
        }
        for message in tail:
            call_id = getattr(message, "tool_call_id", None)
            if getattr(message, "type", None) != "tool" or call_id is None or call_id in self._ids:
                continue
            self._ids.add(call_id)
            name = getattr(message, "name", None) or names.get(call_id) or "(unnamed tool)"
            self.tools.append(ToolTiming(str(name), now - self._last))
        self._last = now


async def _graph_turn(
    agent: Any,
    history: list[Message],
    out: list[Message],
    config: dict[str, Any] | None,
    *,
    held: int,
    max_steps: int | None,
    clock: ToolClock | None = None,
) -> None:
    """Stream one turn of a graph, its new messages kept in ``out`` even when it fails.

    ``held`` is how many of ``history``'s messages the graph's thread already holds; the rest
    are sent. Past ``max_steps`` AI messages the turn is stopped. ``clock`` times its tools.
    """
    state: Any = None
    fresh, marker = _marked(history[held:])
    stream = agent.astream({"messages": fresh}, config=config, stream_mode="values")
    try:
        async with aclosing(stream):
            async for state in stream:
                if max_steps is None and clock is None:
                    continue
                tail = _after_marker(state, marker)
                if tail is None:
                    messages = state.get("messages") if isinstance(state, dict) else None
                    tail = messages[len(history) :] if isinstance(messages, list) else []
                if clock is not None:
                    clock.step(tail)
                if max_steps is None:
                    continue
                steps = sum(getattr(message, "type", None) == "ai" for message in tail)
                if steps > max_steps:
                    raise _step_limit(steps, max_steps)
        if state is None:
            raise AgentRunError(f"the graph returned no state; {CONTRACT}")
    finally:
        if state is not None:
            out[:] = _graph_messages(state, history, marker)


async def agent_turn(
    agent: Any,
    history: list[Message],
    config: dict[str, Any] | None = None,
    *,
    held: int = 0,
    max_steps: int | None = None,
    clock: ToolClock | None = None,
) -> None:
    """Send ``history`` to ``agent``; its new messages are appended, even when it fails.

    A graph's turn is streamed, so a failure (the step limit, LangGraph's recursion limit, an
    exception in a node, a timeout) keeps the messages it produced before; ``held`` is how
    many messages a checkpointed graph's thread already holds (only the rest are sent).
    ``clock`` (a :class:`ToolClock` started at the user's message) times a graph's tool calls.
    Raises the agent's failure, or :class:`AgentRunError` past ``max_steps`` AI messages.
    """
    out: list[Message] = []
    try:
        if is_graph(agent):
            await _graph_turn(
                agent,
                history,
                out,
                config,
                held=held if has_checkpointer(agent) else 0,
                max_steps=max_steps,
                clock=clock,
            )
        else:
            out = await _invoke(agent, history, config)
    finally:
        history.extend(out)
    if max_steps is not None:
        steps = sum(isinstance(message, AIMessage) for message in out)
        if steps > max_steps:
            raise _step_limit(steps, max_steps)


async def _invoke(
    agent: Any, history: list[Message], config: dict[str, Any] | None = None
) -> list[Message]:
    """Send the conversation to a Runnable or a callable; its new messages."""
    if hasattr(agent, "ainvoke"):
        return _new_messages(await agent.ainvoke(to_langchain(history), config=config), history)
    if not callable(agent):
        raise ConfigError(
            f"the agent must be a Runnable, a LangGraph graph or a callable, got {type(agent).__name__}"
        )
    if inspect.iscoroutinefunction(agent) or inspect.iscoroutinefunction(type(agent).__call__):
        output = await agent(list(history))
    else:
        output = await anyio.to_thread.run_sync(agent, list(history), abandon_on_cancel=True)
        if inspect.isawaitable(output):
            output = await output
    return _new_messages(output, history)


def agent_usage(messages: Iterable[Message]) -> tuple[Usage, int]:
    """The token usage and the steps (AI messages) of ``messages``."""
    usage, steps = Usage(), 0
    for message in messages:
        if isinstance(message, AIMessage):
            steps += 1
            meta = (message.metadata or {}).get("usage_metadata") or {}
            usage = usage + Usage(
                int(meta.get("input_tokens", 0)), int(meta.get("output_tokens", 0))
            )
    return usage, steps


async def arun_agent(
    agent: Any,
    sample: MultiTurnSample,
    *,
    timeout: float | None = None,
    multi_turn: bool = True,
    config: dict[str, Any] | None = None,
    max_steps: int | None = None,
) -> AgentRun:
    """Replay ``sample``'s human turns to ``agent`` and capture the conversation.

    A leading system message is kept; with ``multi_turn=False`` only the first human turn is
    sent. ``config`` (a LangChain ``RunnableConfig``) is passed to graphs and Runnables. A
    LangGraph graph with a checkpointer gets a fresh ``thread_id`` (unless ``config`` sets one)
    and, after the first turn, only the new human turn, since its thread keeps the history.
    ``max_steps`` limits the AI messages the agent may produce answering one turn (a graph's
    ``recursion_limit`` is then ``max(25, 4 * max_steps + 4)`` unless ``config`` sets one).
    Never raises for the agent's own failures: they are returned in ``error``, with the
    conversation as far as it went (a graph's failing turn included: its turns are streamed).
    """
    humans = [m for m in sample.user_input if isinstance(m, HumanMessage)]
    if not humans:
        raise AgentRunError("the sample has no human turn to send to the agent")
    turns = humans if multi_turn else humans[:1]
    history: list[Message] = (
        [sample.user_input[0]] if isinstance(sample.user_input[0], SystemMessage) else []
    )
    config = _with_thread(agent, config)
    if max_steps is not None and is_graph(agent) and "recursion_limit" not in (config or {}):
        config = {**(config or {}), "recursion_limit": recursion_limit(max_steps)}
    start = time.perf_counter()
    error = None
    timed: list[TurnTiming] = []
    try:
        with anyio.fail_after(timeout) if timeout is not None else nullcontext():
            held = 0  # messages the agent's thread already holds
            for human in turns:
                history.append(human)
                clock = ToolClock()
                await agent_turn(
                    agent, history, config, held=held, max_steps=max_steps, clock=clock
                )
                timed.append(timed_turn(clock))
                held = len(history)
    except TimeoutError:
        error = f"TimeoutError: the agent did not finish within {timeout:g}s"
    except Exception as exc:  # the agent's failure is the row's, not the run's
        error = f"{type(exc).__name__}: {exc}"
    latency = time.perf_counter() - start
    usage, steps = agent_usage(history)  # the agent's messages: the others are no AI messages
    return AgentRun(history, latency, error, usage, steps, turns=timed)


def timed_turn(clock: ToolClock) -> TurnTiming:
    """The timing of a turn just answered: seconds since ``clock`` started, its tools."""
    tools = None if clock.tools is None else tuple(clock.tools)
    return TurnTiming(time.perf_counter() - clock.started, tools=tools)

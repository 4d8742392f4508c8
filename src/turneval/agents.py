"""Run an agent over a dataset, then score what it did (Vertex AI's ``EvalTask``).

For each sample, its human turns are replayed to the agent (the whole script, turn by turn, or
only the first as a single prompt); the agent's messages become the evaluated conversation,
with the sample's references kept. Every row also gets ``latency_in_seconds``, ``failure``
(0/1, with the error kept), the agent's token usage and its number of steps (AI messages). An
agent that raises, exceeds the timeout or the per-turn step limit gives a failed row, never a
crashed run; the row keeps the conversation as far as it went (a graph's turns are streamed).

The agent may be:

* a LangGraph compiled graph whose state has ``messages`` (invoked with ``{"messages": ...}``);
* any LangChain ``Runnable`` taking a list of messages (a chat model, a chain, an agent); its
  output may be a message, a list of messages, or a dict with ``messages`` or ``output``;
* any sync or async callable taking the conversation so far (turneval messages) and returning
  the new messages, or the whole conversation (turneval or LangChain messages).
"""

from __future__ import annotations

import inspect
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import aclosing, nullcontext
from functools import partial
from itertools import groupby
from os import PathLike
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import ValidationError

from turneval.aggregate import RunAggregate
from turneval.dataset import EvaluationDataset
from turneval.errors import AgentRunError, ConfigError
from turneval.judge import SQLiteCache, Usage
from turneval.messages import (
    AIMessage,
    HumanMessage,
    Message,
    SystemMessage,
    ToolMessage,
    from_langchain,
    from_openai,
    to_langchain,
)
from turneval.metrics import Evaluator
from turneval.metrics.base import run_sync
from turneval.pipeline import RunOptions, arun, score_row
from turneval.provenance import Provenance
from turneval.ratelimit import RateLimit, RateLimiter
from turneval.results import AgentRun, EvaluationResult, SampleResult
from turneval.runner import check_judges, resolve_metrics
from turneval.samples import MultiTurnSample, Sample

if TYPE_CHECKING:
    from collections.abc import Mapping

    from turneval.sequential import StopEarly
    from turneval.simulation import BaseUser, Scenario
    from turneval.store import RunStore

__all__ = ["AgentRun", "EvalTask", "arun_agent"]


def _is_graph(agent: Any) -> bool:
    try:
        from langgraph.graph.state import CompiledStateGraph
    except ImportError:  # pragma: no cover - langgraph is optional
        return False
    return isinstance(agent, CompiledStateGraph)


CONTRACT = (
    "an agent must return a string, messages (LangChain, turneval or OpenAI-format dicts), or a "
    "state dict with 'messages'"
)
"""What an agent may return, quoted in the error when it returns something else."""


def _kind(item: Any) -> str:
    if isinstance(item, (SystemMessage, HumanMessage, AIMessage, ToolMessage)):
        return "turneval"
    if isinstance(item, str):
        return "text"
    if isinstance(item, dict):
        return "openai"
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
        else:
            converted.extend(from_langchain(run))
    return converted


def _as_messages(output: Any) -> list[Message]:
    """The agent's output as turneval messages, whatever supported shape it has."""
    if output is None:
        raise AgentRunError(f"the agent returned None; {CONTRACT}")
    if isinstance(output, dict):
        if "messages" in output:
            output = output["messages"]
        elif "output" in output:
            return [AIMessage(content=str(output["output"]))]
        elif "role" in output:
            output = [output]
        else:
            raise AgentRunError(
                f"the agent returned a dict without 'messages', 'output' or 'role' "
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


def _has_checkpointer(agent: Any) -> bool:
    return _is_graph(agent) and getattr(agent, "checkpointer", None) not in (None, False)


def _with_thread(agent: Any, config: dict[str, Any] | None) -> dict[str, Any] | None:
    """``config``, with a fresh ``thread_id`` when the graph keeps threads and none is set."""
    if not _has_checkpointer(agent):
        return config
    configurable = dict((config or {}).get("configurable") or {})
    if configurable.get("thread_id") is not None:
        return config
    configurable["thread_id"] = f"turneval-{uuid.uuid4().hex}"
    return {**(config or {}), "configurable": configurable}


def _recursion_limit(max_steps: int) -> int:
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


async def _graph_turn(
    agent: Any,
    history: list[Message],
    out: list[Message],
    config: dict[str, Any] | None,
    *,
    held: int,
    max_steps: int | None,
) -> None:
    """Stream one turn of a graph, its new messages kept in ``out`` even when it fails.

    ``held`` is how many of ``history``'s messages the graph's thread already holds; the rest
    are sent. Past ``max_steps`` AI messages the turn is stopped.
    """
    state: Any = None
    fresh, marker = _marked(history[held:])
    stream = agent.astream({"messages": fresh}, config=config, stream_mode="values")
    try:
        async with aclosing(stream):
            async for state in stream:
                if max_steps is None:
                    continue
                tail = _after_marker(state, marker)
                if tail is None:
                    messages = state.get("messages") if isinstance(state, dict) else None
                    tail = messages[len(history) :] if isinstance(messages, list) else []
                steps = sum(getattr(message, "type", None) == "ai" for message in tail)
                if steps > max_steps:
                    raise _step_limit(steps, max_steps)
        if state is None:
            raise AgentRunError(f"the graph returned no state; {CONTRACT}")
    finally:
        if state is not None:
            out[:] = _graph_messages(state, history, marker)


async def _agent_turn(
    agent: Any,
    history: list[Message],
    config: dict[str, Any] | None = None,
    *,
    held: int = 0,
    max_steps: int | None = None,
) -> None:
    """Send ``history`` to ``agent``; its new messages are appended, even when it fails.

    A graph's turn is streamed, so a failure (the step limit, LangGraph's recursion limit, an
    exception in a node, a timeout) keeps the messages it produced before; ``held`` is how
    many messages a checkpointed graph's thread already holds (only the rest are sent).
    Raises the agent's failure, or :class:`AgentRunError` past ``max_steps`` AI messages.
    """
    out: list[Message] = []
    try:
        if _is_graph(agent):
            await _graph_turn(
                agent,
                history,
                out,
                config,
                held=held if _has_checkpointer(agent) else 0,
                max_steps=max_steps,
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


def _usage(messages: Iterable[Message]) -> tuple[Usage, int]:
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
    if max_steps is not None and _is_graph(agent) and "recursion_limit" not in (config or {}):
        config = {**(config or {}), "recursion_limit": _recursion_limit(max_steps)}
    start = time.perf_counter()
    error = None
    try:
        with anyio.fail_after(timeout) if timeout is not None else nullcontext():
            held = 0  # messages the agent's thread already holds
            for human in turns:
                history.append(human)
                await _agent_turn(agent, history, config, held=held, max_steps=max_steps)
                held = len(history)
    except TimeoutError:
        error = f"TimeoutError: the agent did not finish within {timeout:g}s"
    except Exception as exc:  # the agent's failure is the row's, not the run's
        error = f"{type(exc).__name__}: {exc}"
    latency = time.perf_counter() - start
    usage, steps = _usage(history)  # the agent's messages: the others are no AI messages
    return AgentRun(history, latency, error, usage, steps)


class EvalTask:
    """A dataset and metrics; ``evaluate(runnable=agent)`` runs the agent first (Vertex AI).

    The run options have the names and defaults of :class:`~turneval.pipeline.RunOptions`
    (validated there), except ``timeout`` here: Vertex AI's name for the agent step's limit,
    RunOptions' ``agent_timeout`` (either may be given); the scoring timeout per sample is
    :meth:`evaluate`'s ``timeout``, beside its ``fail_on_error`` and ``on_row``.

    Args:
        dataset: Multi-turn samples whose human turns are replayed to the agent, with their
            references (an :class:`EvaluationDataset` or an iterable of samples), or
            :class:`~turneval.simulation.Scenario` objects (or their dicts) played by a
            simulated user.
        metrics: Evaluator objects or names.
        llm: Default judge for judged metrics.
        cache: A :class:`~turneval.llms.SQLiteCache` (or its path) for judge answers.
        max_concurrency: Samples (agent runs) in flight at once.
        max_llm_concurrency: Judge requests in flight at once.
        timeout: Seconds allowed for one agent run (all its turns).
        agent_timeout: The same, by its :class:`~turneval.pipeline.RunOptions` name.
        multi_turn: Replay every human turn (True) or only the first (a single prompt).
        show_progress: A tqdm progress bar; None shows it only on a terminal.
        config: A LangChain ``RunnableConfig`` passed to the graph or Runnable on every run
            (``configurable``, ``callbacks``, ``recursion_limit``, ...), simulated
            conversations included.
        config_fn: ``config_fn(sample) -> RunnableConfig``, a config per sample (instead of
            ``config``; not with scenarios). A graph with a checkpointer gets a fresh
            ``thread_id`` per sample unless the config sets one.
        details: Keep each result's ``details``.
        aggregates: Run-level figure sets (:class:`~turneval.aggregate.RunAggregate`) computed
            once the rows are in: ``result.aggregates``.
    """

    def __init__(
        self,
        dataset: EvaluationDataset | Iterable[Sample] | Iterable[Scenario | Mapping[str, Any]],
        metrics: Iterable[Evaluator | str],
        *,
        llm: Any = None,
        cache: SQLiteCache | str | PathLike[str] | None = None,
        max_concurrency: int = 16,
        max_llm_concurrency: int = 8,
        timeout: float | None = None,
        multi_turn: bool = True,
        show_progress: bool | None = None,
        config: dict[str, Any] | None = None,
        config_fn: Callable[[Sample], dict[str, Any] | None] | None = None,
        details: bool = True,
        agent_timeout: float | None = None,
        aggregates: Sequence[RunAggregate] = (),
    ) -> None:
        """Check the configuration now; nothing runs before :meth:`evaluate`."""
        if config is not None and config_fn is not None:
            raise ConfigError("pass config= or config_fn=, not both")
        if timeout is not None and agent_timeout is not None:
            raise ConfigError("pass timeout= or agent_timeout= (the same limit), not both")
        self.config, self.config_fn = config, config_fn
        self.options = RunOptions(
            llm=llm,
            cache=cache,
            max_concurrency=max_concurrency,
            max_llm_concurrency=max_llm_concurrency,
            agent_timeout=timeout if agent_timeout is None else agent_timeout,
            show_progress=show_progress,
            details=details,
            aggregates=aggregates,
        )
        from turneval.simulation import _as_scenarios  # it builds on this module

        items = dataset if isinstance(dataset, EvaluationDataset) else list(dataset)
        self.scenarios = _as_scenarios(items)  # validated now, before any model call
        self.dataset = EvaluationDataset.coerce([] if self.scenarios else items)  # type: ignore[arg-type]
        self.metrics = resolve_metrics(metrics)
        check_judges(self.metrics, llm)
        self.multi_turn = multi_turn

    @property
    def llm(self) -> Any:
        """The default judge."""
        return self.options.llm

    @property
    def cache(self) -> SQLiteCache | None:
        """The judge cache."""
        return self.options.cache

    @property
    def timeout(self) -> float | None:
        """Seconds allowed for one agent run."""
        return self.options.agent_timeout

    async def _run_agent(
        self, index: int, sample: Sample, agent: Any, max_steps: int | None = None
    ) -> AgentRun:
        """The agent step of one sample: its run, with the error that fails the row if any."""
        if not isinstance(sample, MultiTurnSample):
            raise ConfigError(
                f"sample {index}: an agent needs multi-turn samples (human turns to replay)"
            )
        try:
            config = self.config_fn(sample) if self.config_fn is not None else self.config
        except Exception as exc:  # the row fails, the run goes on
            config_error = f"AgentRunError: config_fn failed: {type(exc).__name__}: {exc}"
            return AgentRun(list(sample.user_input), 0.0, config_error)
        return await arun_agent(
            agent,
            sample,
            timeout=self.timeout,
            multi_turn=self.multi_turn,
            config=config,
            max_steps=max_steps,
        )

    async def _row(
        self, index: int, sample: Sample, agent: Any, options: RunOptions, max_steps: int
    ) -> SampleResult:
        if agent is None:
            return await score_row(index, sample, self.metrics, options)
        run = await self._run_agent(index, sample, agent, max_steps)
        produced = sample.model_copy(update={"user_input": run.messages})  # references kept
        if run.error is None:
            try:  # the captured conversation must be a valid one (tool results after calls, ...)
                MultiTurnSample.model_validate(produced.model_dump())
            except ValidationError as exc:
                detail = exc.errors(include_url=False)[0]["msg"]
                run.error = f"AgentRunError: the agent's conversation is not valid: {detail}"
        provenance = Provenance("agent", run)
        return await score_row(index, produced, self.metrics, options, provenance=provenance)

    async def aevaluate(
        self,
        runnable: Any = None,
        *,
        user: BaseUser | None = None,
        trials: int = 1,
        seed: int | None = None,
        max_steps: int = 25,
        success_thresholds: Mapping[str, float] | None = None,
        timeout: float | None = None,
        fail_on_error: bool | float = False,
        on_row: Callable[[SampleResult], None] | None = None,
        rate_limit: RateLimit | RateLimiter | None = None,
        stop_early: StopEarly | bool | None = None,
        store: RunStore | str | PathLike[str] | None = None,
    ) -> EvaluationResult:
        """Run ``runnable`` on every sample (if given), then score; one row per sample, in order.

        Over scenarios, ``user`` (a :class:`~turneval.simulation.SimulatedUser` or
        :class:`~turneval.simulation.ScriptedUser`) talks with the agent ``trials`` times per
        scenario (one row per trial; see :func:`turneval.simulation.asimulate` for ``seed``).
        ``max_steps`` is the per-turn step limit (AI messages answering one user turn), in
        replayed and simulated conversations alike: past it the row fails with
        ``AgentRunError``, its conversation kept as far as it went. ``success_thresholds``
        sets, per metric, the value counted as a success in ``summary()``'s pass^k and pass@k
        (default 1.0).
        ``timeout`` (seconds to score one sample), ``fail_on_error`` and ``on_row`` are the
        :class:`~turneval.pipeline.RunOptions` of the same names.
        ``rate_limit`` (a :class:`~turneval.ratelimit.RateLimit`) paces the judge's requests
        (and the simulated user's) to the provider's quota, as in :func:`turneval.aevaluate`.
        ``stop_early`` (True, or a :class:`~turneval.sequential.StopEarly`) runs each
        scenario's trials in turn and stops once the trials left cannot change its verdict
        for any metric (True: all ``trials`` must succeed, so the first failure settles it);
        ``result.early_stops`` counts the conversations saved, and the summary keeps only the
        figures the stop leaves exact (see :mod:`turneval.sequential`).
        ``store`` (a :class:`~turneval.store.RunStore`, or its URL or path) keeps the run,
        each row written as it finishes.
        """
        options = self.options.replace(
            timeout=timeout,
            fail_on_error=fail_on_error,
            on_row=on_row,
            seed=seed,
            rate_limit=rate_limit,
            store=store,
        )
        if self.scenarios is not None or user is not None or trials != 1 or stop_early:
            from turneval.simulation import _evaluate_scenarios

            return await _evaluate_scenarios(
                self,
                runnable,
                options,
                user=user,
                trials=trials,
                max_steps=max_steps,
                success_thresholds=success_thresholds,
                stop_early=stop_early,
            )
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise ConfigError(f"max_steps must be an integer >= 1, got {max_steps!r}")
        samples = self.dataset.samples
        return await arun(
            len(samples),
            lambda index: self._row(index, samples[index], runnable, options, max_steps),
            self.metrics,
            options,
            name="EvalTask",
        )

    def evaluate(
        self,
        runnable: Any = None,
        *,
        user: BaseUser | None = None,
        trials: int = 1,
        seed: int | None = None,
        max_steps: int = 25,
        success_thresholds: Mapping[str, float] | None = None,
        timeout: float | None = None,
        fail_on_error: bool | float = False,
        on_row: Callable[[SampleResult], None] | None = None,
        rate_limit: RateLimit | RateLimiter | None = None,
        stop_early: StopEarly | bool | None = None,
        store: RunStore | str | PathLike[str] | None = None,
    ) -> EvaluationResult:
        """Sync form of :meth:`aevaluate`."""
        return run_sync(
            partial(
                self.aevaluate,
                runnable,
                user=user,
                trials=trials,
                seed=seed,
                max_steps=max_steps,
                success_thresholds=success_thresholds,
                timeout=timeout,
                fail_on_error=fail_on_error,
                on_row=on_row,
                rate_limit=rate_limit,
                stop_early=stop_early,
                store=store,
            )
        )

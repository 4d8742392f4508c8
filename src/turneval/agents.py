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

The agent is driven by :mod:`turneval.agent_driver` (which the simulation uses too); over
scenarios, :mod:`turneval.simulation` plays the user.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from os import PathLike
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from turneval._deprecation import deprecated, renamed_keywords
from turneval._sync import sync_form
from turneval.agent_driver import arun_agent
from turneval.aggregate import RunAggregate
from turneval.dataset import EvaluationDataset
from turneval.errors import ConfigError
from turneval.judge import SQLiteCache
from turneval.metrics import Evaluator
from turneval.options import RunOptions
from turneval.pipeline import arun, score_row
from turneval.provenance import Provenance, with_turn_timings
from turneval.ratelimit import RateLimit, RateLimiter
from turneval.results import AgentRun, EvaluationResult, SampleResult
from turneval.runner import check_judges, resolve_metrics
from turneval.samples import MultiTurnSample, Sample
from turneval.simulation import BaseUser, Scenario, as_scenarios, evaluate_scenarios

if TYPE_CHECKING:
    from turneval.runs import RunSink
    from turneval.sequential import StopEarly
    from turneval.store import RunStore

__all__ = ["AgentRun", "EvalTask", "arun_agent"]

_TIMEOUT_MEANS = "timeout= is the scoring limit everywhere; the agent's is agent_timeout="


class EvalTask:
    """A dataset and metrics; ``evaluate(runnable=agent)`` runs the agent first (Vertex AI).

    The run options have the names and defaults of :class:`~turneval.options.RunOptions`
    (validated there): ``agent_timeout`` limits the agent step here, and the scoring timeout
    per sample is :meth:`evaluate`'s ``timeout``, beside its ``fail_on_error`` and ``on_row``.
    ``timeout=`` here, Vertex AI's name for the agent's limit, still works as
    ``agent_timeout``, with a :class:`DeprecationWarning` (``timeout`` means scoring
    everywhere).

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
        agent_timeout: Seconds allowed for one agent run (all its turns) or one simulated
            conversation; past it the row fails with ``TimeoutError`` and is not scored.
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

    @renamed_keywords({"timeout": "agent_timeout"}, why=_TIMEOUT_MEANS)
    def __init__(
        self,
        dataset: EvaluationDataset | Iterable[Sample] | Iterable[Scenario | Mapping[str, Any]],
        metrics: Iterable[Evaluator | str],
        *,
        llm: Any = None,
        cache: SQLiteCache | str | PathLike[str] | None = None,
        max_concurrency: int = 16,
        max_llm_concurrency: int = 8,
        agent_timeout: float | None = None,
        multi_turn: bool = True,
        show_progress: bool | None = None,
        config: dict[str, Any] | None = None,
        config_fn: Callable[[Sample], dict[str, Any] | None] | None = None,
        details: bool = True,
        aggregates: Sequence[RunAggregate] = (),
    ) -> None:
        """Check the configuration now; nothing runs before :meth:`evaluate`."""
        if config is not None and config_fn is not None:
            raise ConfigError("pass config= or config_fn=, not both")
        self.config, self.config_fn = config, config_fn
        self.options = RunOptions.from_arguments(locals())
        items = dataset if isinstance(dataset, EvaluationDataset) else list(dataset)
        self.scenarios = as_scenarios(items)  # validated now, before any model call
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
    def agent_timeout(self) -> float | None:
        """Seconds allowed for one agent run."""
        return self.options.agent_timeout

    @property
    def timeout(self) -> float | None:
        """Deprecated: :attr:`agent_timeout` (``timeout`` means the scoring limit)."""
        deprecated(
            f"EvalTask.timeout is deprecated: read EvalTask.agent_timeout ({_TIMEOUT_MEANS})"
        )
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
            timeout=self.agent_timeout,
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
        produced = sample.model_copy(  # references kept; the turns' timing recorded (issue 49)
            update={
                "user_input": run.messages,
                "metadata": (
                    with_turn_timings(sample.metadata, run.turns) if run.turns else sample.metadata
                ),
            }
        )
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
        sinks: Sequence[RunSink] = (),
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
        :class:`~turneval.options.RunOptions` of the same names.
        ``rate_limit`` (a :class:`~turneval.ratelimit.RateLimit`) paces the judge's requests
        (and the simulated user's) to the provider's quota, as in :func:`turneval.aevaluate`.
        ``stop_early`` (True, or a :class:`~turneval.sequential.StopEarly`) runs each
        scenario's trials in turn and stops once the trials left cannot change its verdict
        for any metric (True: all ``trials`` must succeed, so the first failure settles it);
        ``result.early_stops`` counts the conversations saved, and the summary keeps only the
        figures the stop leaves exact (see :mod:`turneval.sequential`).
        ``store`` (a :class:`~turneval.store.RunStore`, or its URL or path) keeps the run,
        each row written as it finishes; ``sinks`` (:class:`~turneval.runs.RunSink`) are
        handed the rows too.
        """
        options = self.options.replace(
            timeout=timeout,
            fail_on_error=fail_on_error,
            on_row=on_row,
            seed=seed,
            rate_limit=rate_limit,
            store=store,
            sinks=sinks,
        )
        if self.scenarios is not None or user is not None or trials != 1 or stop_early:
            if self.scenarios is None:
                raise ConfigError(
                    "user= and trials= need scenarios: build the EvalTask from Scenario objects"
                )
            return await evaluate_scenarios(
                runnable,
                self.scenarios,
                self.metrics,
                options,
                config=self.config,
                config_fn=self.config_fn,
                multi_turn=self.multi_turn,
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

    evaluate = sync_form(aevaluate)
    """Sync form of :meth:`aevaluate` (same arguments): run the agent, then score."""

"""Trials: every scenario played ``trials`` times, each on a fresh world, scored or not.

:func:`asimulate` and :func:`simulate` return the conversations; :func:`evaluate_scenarios` is
``EvalTask.aevaluate`` over scenarios (simulate, then score each conversation as it ends).
Both go through one simulation step of the run pipeline, which gives each trial a fresh copy
of its scenario's world and records the world's states on the sample, runs the trials of a
scenario one after another when told to stop early, and hands each row to the pipeline.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from contextlib import nullcontext
from os import PathLike
from typing import TYPE_CHECKING, Any

import anyio

from turneval._deprecation import renamed_keywords
from turneval._sync import sync_form
from turneval.dataset import EvaluationDataset
from turneval.errors import ConfigError, EvaluationAbortedError
from turneval.judge import JudgeRun, SQLiteCache, Usage, judge_run
from turneval.metrics import Evaluator
from turneval.options import RunOptions
from turneval.pipeline import finish_recording, recording, run_rows, score_row
from turneval.provenance import Provenance
from turneval.ratelimit import RateLimit, RateLimiter
from turneval.results import AgentRun, EvaluationResult, SampleResult, Trial, trial_outcome
from turneval.samples import MultiTurnSample
from turneval.sequential import StopEarly, TrialSequencer, stop_rule
from turneval.simulation._conversation import (
    DEFAULT_MAX_STEPS,
    Conversation,
    conversation_sample,
    converse,
)
from turneval.simulation._scenarios import Scenario, check_scenarios
from turneval.simulation._users import BaseUser
from turneval.worlds import ToolWorld, bind_worlds

if TYPE_CHECKING:
    from turneval.store import RunStore

__all__ = ["asimulate", "evaluate_scenarios", "simulate"]


def _trial_world(scenario: Scenario, trial: int) -> ToolWorld | None:
    """A fresh copy of the scenario's world for one trial; its faults seeded per trial."""
    if scenario.world is None:
        return None
    seed = f"{scenario.world.seed}|{scenario.id}|{trial}"
    return scenario.world.fresh(scenario.initial_state, seed=seed)


async def _world_record(
    scenario: Scenario, world: ToolWorld, convo: Conversation, timeout: float | None
) -> Any:
    """The trial's world record: states, reference end state, differences, calls, faults.

    A state that cannot be recorded (nested too deep, the reference actions hung past
    ``timeout``) fails this trial alone, with the reason, as ``WorldStateError``.
    """
    try:
        reference = None
        if scenario.world is not None and scenario.reference_tool_calls is not None:
            with anyio.fail_after(timeout) if timeout is not None else nullcontext():
                reference = await scenario.world.areplay(
                    scenario.reference_tool_calls, scenario.initial_state
                )
        return world.report(reference)
    except Exception as exc:  # this trial's world only: the run goes on
        reason = str(exc) or type(exc).__name__
        if isinstance(exc, TimeoutError):
            reason = f"its reference actions did not finish within {timeout:g}s"
        error = f"WorldStateError: the world's state could not be recorded: {reason}"
        if convo.error is None:
            convo.error_type, convo.error = "WorldStateError", error
        return {"name": world.name, "seed": world.seed, "error": error}


def _check_run(user: Any, trials: int, max_steps: int) -> None:
    if not isinstance(user, BaseUser):
        raise ConfigError(
            "user must be a SimulatedUser(llm), a ScriptedUser(turns) or another BaseUser, got "
            f"{type(user).__name__}"
        )
    if trials < 1 or max_steps < 1:
        raise ConfigError(f"trials and max_steps must be >= 1, got {trials} and {max_steps}")


_TIMEOUT_MEANS = "timeout= is the scoring limit everywhere; the agent's is agent_timeout="


@renamed_keywords({"timeout": "agent_timeout"}, why=_TIMEOUT_MEANS)
async def asimulate(
    agent: Any,
    scenarios: Iterable[Scenario | Mapping[str, Any]],
    *,
    user: BaseUser,
    trials: int = 1,
    max_concurrency: int = 16,
    agent_timeout: float | None = None,
    cache: SQLiteCache | str | PathLike[str] | None = None,
    seed: int | None = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    show_progress: bool | None = None,
    rate_limit: RateLimit | RateLimiter | None = None,
    config: dict[str, Any] | None = None,
    stop_early: StopEarly | None = None,
    store: RunStore | str | PathLike[str] | None = None,
) -> EvaluationDataset:
    """Let ``user`` talk with ``agent`` in every scenario, ``trials`` times each.

    Every scenario is validated before any model call. Each (scenario, trial) yields one
    :class:`~turneval.MultiTurnSample` in input order (scenario by scenario, trials in order)
    with the scenario's references and ``metadata`` holding ``scenario_id``, ``trial``,
    ``stop_reason``, ``turns``, ``steps``, ``latency_s``, ``user_usage``, ``agent_usage`` and
    ``error`` (None unless the trial failed). A failing trial never stops the others.

    Args:
        agent: What ``EvalTask`` runs: a LangGraph graph (with a checkpointer, each trial gets
            its own ``thread_id`` and only the new user turn is sent), a Runnable, or a
            sync/async callable over the message list.
        scenarios: :class:`Scenario` objects or dicts.
        user: A :class:`SimulatedUser`, :class:`ScriptedUser` or another :class:`BaseUser`.
        trials: Independent conversations per scenario.
        max_concurrency: Conversations in flight at once.
        agent_timeout: Seconds allowed for one whole conversation (``timeout=``, its old
            name, still works with a :class:`DeprecationWarning`).
        cache: A :class:`~turneval.llms.SQLiteCache` (or its path) for the user model's
            answers; the trial is
            part of the key, so a re-run replays every conversation with no user-model call
            (given a deterministic agent).
        seed: Trial t of the user model runs with seed ``seed + t`` (where the model has a
            ``seed`` parameter, e.g. ``ChatOpenAI``).
        max_steps: Per-turn step limit: AI messages the agent may produce for one user turn.
        show_progress: A tqdm progress bar (None: only on a terminal).
        rate_limit: The user model provider's quota
            (:class:`~turneval.ratelimit.RateLimit`): its requests are paced and its requests
            in flight adapt to 429s.
        config: A LangChain ``RunnableConfig`` passed to the graph or Runnable on every call
            (``callbacks``, ``recursion_limit``, ``configurable``, ...); each trial's
            ``thread_id`` and the ``scenario_id`` and ``trial`` metadata are added to it.
        stop_early: A :class:`~turneval.sequential.StopEarly` with a ``success`` test: a
            scenario's trials run one after another and stop once its verdict is settled;
            the last trial run of such a scenario has ``skipped_trials`` (the trials not run)
            in its ``metadata``.
        store: A run store (:class:`~turneval.store.RunStore`, or its URL or path): the
            conversations are kept there (rows without metrics), each as it ends.
    """
    rule = stop_rule(stop_early)
    if rule is not None and rule.success is None:
        raise ConfigError(
            "simulate(stop_early=...) needs StopEarly(success=...): without metrics, whether a "
            "conversation succeeded is yours to say (EvalTask.evaluate uses its metrics)"
        )
    options = RunOptions(
        max_concurrency=max_concurrency,
        agent_timeout=agent_timeout,
        cache=cache,
        seed=seed,
        show_progress=show_progress,
        rate_limit=rate_limit,
        store=store,
    )
    checked = check_scenarios(scenarios)
    options, recorder = recording(options, [], name="simulate")
    with recorder or nullcontext():
        rows, _ = await _simulated_rows(
            agent,
            checked,
            options,
            user=user,
            trials=trials,
            max_steps=max_steps,
            config=config,
            stop_early=rule,
        )
    if recorder is not None:
        recorder.finish({"samples": len(rows)})
    return EvaluationDataset([row.sample for row in rows if row.sample is not None])


simulate = sync_form(asimulate)
"""Sync form of :func:`asimulate` (same arguments): the conversations, one per trial."""


def _thresholds(given: Mapping[str, float] | None, names: list[str]) -> dict[str, float]:
    """``success_thresholds`` checked before any run: metrics of the run, finite numbers."""
    thresholds: dict[str, float] = {}
    for name, value in (given or {}).items():
        if name not in names:
            raise ConfigError(
                f"success_thresholds names {name!r}, which is not a metric of this run "
                f"(its metrics: {', '.join(names)})"
            )
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
        ):
            raise ConfigError(f"success_thresholds[{name!r}] must be a number, got {value!r}")
        thresholds[name] = float(value)
    return thresholds


async def _simulated_rows(
    agent: Any,
    scenarios: list[Scenario],
    options: RunOptions,
    *,
    user: BaseUser,
    trials: int,
    max_steps: int,
    metrics: Sequence[Evaluator] | None = None,
    judge: JudgeRun | None = None,
    aborted: list[str] | None = None,
    config: dict[str, Any] | None = None,
    stop_early: StopEarly | None = None,
    thresholds: Mapping[str, float] | None = None,
    sequencer: list[TrialSequencer] | None = None,
) -> tuple[list[SampleResult], Usage]:
    """Simulate every (scenario, trial); with ``metrics``, score each conversation as it ends.

    The simulation step of the run pipeline. Returns the rows in input order and the user
    model's usage over the run. With ``stop_early``, a scenario's trials run in turn and stop
    once settled (a trial's success: its metrics against ``thresholds``, else the rule's
    ``success``); the trials tracker is appended to ``sequencer``.
    """
    _check_run(user, trials, max_steps)
    user.check(scenarios)
    if agent is None:
        raise ConfigError("simulating needs an agent: evaluate(runnable=agent, ...)")
    user_run = JudgeRun(  # the simulated user shares the run's limiter with the judge
        max_concurrency=options.max_concurrency,
        cache=options.cache,
        rate_limiter=options.rate_limit,
    )
    timeout, seed = options.agent_timeout, options.seed
    ids = [str(scenario.id) for scenario in scenarios]
    order = None if stop_early is None else TrialSequencer(stop_early, ids, trials)
    skipped: set[int] = set()

    async def produce(index: int) -> SampleResult:
        if order is None:
            row = await conversation(index // trials, index % trials, index)
            return row
        number, trial = order.trial_of(index)
        position = number * trials + trial  # the row's place in the full grid
        if await order.before(number, trial):
            skipped.add(position)
            return SampleResult(position, None)
        row = await conversation(number, trial, position)
        order.done(number, trial, _outcomes(row))
        return row

    def _outcomes(row: SampleResult) -> dict[str, bool | None]:
        if metrics is not None:
            limits = thresholds or {}
            return {m.name: trial_outcome(row, m.name, limits.get(m.name, 1.0)) for m in metrics}
        sample, check = row.sample, stop_early.success if stop_early else None
        if not isinstance(sample, MultiTurnSample) or check is None:
            return {"success": None}
        known = row.trial is not None and row.trial.stop_reason is not None
        return {"success": bool(check(sample)) if known else None}

    async def conversation(number: int, trial: int, index: int) -> SampleResult:
        scenario = scenarios[number]
        world = _trial_world(scenario, trial)
        with judge_run(user_run), bind_worlds(world) if world else nullcontext():
            convo = await converse(
                agent,
                scenario,
                trial,
                user,
                timeout=timeout,
                max_steps=max_steps,
                seed=seed,
                base=config,
            )
        record = None if world is None else await _world_record(scenario, world, convo, timeout)
        sample = conversation_sample(scenario, trial, convo)
        if record is not None and sample.metadata is not None:
            sample.metadata["world"] = record
        played = Trial(str(scenario.id), trial, convo.stop_reason)
        if metrics is None:
            return SampleResult(index, sample, trial=played, source="simulation")
        run = AgentRun(
            convo.messages,
            convo.latency_s,
            convo.error,
            convo.agent_usage,
            convo.steps,
            convo.error_type or "AgentRunError",
            by_agent=convo.stop_reason in ("agent_error", "timeout"),  # not the user's failure
            turns=convo.timings,
        )
        provenance = Provenance("simulation", run, played)
        return await score_row(index, sample, metrics, options, provenance=provenance)

    if metrics is None:  # simulation alone: no row to abort on (on_row: the store's, if any)
        options = options.replace(fail_on_error=False)
    elif order is not None and options.on_row is not None:  # a trial not run is no row
        report = options.on_row
        options = options.replace(on_row=lambda row: None if row.index in skipped else report(row))
    rows = await run_rows(
        len(scenarios) * trials, produce, options, judge=judge or user_run, aborted=aborted
    )
    if order is not None:
        rows = _without_skipped(rows, skipped, order)
        if sequencer is not None:
            sequencer.append(order)
    return rows, user_run.usage


def _without_skipped(
    rows: list[SampleResult], skipped: set[int], order: TrialSequencer
) -> list[SampleResult]:
    """The rows run, in grid order; a stopped scenario's last one notes its trials not run."""
    kept = sorted((row for row in rows if row.index not in skipped), key=lambda r: r.index)
    last = {row.trial.scenario_id: row for row in kept if row.trial is not None}
    for scenario_id, count in order.report().skipped.items():
        sample = last[scenario_id].sample
        if sample is not None and sample.metadata is not None:
            sample.metadata["skipped_trials"] = count
    return kept


async def evaluate_scenarios(
    agent: Any,
    scenarios: list[Scenario],
    metrics: Sequence[Evaluator],
    options: RunOptions,
    *,
    config: dict[str, Any] | None,
    config_fn: Any,
    multi_turn: bool,
    user: BaseUser | None,
    trials: int,
    max_steps: int,
    success_thresholds: Mapping[str, float] | None,
    stop_early: StopEarly | bool | None = None,
) -> EvaluationResult:
    """``EvalTask.aevaluate`` over scenarios: simulate, then score each conversation.

    ``config``, ``config_fn`` and ``multi_turn`` are the task's (the last two are refused:
    they describe a replay). The judge and the simulated user share the options' one
    ``rate_limit``.
    """
    if user is None:
        raise ConfigError(
            "scenarios need a user: evaluate(runnable=agent, user=SimulatedUser(llm)) "
            "or user=ScriptedUser([...])"
        )
    thresholds = _thresholds(success_thresholds, [metric.name for metric in metrics])
    from turneval.metrics._votes import with_vote_options

    # judged metrics voting several times flag trials whose votes straddle the threshold
    bars = {metric.name: thresholds.get(metric.name, 1.0) for metric in metrics}
    metrics = with_vote_options(metrics, thresholds=bars)
    if config_fn is not None:
        raise ConfigError(
            "config_fn takes a sample: with scenarios, pass one config= for every conversation"
        )
    if not multi_turn:
        raise ConfigError(
            "multi_turn=False replays only a sample's first turn: a simulated user talks until "
            "it is done (limit it with the scenario's max_turns)"
        )
    judge, aborted, sequenced = options.judge_run(), list[str](), list[TrialSequencer]()
    options, recorder = recording(options, metrics, name="EvalTask")
    with recorder or nullcontext():
        rows, user_usage = await _simulated_rows(
            agent,
            scenarios,
            options,
            user=user,
            trials=trials,
            max_steps=max_steps,
            metrics=metrics,
            judge=judge,
            aborted=aborted,
            config=config,
            stop_early=stop_rule(stop_early),
            thresholds=thresholds,
            sequencer=sequenced,
        )
        result = EvaluationResult(rows, [metric.name for metric in metrics], judge.usage)
        if sequenced:
            result.early_stops = sequenced[0].report()
        result.metrics = metrics
        result.success_thresholds = thresholds
        result.user_usage = user_usage
    finish_recording(recorder, result, aborted)
    if aborted:
        raise EvaluationAbortedError(aborted[0], result=result)
    return result

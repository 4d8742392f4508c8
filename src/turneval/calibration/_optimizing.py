"""Make a judge agree with people: search its instructions and examples, measure on held-out rows.

:func:`optimize` splits the labeled rows (stratified by label, seeded) into optimisation and
validation rows; GEPA (the ``gepa`` package, the ``optimize`` extra) searches the judge's
instructions and worked examples on the optimisation rows only, reflecting on the judge's own
explanations of the rows it got wrong; the starting judge, the optimised one and the few-shot
baseline (``align``'s rule) are then measured on the validation rows, with bootstrap intervals
and the paired difference. Every model request goes through the judge cache (a rerun after a
crash pays for nothing twice) and a hard budget (:class:`~turneval.calibration.Budget`).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import anyio.from_thread
import anyio.to_thread

from turneval._sync import sync_form
from turneval.calibration._budget import Budget, BudgetGuard
from turneval.calibration._candidates import EXAMPLES, INSTRUCTIONS, CandidateScorer
from turneval.calibration._measuring import measure_arms, splits, statistic_on, task_of
from turneval.calibration._outcome import OptimizationReport
from turneval.calibration._planning import plan_optimization, requests_of
from turneval.calibration._search import JudgeAdapter, choose_examples
from turneval.calibration._statistics import require_extra
from turneval.calibration._units import Task
from turneval.errors import ConfigError

if TYPE_CHECKING:
    from turneval.judge import SQLiteCache
    from turneval.results import Prices

__all__ = ["aoptimize", "optimize"]


class _Loop:
    """Calls into the caller's event loop from GEPA's worker thread."""

    def call(self, function: Any, *args: Any) -> Any:
        return anyio.from_thread.run(function, *args)


class _Log:
    """GEPA's log, kept instead of printed."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def log(self, message: str) -> None:
        self.lines.append(str(message))


class _Stopper:
    """GEPA's stop condition: the rounds, or a budget a next round could pass."""

    def __init__(
        self, guard: BudgetGuard, rounds: int, round_calls: int, per_call: float, reserve: float
    ) -> None:
        self.guard, self.rounds, self.round_calls = guard, rounds, round_calls
        self.per_call, self.reserve = per_call, reserve
        self.reasons: list[str] = []

    def __call__(self, gepa_state: Any) -> bool:
        if gepa_state.i + 1 >= self.rounds:
            self.reasons.append(f"{self.rounds} rounds")
        left = self.guard.remaining_calls()
        if left is not None and left < self.round_calls:
            self.reasons.append(f"budget ({left} calls left, a round may take {self.round_calls})")
        limit, cost = self.guard.budget.cost, self.guard.cost()
        if limit is not None and cost is not None:
            if cost + self.per_call * self.round_calls > limit - self.reserve:
                self.reasons.append(f"budget ({cost:.4f} spent)")
        return bool(self.reasons)


def _best(
    task: Task, scorer: CandidateScorer, select: list[int], candidates: list[dict[str, str]]
) -> dict[str, str]:
    """The candidate agreeing best on the selection rows (ties: the earlier, the start first)."""
    best = candidates[0]
    best_value = statistic_on(task, select, scorer.outcomes[scorer.key(best)])
    for candidate in candidates[1:]:
        known = scorer.outcomes[scorer.key(candidate)]
        if not all(r in known for r in select):
            continue
        value = statistic_on(task, select, known)
        if value is not None and (best_value is None or value > best_value):
            best, best_value = candidate, value
    return best


def _cache(cache: SQLiteCache | str | Path | None) -> SQLiteCache:
    """The judge cache: the one given, or a new temporary one."""
    from turneval.judge import SQLiteCache

    if cache is None:
        return SQLiteCache(Path(tempfile.mkdtemp(prefix="turneval-optimize-")) / "cache.sqlite")
    return cache if isinstance(cache, SQLiteCache) else SQLiteCache(cache)


async def aoptimize(
    metric: Any,
    labels: Sequence[Any],
    *,
    llm: Any = None,
    reflection_llm: Any = None,
    budget: Budget | int | None = None,
    validation: float = 0.3,
    seed: int = 0,
    rounds: int = 20,
    examples: int = 4,
    minibatch: int = 8,
    cache: SQLiteCache | str | Path | None = None,
    engine: str = "live",
    prices: Prices | None = None,
    max_concurrency: int = 8,
    batch_dir: str | Path | None = None,
    poll_interval: float = 30.0,
    resamples: int = 1000,
) -> OptimizationReport:
    """Search a judge's instructions and examples to agree with human labels, measured honestly.

    The labeled rows are split, stratified by label and seeded, into optimisation rows and
    ``validation`` rows. GEPA searches on the optimisation rows only (half of them to reflect
    on and draw examples from, half to choose between candidates); the starting judge, the
    best candidate and the few-shot baseline (``align``'s rule) are then scored on the
    validation rows. The report gives each one's agreement with its bootstrap interval, the
    paired difference with its interval, and calls a change an improvement only when that
    interval excludes 0; agreement on the optimisation rows is shown as training agreement.

    Args:
        metric: A judged metric (built-in or a user's ``JudgedMetric``); its ``judge_config``,
            if any, is where the search starts.
        labels: ``(sample, label)`` or ``(sample, label, reason)`` tuples, at least 10: a label
            on the metric's scale, or a dict of item labels (``{"message_4": "irrelevant"}``)
            for judges with per-item verdicts.
        llm: The judge model (default: the metric's).
        reflection_llm: The model that proposes instructions (default: ``llm``).
        budget: Most model calls (an int), or a :class:`Budget` in calls and/or money.
        validation: Share of rows held out, in (0, 1).
        seed: Seed of the split, the search and the bootstrap.
        rounds: Search rounds at most.
        examples: Most worked examples a candidate shows (0: instructions only).
        minibatch: Rows a round reflects on.
        cache: The judge cache (a :class:`~turneval.judge.SQLiteCache` or its path; default a
            temporary one). With a cache kept on disk, a rerun after a crash pays for nothing
            it already asked.
        engine: ``"live"``, or ``"batch"``: requests the cache lacks are first sent through the
            provider's batch API.
        prices: The models' prices, for the cost.
        max_concurrency: Samples scored at once.
        batch_dir: Folder for the batch runs (default: a temporary folder).
        poll_interval: Seconds between polls of a batch run.
        resamples: Bootstrap resamples for the intervals.

    Raises:
        ConfigError: the metric is not judged, fewer than 10 rows, a label off the scale, no
            judge model, or a budget too small for the measurement.
    """
    require_extra()
    try:
        from gepa.api import optimize as gepa_optimize
    except ImportError as exc:  # pragma: no cover - the extra is installed in tests
        raise ImportError(
            "optimize needs the optimize extra: pip install 'turneval[optimize]'"
        ) from exc
    from turneval.judge import Judge

    task = task_of(metric, labels)
    if engine not in ("live", "batch"):
        raise ConfigError(f"engine must be 'live' or 'batch', got {engine!r}")
    if examples < 0 or rounds < 0 or minibatch < 1:
        raise ConfigError("examples and rounds must be >= 0, minibatch >= 1")
    model = llm if llm is not None else metric.llm
    if model is None:
        raise ConfigError(
            f"optimize needs the judge model: pass llm=... (metric {metric.name!r} has none)"
        )
    spend = Budget.of(budget)
    if prices is not None and spend.prices is None:
        spend = Budget(spend.calls, spend.cost, prices, spend.output_tokens)
    guard = BudgetGuard(spend)
    judge_llm = guard.watch(model, "judge")
    reflection = Judge(
        guard.watch(reflection_llm if reflection_llm is not None else model, "reflection")
    )
    cache = _cache(cache)
    optimisation, held, train, select = splits(task, validation, seed)
    final = 3 * requests_of(task, held)[0] + requests_of(task, train)[0]
    plan = plan_optimization(metric, labels, validation=validation, seed=seed, prices=spend.prices)
    reserve_cost = final * (plan.cost or 0.0) / max(1, plan.total_calls)
    if spend.calls is not None and spend.calls < final + plan.start_calls:
        raise ConfigError(
            f"a budget of {spend.calls} calls is below the {final + plan.start_calls} the "
            f"measurement needs ({plan.start_calls} for the starting judge on the optimisation "
            f"rows, {final} on the validation rows): raise it, or label fewer rows"
        )
    guard.reserve(final, reserve_cost)
    base = metric.judge_config
    scorer = CandidateScorer(
        task,
        judge_llm,
        cache,
        base=base,
        max_concurrency=max_concurrency,
        engine=engine,
        guard=guard,
        batch_dir=None if batch_dir is None else Path(batch_dir),
        poll_interval=poll_interval,
    )
    seed_candidate = {INSTRUCTIONS: "" if base is None else base.instructions}
    if examples:
        seed_candidate[EXAMPLES] = "[]"
    start = await scorer.score(seed_candidate, optimisation)
    adapter = JudgeAdapter(scorer, _Loop(), reflection, examples=examples)
    log = _Log()
    per_row = plan.requests_per_row
    round_calls = round(per_row * (2 * min(minibatch, len(train)) + len(select))) + 1
    per_call = (plan.cost or 0.0) / max(1, plan.total_calls)
    stop = _Stopper(guard, rounds, round_calls, per_call, reserve_cost)
    result = None
    if rounds and len(task.classes) > 1:
        result = await anyio.to_thread.run_sync(
            partial(
                gepa_optimize,
                seed_candidate=seed_candidate,
                trainset=train,
                valset=select,
                adapter=cast(Any, adapter),
                reflection_minibatch_size=min(minibatch, len(train)),
                perfect_score=1.0,
                skip_perfect_score=True,
                module_selector="round_robin",
                stop_callbacks=[stop],
                logger=log,
                seed=seed,
                raise_on_exception=True,
                display_progress_bar=False,
                track_best_outputs=False,
            )
        )
    candidates = [seed_candidate] if result is None else [dict(c) for c in result.candidates]
    best = _best(task, scorer, select, candidates)
    # the final measurement: the reserve is spent now
    guard.releasing = True
    aligned = {INSTRUCTIONS: seed_candidate[INSTRUCTIONS]}
    aligned[EXAMPLES] = json.dumps(choose_examples(task, start, [], examples or 4))
    report = await measure_arms(
        task,
        optimisation,
        held,
        guard,
        model,
        before=(scorer, seed_candidate),
        after=(scorer, best),
        baseline=(scorer, aligned),
        seed=seed,
        resamples=resamples,
    )
    done = "no search rounds" if result is None else "done"
    report.stopped = stop.reasons[0] if stop.reasons else done
    report.candidates = len(candidates)
    report.rounds = adapter.proposals.asked
    report.notes += [f"reflection failed: {why}" for why in adapter.proposals.failed[:3]]
    report.config = report.config.model_copy(update={"report": report.summary()})
    return report


optimize = sync_form(aoptimize)
"""Sync form of :func:`aoptimize` (same arguments): search a judge to agree with human labels, measured honestly."""

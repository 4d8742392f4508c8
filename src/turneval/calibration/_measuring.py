"""The measurement: two judges (and a baseline) on validation rows, with the paired difference.

:func:`measure` compares a judge configuration you have (written by hand, by another tool, or
an earlier ``optimize``) with the metric's own judge, on the same split :func:`optimize` makes:
their agreement on the validation rows with intervals, the paired difference, and agreement on
the optimisation rows shown as training agreement.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turneval._sync import sync_form
from turneval.calibration._budget import Budget, BudgetGuard
from turneval.calibration._candidates import EXAMPLES, INSTRUCTIONS, CandidateScorer, RowOutcome
from turneval.calibration._outcome import OptimizationReport
from turneval.calibration._paired import agreement_value, paired_difference
from turneval.calibration._statistics import agreement_statistics, require_extra
from turneval.calibration._units import Task, labeled_rows, stratified_split
from turneval.errors import ConfigError

if TYPE_CHECKING:
    from turneval.calibration._report import AgreementReport
    from turneval.judge import JudgeConfig, SQLiteCache
    from turneval.results import Prices

__all__ = ["ameasure", "measure", "measure_arms", "statistic_on"]

Arm = tuple[CandidateScorer, dict[str, str]]


def _report(
    task: Task, rows: Sequence[int], outcomes: dict[int, RowOutcome], seed: int
) -> AgreementReport | None:
    """The agreement statistics of one judge on ``rows`` (None when it failed on them all)."""
    human, judge, skipped = [], [], 0
    classes = task.classes
    for r in rows:
        labels = dict(task.rows[r].units())
        for item, verdict in outcomes[r].verdicts.items():
            if verdict is None or verdict not in classes:
                skipped += 1
                continue
            human.append(classes.index(labels[item]))
            judge.append(classes.index(verdict))
    if not human:
        return None
    if task.per_item:  # categories: their positions
        scale = tuple(float(i) for i in range(len(classes)))
    else:
        scale = tuple(float(v) for v in classes)
    return agreement_statistics(
        task.metric.name,
        [scale[h] for h in human],
        [scale[j] for j in judge],
        scale,
        skipped=skipped,
        seed=seed,
    )


def _positions(
    task: Task, rows: Sequence[int], *arms: dict[int, RowOutcome]
) -> tuple[list[int], list[list[int]]]:
    """Class positions of the labels and of each arm's verdicts, on units every arm judged."""
    human: list[int] = []
    judged: list[list[int]] = [[] for _ in arms]
    for r in rows:
        for item, label in task.rows[r].units():
            verdicts = [arm[r].verdicts.get(item) for arm in arms]
            if any(v is None or v not in task.classes for v in verdicts):
                continue
            human.append(task.classes.index(label))
            for column, verdict in zip(judged, verdicts, strict=True):
                assert verdict is not None
                column.append(task.classes.index(verdict))
    return human, judged


def statistic_on(task: Task, rows: Sequence[int], outcomes: dict[int, RowOutcome]) -> float | None:
    """The task's statistic of one judge on ``rows`` (None where undefined)."""
    human, (judge,) = _positions(task, rows, outcomes)
    return agreement_value(task.statistic, human, judge, len(task.classes))


async def measure_arms(
    task: Task,
    optimisation: Sequence[int],
    held: Sequence[int],
    guard: BudgetGuard,
    model: Any,
    *,
    before: Arm,
    after: Arm,
    baseline: Arm | None = None,
    seed: int = 0,
    resamples: int = 1000,
) -> OptimizationReport:
    """Score the arms on the validation rows, and report them.

    ``before`` and ``after`` are scored on the optimisation rows too (training agreement);
    ``after`` gives the report's configuration.
    """
    from turneval.manifest import judge_model

    arms: dict[str, dict[int, RowOutcome]] = {}
    named = [("before", before), ("after", after)] + ([("align", baseline)] if baseline else [])
    for name, (scorer, candidate) in named:
        arms[name] = {o.row: o for o in await scorer.score(candidate, held)}
    trained = [
        {o.row: o for o in await scorer.score(candidate, optimisation)}
        for scorer, candidate in (before, after)
    ]
    k = len(task.classes)
    human, (first, second) = _positions(task, held, arms["before"], arms["after"])
    difference = paired_difference(
        task.statistic, human, first, second, k, seed=seed, resamples=resamples
    )
    versus = None
    if baseline is not None:
        human, (first, third) = _positions(task, held, arms["before"], arms["align"])
        versus = paired_difference(
            task.statistic, human, first, third, k, seed=seed, resamples=resamples
        )
    base = before[0].base
    config = (
        after[0]
        .metric(after[1])
        .judge_config.model_copy(
            update={
                "metric": task.metric.name,
                "model": judge_model(model),
                "scale": None if task.per_item else tuple(float(v) for v in task.classes),
                "labels_digest": task.digest(),
                "parent": None if base is None else base.digest,
            }
        )
    )
    judge_spent = guard.spent.get("judge")
    reflection_spent = guard.spent.get("reflection")
    report = OptimizationReport(
        metric=task.metric.name,
        statistic=task.statistic,
        config=config,
        base=base,
        optimisation_rows=[task.rows[r].ref for r in optimisation],
        validation_rows=[task.rows[r].ref for r in held],
        before=_report(task, held, arms["before"], seed),
        after=_report(task, held, arms["after"], seed),
        difference=difference,
        baseline=None if baseline is None else _report(task, held, arms["align"], seed),
        baseline_difference=versus,
        training_before=statistic_on(task, optimisation, trained[0]),
        training_after=statistic_on(task, optimisation, trained[1]),
        judge_calls=0 if judge_spent is None else judge_spent.calls,
        reflection_calls=0 if reflection_spent is None else reflection_spent.calls,
        cached=sum(
            {
                id(s): s.cached for s, _ in [before, after, *([baseline] if baseline else [])]
            }.values()
        ),
        usage=guard.usage,
        cost=guard.cost(),
        budget=str(guard.budget),
    )
    refused = sum(s.refused for s in guard.spent.values())
    if refused:
        report.notes.append(f"{refused} requests refused by the budget (never sent)")
    failed = sum(1 for arm in arms.values() for o in arm.values() if None in o.verdicts.values())
    if failed:
        report.notes.append(f"{failed} validation verdicts failed (left out of the statistics)")
    report.config = config.model_copy(update={"report": report.summary()})
    return report


def splits(
    task: Task, validation: float, seed: int
) -> tuple[list[int], list[int], list[int], list[int]]:
    """Optimisation and validation rows; the optimisation rows' reflection and selection halves."""
    strata = [row.stratum for row in task.rows]
    optimisation, held = stratified_split(strata, validation, seed)
    if len(optimisation) >= 4:
        part = stratified_split([strata[i] for i in optimisation], 0.5, seed + 1)
        return (
            optimisation,
            held,
            [optimisation[i] for i in part[0]],
            [optimisation[i] for i in part[1]],
        )
    return optimisation, held, optimisation, optimisation


MIN_ROWS = 10
"""Labeled rows an optimisation (or a measurement) needs at least."""


def task_of(metric: Any, labels: Any) -> Task:
    """The task of a judged metric and its labels (checked)."""
    from turneval.metrics import JudgedMetric

    name = getattr(metric, "name", type(metric).__name__)
    if not isinstance(metric, JudgedMetric):
        raise ConfigError(f"metric {name!r} is not judged by an LLM: only judged metrics optimise")
    rows = labeled_rows(labels)
    if len(rows) < MIN_ROWS:
        raise ConfigError(
            f"optimize needs at least {MIN_ROWS} labeled rows of {name!r}, got {len(rows)}"
        )
    return Task.of(metric, rows)


async def ameasure(
    metric: Any,
    labels: Sequence[Any],
    config: JudgeConfig,
    *,
    llm: Any = None,
    validation: float = 0.3,
    seed: int = 0,
    cache: SQLiteCache | str | Path | None = None,
    budget: Budget | int | None = None,
    prices: Prices | None = None,
    max_concurrency: int = 8,
    resamples: int = 1000,
) -> OptimizationReport:
    """Measure a judge configuration against the metric's own judge, as :func:`optimize` does.

    The labels are split as :func:`optimize` splits them (same ``validation`` and ``seed``:
    same rows); both judges are scored on the validation rows (agreement with intervals, the
    paired difference, an improvement only when its interval excludes 0) and on the
    optimisation rows (training agreement: a configuration fitted to those rows gains there
    and not on the validation rows, and the report says so).

    Args:
        metric: The judged metric (its ``judge_config``, if any, is the starting judge).
        labels: The labeled rows, as :func:`optimize` takes them.
        config: The judge configuration to measure.
        llm: The judge model (default: the metric's).
        validation: Share of rows held out.
        seed: Seed of the split and the bootstrap.
        cache: The judge cache (default: a temporary one).
        budget: Most model calls, or a :class:`Budget`.
        prices: Prices, for the cost.
        max_concurrency: Samples scored at once.
        resamples: Bootstrap resamples.

    Raises:
        ConfigError: as :func:`optimize`.
    """
    from turneval.judge import SQLiteCache

    require_extra()
    task = task_of(metric, labels)
    model = llm if llm is not None else metric.llm
    if model is None:
        raise ConfigError(f"measure needs the judge model: pass llm=... ({metric.name!r} has none)")
    spend = Budget.of(budget)
    if prices is not None and spend.prices is None:
        spend = Budget(spend.calls, spend.cost, prices, spend.output_tokens)
    guard = BudgetGuard(spend)
    judge_llm = guard.watch(model, "judge")
    if cache is None:
        cache = SQLiteCache(Path(tempfile.mkdtemp(prefix="turneval-measure-")) / "cache.sqlite")
    elif not isinstance(cache, SQLiteCache):
        cache = SQLiteCache(cache)
    optimisation, held, _, _ = splits(task, validation, seed)
    base = metric.judge_config
    options: dict[str, Any] = {"max_concurrency": max_concurrency, "guard": guard}
    starting = CandidateScorer(task, judge_llm, cache, base=base, **options)
    candidate = CandidateScorer(task, judge_llm, cache, base=config, **options)
    plain = {INSTRUCTIONS: "" if base is None else base.instructions, EXAMPLES: "[]"}
    given = {INSTRUCTIONS: config.instructions, EXAMPLES: "[]"}
    report = await measure_arms(
        task,
        optimisation,
        held,
        guard,
        model,
        before=(starting, plain),
        after=(candidate, given),
        seed=seed,
        resamples=resamples,
    )
    report.stopped = "measured (no search)"
    return report


measure = sync_form(ameasure)
"""Sync form of :func:`ameasure` (same arguments): a judge configuration measured against the metric's own judge."""

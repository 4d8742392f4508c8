"""optimize against a prompt-sensitive fake judge: the gain the construction fixes, and no more.

A fake model shows the mechanics (the search finds the rule the construction hides, the report
measures it on rows the search never saw), not the gain a real model gets.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score

from turneval.calibration import Budget, measure, optimize, plan_optimization
from turneval.calibration._candidates import CandidateScorer
from turneval.errors import ConfigError
from turneval.judge import JudgeConfig, SQLiteCache
from turneval.metrics import AgentGoalAccuracyWithoutReference
from turneval.results import Prices

from ._judges import KINDS, RULE, fake_judge, fake_reflection, judge_verdict, rows

COUNTS = {"done": 24, "refused": 15, "failed": 12, "noise": 9}


def kind_of_row(labels: list[Any], ref: str) -> str:
    """The kind of the labeled row ``ref`` (its sample's metadata)."""
    return str((labels[int(ref)][0].metadata or {})["kind"])


def expected_kappas(labels: list[Any], refs: list[str]) -> tuple[float, float]:
    """Validation kappa of the fake judge without and with the rule, from the construction."""
    kinds = [kind_of_row(labels, ref) for ref in refs]
    human = [KINDS[kind][0] for kind in kinds]
    before = [int(kind == "done") for kind in kinds]  # refused rows counted as achieved: wrong
    before = [1 if kind == "refused" else b for kind, b in zip(kinds, before, strict=True)]
    after = [int(kind == "done") for kind in kinds]  # the rule: refused rows are failures
    return (
        float(cohen_kappa_score(human, before)),
        float(cohen_kappa_score(human, after)),
    )


def test_the_fake_judge_follows_its_rule() -> None:
    question = "# The case to judge\n" + KINDS["refused"][1]
    assert judge_verdict("system", question) is True
    assert judge_verdict("system\n" + RULE, question) is False
    assert judge_verdict("system\n" + RULE, "# The case to judge\n" + KINDS["noise"][1]) is False


def test_optimisation_raises_validation_kappa_by_what_the_construction_fixes() -> None:
    labels = rows(COUNTS)
    judge, reflection = fake_judge(), fake_reflection()
    report = optimize(
        AgentGoalAccuracyWithoutReference(),
        labels,
        llm=judge,
        reflection_llm=reflection,
        seed=1,
        rounds=6,
        resamples=500,
    )
    kinds = [kind_of_row(labels, ref) for ref in report.validation_rows]
    assert kinds.count("refused") >= 3  # the seed's split holds rows the rule fixes
    assert not set(report.validation_rows) & set(report.optimisation_rows)
    assert len(report.validation_rows) == round(len(labels) * 0.3)
    before, after = expected_kappas(labels, report.validation_rows)
    assert report.statistic == "kappa"
    assert report.before is not None and report.after is not None
    assert report.before.kappa == pytest.approx(before)
    assert report.after.kappa == pytest.approx(after)
    assert report.difference.difference == pytest.approx(after - before)
    assert report.improved and report.difference.interval is not None
    assert report.difference.interval[0] > 0
    assert RULE in report.config.instructions
    assert report.config.metric == "agent_goal_accuracy_without_reference"
    assert report.config.report is not None and report.config.report["improved"] is True
    text = str(report)
    assert "improvement on the validation rows" in text
    assert "training agreement (optimisation rows, not evidence)" in text
    assert report.judge_calls == judge.calls and report.reflection_calls == reflection.calls
    # the baseline (examples only) cannot fix a rule the fake judge only reads as instructions
    assert report.baseline_difference is not None
    assert report.baseline_difference.difference == pytest.approx(0.0)


def test_a_memorising_candidate_gains_on_training_rows_only_and_the_report_says_so() -> None:
    labels = rows(COUNTS)
    metric = AgentGoalAccuracyWithoutReference()
    # an optimiser that memorised: its candidate names every optimisation row that is a failure
    split = measure(metric, labels, JudgeConfig(), llm=fake_judge(), seed=1, resamples=50)
    memorised = JudgeConfig(
        instructions="\n".join(
            f"[case {ref}] is a failure."
            for ref in split.optimisation_rows
            if kind_of_row(labels, ref) == "refused"
        )
    )
    report = measure(metric, labels, memorised, llm=fake_judge(), seed=1, resamples=500)
    assert report.validation_rows == split.validation_rows
    assert report.training_before is not None and report.training_after is not None
    assert report.training_after > report.training_before
    assert report.difference.difference == pytest.approx(0.0)
    assert not report.improved and report.memorised
    assert "agreement rose on the optimisation rows only" in report.verdict
    assert "not an improvement" in str(report)


def test_the_search_does_not_keep_a_memorising_candidate() -> None:
    # the reflection model names the cases it is shown; candidates are chosen on other rows
    report = optimize(
        AgentGoalAccuracyWithoutReference(),
        rows(COUNTS),
        llm=fake_judge(),
        reflection_llm=fake_reflection(memorise=True),
        seed=1,
        rounds=6,
        examples=0,
        resamples=200,
    )
    assert report.candidates > 1  # GEPA kept memorising candidates...
    assert "[case " not in report.config.instructions  # ...and the selection rows refused them
    assert not report.improved


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(extra=st.integers(min_value=0, max_value=150), seed=st.integers(min_value=0, max_value=3))
def test_the_budget_is_never_exceeded(extra: int, seed: int) -> None:
    labels = rows({"done": 8, "refused": 6, "failed": 4, "noise": 2})
    metric = AgentGoalAccuracyWithoutReference()
    plan = plan_optimization(metric, labels, seed=seed)
    budget = plan.start_calls + plan.final_calls + extra
    judge, reflection = fake_judge(), fake_reflection()
    report = optimize(
        metric,
        labels,
        llm=judge,
        reflection_llm=reflection,
        budget=budget,
        seed=seed,
        rounds=8,
        resamples=50,
    )
    assert judge.calls + reflection.calls <= budget  # counted at the models themselves
    assert report.judge_calls + report.reflection_calls == judge.calls + reflection.calls
    assert report.before is not None and report.after is not None  # the reserve was kept


def test_a_budget_below_the_measurement_is_refused_before_any_call() -> None:
    judge = fake_judge()
    with pytest.raises(ConfigError, match="budget of 5 calls is below"):
        optimize(AgentGoalAccuracyWithoutReference(), rows(COUNTS), llm=judge, budget=5)
    assert judge.calls == 0


def test_a_money_budget_is_kept() -> None:
    labels = rows({"done": 8, "refused": 6, "failed": 4, "noise": 2})
    prices = Prices(1000.0, 1000.0)  # a call of ~100 input + 20 output tokens costs ~0.12
    judge, reflection = fake_judge(), fake_reflection()
    budget = Budget(cost=12.0, prices=prices, output_tokens=20)
    report = optimize(
        AgentGoalAccuracyWithoutReference(),
        labels,
        llm=judge,
        reflection_llm=reflection,
        budget=budget,
        rounds=8,
        resamples=50,
    )
    assert report.cost is not None and report.cost <= 12.0
    assert report.cost == pytest.approx((judge.calls + reflection.calls) * 0.12)


class Crash(BaseException):
    """A process killed mid-search (not an error a row would record)."""


def crashed_by(error: BaseException) -> bool:
    """Whether ``error`` is the crash, or an exception group holding it."""
    if isinstance(error, Crash):
        return True
    return any(crashed_by(inner) for inner in getattr(error, "exceptions", ()))


def test_a_crash_mid_search_resumes_without_paying_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    labels = rows({"done": 10, "refused": 8, "failed": 6, "noise": 4})
    metric = AgentGoalAccuracyWithoutReference()
    options: dict[str, Any] = {"seed": 2, "rounds": 6, "resamples": 50}
    whole_judge, whole_reflection = fake_judge(), fake_reflection()
    whole = optimize(
        metric,
        labels,
        llm=whole_judge,
        reflection_llm=whole_reflection,
        cache=SQLiteCache(tmp_path / "fresh.sqlite"),
        **options,
    )
    total = whole_judge.calls + whole_reflection.calls

    scored = 0
    score = CandidateScorer.score

    async def crashing(self: CandidateScorer, candidate: Any, rows: Any) -> Any:
        nonlocal scored
        scored += 1
        if scored == 6:  # mid-search: the process dies between two evaluations
            raise Crash
        return await score(self, candidate, rows)

    cache = tmp_path / "kept.sqlite"
    first_judge, first_reflection = fake_judge(), fake_reflection()
    monkeypatch.setattr(CandidateScorer, "score", crashing)
    with pytest.raises(BaseException) as crashed:
        optimize(
            metric,
            labels,
            llm=first_judge,
            reflection_llm=first_reflection,
            cache=SQLiteCache(cache),
            **options,
        )
    monkeypatch.setattr(CandidateScorer, "score", score)
    assert crashed_by(crashed.value)
    paid_first = first_judge.calls + first_reflection.calls
    assert 0 < paid_first < total
    again_judge, again_reflection = fake_judge(), fake_reflection()
    again = optimize(
        metric,
        labels,
        llm=again_judge,
        reflection_llm=again_reflection,
        cache=SQLiteCache(cache),
        **options,
    )
    assert again_judge.calls + again_reflection.calls == total - paid_first
    assert again.config.digest == whole.config.digest
    assert again.difference == whole.difference


def test_the_config_file_round_trips_and_a_metric_loads_it(tmp_path: Path) -> None:
    report = optimize(
        AgentGoalAccuracyWithoutReference(),
        rows(COUNTS),
        llm=fake_judge(),
        reflection_llm=fake_reflection(),
        seed=1,
        rounds=4,
        resamples=50,
    )
    path = report.config.save(tmp_path / "judge.json")
    loaded = JudgeConfig.load(path)
    assert loaded == report.config and loaded.digest == report.config.digest
    assert json.loads(path.read_text())["format"] == "turneval.judge_config"
    metric = AgentGoalAccuracyWithoutReference(judge_config=str(path))
    sample = rows(COUNTS)[1][0]
    (request,) = metric.judge_requests(sample)
    assert RULE in request.system and request.system.startswith(
        AgentGoalAccuracyWithoutReference().judge_requests(sample)[0].system
    )

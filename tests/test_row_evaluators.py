"""Row evaluators and assessment aggregates choose their judges by type, not by name."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from turneval import ConfigError, SingleTurnSample, evaluate
from turneval.aggregate import RunAggregate, summary_document
from turneval.metrics import (
    AssessmentJudge,
    Correctness,
    DatabricksAggregates,
    Evaluator,
    OverallAssessment,
    Safety,
)
from turneval.metrics.assessments import run_aggregates
from turneval.metrics.base import RowEvaluator
from turneval.results import EvaluationResult, MetricResult
from turneval.testing import ScriptedChatModel

TRUTH = SingleTurnSample(user_input="q", response="r", reference="truth")


def _yes_no(*answers: bool) -> ScriptedChatModel:
    replies = [
        json.dumps({"rationale": "yes" if a else "wrong", "rating": "yes" if a else "no"})
        for a in answers
    ]
    return ScriptedChatModel(responses=replies)


def _score(value: int) -> ScriptedChatModel:
    return ScriptedChatModel(responses=[json.dumps({"explanation": "e", "score": value})])


class CitesSources(AssessmentJudge):
    """A user's own judge type: a subclass, so it plays the custom part."""

    name: str = "cites_sources"
    instructions: str = "Does the response cite a source?"


def test_a_renamed_built_in_judge_keeps_its_part_in_the_overall_assessment() -> None:
    # Safety passes (1: safe) and the subclassed custom judge fails, but the renamed correctness
    # judge fails too and comes first in the documented order (correctness before safety,
    # custom judges last).
    metrics: list[Evaluator] = [
        CitesSources(llm=_yes_no(False)),
        Safety(name="harmless", llm=_score(1)),
        Correctness(name="strict_correctness", llm=_yes_no(False)),
        OverallAssessment(),
    ]
    details = evaluate([TRUTH], metrics).rows[0].results["overall_assessment"].details
    assert details["root_cause"] == "strict_correctness"
    assert [j["judge"] for j in details["judges"]] == [
        "strict_correctness",
        "harmless",
        "cites_sources",
    ]
    assert [j["passed"] for j in details["judges"]] == [False, True, False]


def test_aggregates_name_renamed_judges_by_their_own_name() -> None:
    metrics: list[Evaluator] = [
        Correctness(name="strict_correctness", llm=_yes_no(True, False, False, True)),
        Safety(name="harmless", llm=_score(1)),
        CitesSources(llm=_yes_no(True)),
        OverallAssessment(),
    ]
    result = evaluate([TRUTH] * 4, metrics, max_concurrency=1)
    figures = run_aggregates(result)
    # correctness: yes, no, no, yes = 2 of 4; safety says 1 (safe) on every row.
    assert figures["response/llm_judged/strict_correctness/rating/percentage"] == 2 / 4
    assert figures["response/llm_judged/harmless/rating/average"] == 1.0
    assert figures["response/llm_judged/cites_sources/rating/percentage"] == 1.0
    # a row passes when correctness says yes (safety and cites_sources always pass): 2 of 4.
    assert figures["overall_assessment/rating/percentage"] == 2 / 4


class FailedShare(RowEvaluator):
    """A user's row evaluator: the share of the row's other metrics that failed."""

    name: str = "failed_share"

    def derive(
        self,
        sample: Any,
        results: Mapping[str, MetricResult],
        errors: Mapping[str, str],
        metrics: Sequence[Evaluator],
    ) -> MetricResult:
        others = [m.name for m in metrics if m is not self]
        share = sum(name in errors for name in others) / len(others)
        return MetricResult(self.name, share, f"{len(errors)} of {len(others)} failed")


def test_any_row_evaluator_runs_after_the_row_s_other_metrics() -> None:
    # Correctness needs a reference: on the sample without one it fails (1 of 1 other metric).
    without = SingleTurnSample(user_input="q", response="r")
    rows = evaluate(
        [TRUTH, without], [Correctness(llm=_yes_no(True)), FailedShare()], max_concurrency=1
    ).rows
    assert rows[0].score("failed_share") == 0.0 and rows[1].score("failed_share") == 1.0
    assert rows[1].results["failed_share"].reason == "1 of 1 failed"


class FailedRows(RunAggregate):
    """A user's aggregate: the share of rows with at least one failed metric."""

    name = "failed_rows"

    def compute(self, result: EvaluationResult) -> dict[str, float]:
        return {"failed_row_share": sum(bool(row.failures) for row in result.rows) / len(result)}


class Broken(RunAggregate):
    name = "broken"

    def compute(self, result: EvaluationResult) -> dict[str, float]:
        raise ZeroDivisionError("no rows to divide by")


def test_aggregates_listed_beside_the_metrics_land_in_the_result_and_its_summary() -> None:
    metrics: list[Evaluator] = [
        Correctness(name="strict_correctness", llm=_yes_no(True, False, False, True)),
        Safety(name="harmless", llm=_score(1)),
        OverallAssessment(),
    ]
    aggregates = [DatabricksAggregates(), Broken(), FailedRows()]
    result = evaluate([TRUTH] * 4, metrics, max_concurrency=1, aggregates=aggregates)
    # correctness: yes, no, no, yes = 2 of 4; safety says 1 (safe) on every row; no row failed.
    assert result.aggregates == {
        "response/llm_judged/strict_correctness/rating/percentage": 2 / 4,
        "response/llm_judged/harmless/rating/average": 1.0,
        "overall_assessment/rating/percentage": 2 / 4,
        "failed_row_share": 0.0,
    }
    assert result.aggregates == {**run_aggregates(result), "failed_row_share": 0.0}
    # the one that raised is kept with its reason; the run and the other aggregates go on
    assert result.aggregate_errors == {"broken": "ZeroDivisionError: no rows to divide by"}
    document = summary_document(
        len(result), result.summary(), result.usage, aggregates=result.aggregates
    )
    assert document["aggregates"] == result.aggregates
    assert "aggregates" not in summary_document(len(result), result.summary(), result.usage)


def test_an_agent_run_reports_its_latency_aggregate() -> None:
    from turneval import AIMessage, EvalTask, HumanMessage, MultiTurnSample

    samples = [MultiTurnSample(user_input=[HumanMessage(content=f"hi {i}")]) for i in range(3)]

    def agent(messages: list[Any]) -> list[Any]:
        return [AIMessage(content="hello")]

    task = EvalTask(samples, ["tool_call_valid"], aggregates=[DatabricksAggregates()])
    result = task.evaluate(runnable=agent)
    latencies = [row.latency_s for row in result.rows]
    assert all(value is not None for value in latencies)
    expected = sum(value or 0.0 for value in latencies) / 3
    assert result.aggregates["agent/latency_seconds/average"] == expected


def test_aggregates_must_be_run_aggregates() -> None:
    with pytest.raises(ConfigError, match="aggregates.*expected RunAggregate objects, got str"):
        evaluate([TRUTH], [OverallAssessment()], aggregates=["databricks"])  # type: ignore[list-item]


def test_an_assessment_without_assessment_judges_is_refused_before_the_run() -> None:
    # It would derive nothing: a run of it alone gave 0.0 on every row, silently.
    with pytest.raises(
        ConfigError, match="overall_assessment is derived from the run's assessment"
    ):
        evaluate([TRUTH], [OverallAssessment(), "tool_call_f1"])

"""Run-level aggregates on the streamed front end and the CLI, as on ``evaluate()``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from turneval import EvalTask, HumanMessage, MultiTurnSample, SingleTurnSample, evaluate
from turneval.aggregate import RunAggregate, builtin_aggregates
from turneval.cli import main
from turneval.metrics import Correctness, DatabricksAggregates, Evaluator, OverallAssessment
from turneval.results import EvaluationResult
from turneval.stream import evaluate_jsonl

from .._openai_stub import Reply
from ..test_row_evaluators import TRUTH, Broken, FailedRows, _yes_no


def _write(path: Path, samples: list[SingleTurnSample]) -> Path:
    path.write_text("".join(s.model_dump_json(exclude_none=True) + "\n" for s in samples))
    return path


def test_streamed_aggregates_equal_the_in_memory_ones(tmp_path: Path) -> None:
    def metrics() -> list[Evaluator]:  # judges answer yes, no, no, yes on the four rows
        return [Correctness(llm=_yes_no(True, False, False, True)), OverallAssessment()]

    aggregates = [DatabricksAggregates(), Broken(), FailedRows()]
    data = _write(tmp_path / "d.jsonl", [TRUTH] * 4)
    streamed = evaluate_jsonl(
        data, metrics(), tmp_path / "out", max_concurrency=1, aggregates=aggregates
    )
    memory = evaluate([TRUTH] * 4, metrics(), max_concurrency=1, aggregates=aggregates)
    expected = {  # 2 of 4 correct; the assessment passes with correctness; no row failed
        "response/llm_judged/correctness/rating/percentage": 2 / 4,
        "overall_assessment/rating/percentage": 2 / 4,
        "failed_row_share": 0.0,
    }
    assert streamed.aggregates == memory.aggregates == expected
    assert streamed.aggregate_errors == {"broken": "ZeroDivisionError: no rows to divide by"}
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["aggregates"] == expected
    assert summary["aggregate_errors"] == streamed.aggregate_errors
    # Without aggregates the summary has neither key, as before.
    plain = evaluate_jsonl(data, ["exact_match"], tmp_path / "plain")
    assert plain.aggregates == {} and plain.aggregate_errors == {}
    assert "aggregates" not in json.loads((tmp_path / "plain" / "summary.json").read_text())


def test_a_results_file_keeps_the_agent_figures_aggregates_read(tmp_path: Path) -> None:
    samples = [MultiTurnSample(user_input=[HumanMessage(content=f"hi {i}")]) for i in range(3)]

    def agent(messages: list[Any]) -> list[Any]:
        if "1" in str(messages[-1].content):
            raise RuntimeError("tool server down")
        return [{"type": "ai", "content": "hello"}]

    result = EvalTask(samples, ["tool_call_valid"]).evaluate(runnable=agent)
    result.to_jsonl(tmp_path / "results.jsonl")
    back = EvaluationResult.from_jsonl(tmp_path / "results.jsonl")
    for row, read in zip(result.rows, back.rows, strict=True):
        assert row.agent is not None and read.agent is not None
        assert read.agent.latency_s == row.agent.latency_s
        assert read.agent.error == row.agent.error
        assert read.agent.usage == row.agent.usage and read.agent.steps == row.agent.steps
        assert read.agent.messages == []  # the conversation is not in the file
    assert back.rows[1].agent is not None and back.rows[1].agent.failed
    figures = DatabricksAggregates().compute(back)
    assert figures == DatabricksAggregates().compute(result)
    assert figures["agent/latency_seconds/average"] == pytest.approx(
        sum(row.latency_s or 0.0 for row in result.rows if row.latency_s is not None) / 3
    )


def test_the_cli_adds_aggregates_by_name(
    tmp_path: Path, openai_stub: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert builtin_aggregates() == {"databricks": DatabricksAggregates}
    data = _write(tmp_path / "d.jsonl", [TRUTH] * 6)
    answers = ["yes", "no", "yes", "yes", "no", "yes"]
    for answer in answers:
        openai_stub.script.append(Reply(json.dumps({"rationale": "r", "rating": answer})))
    out = tmp_path / "out"
    flags = ["--judge-base-url", openai_stub.url, "--judge-model", "m", "--concurrency", "1"]
    command = ["evaluate", str(data), "--metric", "correctness", "--out", str(out), *flags]
    assert main([*command, "--aggregate", "databricks"]) == 0
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    share = sum(row["correctness"] for row in rows) / len(rows)  # the file's own column
    assert share == answers.count("yes") / 6
    summary = json.loads((out / "summary.json").read_text())
    figure = "response/llm_judged/correctness/rating/percentage"
    assert summary["aggregates"] == {figure: share}
    assert f"{figure}: {share:.4f}" in capsys.readouterr().out
    # An unknown name fails before any request, naming the known ones.
    sent = len(openai_stub.requests)
    assert main([*command, "--overwrite", "--aggregate", "nope"]) == 2
    assert "unknown aggregate 'nope'; known aggregates: databricks" in capsys.readouterr().err
    assert len(openai_stub.requests) == sent


def test_a_user_aggregate_is_not_a_cli_name() -> None:
    class Mine(RunAggregate):
        name = "mine"

        def compute(self, result: EvaluationResult) -> dict[str, float]:
            return {}

    assert "mine" not in builtin_aggregates()  # only turneval's own are named on the CLI


def test_the_cli_help_names_every_built_in_aggregate(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    text = capsys.readouterr().out
    assert "--aggregate NAME" in text
    assert all(name in text for name in builtin_aggregates())

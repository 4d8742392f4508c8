"""EvaluationResult.to_jsonl -> from_jsonl keeps each result's details and judge usage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from turneval.results import EvaluationResult, MetricFailure, MetricResult, SampleResult
from turneval.usage import Usage


def result_set() -> EvaluationResult:
    judged = MetricResult(
        "rubric", 4.0, "score 4", {"choice": "B", "votes": [4, 4]}, Usage(120, 8, 2, 1)
    )
    computed = MetricResult("tool_call_f1", 0.5, "f1=1/2=0.500", {"matched": ["a({})"]})
    first = SampleResult(0, None, results={"rubric": judged, "tool_call_f1": computed})
    second = SampleResult(
        1,
        None,
        results={"tool_call_f1": MetricResult("tool_call_f1", 1.0)},
        failures={"rubric": MetricFailure("rubric", 1, "JudgeCallError", "timed out")},
    )
    return EvaluationResult([first, second], ["rubric", "tool_call_f1"])


def test_round_trip_keeps_details_and_usage(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    original = result_set()
    original.to_jsonl(path)
    back = EvaluationResult.from_jsonl(path)

    assert back.metric_names == original.metric_names
    for old, new in zip(original.rows, back.rows, strict=True):
        assert new.index == old.index
        assert new.results == old.results  # value, reason, details and usage
        assert new.failures == old.failures
    assert back.rows[0].results["rubric"].usage == Usage(120, 8, 2, 1)
    assert back.rows[0].usage == Usage(120, 8, 2, 1)  # the row's sum: tool_call_f1 has none
    assert back.rows[0].results["tool_call_f1"].usage is None
    assert back.usage == Usage(120, 8, 2, 1)  # the run's: the sum over the rows


def test_without_details_nothing_extra_is_written_or_invented(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    result_set().to_jsonl(path, details=False)
    assert "rubric_usage" not in json.loads(path.read_text().splitlines()[0])
    back = EvaluationResult.from_jsonl(path)
    assert back.rows[0].results["rubric"] == MetricResult("rubric", 4.0, "score 4")


def test_a_bad_usage_object_names_line_and_field(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text(
        '{"index": 0, "m": 1.0, "m_reason": "", "m_error": null}\n'
        '{"index": 1, "m": 1.0, "m_reason": "", "m_error": null, "m_usage": {"calls": -1}}\n'
    )
    with pytest.raises(ValueError, match=r"line 2: m_usage: usage field 'calls' must be a non"):
        EvaluationResult.from_jsonl(path)
    path.write_text('{"index": 0, "m": 1.0, "m_reason": "", "m_usage": 3}\n')
    with pytest.raises(ValueError, match="line 1: m_usage must be an object, got 3"):
        EvaluationResult.from_jsonl(path)


def test_the_input_line_of_a_streamed_row_survives_the_round_trip(tmp_path: Path) -> None:
    # The streaming CLI's rows carry the input line (blank lines make it differ from index+1).
    path = tmp_path / "results.jsonl"
    path.write_text(
        '{"index": 0, "m": 1.0, "m_reason": "", "m_error": null, "line": 1}\n'
        '{"index": 1, "m": null, "m_reason": null, "m_error": "E: x", "line": 3}\n'
    )
    back = EvaluationResult.from_jsonl(path)
    assert [row.line for row in back.rows] == [1, 3]
    again = tmp_path / "again.jsonl"
    back.to_jsonl(again)
    assert [json.loads(line)["line"] for line in again.read_text().splitlines()] == [1, 3]
    assert "line" not in result_set().records()[0]  # rows not read from a file have none


@pytest.mark.parametrize("details", [True, False])
def test_pairwise_win_rates_are_restored(tmp_path: Path, details: bool) -> None:
    from turneval import evaluate

    from .test_run_summary import EXPECTED, SAMPLES, _metric

    ran = evaluate(SAMPLES, [_metric()], details=details)
    path = tmp_path / "results.jsonl"
    ran.to_jsonl(path, details=details)
    back = EvaluationResult.from_jsonl(path).summary()
    # CANDIDATE, CANDIDATE, BASELINE, TIE (EXPECTED); the orders' agreement needs details.
    expected = {k: v for k, v in EXPECTED.items() if details or k != "position_consistency"}
    assert back["p"].extra == expected == ran.summary()["p"].extra
    rows = [
        SampleResult(i, None, results={"p": MetricResult("p", value, reason)})
        for i, (value, reason) in enumerate(
            [(1.0, "CANDIDATE (both orders agree): e"), (0.0, "no")]
        )
    ]
    assert not EvaluationResult(rows, ["p"]).summary()["p"].extra  # one reason is no verdict

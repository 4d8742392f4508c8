from pathlib import Path

import pytest

from turneval import ConfigError, MetricResult, SampleResult
from turneval.compare import compare, compare_files
from turneval.results import EvaluationResult


def run(values: list[float | None]) -> EvaluationResult:
    rows = []
    for index, value in enumerate(values):
        row = SampleResult(index, None)
        if value is not None:
            row.results["m"] = MetricResult("m", value, "r")
        rows.append(row)
    return EvaluationResult(rows, ["m"])


def test_compare_differences_flips_and_pairs() -> None:
    baseline = run([1.0, 1.0, 0.0, 0.0, 1.0, None])
    candidate = run([1.0, 0.0, 1.0, 1.0, 1.0, 1.0])
    comparison = compare(baseline, candidate)
    m = comparison.metrics["m"]
    assert m.pairs == 5  # row 5 failed in the baseline
    assert m.baseline_mean == 3 / 5 and m.candidate_mean == 4 / 5
    assert m.difference == pytest.approx(1 / 5)
    assert m.regressions == [1] and m.improvements == [2, 3]
    assert m.p_value is not None and 0 < m.p_value <= 1
    assert "| m | 0.6000 | 0.8000 | +0.2000 |" in str(comparison)


def test_a_consistent_improvement_is_significant() -> None:
    comparison = compare(run([0.0] * 30), run([1.0] * 30))
    assert comparison.metrics["m"].significant() and comparison.metrics["m"].improvements == list(
        range(30)
    )


def test_compare_rejects_different_datasets() -> None:
    with pytest.raises(ConfigError, match="differ in length"):
        compare(run([1.0]), run([1.0, 0.0]))


def test_compare_files_round_trip(tmp_path: Path) -> None:
    run([1.0, 0.0]).to_jsonl(tmp_path / "a.jsonl")
    run([1.0, 1.0]).to_jsonl(tmp_path / "b.jsonl")
    comparison = compare_files(tmp_path / "a.jsonl", tmp_path / "b.jsonl")
    assert comparison.metrics["m"].improvements == [1]
    assert comparison.to_dict()["metrics"]["m"]["pairs"] == 2

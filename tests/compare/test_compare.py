from pathlib import Path

import pytest

from turneval import ConfigError, MetricFailure, MetricResult, SampleResult
from turneval.compare import compare, compare_files
from turneval.results import EvaluationResult

from ..stats._helpers import trials_run


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


def run_with_ids(values: dict[str, float | None]) -> EvaluationResult:
    """Rows read back from a results file: an id per row, a failure where the value is None."""
    rows = []
    for index, (sample_id, value) in enumerate(values.items()):
        row = SampleResult(index, None, stored_id=sample_id)
        if value is None:
            row.failures["m"] = MetricFailure("m", index, "JudgeCallError", "boom")
        else:
            row.results["m"] = MetricResult("m", value, "r")
        rows.append(row)
    return EvaluationResult(rows, ["m"])


def test_rows_pair_by_id_when_the_candidate_is_in_another_order() -> None:
    baseline = run_with_ids({"a": 1.0, "b": 0.0, "c": 1.0})
    shuffled = run_with_ids({"c": 1.0, "a": 1.0, "b": 0.0})  # the same scores, row for row
    m = compare(baseline, shuffled).metrics["m"]
    # by position, rows 0 and 1 would be a regression (1 -> 0) and an improvement (0 -> 1)
    assert (m.pairs, m.difference, m.p_value) == (3, 0.0, 1.0)
    assert m.regressions == m.improvements == m.worse == []


def test_runs_of_different_samples_are_refused_naming_the_ids() -> None:
    with pytest.raises(
        ConfigError, match=r"share no sample: ids of the baseline 'a', 'b', of the candidate 'z'"
    ):
        compare(run_with_ids({"a": 1.0, "b": 0.0}), run_with_ids({"z": 1.0}))
    twice = run_with_ids({"a": 1.0, "b": 0.0})
    twice.rows[1].stored_id = "a"  # ids repeat: rows pair by position, and must agree there
    with pytest.raises(ConfigError, match=r"row 1: id 'b' in the baseline, 'a' in the candidate"):
        compare(run_with_ids({"a": 1.0, "b": 0.0}), twice)


def test_rows_the_candidate_failed_are_listed_and_kept_out_of_the_means() -> None:
    baseline = run_with_ids({"a": 1.0, "b": 1.0, "c": 0.0, "d": None})
    candidate = run_with_ids({"a": 1.0, "b": None, "c": None, "d": 1.0})
    comparison = compare(baseline, candidate)
    m = comparison.metrics["m"]
    assert m.pairs == 1 and m.baseline_mean == m.candidate_mean == 1.0
    assert m.newly_failed == [1, 2]  # d failed in the baseline, not newly
    assert "note: m failed in the candidate on 2 rows the baseline scored: row 1, row 2" in str(
        comparison
    )
    assert comparison.to_dict()["metrics"]["m"]["newly_failed"] == [1, 2]


def test_an_empty_run_is_named_as_such(tmp_path: Path) -> None:
    run([1.0]).to_jsonl(tmp_path / "a.jsonl")
    (tmp_path / "empty.jsonl").write_text("")  # a run of an empty input file
    with pytest.raises(ConfigError, match=r"empty\.jsonl holds no rows: nothing to compare"):
        compare_files(tmp_path / "empty.jsonl", tmp_path / "a.jsonl")


def test_a_metric_on_a_1_to_5_scale_takes_its_own_pass_threshold() -> None:
    # a rubric judge fell from 5 and 4 to 1 on every row
    baseline, candidate = run([5.0, 4.0, 5.0]), run([1.0, 1.0, 1.0])
    default = compare(baseline, candidate)
    m = default.metrics["m"]
    assert m.pass_threshold == 0.5 and m.regressions == []  # 1.0 still "passes" 0.5
    assert (
        "note: m is scored outside [0, 1]: no row can cross the pass threshold 0.5; "
        "give it one on its scale (pass_thresholds={'m': VALUE}, --pass-threshold m=VALUE)"
    ) in str(default)
    own = compare(baseline, candidate, pass_thresholds={"m": 3})
    assert own.metrics["m"].pass_threshold == 3 and own.metrics["m"].regressions == [0, 1, 2]
    assert "outside [0, 1]" not in str(own) and own.to_dict()["metrics"]["m"]["pass_threshold"] == 3
    with pytest.raises(
        ConfigError, match=r"pass_thresholds names metrics that are not in both runs: \['x'\]"
    ):
        compare(baseline, candidate, pass_thresholds={"x": 3})


def test_the_cli_takes_a_pass_threshold_per_metric(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from turneval.cli import main

    run([5.0, 4.0]).to_jsonl(tmp_path / "a.jsonl")
    run([1.0, 4.0]).to_jsonl(tmp_path / "b.jsonl")
    capsys.readouterr()
    args = ["compare", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]
    assert main([*args, "--pass-threshold", "0.7", "--pass-threshold", "m=3"]) == 0
    assert "| m | 4.5000 | 2.5000 | -2.0000 | 1.0000 | 1 | 0 |" in capsys.readouterr().out
    assert main([*args, "--pass-threshold", "m=high"]) == 2
    assert "--pass-threshold 'm=high': expected [NAME=]VALUE" in capsys.readouterr().err


def test_compare_lists_regressions_on_flaky_scenarios_apart() -> None:
    base = trials_run({"steady": [True, True], "wobbly": [True, True]})
    cand = trials_run({"steady": [False, True], "wobbly": [True, False]})
    for run_ in (base, cand):  # every trial its own id: rows pair by id
        for row in run_.rows:
            row.stored_id = f"{row.trial.scenario_id}-{row.trial.index}" if row.trial else None
    m = compare(base, cand).metrics["m"]
    # both scenarios lost a trial; both are flaky in the candidate, so both flips are apart
    assert m.regressions == [] and m.flaky_regressions == [0, 3]
    assert set(m.flaky) == {"steady", "wobbly"}
    steady = compare(base, base).metrics["m"]
    assert steady.flaky_regressions == [] and steady.flaky == {}
    cand_one = trials_run({"steady": [False, False], "wobbly": [True, False]})
    for row in cand_one.rows:
        row.stored_id = f"{row.trial.scenario_id}-{row.trial.index}" if row.trial else None
    mixed = compare(base, cand_one)
    assert mixed.metrics["m"].regressions == [0, 1]  # steady failed twice: a real regression
    assert mixed.metrics["m"].flaky_regressions == [3]
    assert "1 regression on flaky scenarios" in str(mixed) and ": row 3;" in str(mixed)
    assert "wobbly: 1/2 passed" in str(mixed)

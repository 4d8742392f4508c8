import json
import math
import statistics
from pathlib import Path

import pytest

from turneval import ConfigError, EvaluationDataset, aevaluate, evaluate
from turneval.metrics import ToolCallAccuracy, ToolCallF1, TrajectorySingleToolUse

from ._builders import call, conversation


def dataset() -> EvaluationDataset:
    return EvaluationDataset(
        [
            conversation([call("a")], reference=[call("a")]),  # F1 1
            conversation([call("a"), call("x")], reference=[call("a")]),  # F1 2/3
            conversation([call("a")]),  # no reference: fails
            conversation([call("b")], reference=[call("a")]),  # F1 0
        ]
    )


def test_rows_in_order_with_per_cell_errors_and_summary() -> None:
    result = evaluate(dataset(), ["tool_call_f1", TrajectorySingleToolUse(tool_name="a")])
    assert len(result) == 4 and [row.index for row in result.rows] == [0, 1, 2, 3]
    f1 = result.scores("tool_call_f1")
    assert f1[0] == 1.0 and f1[1] == 2 * 0.5 * 1 / 1.5 and math.isnan(f1[2]) and f1[3] == 0.0
    failure = result.rows[2].failures["tool_call_f1"]
    assert failure.error_type == "InvalidSampleError" and "reference_tool_calls" in failure.message
    # The other metric still scored row 2.
    assert result.rows[2].results["trajectory_single_tool_use"].value == 1.0
    summary = result.summary()["tool_call_f1"]
    scored = [1.0, 2 / 3, 0.0]
    assert summary.count == 3 and summary.failed == 1
    assert summary.mean == pytest.approx(statistics.mean(scored))
    assert summary["std"] == pytest.approx(statistics.stdev(scored))  # ddof=1
    single = result.summary()["trajectory_single_tool_use"]
    assert (single.mean, single.count, single.failed) == (0.75, 4, 0)


async def test_aevaluate_accepts_a_list_and_limits() -> None:
    result = await aevaluate(list(dataset()), [ToolCallAccuracy()], max_concurrency=2)
    assert result.scores("tool_call_accuracy")[:2] == [1.0, 0.0]
    one = await aevaluate([conversation([call("a")], reference=[call("a")])], [ToolCallF1()])
    assert one.summary()["tool_call_f1"].std is None  # fewer than two scored rows


def test_to_pandas_and_jsonl(tmp_path: Path) -> None:
    result = evaluate(dataset(), ["tool_call_f1"])
    frame = result.to_pandas()
    assert list(frame.columns) == [
        "index",
        "user_input",
        "reference_tool_calls",
        "tool_call_f1",
        "tool_call_f1_reason",
        "tool_call_f1_error",
    ]
    assert frame["tool_call_f1_error"][2].startswith(
        "InvalidSampleError: metric 'tool_call_f1' needs"
    )
    assert frame["tool_call_f1_error"][0] is None and math.isnan(frame["tool_call_f1"][2])
    path = tmp_path / "rows.jsonl"
    result.to_jsonl(path)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [row["tool_call_f1"] for row in rows] == [1.0, 2 / 3, None, 0.0]
    assert rows[0]["tool_call_f1_details"]["matched"][0]["call"] == "a({})"


def test_bad_metric_lists_fail_before_running() -> None:
    with pytest.raises(
        ConfigError,
        match="unknown metric 'tool_call_f2'; did you mean 'tool_call_f1', 'tool_call_valid' or "
        "'tool_call_efficiency'[?] known names: agent_goal_accuracy_with_reference,",
    ):
        evaluate(dataset(), ["tool_call_f2"])
    with pytest.raises(ConfigError, match=r"share the name\(s\) \['tool_call_f1'\]"):
        evaluate(dataset(), [ToolCallF1(), "tool_call_f1"])
    with pytest.raises(ConfigError, match="no metric given"):
        evaluate(dataset(), [])
    with pytest.raises(ConfigError, match="max_concurrency"):
        evaluate(dataset(), ["tool_call_f1"], max_concurrency=0)
    with pytest.raises(KeyError, match="no metric named 'nope'"):
        evaluate(dataset(), ["tool_call_f1"]).scores("nope")

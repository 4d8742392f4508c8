import json
from pathlib import Path

import pytest

from turneval import InvalidSampleError
from turneval.engines import Local
from turneval.stream import evaluate_jsonl

from .._builders import call, conversation

METRICS = ["tool_call_f1", "trajectory_in_order_match"]


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def good(*calls: str) -> str:
    sample = conversation([call(name) for name in calls], reference=[call("a"), call("b")])
    return sample.model_dump_json(exclude_none=True)


def test_streams_rows_in_order_and_keeps_bad_lines(tmp_path: Path) -> None:
    data = write(
        tmp_path / "data.jsonl",
        [
            good("a", "b"),
            "{not json",
            good("b", "a"),
            "",
            '{"user_input": [{"type": "robot", "content": "x"}]}',
            good("a"),
        ],
    )
    result = evaluate_jsonl(data, METRICS, tmp_path / "out", engine=Local(workers=1, chunk_size=2))
    rows = [
        json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()
    ]
    assert [row["index"] for row in rows] == [0, 1, 2, 3, 4] and [row["line"] for row in rows] == [
        1,
        2,
        3,
        5,
        6,
    ]
    assert rows[1]["tool_call_f1"] is None
    assert rows[1]["tool_call_f1_error"].startswith("InvalidSampleError: line 2: not valid JSON")
    assert "line 5 (MultiTurnSample): user_input.0" in rows[3]["trajectory_in_order_match_error"]
    assert [row["trajectory_in_order_match"] for row in rows] == [1.0, None, 0.0, None, 0.0]
    assert rows[4]["tool_call_f1"] == 2 * 1.0 * 0.5 / 1.5
    assert result.total_rows == 5 and result.bad_lines == 2
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert (
        summary["metrics"]["tool_call_f1"]["count"] == 3
        and summary["metrics"]["tool_call_f1"]["failed"] == 2
    )
    assert summary["bad_lines"] == 2
    report = (tmp_path / "out" / "report.html").read_text()
    assert "5 samples" in report and "not valid JSON" in report


def test_worker_processes_give_the_same_file(tmp_path: Path) -> None:
    lines = [good("a", "b"), good("b"), good("a", "x", "b")] * 40
    data = write(tmp_path / "data.jsonl", lines)
    evaluate_jsonl(data, METRICS, tmp_path / "one", engine=Local(workers=1, chunk_size=16))
    evaluate_jsonl(data, METRICS, tmp_path / "two", engine=Local(workers=2, chunk_size=16))
    assert (tmp_path / "one" / "results.jsonl").read_text() == (
        tmp_path / "two" / "results.jsonl"
    ).read_text()


def test_details_and_missing_file(tmp_path: Path) -> None:
    data = write(tmp_path / "data.jsonl", [good("a", "b")])
    evaluate_jsonl(data, ["tool_call_f1"], tmp_path / "out", details=True, engine=Local(workers=1))
    row = json.loads((tmp_path / "out" / "results.jsonl").read_text())
    assert row["tool_call_f1_details"]["matched"][0]["call"] == "a({})"
    with pytest.raises(InvalidSampleError, match="no such file"):
        evaluate_jsonl(tmp_path / "missing.jsonl", ["tool_call_f1"], tmp_path / "out")
    with pytest.raises(InvalidSampleError, match="a folder, not a JSONL file"):
        evaluate_jsonl(tmp_path, ["tool_call_f1"], tmp_path / "out")
    with pytest.raises(InvalidSampleError, match="not a regular file"):
        evaluate_jsonl("/dev/null", ["tool_call_f1"], tmp_path / "out")


def test_judged_metrics_stream_with_the_cache(tmp_path: Path) -> None:
    from .._fakes import ScriptedChatModel

    verdict = json.dumps({"user_goal": "g", "end_state": "e", "reason": "r", "achieved": True})
    data = write(tmp_path / "data.jsonl", [good("a", "b"), good("a"), good("b")])
    model = ScriptedChatModel(responses=[verdict])
    cache = tmp_path / "cache.sqlite"
    first = evaluate_jsonl(
        data,
        ["agent_goal_accuracy_without_reference"],
        tmp_path / "o1",
        llm=model,
        cache=cache,
        details=False,  # details say whether the answer was cached
    )
    assert model.calls == 3 and first.usage.calls == 3
    assert first.summaries["agent_goal_accuracy_without_reference"].usage == first.usage
    second = evaluate_jsonl(
        data,
        ["agent_goal_accuracy_without_reference"],
        tmp_path / "o2",
        llm=model,
        cache=cache,
        details=False,
    )
    assert model.calls == 3 and second.usage.cached_calls == 3  # a re-run pays for nothing twice
    assert (tmp_path / "o1" / "results.jsonl").read_text() == (
        tmp_path / "o2" / "results.jsonl"
    ).read_text()

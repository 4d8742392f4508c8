"""The one results codec: every writer and reader of results.jsonl goes through it."""

from __future__ import annotations

import json
from pathlib import Path

from turneval.engines import Local
from turneval.metrics import TrajectorySingleToolUse
from turneval.results import (
    AgentRun,
    EvaluationResult,
    MetricFailure,
    MetricResult,
    SampleResult,
    Trial,
)
from turneval.results_codec import decode, encode, metric_names
from turneval.stream import evaluate_jsonl
from turneval.usage import Usage

from .test_four_sinks import traces_file

TRACE = "Traceback (most recent call last):\n  File \"m.py\", line 3, in budget\nKeyError: 'budget'"


def simulated_row() -> SampleResult:
    row = SampleResult(4, None, line=5, stored_id="t-1", source="simulation")
    row.trial = Trial("refund", 2, "agent_error")
    row.agent = AgentRun([], 1.5, "AgentRunError: boom", Usage(7, 3), 2)
    row.results["a"] = MetricResult("a", 0.5, "half", {"k": [1]}, Usage(11, 2, calls=1))
    row.failures["b"] = MetricFailure("b", 4, "KeyError", "'budget'", TRACE)
    return row


def test_a_row_reads_back_as_it_was_written_traceback_included() -> None:
    row = simulated_row()
    record = json.loads(json.dumps(encode(row, ["a", "b"], details=True)))
    assert record["b_error"] == "KeyError: 'budget'"  # what users read, unchanged
    assert record["b_traceback"] == TRACE
    assert (record["scenario_id"], record["trial"], record["stop_reason"]) == (
        "refund",
        2,
        "agent_error",
    )
    assert record["source"] == "simulation" and record["latency_in_seconds"] == 1.5
    back = decode(record, metric_names(record), 1)
    assert back.failures == row.failures  # the traceback too
    assert back.results == row.results
    assert (back.trial, back.source, back.line, back.sample_id) == (
        row.trial,
        "simulation",
        5,
        "t-1",
    )
    assert back.agent is not None and row.agent is not None
    assert (back.agent.latency_s, back.agent.error, back.agent.usage, back.agent.steps) == (
        1.5,
        "AgentRunError: boom",
        Usage(7, 3),
        2,
    )


def test_a_file_written_before_source_existed_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    old = [  # as turneval wrote them before rows said their source (no run.json beside)
        {"index": 0, "scenario_id": "s", "trial": 0, "stop_reason": "user_done", "m": 1.0,
         "m_reason": "r", "m_error": None},
        {"index": 1, "m": 0.0, "m_reason": "r", "m_error": None, "latency_in_seconds": 2.0,
         "failure": 0, "agent_error": None, "agent_input_tokens": 1, "agent_output_tokens": 2,
         "agent_total_tokens": 3, "steps": 1},
        {"index": 2, "m": None, "m_reason": None, "m_error": "KeyError: 'x'"},
    ]  # fmt: skip
    path.write_text("".join(json.dumps(record) + "\n" for record in old))
    rows = EvaluationResult.from_jsonl(path).rows
    assert [row.source for row in rows] == ["simulation", "agent", "dataset"]
    assert rows[0].trial == Trial("s", 0, "user_done")
    assert rows[2].failures["m"].traceback is None


def test_a_resumed_trace_run_writes_the_summary_of_an_uninterrupted_one(tmp_path: Path) -> None:
    path = traces_file(tmp_path)
    metrics = [TrajectorySingleToolUse(tool_name="f")]
    evaluate_jsonl(path, metrics, tmp_path / "whole", engine=Local(workers=1))
    whole = json.loads((tmp_path / "whole" / "summary.json").read_text())["metrics"]
    assert "latency_in_seconds" in whole
    partial = tmp_path / "partial"
    evaluate_jsonl(path, metrics, partial, engine=Local(workers=1))
    lines = (partial / "results.jsonl").read_text().splitlines(keepends=True)
    (partial / "results.jsonl").write_text(lines[0] + lines[1][:10])  # killed mid-row
    evaluate_jsonl(path, metrics, partial, engine=Local(workers=1), resume=True)
    resumed = json.loads((partial / "summary.json").read_text())["metrics"]
    assert resumed == whole

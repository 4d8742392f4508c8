"""A real LangGraph agent traced by OpenInference and by OpenLLMetry, rebuilt from its spans.

The agent runs in a fresh process per instrumentation (see ``_traced_run.py``), which exports
its spans in memory (``from_otel_spans`` there) and to OTLP/JSON (read back here).
"""

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests._builders import metadata_of
from tests.test_agents import USAGE
from turneval import EvaluationDataset, MultiTurnSample, ToolCall, evaluate
from turneval.cli import main
from turneval.messages import Message, messages_from_json
from turneval.metrics import ToolCallAccuracy, ToolCallF1, TrajectoryExactMatch
from turneval.traces import from_otlp_json

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", params=["openinference", "openllmetry"])
def traced(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    from tests.watch._helpers import results, serving, wait_for
    from turneval.metrics import StepBudget
    from turneval.watch import Watcher

    out = tmp_path_factory.mktemp(request.param)
    # The agent's spans also go, as it runs, to a turneval watch receiver (OTLP/HTTP protobuf).
    watcher = Watcher([StepBudget(max_steps=1)], out / "watch", idle=0.2)
    with serving(watcher) as port:
        subprocess.run(
            [
                *(sys.executable, "-m", "tests.traces._traced_run", request.param, str(out)),
                f"http://127.0.0.1:{port}/v1/traces",
            ],
            cwd=ROOT,
            check=True,
            capture_output=True,
            timeout=120,
        )
        expected = len(EvaluationDataset.from_jsonl(out / "memory.jsonl"))
        wait_for(lambda: len(results(out / "watch")) == expected)
    states = [
        messages_from_json(json.dumps(s)) for s in json.loads((out / "states.json").read_text())
    ]
    return {
        "name": request.param,
        "otlp": out / "spans.jsonl",
        "memory": EvaluationDataset.from_jsonl(out / "memory.jsonl"),
        "session": EvaluationDataset.from_jsonl(out / "memory_session.jsonl"),
        "states": states,
        "skipped": json.loads((out / "skipped.json").read_text()),
        "watched": results(out / "watch"),
        "watch_skipped": dict(watcher.skipped),
    }


def _plain(messages: list[Message]) -> list[dict[str, Any]]:
    return [m.model_dump(exclude={"metadata"}) for m in messages]


def test_rebuilt_conversations_equal_the_agents_own_messages(traced: dict[str, Any]) -> None:
    dataset = traced["memory"]
    assert len(dataset) == 2  # one trace per user turn, in order of first span start
    for sample, state in zip(dataset, traced["states"], strict=True):
        assert isinstance(sample, MultiTurnSample)
        assert _plain(sample.user_input) == _plain(state)  # from_langchain(agent's messages)
    last = dataset[1].user_input
    assert [m.type for m in last] == [
        "human",
        "ai",
        "tool",
        "tool",
        "ai",
        "human",
        "ai",
        "tool",
        "ai",
    ]
    assert last[1].tool_calls == [
        ToolCall(name="set_temperature", args={"location": "Kitchen", "temperature": 19}, id="p1"),
        ToolCall(name="set_temperature", args={"location": "Office", "temperature": 22}, id="p2"),
    ]
    assert [m.tool_call_id for m in last if m.type == "tool"] == ["p1", "p2", "g1"]
    ids = set()
    for line in traced["otlp"].read_text().splitlines():
        for span in json.loads(line)["resourceSpans"][0]["scopeSpans"][0]["spans"]:
            ids.add((span["traceId"], span["spanId"]))
    for message in last:
        assert (metadata_of(message)["trace_id"], metadata_of(message)["span_id"]) in ids


def test_otlp_json_export_gives_the_same_samples(traced: dict[str, Any]) -> None:
    assert from_otlp_json(traced["otlp"]).samples == traced["memory"].samples
    assert from_otlp_json(traced["otlp"], group_by="session").samples == traced["session"].samples


def test_trace_metadata_and_run_columns(traced: dict[str, Any]) -> None:
    dataset = traced["memory"]
    meta = dataset[1].metadata
    assert meta["input_tokens"] == 2 * USAGE["input_tokens"]  # two LLM calls in turn 2
    assert meta["output_tokens"] == 2 * USAGE["output_tokens"]
    assert meta["latency_in_seconds"] > 0 and meta["status"] != "ERROR"
    assert "conversion_error" not in meta
    result = evaluate(
        [s.model_copy(update={"reference_tool_calls": []}) for s in dataset],
        ["trajectory_precision"],
        show_progress=False,
    )
    row = result.rows[1]
    assert row.latency_s == meta["latency_in_seconds"] and row.failure == 0
    assert row.agent_usage is not None and row.agent_usage.input_tokens == 100
    assert row.steps == 4  # AI messages of the whole conversation


def test_tool_call_metrics_score_the_same_from_either_source(traced: dict[str, Any]) -> None:
    reference = [
        ToolCall(name="set_temperature", args={"location": "Kitchen", "temperature": 19}),
        ToolCall(name="get_temperature", args={"location": "Office"}),
    ]
    from_traces = traced["memory"][1].model_copy(update={"reference_tool_calls": reference})
    from_agent = MultiTurnSample(user_input=traced["states"][1], reference_tool_calls=reference)
    metrics = [ToolCallF1(), ToolCallAccuracy(), TrajectoryExactMatch()]
    rows = [
        evaluate(EvaluationDataset([sample]), metrics, show_progress=False).rows[0]
        for sample in (from_traces, from_agent)
    ]
    # 3 predicted calls, 1 matches: P = 1/3, R = 1/2, F1 = 2PR/(P+R) = 0.4; names differ -> 0, 0.
    expected = {"tool_call_f1": 0.4, "tool_call_accuracy": 0.0, "trajectory_exact_match": 0.0}
    for row in rows:
        assert {name: row.score(name) for name in expected} == pytest.approx(expected)


def test_session_grouping_joins_the_turns(traced: dict[str, Any]) -> None:
    dataset = traced["session"]
    if traced["name"] == "openinference":  # session.id set with openinference's using_session
        assert len(dataset) == 1
        assert dataset[0].metadata["session_id"] == "conversation-1"
        assert len(dataset[0].metadata["trace_ids"]) == 2
        assert _plain(dataset[0].user_input) == _plain(traced["states"][1])
    else:  # no conversation id recorded: each trace is its own sample
        assert len(dataset) == 2


def test_agent_construction_is_skipped_not_a_failed_row(
    traced: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # OpenLLMetry traces create_react_agent on its own (a "create_agent" span, no LLM span);
    # OpenInference records nothing for it.
    expected = {"no_llm_span": 1} if traced["name"] == "openllmetry" else {}
    lines = traced["otlp"].read_text().splitlines()
    assert len(lines) == 2 + sum(expected.values())  # one trace a line
    assert traced["skipped"] == expected  # from_otel_spans, in memory
    assert from_otlp_json(traced["otlp"]).skipped_traces == expected
    out = tmp_path / "out"
    args = ["evaluate", str(traced["otlp"]), "--metric", "agent_loop_detection", "--quiet"]
    assert main([*args, "--out", str(out)]) == 0  # the default --max-failed 0 holds
    summary = json.loads((out / "summary.json").read_text())
    assert summary["skipped_traces"] == expected
    assert (summary["samples"], summary["failed_rows"]) == (2, 0)
    strict = main([*args, "--out", str(out), "--overwrite", "--strict-traces"])
    assert strict == (3 if expected else 0)
    capsys.readouterr()


def test_the_agents_live_exports_are_scored_by_turneval_watch(traced: dict[str, Any]) -> None:
    """The same run, exported span by span to ``turneval watch``: one row per conversation."""
    memory = traced["memory"]
    rows = {row["id"]: row for row in traced["watched"]}
    assert set(rows) == {sample.metadata["id"] for sample in memory}
    for sample in memory:  # step_budget, max_steps=1: 1/steps, steps = the AI messages
        steps = sum(1 for message in sample.user_input if message.type == "ai")
        assert rows[sample.metadata["id"]]["step_budget"] == min(1.0, 1 / steps)
    # OpenLLMetry's agent-construction trace: no conversation, skipped in both
    assert traced["watch_skipped"]["no_conversation"] == sum(traced["skipped"].values())

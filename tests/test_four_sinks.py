"""One summariser fed by every sink: the same data gives the same summary in memory, streamed
(``evaluate_jsonl``, the CLI's summary.json) and read back from results.jsonl; the fourth
sink, Ray, runs the same data in test_distributed (test_four_sinks_give_one_summary_...).
Agent figures come from traces, trial figures from saved simulated conversations; every figure
of every summary is compared.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from turneval import EvaluationDataset, MultiTurnSample, evaluate
from turneval.engines import Local
from turneval.metrics import ToolCallF1, TrajectorySingleToolUse
from turneval.results import EvaluationResult
from turneval.stream import evaluate_jsonl
from turneval.traces import from_otlp_json, write_otlp_json

from ._builders import call, conversation
from .traces._spans import Recorder, assistant, chat, user

# Three traces: 2 s / 10+5 tokens, 4 s / 20+10 tokens, and a 6 s one that ended in ERROR.
TRACES = ((2, 10, False), (4, 20, False), (6, 30, True))


def traces_file(folder: Path) -> Path:
    """An OTLP/JSON export of :data:`TRACES`, one AI message each (the second calls ``f``)."""
    r = Recorder()
    start = 1_700_000_000_000_000_000
    for number, (seconds, tokens, failed) in enumerate(TRACES):
        root = r.tracer.start_span(
            "agent", attributes={"gen_ai.operation.name": "invoke_agent"}, start_time=start
        )
        with trace.use_span(root, end_on_exit=False):
            output = assistant("", {"id": "c1", "name": "f", "arguments": {}})
            chat(
                r,
                [user(f"hi {number}")],
                [output if number == 1 else assistant("done")],
                gen_ai__usage__input_tokens=tokens,
                gen_ai__usage__output_tokens=tokens // 2,
            )
        if failed:
            root.set_status(Status(StatusCode.ERROR, "boom"))
        root.end(end_time=start + seconds * 10**9)
        start += 10 * 10**9
    path = folder / "traces.jsonl"
    write_otlp_json(r.spans(), path)
    return path


# Saved simulated conversations: scenario -> each trial's (calls made, stop reason).
GRID: dict[str, list[tuple[list[str], str]]] = {
    "refund": [(["a"], "user_done"), (["a"], "user_done"), (["b"], "max_turns")],
    "cancel": [(["a"], "user_done"), (["b"], "user_done"), (["b"], "agent_error")],
    "lookup": [(["b"], "user_done"), (["b"], "user_done"), (["b"], "user_done")],
}


def trials_file(folder: Path) -> Path:
    """Simulated conversations saved as samples (metadata as ``simulate`` writes it)."""
    samples: list[MultiTurnSample] = []
    for scenario, trials in GRID.items():
        for index, (names, stop) in enumerate(trials):
            sample = conversation([call(name) for name in names], reference=[call("a")])
            meta = {"scenario_id": scenario, "trial": index, "stop_reason": stop}
            samples.append(sample.model_copy(update={"metadata": meta}))
    path = folder / "trials.jsonl"
    EvaluationDataset(samples).to_jsonl(path)
    return path


def in_memory(path: Path, metrics: list[Any]) -> dict[str, Any]:
    """The in-memory summary of the same data, as summary.json writes summaries."""
    samples: Any = from_otlp_json(path) if path.name == "traces.jsonl" else None
    if samples is None:
        samples = EvaluationDataset.from_jsonl(path)
    return evaluate(samples, metrics).summary().to_dict()


def the_same(summaries: dict[str, dict[str, dict[str, Any]]]) -> None:
    """Every sink's summary holds the same figures as the first (exactly: one summariser)."""
    (first, expected), *others = summaries.items()
    for sink, summary in others:
        assert summary == expected, f"{sink} differs from {first}"


def test_traces_give_the_agent_figures_in_memory_streamed_and_read_back(tmp_path: Path) -> None:
    path = traces_file(tmp_path)
    metrics = [TrajectorySingleToolUse(tool_name="f")]
    memory = in_memory(path, metrics)
    streamed = evaluate_jsonl(path, metrics, tmp_path / "out", engine=Local(workers=1))
    written = json.loads((tmp_path / "out" / "summary.json").read_text())["metrics"]
    back = EvaluationResult.from_jsonl(tmp_path / "out" / "results.jsonl").summary().to_dict()
    the_same({"memory": memory, "summary.json": written, "from_jsonl": back})
    # by hand: the two traces that succeeded (2 s, 4 s; 15 and 30 tokens), 1 failure in 3
    assert list(written)[:4] == ["latency_in_seconds", "failure", "agent_total_tokens", "steps"]
    assert written["latency_in_seconds"]["mean"] == pytest.approx(3.0)
    assert written["latency_in_seconds"]["failed"] == 1  # the failed run is left out
    assert written["failure"]["mean"] == pytest.approx(1 / 3)
    assert written["agent_total_tokens"]["mean"] == pytest.approx(22.5)
    assert written["steps"]["mean"] == 1.0
    assert written["trajectory_single_tool_use"]["mean"] == pytest.approx(1 / 3)
    assert {**streamed.agent_summaries, **streamed.summaries} == EvaluationResult.from_jsonl(
        tmp_path / "out" / "results.jsonl"
    ).summary()
    rows = [
        json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()
    ]
    assert [row["source"] for row in rows] == ["traces"] * 3


def test_saved_trials_give_pass_k_in_memory_streamed_and_read_back(tmp_path: Path) -> None:
    path = trials_file(tmp_path)
    metrics = [ToolCallF1()]
    memory = in_memory(path, metrics)
    evaluate_jsonl(path, metrics, tmp_path / "out", engine=Local(workers=1))
    written = json.loads((tmp_path / "out" / "summary.json").read_text())["metrics"]
    back = EvaluationResult.from_jsonl(tmp_path / "out" / "results.jsonl").summary().to_dict()
    the_same({"memory": memory, "summary.json": written, "from_jsonl": back})
    extra = written["tool_call_f1"]["extra"]
    # by hand: successes (F1 = 1) per scenario: refund 2/3, cancel 1/3, lookup 0/3
    assert extra["pass^1"] == pytest.approx((2 / 3 + 1 / 3 + 0) / 3)
    assert extra["pass^3"] == 0.0  # no scenario passed all three
    assert extra["pass@3"] == pytest.approx(2 / 3)  # refund and cancel passed once
    assert extra["pass^2"] == pytest.approx((1 / 3 + 0 + 0) / 3)  # C(2,2)/C(3,2) for refund
    assert extra["flaky_scenarios"] == 2.0
    assert extra["success_rate"] == extra["pass^1"]

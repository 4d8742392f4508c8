"""The shipped labeled example (τ-bench's rewards) and the demo that optimises on it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from turneval.calibration.examples import tau_bench_airline, write_tau_bench_airline
from turneval.dataset import EvaluationDataset
from turneval.judge import JudgeConfig


def test_the_tau_bench_example_is_what_the_script_made() -> None:
    rows = tau_bench_airline()
    assert len(rows) == 100  # trials 0 and 1 of the 50 airline tasks
    ids = [sample.metadata["id"] for sample, _, _ in rows if sample.metadata]
    assert len(set(ids)) == 100
    assert {(s.metadata or {})["trial"] for s, _, _ in rows} == {0, 1}
    assert sum(value for _, value, _ in rows) == 43  # rewards of 1, as published
    assert all(reason.startswith("tau-bench reward") for _, _, reason in rows)
    assert all(m.type != "system" for s, _, _ in rows for m in s.user_input)
    assert len(tau_bench_airline(limit=7)) == 7


def test_the_example_as_files(tmp_path: Path) -> None:
    data, labels = write_tau_bench_airline(tmp_path, limit=12)
    assert len(EvaluationDataset.from_jsonl(data)) == 12
    records = [json.loads(line) for line in labels.read_text().splitlines()]
    assert [r["index"] for r in records] == list(range(12))
    assert {r["metric"] for r in records} == {"agent_goal_accuracy_without_reference"}


def test_the_demo_runs_offline(tmp_path: Path, capsys: Any) -> None:
    import runpy

    root = Path(__file__).resolve().parents[2]
    demo = runpy.run_path(str(root / "examples" / "optimize_judge.py"))
    assert demo["main"](tmp_path) == 0
    printed = capsys.readouterr().out
    assert "kappa on 30 validation rows (never seen by the search; 70 rows searched on)" in printed
    assert "training agreement (optimisation rows, not evidence)" in printed
    config = JudgeConfig.load(tmp_path / "judge-config.json")
    assert demo["RULE"] in config.instructions and config.labels_digest

"""The demo's run folders are run folders as ``evaluate`` writes them, ``run.json`` included.

Without ``run.json`` (what the run was started with), ``compare`` of two demo runs checked no
metric configuration and a demo folder could not be told from a foreign one.
"""

import json
from pathlib import Path

import pytest

from turneval.compare import compare_files
from turneval.demo import DOMAINS, RULE_BASED, build_team_rows, run_demo
from turneval.engines import Local
from turneval.metrics import Evaluator, ToolCallAccuracy, TrajectorySingleToolUse
from turneval.stream import evaluate_jsonl


def test_every_demo_run_folder_has_the_run_json_evaluate_writes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "demo"
    assert run_demo(out) == 0
    capsys.readouterr()
    runs = sorted(path.parent for path in out.glob("*/results.jsonl"))
    assert [run.name for run in runs] == sorted([*(domain.name for domain in DOMAINS), "team"])
    for domain in DOMAINS:
        folder = out / domain.name
        record = json.loads((folder / "run.json").read_text(encoding="utf-8"))
        source = out / "data" / f"{domain.name}.jsonl"
        lines = source.read_text(encoding="utf-8").splitlines()
        assert record["dataset"]["path"] == str(source)
        assert record["dataset"]["lines_read"] == len(lines) == 32
        assert [m["name"] for m in record["metrics"]] == [
            *RULE_BASED,
            "tool_call_accuracy_unordered",
            "trajectory_single_tool_use",
        ]
        assert record["judge"] == {"model": None, "base_url": None, "prompt_version": None}
        # The same input, scored by evaluate with the same metrics, records the same run.
        metrics: list[Evaluator | str] = [
            *RULE_BASED,
            ToolCallAccuracy(name="tool_call_accuracy_unordered", strict_order=False),
            TrajectorySingleToolUse(tool_name=domain.key_tool),
        ]
        evaluated = tmp_path / "evaluated" / domain.name
        evaluate_jsonl(source, metrics, evaluated, engine=Local(workers=1), show_progress=False)
        assert json.loads((evaluated / "run.json").read_text(encoding="utf-8")) == record
        assert (folder / "results.jsonl").read_text().count("\n") == len(lines)


def test_two_demo_runs_compare_with_their_configurations_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_demo(tmp_path / "base")
    run_demo(tmp_path / "cand")
    capsys.readouterr()
    comparison = compare_files(tmp_path / "base" / "on_device", tmp_path / "cand" / "on_device")
    assert not any("not checked" in note for note in comparison.config_notes)
    assert comparison.metrics["tool_call_f1"].difference == 0.0


def test_the_team_run_breaks_figures_down_by_agent_and_clusters_its_failures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from turneval.clusters import cluster_failures, read_run

    run_demo(tmp_path)
    printed = capsys.readouterr().out
    assert "team (a supervisor, a flights and a hotels agent): 24 samples" in printed
    assert "by agent: supervisor 1.000, flights 1.000, hotels 0.500" in printed  # in-order match
    folder = tmp_path / "team"
    record = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    assert record["dataset"]["lines_read"] == 24 == len(build_team_rows())
    summary = json.loads((folder / "summary.json").read_text())["metrics"]
    # the flights agent books the hotel itself in 6 of 24 rows: 1 of its 4 calls there
    assert summary["tool_permission"]["extra"]["by_agent.flights"] == (18 + 6 * 3 / 4) / 24
    result = read_run(folder)
    behaviours = [str(row.stored_id).rsplit("-", 1)[1] for row in result.rows]
    clusters = cluster_failures(result.rows, fail_under=1.0)
    groups = sorted(sorted({behaviours[r.index] for r in c.rows}) for c in clusters)
    assert groups == [["wrong_argument"], ["wrong_handoff"], ["wrong_tool"]]

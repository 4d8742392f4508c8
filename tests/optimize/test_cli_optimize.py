"""``turneval optimize`` and ``--judge-config`` end to end, against a stub OpenAI server.

The stub answers every judge request with a verdict seeded by its messages (and batches of
them): the mechanics (files, store, budget, batch path, run.json, compare, regrade, viewer),
not a model's judgement.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_openai import ChatOpenAI
from starlette.testclient import TestClient

from turneval.calibration import optimize
from turneval.cli import main
from turneval.judge import JudgeConfig
from turneval.metrics import AgentGoalAccuracyWithoutReference
from turneval.store import RunStore
from turneval.view import create_app

from .._batch_stub import BatchStub
from ._judges import RULE, fake_reflection, rows

NAME = "agent_goal_accuracy_without_reference"


class RecordingStub(BatchStub):
    """The batch stub, keeping the body of every live chat completion too."""

    def __init__(self) -> None:
        super().__init__()
        self.bodies: list[dict[str, Any]] = []

    def post(self, path: str, raw: bytes, content_type: str | None) -> Any:
        if path == "/v1/chat/completions":
            with self.lock:
                self.bodies.append(json.loads(raw))
        return super().post(path, raw, content_type)


@pytest.fixture(scope="module")
def stub() -> Iterator[RecordingStub]:
    server = RecordingStub()
    yield server
    server.close()


@pytest.fixture
def fresh(stub: RecordingStub) -> RecordingStub:
    stub.reset()
    stub.bodies.clear()
    stub.instant = True
    return stub


def judge(stub: BatchStub) -> ChatOpenAI:
    return ChatOpenAI(model="gpt-4o-mini", base_url=stub.url, api_key="test-key", max_retries=0)


def write_files(tmp_path: Path) -> tuple[Path, Path]:
    labeled = rows({"done": 6, "refused": 4, "failed": 4, "noise": 2})
    data, labels = tmp_path / "data.jsonl", tmp_path / "labels.jsonl"
    data.write_text("".join(s.model_dump_json() + "\n" for s, _, _ in labeled))
    labels.write_text(
        "".join(
            json.dumps({"index": i, "metric": NAME, "label": label, "reason": reason}) + "\n"
            for i, (_, label, reason) in enumerate(labeled)
        )
    )
    return data, labels


def stub_flags(stub: BatchStub) -> list[str]:
    return ["--judge-base-url", stub.url, "--judge-model", "gpt-4o-mini"]


def test_optimize_from_files_keeps_the_budget_and_writes_the_config(
    fresh: RecordingStub, tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    data, labels = write_files(tmp_path)
    common = ["optimize", "--metric", NAME, "--data", str(data), "--labels", str(labels)]
    assert main([*common, "--dry-run", "--budget", "90"]) == 0
    planned = capsys.readouterr().out
    assert "no model is called" in planned
    expected = re.search(r"expected calls: at most (\d+)", planned)
    assert expected is not None and int(expected.group(1)) <= 90
    assert fresh.sync_requests == 0
    out, report = tmp_path / "judge.json", tmp_path / "report.json"
    args = [*common, *stub_flags(fresh), "--budget", "90", "--rounds", "3"]
    assert main([*args, "--output", str(out), "--report", str(report)]) == 0
    assert fresh.sync_requests <= 90
    printed = capsys.readouterr().out
    assert "validation rows (never seen by the search" in printed
    assert "training agreement (optimisation rows, not evidence)" in printed
    config = JudgeConfig.load(out)
    assert config.metric == NAME and config.model == "gpt-4o-mini"
    assert json.loads(report.read_text())["judge_calls"] <= 90


def test_the_batch_path_sends_the_same_requests_as_the_live_path(
    fresh: RecordingStub, tmp_path: Path
) -> None:
    labeled = rows({"done": 6, "refused": 4, "failed": 4, "noise": 2})
    options: dict[str, Any] = {"seed": 3, "rounds": 3, "resamples": 50}
    metric = AgentGoalAccuracyWithoutReference()
    live = optimize(metric, labeled, llm=judge(fresh), reflection_llm=fake_reflection(), **options)
    sent_live = sorted(json.dumps(body["messages"]) for body in fresh.bodies)
    fresh.reset()
    fresh.bodies.clear()
    fresh.instant = True
    batched = optimize(
        metric,
        labeled,
        llm=judge(fresh),
        reflection_llm=fake_reflection(),
        engine="batch",
        poll_interval=0,
        batch_dir=tmp_path / "batches",
        **options,
    )
    assert fresh.sync_requests == 0  # every judge request went through a batch
    sent_batch = sorted(
        json.dumps(line["body"]["messages"]) for lines in fresh.lines.values() for line in lines
    )
    assert sent_batch == sent_live
    assert batched.config.digest == live.config.digest
    assert batched.judge_calls == live.judge_calls == len(sent_live)


def test_a_stored_run_to_a_kept_config_to_the_next_run_and_a_regrade(
    fresh: RecordingStub, tmp_path: Path, capsys: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    data, labels = write_files(tmp_path)
    store = str(tmp_path / "runs.db")
    first = tmp_path / "first"
    evaluate = ["evaluate", str(data), "--metric", NAME, *stub_flags(fresh), "--store", store]
    assert main([*evaluate, "--out", str(first)]) == 0
    with RunStore(store) as kept:
        (run,) = kept.runs()
        for line in labels.read_text().splitlines():
            record = json.loads(line)
            kept.add_label(
                metric=NAME,
                label=record["label"],
                run_id=run.id,
                row_index=record["index"],
                note=record["reason"],
            )
    out = tmp_path / "judge.json"
    optimise = ["optimize", "--metric", NAME, "--run", run.id[:8], "--store", store]
    assert main([*optimise, *stub_flags(fresh), "--rounds", "2", "--output", str(out)]) == 0
    assert "kept as judge configuration" in capsys.readouterr().out
    with RunStore(store) as kept:
        (stored,) = kept.judge_configs(run_id=run.id)
        assert stored.metric == NAME and stored.digest == JudgeConfig.load(out).digest
        page = TestClient(create_app(kept)).get(f"/judges/{stored.id}").text
        listing = TestClient(create_app(kept)).get("/judges").text
    assert "Instructions (old → new)" in page and "validation rows" in page
    assert f"/judges/{stored.id}" in listing
    # a configuration of our own, so that the next run surely judges otherwise
    mine = JudgeConfig(metric=NAME, instructions=RULE).save(tmp_path / "mine.json")
    second = tmp_path / "second"
    assert main([*evaluate, "--out", str(second), "--judge-config", str(mine)]) == 0
    recorded = json.loads((second / "run.json").read_text())
    assert recorded["judge"]["configs"][NAME]["digest"] == JudgeConfig.load(mine).digest
    (metric,) = recorded["metrics"]
    assert metric["config"]["judge_config"]["instructions"] == RULE
    capsys.readouterr()
    assert main(["compare", str(first), str(second)]) == 2  # the judge changed: refused
    assert "judge_config" in capsys.readouterr().err
    regrade = ["regrade", run.id[:8], "--store", store, "--judge-config", str(mine)]
    assert main([*regrade, *stub_flags(fresh)]) == 0
    shown = capsys.readouterr().out
    assert f"{NAME}:" in shown and "rows changed" in shown


def test_a_judge_config_for_another_metric_is_refused(tmp_path: Path, capsys: Any) -> None:
    data, _ = write_files(tmp_path)
    other = JudgeConfig(metric="fluency", instructions="x").save(tmp_path / "other.json")
    code = main(
        ["evaluate", str(data), "--metric", NAME, "--judge-config", str(other), "--dry-run"]
    )
    assert code == 2
    assert "is for fluency" in capsys.readouterr().err

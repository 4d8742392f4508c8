"""Runs kept by every front end: evaluate, EvalTask, simulate, the demo; a failed run's reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from turneval import EvalTask, MultiTurnSample, evaluate
from turneval.cli import main
from turneval.demo import DOMAINS
from turneval.simulation import ScriptedUser, simulate
from turneval.store import RunStore

from ._helpers import sample_row

pytest.importorskip("sqlalchemy")


def test_simulate_and_eval_task_keep_their_runs(store_url: str) -> None:
    def echo(messages: list[Any]) -> list[Any]:
        return [*messages, {"type": "ai", "content": "ok"}]

    scenarios = [{"id": "a", "goal": "g"}, {"id": "b", "goal": "h"}]
    dataset = simulate(echo, scenarios, user=ScriptedUser(["hi"]), trials=2, store=store_url)
    with RunStore(store_url) as store:
        (run,) = store.runs()
        assert (run.name, run.status, run.rows, run.metrics) == ("simulate", "finished", 4, [])
        stored = store.samples(run.id, range(4))
    assert [stored[i] for i in range(4)] == [
        json.loads(sample.model_dump_json(exclude_none=True)) for sample in dataset.samples
    ]
    # EvalTask: the conversations scored (no reference calls: every row fails, and is kept)
    result = EvalTask(dataset, ["tool_call_f1"]).evaluate(store=store_url)
    with RunStore(store_url) as store:
        task = store.runs()[0]
        assert (task.name, task.status, task.rows) == ("EvalTask", "finished", 4)
        assert task.summary is not None and task.summary["failed_rows"] == 4
        assert [row.index for row in store.rows_page(task.id, failed=True)] == [0, 1, 2, 3]
        assert store.rows_page(task.id, failed=False) == []
        assert list(store.records(task.id)) == json.loads(json.dumps(result.records(details=True)))


def test_demo_keeps_its_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    url = str(tmp_path / "demo.db")
    assert main(["demo", "--out", str(tmp_path / "out"), "--store", url]) == 0
    printed = capsys.readouterr().out
    assert f"turneval store list --store {url}" in printed
    assert f"turneval view --store {url}" in printed
    with RunStore(url) as store:
        runs = store.runs()
        assert sorted(run.name for run in runs) == sorted(
            [*(f"demo: {d.name}" for d in DOMAINS), "demo: team"]
        )
        for run in runs:
            folder = tmp_path / "out" / run.name.removeprefix("demo: ")
            lines = (folder / "results.jsonl").read_text().splitlines()
            assert [json.loads(line) for line in lines] == list(store.records(run.id))


def test_a_run_fail_on_error_stops_is_failed_with_its_reason(tmp_path: Path) -> None:
    from turneval.errors import EvaluationAbortedError

    broken = MultiTurnSample.model_validate(sample_row(0, True) | {"reference_tool_calls": None})
    url = str(tmp_path / "runs.db")
    with pytest.raises(EvaluationAbortedError):
        evaluate([broken], ["tool_call_f1"], store=url, fail_on_error=True)
    with RunStore(url) as store:
        (run,) = store.runs()
        assert (run.status, run.rows) == ("failed", 1)
        assert run.error is not None and run.error.startswith("fail_on_error=True: 1 of 1 rows")
        assert run.summary is not None and run.summary["failed_rows"] == 1

"""``turneval scenarios generate|accepted`` against the OpenAI stub (real ChatOpenAI)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from turneval.cli import main
from turneval.simulation import Scenario

from .._openai_stub import OpenAIStub, Reply
from ._helpers import record

TOOLS = {"tools": [{"name": "search", "description": "Search."}, {"name": "book"}]}


@pytest.fixture
def tools_file(tmp_path: Path) -> Path:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps(TOOLS))
    return path


def flags(stub: OpenAIStub) -> list[str]:
    return ["--judge-base-url", stub.url, "--judge-model", "gen", "--quiet"]


def test_generate_writes_scenarios_report_and_progress(
    openai_stub: OpenAIStub, tools_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    openai_stub.reset(default=Reply(from_schema=True), schema_seed=3)
    out = tmp_path / "set.jsonl"
    command = [
        "scenarios",
        "generate",
        "--from",
        "tools",
        str(tools_file),
        "-n",
        "4",
        "--output",
        str(out),
        "--no-dedup",
        *flags(openai_stub),
    ]
    assert main(command) == 0
    printed = capsys.readouterr().out
    assert "generated 4 scenarios from tools (seed 0, model gen): 1 requests" in printed
    assert "coverage of 4 scenarios" in printed and f"wrote 4 scenarios to {out}" in printed
    assert len(Scenario.from_jsonl(out)) == 4 and len(openai_stub.requests) == 1
    assert "<h2>Coverage</h2>" in (tmp_path / "set.html").read_text()
    assert (tmp_path / "set.jsonl.progress.jsonl").exists()
    # the same command again: answered by the progress file, nothing sent
    assert main(command) == 0
    assert len(openai_stub.requests) == 1 and "1 answered before, 0 sent" in capsys.readouterr().out


def test_dry_run_counts_and_prices_without_asking(
    openai_stub: OpenAIStub, tools_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    openai_stub.reset(default=Reply(from_schema=True))
    code = main(
        [
            "scenarios",
            "generate",
            "--from",
            "tools",
            str(tools_file),
            "-n",
            "12",
            "--dry-run",
            "--price-input",
            "1",
            "--price-output",
            "4",
            *flags(openai_stub),
        ]
    )
    assert code == 0 and openai_stub.requests == []
    printed = capsys.readouterr().out
    assert "3 requests for 12 scenarios; 0 already answered" in printed
    assert "estimated cost: " in printed and "12 * 250" not in printed


def test_a_world_by_module_name(
    openai_stub: OpenAIStub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    openai_stub.reset(default=Reply(from_schema=True), schema_seed=1)
    out = tmp_path / "world.jsonl"
    code = main(
        [
            "scenarios",
            "generate",
            "--from",
            "world",
            "turneval.simulation.domains:orders_world",
            "-n",
            "5",
            "--output",
            str(out),
            "--report",
            str(tmp_path / "r.html"),
            *flags(openai_stub),
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "whose reference actions failed on the world" in printed
    for scenario in Scenario.from_jsonl(out):
        assert record(scenario)["world"] == "orders"


def test_failed_requests_exit_3_and_a_rerun_asks_them(
    openai_stub: OpenAIStub, tools_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    openai_stub.reset(Reply(status=400), default=Reply(from_schema=True), schema_seed=2)
    out = tmp_path / "set.jsonl"
    command = [
        "scenarios",
        "generate",
        "--from",
        "tools",
        str(tools_file),
        "-n",
        "4",
        "--batch-size",
        "2",
        "--llm-concurrency",
        "1",
        "--output",
        str(out),
        "--no-dedup",
        *flags(openai_stub),
    ]
    assert main(command) == 3
    assert "1 request(s) failed; run the same command again" in capsys.readouterr().err
    assert len(Scenario.from_jsonl(out)) == 2
    assert main(command) == 0
    assert len(openai_stub.requests) == 3 and len(Scenario.from_jsonl(out)) == 4


def test_review_keeps_only_the_accepted(
    openai_stub: OpenAIStub,
    tools_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    pytest.importorskip("starlette")
    from turneval.store import RunStore

    openai_stub.reset(default=Reply(from_schema=True), schema_seed=4)
    store = str(tmp_path / "runs.db")
    served: list[Any] = []

    def reviewer(url: str, **options: Any) -> None:  # what a person does in the viewer
        served.append((url, options))
        with RunStore(url) as opened:
            run = opened.runs()[0]
            for index in range(run.rows):
                opened.add_label(
                    metric="accept", label=int(index != 0), run_id=run.id, row_index=index
                )

    monkeypatch.setattr("turneval.view.serve", reviewer)
    out = tmp_path / "set.jsonl"
    code = main(
        [
            "scenarios",
            "generate",
            "--from",
            "tools",
            str(tools_file),
            "-n",
            "3",
            "--output",
            str(out),
            "--no-dedup",
            "--review",
            "--store",
            store,
            "--port",
            "9999",
            *flags(openai_stub),
        ]
    )
    assert code == 0 and served == [(store, {"port": 9999})]
    printed = capsys.readouterr().out
    assert "/label?metric=accept&mode=all (1 accepts, 0 rejects" in printed
    assert "2 accepted, 1 rejected, 0 not labeled" in printed
    kept = Scenario.from_jsonl(out)
    assert [s.id for s in kept] == ["tools-0-002", "tools-0-003"]
    with RunStore(store) as opened:
        run_id = opened.runs()[0].id
    again = tmp_path / "again.jsonl"
    assert (
        main(["scenarios", "accepted", run_id[:8], "--output", str(again), "--store", store]) == 0
    )
    assert [s.id for s in Scenario.from_jsonl(again)] == ["tools-0-002", "tools-0-003"]


def test_usage_errors_are_one_line(tools_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "scenarios",
                "generate",
                "--from",
                "tools",
                str(tools_file),
                "--judge-model",
                "x",
                "--judge-base-url",
                "http://127.0.0.1:9",
            ]
        )
        == 2
    )
    assert "--output FILE is needed" in capsys.readouterr().err
    assert (
        main(["scenarios", "generate", "--from", "world", "nowhere:thing", "--output", "x.jsonl"])
        == 2
    )
    assert "cannot import nowhere" in capsys.readouterr().err
    assert (
        main(["scenarios", "generate", "--from", "failures", "missing-run", "--output", "x.jsonl"])
        == 2
    )
    assert "give --store URL" in capsys.readouterr().err


def test_engine_batch_then_a_live_run_that_sends_nothing(
    tools_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from .._batch_stub import BatchStub

    stub = BatchStub()
    try:
        out = tmp_path / "set.jsonl"
        code = main(
            [
                "scenarios",
                "generate",
                "--from",
                "tools",
                str(tools_file),
                "-n",
                "6",
                "--batch-size",
                "3",
                "--output",
                str(out),
                "--no-dedup",
                "--engine",
                "batch",
                "--poll-interval",
                "0",
                "--judge-base-url",
                stub.url,
                "--judge-model",
                "gpt-4o-mini",
                "--quiet",
            ]
        )
        assert code == 0, capsys.readouterr().err
        assert len(stub.submitted) == 2 and stub.sync_requests == 0  # all through the batches
        printed = capsys.readouterr().out
        assert "batches: 2/2 answered" in printed and "0 sent, 2 from the cache" in printed
        assert len(Scenario.from_jsonl(out)) == 6
        assert (tmp_path / "set.jsonl.batch" / "state.sqlite").exists()
    finally:
        stub.close()


def test_conversations_scenarios_and_a_run_folders_failures(
    openai_stub: OpenAIStub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from turneval import EvaluationDataset

    openai_stub.reset(default=Reply(from_schema=True), schema_seed=5)
    data = tmp_path / "data.jsonl"
    rows = [
        {
            "user_input": [
                {"type": "human", "content": f"book {city}, mail me at ann@corp.io"},
                {
                    "type": "ai",
                    "content": "",
                    "tool_calls": [{"name": "book", "args": {"city": city}}],
                },
                {"type": "tool", "content": "booked"},
                {"type": "ai", "content": "done"},
            ],
            "reference_tool_calls": [{"name": "book", "args": {"city": "Rome"}}],
        }
        for city in ("Rome", "Oslo", "Lima")
    ]
    EvaluationDataset.from_list(rows).to_jsonl(data)
    out = tmp_path / "distilled.jsonl"
    base = [*flags(openai_stub), "--no-dedup"]
    assert (
        main(
            [
                "scenarios",
                "generate",
                "--from",
                "conversations",
                str(data),
                "--output",
                str(out),
                *base,
            ]
        )
        == 0
    )
    assert len(Scenario.from_jsonl(out)) == 3 and len(openai_stub.requests) == 3
    assert all("ann@corp.io" not in str(body) for body in openai_stub.requests)
    varied = tmp_path / "varied.jsonl"
    assert (
        main(
            [
                "scenarios",
                "generate",
                "--from",
                "scenarios",
                str(out),
                "-n",
                "4",
                "--output",
                str(varied),
                *base,
            ]
        )
        == 0
    )
    assert len(Scenario.from_jsonl(varied)) == 4  # 3 kinds for the first, 1 for the next
    run = tmp_path / "run"
    assert main(
        [
            "evaluate",
            str(data),
            "--metric",
            "tool_call_f1",
            "--out",
            str(run),
            "--quiet",
            "--max-failed",
            "1.0",
        ]
    ) in (0, 1)
    near = tmp_path / "near.jsonl"
    code = main(
        [
            "scenarios",
            "generate",
            "--from",
            "failures",
            str(run),
            "--data",
            str(data),
            "--output",
            str(near),
            *base,
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    # Oslo and Lima fail alike (the reference books Rome): one group, three near misses
    assert "generated 3 scenarios from failures (seed 0, model gen): 1 requests" in printed
    missing = main(
        ["scenarios", "generate", "--from", "failures", str(run), "--output", str(near), *base]
    )
    assert missing == 2 and "needs --data INPUT.jsonl" in capsys.readouterr().err

"""A real ChatOpenAI judge keeps working across event loops: repeated sync runs, score() loops,
several asyncio.run calls and the CLI's chunks. The stub keeps connections alive, as real
servers do, so a client bound to a closed loop would fail ("Event loop is closed")."""

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from turneval import HumanMessage, MultiTurnSample, aevaluate, evaluate
from turneval.agents import EvalTask
from turneval.cli import main
from turneval.errors import SyncInAsyncContextError
from turneval.judge import Judge
from turneval.metrics import AgentGoalAccuracyWithoutReference
from turneval.metrics.base import run_sync

from .._builders import call, conversation, messages_of
from .._openai_stub import OpenAIStub, Reply

VERDICT = json.dumps({"user_goal": "g", "end_state": "e", "reason": "r", "achieved": True})
NAME = "agent_goal_accuracy_without_reference"


class Verdict(BaseModel):
    reason: str
    achieved: bool


@pytest.fixture(scope="module")
def keep_alive_server() -> Iterator[OpenAIStub]:
    stub = OpenAIStub(keep_alive=True)
    yield stub
    stub.close()


@pytest.fixture
def stub(keep_alive_server: OpenAIStub) -> OpenAIStub:
    keep_alive_server.reset(default=Reply(VERDICT))
    return keep_alive_server


def model(stub: OpenAIStub) -> ChatOpenAI:
    return ChatOpenAI(model="judge", base_url=stub.url, api_key="test-key")


def dataset(size: int) -> list[Any]:
    return [
        conversation([call("lookup", n=i)], reference=[call("lookup", n=i)]) for i in range(size)
    ]


def failures(result: Any) -> list[str]:
    return [str(f) for row in result.rows for f in row.failures.values()]


def test_three_sync_runs_in_a_row(stub: OpenAIStub) -> None:
    llm = model(stub)
    for run in range(3):
        result = evaluate(dataset(4), [AgentGoalAccuracyWithoutReference(llm=llm)])
        assert failures(result) == [], f"run {run + 1}"
        assert result.scores(NAME) == [1.0] * 4
    assert len(stub.requests) == 12  # one judge request per row and run


def test_score_in_a_loop(stub: OpenAIStub) -> None:
    metric = AgentGoalAccuracyWithoutReference(llm=model(stub))
    sample = dataset(1)[0]
    assert [metric.multi_turn_score(sample) for _ in range(3)] == [1.0] * 3
    assert [metric.score(sample).value for _ in range(2)] == [1.0] * 2
    assert len(stub.requests) == 5


def test_two_asyncio_runs(stub: OpenAIStub) -> None:
    llm = model(stub)
    for _ in range(2):
        result = asyncio.run(aevaluate(dataset(3), [NAME], llm=llm, show_progress=False))
        assert failures(result) == []
    judge = Judge(llm)

    async def ask() -> bool:
        reply = await judge.ask("s", "q", Verdict)
        return reply.parsed.achieved

    assert [asyncio.run(ask()) for _ in range(2)] == [True, True]  # no run: one call's scope


def test_judged_cli_file_over_several_chunks(
    stub: OpenAIStub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 2,500 lines in three chunks of 1,000; 30 distinct samples per chunk, repeated, so the
    # cache answers the repeats and each chunk's event loop still makes its own requests.
    keys = [(number // 1000) * 30 + number % 30 for number in range(2500)]
    samples = dataset(90)
    data = tmp_path / "data.jsonl"
    data.write_text("".join(samples[k].model_dump_json(exclude_none=True) + "\n" for k in keys))
    out = tmp_path / "out"
    code = main(
        [
            "evaluate",
            str(data),
            "--metric",
            NAME,
            "--judge-model",
            "stub-model",
            "--judge-base-url",
            stub.url,
            "--cache",
            str(tmp_path / "cache.sqlite"),
            "--concurrency",
            "4",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    assert code == 0, capsys.readouterr().err
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2500 and all(row[NAME] == 1.0 for row in rows)
    assert json.loads((out / "summary.json").read_text())["metrics"][NAME]["failed"] == 0
    asked = {json.dumps(r["messages"]) for r in stub.requests}
    assert len(asked) == 90 and stub.connections > 3  # every chunk asked; pooled connections


def test_sync_wrappers_share_one_long_lived_loop() -> None:
    async def current() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    first, second = run_sync(current), run_sync(current)
    assert first is second and not first.is_closed()

    async def nested() -> None:
        run_sync(current)

    with pytest.raises(SyncInAsyncContextError, match="inside a running event loop"):
        asyncio.run(nested())


def test_an_openai_agent_across_sync_runs(stub: OpenAIStub) -> None:
    # The agent's own client is langchain's shared one: the long-lived sync loop keeps it valid.
    agent = ChatOpenAI(model="agent", base_url=stub.url, api_key="test-key")
    stub.reset(default=Reply("hello there"))
    sample = MultiTurnSample(user_input=[HumanMessage(content="hi")], reference_tool_calls=[])
    for _ in range(3):
        row = EvalTask([sample], ["tool_call_f1"]).evaluate(runnable=agent).rows[0]
        assert row.agent_error is None and messages_of(row.sample)[-1].content == "hello there"


async def test_every_request_in_flight_has_its_own_pooled_connection(stub: OpenAIStub) -> None:
    # 16 judge requests at once: all 16 reach the server together (none waits for a pooled
    # connection), and the second wave reuses the first wave's 16 connections.
    stub.reset(default=Reply(VERDICT, delay=0.3))
    before = stub.connections
    metric = AgentGoalAccuracyWithoutReference(llm=model(stub))
    result = await aevaluate(
        dataset(32), [metric], max_concurrency=16, max_llm_concurrency=16, show_progress=False
    )
    assert failures(result) == [] and len(stub.requests) == 32
    assert stub.peak_in_flight == 16
    assert stub.connections - before == 16

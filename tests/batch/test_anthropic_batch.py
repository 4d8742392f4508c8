"""Anthropic: a live judge through ChatAnthropic (forced tool) and Message Batches, on 127.0.0.1."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_anthropic import ChatAnthropic
from pydantic import BaseModel

from turneval import evaluate
from turneval.batch import BatchRun, submit
from turneval.judge import Judge
from turneval.llms import SQLiteCache

from .._batch_stub import BatchStub, Failing, anthropic_answer
from .test_openai_batch import Killed, once_submitted, samples, values


def claude(stub: BatchStub) -> ChatAnthropic:
    return ChatAnthropic(
        model="claude-stub-1", base_url=stub.anthropic_url, api_key="test-key", max_retries=0
    )


class Verdict(BaseModel):
    reason: str
    score: int


async def test_live_judge_through_chat_anthropic_uses_a_forced_tool(stub: BatchStub) -> None:
    reply = await Judge(claude(stub)).ask("system text", "user text", Verdict)
    body = {
        "system": "system text",
        "messages": [{"role": "user", "content": "user text"}],
        "tools": [{"name": "Verdict", "input_schema": Verdict.model_json_schema()}],
    }
    expected = anthropic_answer(body)["content"][0]["input"]
    assert reply.parsed == Verdict.model_validate(expected)
    assert (reply.usage.input_tokens, reply.usage.output_tokens, reply.usage.calls) == (100, 20, 1)
    assert stub.sync_requests == 1


def test_message_batches_equal_the_live_run(stub: BatchStub, tmp_path: Path) -> None:
    stub.inject = Failing(3, "expired")
    data = samples(12)
    run = submit(data, ["fluency", "exact_match"], llm=claude(stub), out=tmp_path / "run")
    status = run.wait(progress=False, poll_interval=0)
    assert status.rounds == 2 and status.answered == 12
    assert any(c.endswith("-2") for c in stub.submitted)
    batch = run.collect()
    assert stub.sync_requests == 0
    live = evaluate(data, ["fluency", "exact_match"], llm=claude(stub))
    assert stub.sync_requests == 12
    assert values(batch, "fluency") == values(live, "fluency")
    stub.sync_requests = 0
    cache = SQLiteCache(tmp_path / "run" / "cache.sqlite")
    evaluate(data, ["fluency"], llm=claude(stub), cache=cache)
    assert stub.sync_requests == 0


def test_restart_matches_an_unrecorded_message_batch(
    stub: BatchStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from turneval.batch._providers import AnthropicProvider

    real = AnthropicProvider.create

    def dying(self: AnthropicProvider, requests: Any, metadata: Any) -> str:
        real(self, requests, metadata)
        raise Killed  # the provider has the batch; the folder never learnt its id

    monkeypatch.setattr(AnthropicProvider, "create", dying)
    with pytest.raises(Killed):
        submit(samples(12), ["fluency"], llm=claude(stub), out=tmp_path / "run")
    monkeypatch.setattr(AnthropicProvider, "create", real)
    run = BatchRun.open(tmp_path / "run", llm=claude(stub))
    status = run.wait(progress=False, poll_interval=0)
    assert status.answered == 12 and len(stub.submitted) == 12
    once_submitted(stub)


def test_live_chat_anthropic_runs_one_event_loop_after_another(stub: BatchStub) -> None:
    model = claude(stub)
    for run in range(3):  # each evaluate is a new event loop: pooled connections must not leak
        result = evaluate(samples(4), ["fluency"], llm=model)
        assert not any(row.failures for row in result.rows)
        assert stub.sync_requests == 4 * (run + 1)
    # langchain-anthropic shares one HTTP client per base URL across the process; the judge
    # talks through a client of its own run instead, closed with the run's loop.
    shared: Any = model._async_client._client
    assert not shared._transport._pool.connections

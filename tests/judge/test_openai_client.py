"""The real client path: ChatOpenAI against an OpenAI-compatible server on 127.0.0.1."""

import json
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from turneval import JudgeCallError, JudgeOutputError, evaluate
from turneval.judge import Judge
from turneval.llms import SQLiteCache
from turneval.metrics import AgentGoalAccuracyWithoutReference, TopicAdherenceScore

from .._builders import call, conversation
from .._openai_stub import OpenAIStub, Reply


class Verdict(BaseModel):
    reason: str
    passed: bool


GOOD = json.dumps({"reason": "fine", "passed": True})


def model(stub: OpenAIStub, **kwargs: Any) -> ChatOpenAI:
    return ChatOpenAI(model="gpt-4o-mini", base_url=stub.url, api_key="test-key", **kwargs)


async def test_structured_output_and_tokens(openai_stub: OpenAIStub) -> None:
    openai_stub.reset(Reply(GOOD, prompt_tokens=321, completion_tokens=12))
    reply = await Judge(model(openai_stub)).ask("system text", "user text", Verdict)
    assert reply.parsed == Verdict(reason="fine", passed=True)
    assert (reply.usage.input_tokens, reply.usage.output_tokens, reply.usage.calls) == (321, 12, 1)
    request = openai_stub.requests[0]
    assert request["response_format"]["type"] == "json_schema"
    assert request["temperature"] == 0.0  # unset temperature defaults to 0
    assert [m["role"] for m in request["messages"]] == ["system", "user"]


async def test_429_honours_retry_after(openai_stub: OpenAIStub) -> None:
    openai_stub.reset(Reply(status=429, headers={"retry-after": "0.4"}), Reply(GOOD))
    reply = await Judge(model(openai_stub), backoff=0.0).ask("s", "q", Verdict)
    assert reply.parsed.passed and len(openai_stub.requests) == 2
    assert openai_stub.times[1] - openai_stub.times[0] >= 0.38


async def test_500s_are_retried_by_us_only(openai_stub: OpenAIStub) -> None:
    openai_stub.reset(Reply(status=500), Reply(status=502), Reply(GOOD))
    reply = await Judge(model(openai_stub), backoff=0.01).ask("s", "q", Verdict)
    assert reply.parsed.passed and len(openai_stub.requests) == 3
    # Exhausted: exactly 1 + max_retries requests; the client's own 2 retries would make 6.
    openai_stub.reset(default=Reply(status=500))
    with pytest.raises(JudgeCallError, match=r"after 2 attempt\(s\): .*Error code: 500"):
        await Judge(model(openai_stub, max_retries=2), max_retries=1, backoff=0.01).ask(
            "s", "q", Verdict
        )
    assert len(openai_stub.requests) == 2


async def test_auth_and_bad_request_errors_are_not_retried(openai_stub: OpenAIStub) -> None:
    for status in (401, 400):
        openai_stub.reset(default=Reply(status=status))
        with pytest.raises(JudgeCallError, match=r"after 1 attempt\(s\)"):
            await Judge(model(openai_stub), backoff=0.01).ask("s", "q", Verdict)
        assert len(openai_stub.requests) == 1


async def test_slow_response_hits_the_timeout(openai_stub: OpenAIStub) -> None:
    openai_stub.reset(Reply(GOOD, delay=1.5), Reply(GOOD))
    start = time.monotonic()
    reply = await Judge(model(openai_stub), timeout=0.3, backoff=0.01).ask("s", "q", Verdict)
    assert reply.parsed.passed and len(openai_stub.requests) == 2
    assert time.monotonic() - start < 1.4  # the slow answer was not waited for
    openai_stub.reset(default=Reply(GOOD, delay=1.0))
    with pytest.raises(JudgeCallError, match=r"timed out after 2 attempt\(s\)"):
        await Judge(model(openai_stub), timeout=0.2, max_retries=1, backoff=0.01).ask(
            "s", "q", Verdict
        )


async def test_malformed_json_is_retried_then_reported(openai_stub: OpenAIStub) -> None:
    openai_stub.reset(Reply('{"reason": "fine", "passed": '), Reply(GOOD))
    reply = await Judge(model(openai_stub)).ask("s", "q", Verdict)
    assert reply.parsed.passed and len(openai_stub.requests) == 2
    feedback = openai_stub.requests[1]["messages"][-1]["content"]
    assert feedback.startswith("That answer could not be used")
    openai_stub.reset(default=Reply("I think it passed."))
    with pytest.raises(JudgeOutputError) as info:
        await Judge(model(openai_stub)).ask("s", "q", Verdict)
    assert info.value.raw_output == "I think it passed." and len(openai_stub.requests) == 3


def topic_reply(answered: bool) -> str:
    return json.dumps({"topics": [{"topic": "weather", "answered": answered, "on_topic": True}]})


def test_evaluate_with_cache_second_run_makes_no_request_and_sums_tokens(
    openai_stub: OpenAIStub, tmp_path: Path
) -> None:
    samples = [conversation([call("weather", city=c)]) for c in ("Paris", "Rome", "Oslo")]
    for sample in samples:
        sample.reference_topics = ["weather"]
    openai_stub.reset(default=Reply(topic_reply(True), prompt_tokens=150, completion_tokens=10))
    cache = SQLiteCache(tmp_path / "cache.sqlite")
    llm = model(openai_stub)
    first = evaluate(samples, [TopicAdherenceScore()], llm=llm, cache=cache)
    assert len(openai_stub.requests) == 3
    assert first.scores("topic_adherence") == [1.0, 1.0, 1.0]
    assert (first.usage.input_tokens, first.usage.output_tokens, first.usage.calls) == (450, 30, 3)
    assert first.summary()["topic_adherence"].usage == first.usage
    assert first.rows[0].usage.input_tokens == 150

    openai_stub.reset(default=Reply(status=500))  # any request now would fail
    second = evaluate(
        samples, [TopicAdherenceScore()], llm=llm, cache=SQLiteCache(tmp_path / "cache.sqlite")
    )
    assert openai_stub.requests == []
    assert second.scores("topic_adherence") == [1.0, 1.0, 1.0]
    assert (second.usage.calls, second.usage.cached_calls) == (0, 3)


def test_a_failing_judge_is_recorded_on_its_row(openai_stub: OpenAIStub) -> None:
    openai_stub.reset(default=Reply("no json here"))
    result = evaluate(
        [conversation([call("a")])], [AgentGoalAccuracyWithoutReference(llm=model(openai_stub))]
    )
    failure = result.rows[0].failures["agent_goal_accuracy_without_reference"]
    assert failure.error_type == "JudgeOutputError" and "after 3 attempt(s)" in failure.message
    assert "Invalid JSON" in failure.message
    assert result.summary()["agent_goal_accuracy_without_reference"].failed == 1

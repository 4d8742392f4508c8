"""Regressions for faults that used to falsify or stall a run: cache keys, corrupt or stale
cache entries, timeouts counting queue time, unbounded Retry-After, slots freed too early."""

import json
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from turneval import ConfigError, JudgeCallError, SingleTurnSample, evaluate
from turneval.judge import Judge, JudgeRun, judge_run
from turneval.llms import SQLiteCache
from turneval.metrics import PointwiseMetric

from .._openai_stub import OpenAIStub, Reply


class Verdict(BaseModel):
    reason: str
    passed: bool


GOOD = json.dumps({"reason": "fine", "passed": True})
CLARITY = {"1": "unclear", "3": "ok", "5": "clear"}
QA = SingleTurnSample(user_input="What is 2+2?", response="4")


def model(url: str, **kwargs: Any) -> ChatOpenAI:
    return ChatOpenAI(model="gpt-4o-mini", base_url=url, api_key="test-key", **kwargs)


def rating(score: int) -> Reply:
    return Reply(json.dumps({"explanation": f"rated {score}", "score": score}))


def test_self_consistency_votes_are_cached_one_by_one(
    openai_stub: OpenAIStub, tmp_path: Path
) -> None:
    # Votes 3, 5, 5: majority 5 with agreement 2/3. A shared key made them 3, 3, 3.
    metric = PointwiseMetric(
        name="clarity", criteria="c", rating_rubric=CLARITY, samples=3, llm=model(openai_stub.url)
    )
    cache = SQLiteCache(tmp_path / "cache.sqlite")
    openai_stub.reset(rating(3), rating(5), rating(5))
    first = evaluate([QA], [metric], cache=cache).rows[0].results["clarity"]
    assert len(openai_stub.requests) == 3
    # The votes are asked concurrently: the stub hands out 3, 5, 5 in arrival order.
    assert sorted(first.details["votes"]) == [3.0, 5.0, 5.0] and first.value == 5.0
    assert first.details["confidence"] == 2 / 3
    openai_stub.reset(default=Reply(status=500))  # any request now would fail
    second = evaluate([QA], [metric], cache=cache).rows[0].results["clarity"]
    assert openai_stub.requests == []
    assert second.details["votes"] == first.details["votes"] and second.value == 5.0


def test_cache_key_names_the_server(openai_stub: OpenAIStub, tmp_path: Path) -> None:
    messages = [HumanMessage(content="q")]
    here = Judge(model(openai_stub.url)).cache_key(messages, Verdict)
    there = Judge(model("http://127.0.0.1:9/v1")).cache_key(messages, Verdict)
    assert here != there
    # An unreachable server must not "answer" from another server's cached verdicts.
    cache = SQLiteCache(tmp_path / "cache.sqlite")
    openai_stub.reset(Reply(GOOD))

    async def ask(judge: Judge) -> Any:
        with judge_run(JudgeRun(cache=cache)):
            return await judge.ask("s", "q", Verdict)

    assert anyio.run(ask, Judge(model(openai_stub.url))).parsed.passed
    with pytest.raises(JudgeCallError, match=r"after 1 attempt\(s\)"):
        anyio.run(ask, Judge(model("http://127.0.0.1:9/v1"), max_retries=0))


def test_vote_index_changes_the_key() -> None:
    judge = Judge(model("http://127.0.0.1:9/v1"))
    messages = [HumanMessage(content="q")]
    keys = {judge.cache_key(messages, Verdict, vote=vote) for vote in range(3)}
    assert len(keys) == 3 and judge.cache_key(messages, Verdict) in keys


def test_corrupt_cache_is_named_before_the_run(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(ConfigError, match=r"judge cache .*cache\.sqlite is not a readable SQLite"):
        SQLiteCache(path)


async def test_a_stale_cache_entry_is_never_served(openai_stub: OpenAIStub, tmp_path: Path) -> None:
    cache = SQLiteCache(tmp_path / "cache.sqlite")
    judge = Judge(model(openai_stub.url))
    key = judge.cache_key(judge.prompt("s", "q", Verdict), Verdict)
    cache.set(key, {"raw": "oops", "parsed": {"reason": "no verdict"}})  # not a valid Verdict
    openai_stub.reset(Reply(GOOD))
    with judge_run(JudgeRun(cache=cache)) as run:
        reply = await judge.ask("s", "q", Verdict)
    assert not reply.cached and reply.parsed.passed and len(openai_stub.requests) == 1
    assert run.usage.calls == 1 and run.usage.cached_calls == 0
    assert cache.get(key) == {"raw": GOOD, "parsed": {"reason": "fine", "passed": True}}


async def test_timeout_starts_when_the_request_is_sent(openai_stub: OpenAIStub) -> None:
    # One slot, three verdicts of 0.3 s each, a 0.5 s timeout: the last waits 0.6 s in the
    # queue. Counting queue time, it timed out and was retried (and billed) for nothing.
    openai_stub.reset(default=Reply(GOOD, delay=0.3))
    judge = Judge(model(openai_stub.url), timeout=0.5, max_retries=0)
    replies: list[Any] = []

    async def ask() -> None:
        replies.append(await judge.ask("s", "q", Verdict))

    with judge_run(JudgeRun(max_concurrency=1)) as run:
        async with anyio.create_task_group() as group:
            for _ in range(3):
                group.start_soon(ask)
    assert len(replies) == 3 and all(reply.parsed.passed for reply in replies)
    assert len(openai_stub.requests) == 3 and run.usage.calls == 3
    assert run.usage.input_tokens == 3 * 100


async def test_retry_after_beyond_the_cap_fails_clearly(openai_stub: OpenAIStub) -> None:
    openai_stub.reset(Reply(status=429, headers={"retry-after": "3600"}), Reply(GOOD))
    with pytest.raises(
        JudgeCallError, match=r"retry after 3600 s, more than max_retry_after=60 s \(HTTP 429"
    ):
        await Judge(model(openai_stub.url)).ask("s", "q", Verdict)
    assert len(openai_stub.requests) == 1
    openai_stub.reset(Reply(status=429, headers={"retry-after": "2"}), Reply(GOOD))
    with pytest.raises(JudgeCallError, match=r"max_retry_after=0\.5 s"):
        await Judge(model(openai_stub.url), max_retry_after=0.5).ask("s", "q", Verdict)
    openai_stub.reset(Reply(status=429, headers={"retry-after": "0.05"}), Reply(GOOD))
    reply = await Judge(model(openai_stub.url), max_retry_after=0.5).ask("s", "q", Verdict)
    assert reply.parsed.passed and len(openai_stub.requests) == 2


def test_metrics_pass_the_retry_after_cap_to_their_judge() -> None:
    metric = PointwiseMetric(
        name="c", criteria="c", rating_rubric=CLARITY, llm=model("http://x/v1"), max_retry_after=5
    )
    assert metric.judge().max_retry_after == 5.0


async def test_a_timed_out_request_keeps_its_slot_until_it_ends(openai_stub: OpenAIStub) -> None:
    # Limit 2, four verdicts; the server takes 0.6 s, the timeout is 0.2 s, one retry each.
    # Freeing the slot at the timeout let retries pile onto a server still working.
    openai_stub.reset(default=Reply(GOOD, delay=0.6, prompt_tokens=7, completion_tokens=1))
    judge = Judge(model(openai_stub.url), timeout=0.2, max_retries=1, backoff=0, drain_timeout=5)
    errors: list[Exception] = []

    async def ask() -> None:
        try:
            await judge.ask("s", "q", Verdict)
        except JudgeCallError as error:
            errors.append(error)

    with judge_run(JudgeRun(max_concurrency=2)) as run:
        async with anyio.create_task_group() as group:
            for _ in range(4):
                group.start_soon(ask)
    assert len(errors) == 4 and all("timed out after 2 attempt(s)" in str(e) for e in errors)
    assert openai_stub.peak_in_flight <= 2
    assert len(openai_stub.requests) == 8 and run.usage.calls == 8
    assert run.usage.input_tokens == 8 * 7  # the late answers were billed, and are counted


async def test_a_cancelled_caller_keeps_its_slot_until_the_request_ends(
    openai_stub: OpenAIStub,
) -> None:
    # The sample's own timeout (an outer cancellation) used to free the slot at once while the
    # server still worked: the next requests piled on. Limit 2; caller i starts at 0.1 i s and
    # gives up 0.25 s later; the server takes 0.5 s per request.
    openai_stub.reset(default=Reply(GOOD, delay=0.5, prompt_tokens=7, completion_tokens=1))
    judge = Judge(model(openai_stub.url), timeout=10, max_retries=0, drain_timeout=5)
    cancelled = 0

    async def ask(start: float) -> None:
        nonlocal cancelled
        await anyio.sleep(start)
        with anyio.move_on_after(0.25) as scope:
            await judge.ask("s", "q", Verdict)
        cancelled += scope.cancelled_caught

    with judge_run(JudgeRun(max_concurrency=2)) as run:
        async with anyio.create_task_group() as group:
            for i in range(6):
                group.start_soon(ask, 0.1 * i)
    assert cancelled == 6
    assert openai_stub.peak_in_flight <= 2  # freed slots would have put 3 or more in flight
    sent = len(openai_stub.requests)
    assert sent >= 2 and run.usage.calls == sent


def test_bad_drain_or_cap_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="max_retry_after and drain_timeout"):
        Judge(model("http://x/v1"), max_retry_after=-1)


async def test_timed_out_requests_never_push_the_server_past_the_limit(
    openai_stub: OpenAIStub,
) -> None:
    # A server that keeps working on requests whose client gave up (providers finish and bill
    # them). Limit 2, three verdicts; the server takes 0.4 s, the judge's timeout is 0.1 s with
    # one retry, and no drain bound is set. Slots freed once a bound passed let the retries
    # join the abandoned requests: 4 or more at the server.
    openai_stub.reset(default=Reply(GOOD, delay=0.4, prompt_tokens=7, completion_tokens=1))
    judge = Judge(model(openai_stub.url), timeout=0.1, max_retries=1, backoff=0)
    errors: list[Exception] = []

    async def ask() -> None:
        try:
            await judge.ask("s", "q", Verdict)
        except JudgeCallError as error:
            errors.append(error)

    with judge_run(JudgeRun(max_concurrency=2)) as run:
        async with anyio.create_task_group() as group:
            for _ in range(3):
                group.start_soon(ask)
    assert len(errors) == 3 and all("timed out after 2 attempt(s)" in str(e) for e in errors)
    assert len(openai_stub.requests) == 6 and run.usage.calls == 6
    assert openai_stub.peak_in_flight == 2
    assert run.usage.input_tokens == 6 * 7  # every late answer was waited for, and counted


async def test_a_hanging_server_holds_a_slot_only_briefly_past_the_judge_timeout(
    openai_stub: OpenAIStub,
) -> None:
    # The judge lowers the OpenAI client's own timeout to its timeout + 2 s: the connection of
    # a request it gave up on is closed then, so the slot is freed within seconds, not after
    # the SDK's default 600 s, and the limit still holds.
    openai_stub.reset(default=Reply(GOOD, delay=2.8))
    judge = Judge(model(openai_stub.url), timeout=0.2, max_retries=0, backoff=0)
    assert judge.llm.root_async_client.timeout == 2.2
    started = time.monotonic()
    with judge_run(JudgeRun(max_concurrency=1)), pytest.raises(JudgeCallError, match="timed out"):
        await judge.ask("s", "q", Verdict)
    assert 2.0 <= time.monotonic() - started < 2.75  # closed by the client, before the server
    assert openai_stub.peak_in_flight == 1
    while openai_stub.in_flight:  # the server's own sleep ends within 0.6 s: leave it idle
        await anyio.sleep(0.05)

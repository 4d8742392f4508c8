"""Provider quotas and adaptive concurrency: pacing, AIMD, and the real client path at the stub."""

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from langchain_openai import ChatOpenAI

import turneval
from turneval import ConfigError, EvalTask, SingleTurnSample, evaluate
from turneval.cli import main
from turneval.metrics import PointwiseMetric
from turneval.ratelimit import Budget, LocalBudget, RateLimit, RateLimiter, estimate_tokens
from turneval.simulation import Scenario, SimulatedUser, simulate
from turneval.testing import ScriptedChatModel

from ._openai_stub import OpenAIStub, Reply

CLARITY = {"1": "unclear", "3": "ok", "5": "clear"}
RATED = json.dumps({"explanation": "fine", "score": 3})


def model(stub: OpenAIStub) -> ChatOpenAI:
    return ChatOpenAI(model="gpt-4o-mini", base_url=stub.url, api_key="test-key")


def clarity(llm: Any) -> PointwiseMetric:
    return PointwiseMetric(name="clarity", criteria="c", rating_rubric=CLARITY, llm=llm)


def questions(n: int) -> list[SingleTurnSample]:
    return [SingleTurnSample(user_input=f"question {i}?", response=f"{i}") for i in range(n)]


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


class Overloaded(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(f"HTTP {status}")
        self.status_code = status


# -- RateLimit -------------------------------------------------------------------------------


def test_rate_limit_is_validated_frozen_and_exported() -> None:
    limit = turneval.RateLimit(requests_per_minute=600, tokens_per_minute=2e5)
    assert (limit.max_in_flight, limit.adaptive) == (8, True)
    assert RateLimit(600, None, 4) == RateLimit(requests_per_minute=600, max_in_flight=4)
    assert str(limit) == "600 requests/min, 200000 tokens/min, at most 8 in flight (adaptive)"
    with pytest.raises(ConfigError, match=r"requests_per_minute: .*positive number.*got 0"):
        RateLimit(requests_per_minute=0)
    with pytest.raises(ConfigError, match=r"tokens_per_minute: .*got -5"):
        RateLimit(tokens_per_minute=-5)
    with pytest.raises(ConfigError, match=r"tokens_per_minute: .*got inf"):
        RateLimit(tokens_per_minute=float("inf"))
    with pytest.raises(ConfigError, match=r"max_in_flight: .*at least 1, got 0"):
        RateLimit(max_in_flight=0)
    with pytest.raises(ConfigError, match="requests_per_minute"):
        RateLimit(requests_per_minute="many")  # type: ignore[arg-type]
    with pytest.raises(Exception, match="frozen"):
        limit.max_in_flight = 2  # type: ignore[misc]
    with pytest.raises(ConfigError, match="rate_limit must be a RateLimit"):
        evaluate(questions(1), [clarity(ScriptedChatModel(responses=[RATED]))], rate_limit=600)  # type: ignore[arg-type]


# -- LocalBudget: pacing on a fake clock ------------------------------------------------------


async def test_request_quota_spaces_starts_evenly() -> None:
    clock = FakeClock()
    budget = LocalBudget(
        RateLimit(requests_per_minute=120), headroom=0, clock=clock, sleep=clock.sleep
    )
    starts = []
    for _ in range(5):
        await budget.acquire(1000)  # no token quota: tokens do not matter
        starts.append(clock.now - 100.0)
    assert starts == [0.0, 0.5, 1.0, 1.5, 2.0]  # 60 s / 120 requests = 0.5 s apart
    clock.now += 10.0  # idle time is not saved up into a burst
    await budget.acquire(1)
    await budget.acquire(1)
    assert clock.now - 100.0 == 12.5


async def test_token_quota_uses_the_estimate_then_the_reported_usage() -> None:
    clock = FakeClock()
    budget = LocalBudget(
        RateLimit(tokens_per_minute=6000), headroom=0, clock=clock, sleep=clock.sleep
    )
    await budget.acquire(1000)  # 1000 of 6000 tokens a minute: holds the budget for 10 s
    await budget.acquire(500)
    assert clock.now - 100.0 == 10.0
    await budget.settle(500, 2000)  # it used 1500 tokens more than estimated: 15 s more
    await budget.acquire(100)
    assert clock.now - 100.0 == 10.0 + 5.0 + 15.0
    await budget.settle(100, 40)  # 60 fewer: 0.6 s given back
    await budget.acquire(100)
    assert clock.now - 100.0 == pytest.approx(30.0 + 1.0 - 0.6)
    assert isinstance(budget, Budget)


async def test_both_quotas_the_tighter_one_wins() -> None:
    clock = FakeClock()
    limit = RateLimit(requests_per_minute=60, tokens_per_minute=600)
    budget = LocalBudget(limit, headroom=0, clock=clock, sleep=clock.sleep)
    await budget.acquire(5)  # 0.5 s of tokens, 1 s of requests: the request quota binds
    await budget.acquire(50)  # 5 s of tokens: the token quota binds next
    await budget.acquire(5)
    assert clock.slept == [1.0, 5.0]


async def test_default_headroom_paces_one_percent_under_the_quota() -> None:
    clock = FakeClock()
    limit = RateLimit(requests_per_minute=120, tokens_per_minute=6000)
    budget = LocalBudget(limit, clock=clock, sleep=clock.sleep)
    await budget.acquire(100)  # 100 of 6000 tokens: 1 s of tokens, 0.5 s of requests
    await budget.acquire(100)
    assert clock.now - 100.0 == pytest.approx(1.0 * 1.01)
    with pytest.raises(ConfigError, match="headroom"):
        LocalBudget(limit, headroom=1.0)


def test_estimate_tokens_counts_characters_as_the_dry_run_does() -> None:
    assert estimate_tokens(["a" * 400, "b" * 399]) == 200  # 799 / 4 rounded


# -- RateLimiter: the AIMD window -------------------------------------------------------------


async def test_window_halves_once_per_round_and_grows_back_by_one_per_window() -> None:
    limiter = RateLimiter(RateLimit(max_in_flight=8))
    assert limiter.budget is None and limiter.window == 8

    async def request(outcome: Exception | None) -> None:
        async with limiter.slot(10):
            if outcome is not None:
                raise outcome

    with pytest.raises(Overloaded):
        await request(Overloaded(429))
    assert limiter.window == 4 and limiter.throttled == 1
    # Two requests sent before a decrease answer 429: the window halves once, not twice.
    first, second = limiter.slot(10), limiter.slot(10)
    await first.__aenter__()
    await second.__aenter__()
    await first.__aexit__(Overloaded, Overloaded(503), None)
    await second.__aexit__(Overloaded, Overloaded(529), None)
    assert (limiter.window, limiter.throttled, limiter.lowest_window) == (2, 3, 2)
    for status in (500, 400):  # not overload: the window stays
        with pytest.raises(Overloaded):
            await request(Overloaded(status))
    assert limiter.window == 2
    # Additive increase: 2 successes at window 2, 3 at window 3, ..., 7 at window 7.
    for _ in range(2 + 3 + 4 + 5 + 6 + 7 - 1):
        await request(None)
    assert limiter.window == 7
    await request(None)
    assert limiter.window == 8
    for _ in range(20):
        await request(None)
    assert limiter.window == 8 and limiter.started == 52 and limiter.in_flight == 0


async def test_fixed_window_without_adaptive() -> None:
    limiter = RateLimiter(RateLimit(max_in_flight=3, adaptive=False))
    with pytest.raises(Overloaded):
        async with limiter.slot(1):
            raise Overloaded(429)
    assert limiter.window == 3 and limiter.throttled == 1


async def test_waiters_never_exceed_the_window_and_a_cancelled_waiter_leaves() -> None:
    limiter = RateLimiter(RateLimit(max_in_flight=2))
    peak = 0
    order: list[int] = []

    async def request(i: int) -> None:
        nonlocal peak
        async with limiter.slot(1):
            order.append(i)
            peak = max(peak, limiter.in_flight)
            await anyio.sleep(0.01)

    async with anyio.create_task_group() as group:
        for i in range(6):
            group.start_soon(request, i)
    assert peak == 2 and order == [0, 1, 2, 3, 4, 5]  # first come, first served
    assert "in flight 0/2" in limiter.describe() and limiter.rate == 36.0  # 6 in 10 s
    # A waiter cancelled while queued gives its place up; the others still get through.
    hold = anyio.Event()

    async def holder() -> None:
        async with limiter.slot(1):
            await hold.wait()

    async with anyio.create_task_group() as group:
        group.start_soon(holder)
        group.start_soon(holder)
        await anyio.sleep(0.01)
        with anyio.move_on_after(0.01):
            async with limiter.slot(1):
                pytest.fail("the window is full")  # pragma: no cover
        hold.set()
    async with limiter.slot(1):
        assert limiter.in_flight == 1


# -- the real client path: ChatOpenAI against the stub ----------------------------------------


class Recorder:
    """A Budget (as a distributed run passes one) that records what the run asks of it."""

    def __init__(self) -> None:
        self.acquired: list[int] = []
        self.settled: list[tuple[int, int]] = []

    async def acquire(self, tokens: int) -> None:
        self.acquired.append(tokens)

    async def settle(self, estimated: int, actual: int) -> None:
        self.settled.append((estimated, actual))


def test_a_budget_gets_the_estimate_then_the_reported_usage(openai_stub: OpenAIStub) -> None:
    openai_stub.reset(default=Reply(RATED, prompt_tokens=500, completion_tokens=20))
    recorder = Recorder()
    limiter = RateLimiter(RateLimit(max_in_flight=2), budget=recorder)
    result = evaluate(questions(3), [clarity(model(openai_stub))], rate_limit=limiter)
    assert all(row.results["clarity"].value == 3.0 for row in result.rows)
    expected = sorted(
        round(sum(len(m["content"]) for m in body["messages"]) / 4) for body in openai_stub.requests
    )
    assert sorted(recorder.acquired) == expected and len(expected) == 3
    assert sorted(recorder.settled) == [(tokens, 520) for tokens in expected]
    assert openai_stub.peak_in_flight <= 2 and limiter.started == 3


@pytest.fixture
def own_stub() -> Iterator[OpenAIStub]:
    """A server of the test's own: no request left over from another test can arrive."""
    stub = OpenAIStub()
    yield stub
    stub.close()


def test_request_quota_is_honoured_at_the_stub(own_stub: OpenAIStub) -> None:
    openai_stub = own_stub
    # 600 requests a minute: 10 a second. 16 requests take about 1.5 s.
    openai_stub.reset(default=Reply(RATED))
    limit = RateLimit(requests_per_minute=600, max_in_flight=8)
    result = evaluate(questions(16), [clarity(model(openai_stub))], rate_limit=limit)
    assert all(not row.failures for row in result.rows)
    times = sorted(openai_stub.times)
    assert len(times) == 16
    # At most 10 starts in any 1-second window (+2 for the jitter between a start and its
    # arrival when a loaded machine stalls the process); unpaced, all 16 requests arrive
    # within a few hundredths of a second.
    most = max(sum(1 for t in times if start <= t < start + 1.0) for start in times)
    assert most <= 12


def test_a_429_burst_shrinks_the_window_then_it_recovers(own_stub: OpenAIStub) -> None:
    openai_stub = own_stub
    limiter = RateLimiter(RateLimit(max_in_flight=8))
    arrivals: list[int] = []  # the limiter's requests in flight as each request arrives
    lock = threading.Lock()
    first_round = threading.Event()  # set once the whole first round has arrived: stays set

    def hold_until(count: int, most: float) -> None:
        """Answer once ``count`` requests hold a slot (at most ``most`` seconds)."""
        deadline = time.monotonic() + most
        while limiter.in_flight < count and time.monotonic() < deadline:
            time.sleep(0.002)

    def respond(body: dict[str, Any]) -> Reply:
        with lock:
            arrivals.append(limiter.in_flight)
            seen = len(arrivals)
            if seen == 8:
                first_round.set()
        if seen <= 8:  # the whole first round is sent before any answer, however busy
            first_round.wait(20.0)  # (a count read in a loop missed it once one had answered)
        elif 48 < seen <= 56:
            hold_until(8, 2.0)
        if seen <= 12:
            return Reply(status=429, headers={"retry-after": "0"})
        return Reply(RATED, delay=0.02)

    openai_stub.reset(responder=respond)
    result = evaluate(questions(56), [clarity(model(openai_stub))], rate_limit=limiter)
    assert all(not row.failures for row in result.rows)  # the burst cost retries, no row
    assert len(arrivals) == 56 + 12 and limiter.throttled == 12
    assert max(arrivals[:8]) == 8  # the first round: the whole window
    # 8 answers of 429 halve it to 4 (once: they were sent in one round), the next round's
    # 429s to 2, or to 1 when a busy machine answers the first of them before the last is
    # sent (a new round): the first requests after the burst are at most 2 in flight.
    assert limiter.lowest_window in (1, 2) and max(arrivals[12:14]) <= 2
    # 27 successes later it is back at max_in_flight: 8 requests in flight.
    assert max(arrivals[48:56]) == 8 and limiter.window == 8
    assert openai_stub.peak_in_flight <= 8  # and never more at the server


def test_a_provider_answering_429_to_everything_fails_every_row_and_ends(
    openai_stub: OpenAIStub,
) -> None:
    arrivals: list[int] = []

    def respond(body: dict[str, Any]) -> Reply:
        arrivals.append(openai_stub.in_flight)
        return Reply(status=429, headers={"retry-after": "0.001"})

    openai_stub.reset(responder=respond)
    limiter = RateLimiter(RateLimit(requests_per_minute=6000, max_in_flight=4))
    metric = clarity(model(openai_stub)).model_copy(update={"max_retries": 2})
    result = evaluate(questions(6), [metric], rate_limit=limiter, timeout=30)
    assert len(result.rows) == 6
    for row in result.rows:
        failure = row.failures["clarity"]
        assert failure.error_type == "JudgeCallError"
        assert "after 3 attempt(s)" in failure.message and "429" in failure.message
    assert len(arrivals) == 6 * 3  # bounded: 1 + max_retries requests a row, then it fails
    assert limiter.window == 1 and limiter.throttled == 18
    assert max(arrivals[-6:]) <= 2  # it slowed down to one request at a time (+1, see above)


def test_cli_quota_flags(
    openai_stub: OpenAIStub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text(
        "".join(
            json.dumps(
                {
                    "user_input": [
                        {"type": "human", "content": f"hi {i}"},
                        {"type": "ai", "content": "Hello! How can I help?"},
                    ],
                    "reference_topics": ["greetings"],
                }
            )
            + "\n"
            for i in range(4)
        )
    )
    base = ["evaluate", str(data), "--metric", "topic_adherence", "--out", str(tmp_path / "o")]
    judge = ["--judge-model", "m", "--judge-base-url", openai_stub.url]
    with pytest.raises(SystemExit) as refused:  # a quota is above 0: argparse names the flag
        main([*base, *judge, "--rpm", "0"])
    assert refused.value.code == 2
    assert "argument --rpm: must be above 0, got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:  # argparse names the option
        main([*base, *judge, "--max-in-flight", "0"])
    assert info.value.code == 2
    assert "argument --max-in-flight: must be at least 1, got 0" in capsys.readouterr().err
    openai_stub.reset(default=Reply(from_schema=True))
    code = main([*base, *judge, "--rpm", "6000", "--tpm", "1e7", "--max-in-flight", "1"])
    assert code in (0, 3)  # random verdicts may fail a row; the limit is what is tested
    assert len(openai_stub.requests) >= 4 and openai_stub.peak_in_flight == 1


# -- every runner takes rate_limit= -----------------------------------------------------------


def test_eval_task_and_simulate_pass_the_limit_through() -> None:
    judge = ScriptedChatModel(responses=[RATED])
    limiter = RateLimiter(RateLimit(max_in_flight=1))
    task = EvalTask(questions(3), [clarity(judge)], show_progress=False)
    result = task.evaluate(rate_limit=limiter)
    assert [row.results["clarity"].value for row in result.rows] == [3.0] * 3
    assert limiter.started == judge.calls == 3 and judge.max_in_flight == 1

    user_model = ScriptedChatModel(responses=[json.dumps({"message": "bye", "done": True})])
    user_limiter = RateLimiter(RateLimit(max_in_flight=1))
    scenarios = [Scenario(id=name, goal="g") for name in "ab"]

    def agent(messages: list[Any]) -> list[Any]:
        return [turneval.AIMessage(content="ok")]

    samples = simulate(
        agent, scenarios, user=SimulatedUser(user_model), trials=2, rate_limit=user_limiter
    )
    # Each trial: the opening message (its schema has no "done"), then "done".
    assert len(samples) == 4 and user_limiter.started == user_model.calls == 8


def test_progress_shows_in_flight_and_rate(capsys: pytest.CaptureFixture[str]) -> None:
    judge = ScriptedChatModel(responses=[RATED])
    limit = RateLimit(requests_per_minute=60000, max_in_flight=3)
    evaluate(questions(4), [clarity(judge)], rate_limit=limit, show_progress=True)
    bar = capsys.readouterr().err
    assert "4/4" in bar and "in flight 0/3" in bar and "req/min" in bar


def test_scenarios_share_one_limit_between_judge_and_simulated_user() -> None:
    def user_turn(messages: list[Any]) -> str:  # says "hi", then ends
        done = "[you]" in str(messages[-1].content)
        return json.dumps({"message": "bye" if done else "hi", "done": done})

    judge = ScriptedChatModel(responses=[RATED])
    user_model = ScriptedChatModel(responses=[user_turn])
    limiter = RateLimiter(RateLimit(max_in_flight=1))
    task = EvalTask([Scenario(id="a", goal="g")], [clarity(judge)], show_progress=False)

    def agent(messages: list[Any]) -> list[Any]:
        return [turneval.AIMessage(content="ok")]

    result = task.evaluate(
        runnable=agent, user=SimulatedUser(user_model), trials=2, rate_limit=limiter
    )
    assert [row.results["clarity"].value for row in result.rows] == [3.0, 3.0]
    assert limiter.started == judge.calls + user_model.calls == 2 + 2 * 2


class _SlowQuotaActor:
    """A quota actor stand-in whose answers take ``trip`` seconds to reach the worker."""

    def __init__(self, trip: float, rpm: float) -> None:
        from turneval.engines._ray_quota import Quota

        self.quota = Quota(RateLimit(requests_per_minute=rpm))
        self.trip = trip
        self.reserve = self  # handle.reserve.remote(...) as on a Ray actor handle

    async def remote(self, tokens: int, lead: float = 0.0) -> tuple[float, float]:
        answer = self.quota.reserve(tokens, lead)
        await anyio.sleep(self.trip)  # the answer travels
        return answer


def test_a_remote_budget_asks_ahead_of_a_slow_round_trip() -> None:
    from turneval.engines._ray import ActorBudget

    # Starts 0.1 s apart, answers 0.08 s in transit: a start of "now" would arrive 0.08 s
    # late, more than half a gap, and be lost. After the first round trip the worker asks
    # for starts twice the round trip ahead, so it misses at most the first one.
    budget = ActorBudget(_SlowQuotaActor(trip=0.08, rpm=600))
    sent: list[float] = []

    async def main() -> None:
        for _ in range(8):
            await budget.acquire(1)
            sent.append(time.time())

    anyio.run(main)
    assert budget.missed <= 1
    assert budget.lead >= 2 * 0.08 * 0.9
    gaps = [b - a for a, b in zip(sent, sent[1:], strict=False)]
    assert min(gaps) >= 0.1 * 0.9  # still one gap apart

"""Judge requests through a run's private clients are sent in turns: each one is built and
written before the next is built, so a wave of concurrent requests leaves one after another
instead of all at the end, and the turn ends when the body is on the wire, not at the answer."""

import threading
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest
from langchain_openai import ChatOpenAI

from turneval import JudgeCallError, aevaluate, evaluate
from turneval.judge import Judge
from turneval.judge import _clients as clients
from turneval.judge._clients import client_scope, loop_bound, sending
from turneval.metrics import AgentGoalAccuracyWithoutReference

from .._openai_stub import OpenAIStub, Reply
from .test_event_loops import VERDICT, Verdict, dataset, failures


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAIStub]:
    stub = OpenAIStub(keep_alive=True)
    yield stub
    stub.close()


def model(stub: OpenAIStub, **kwargs: Any) -> ChatOpenAI:
    return ChatOpenAI(model="judge", base_url=stub.url, api_key="test-key", **kwargs)


@pytest.fixture
def log(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """'built' when the direct path builds a request body, 'ended' when a turn ends."""
    events: list[str] = []
    build = ChatOpenAI._get_request_payload
    release = clients._Turn.release

    def built(self: ChatOpenAI, *args: Any, **kwargs: Any) -> Any:
        events.append("built")
        return build(self, *args, **kwargs)

    def ended(self: clients._Turn) -> None:
        if self.held:
            events.append("ended")
        release(self)

    monkeypatch.setattr(ChatOpenAI, "_get_request_payload", built)
    monkeypatch.setattr(clients._Turn, "release", ended)
    monkeypatch.setattr(clients, "_TURN_WAIT", 30.0)  # no request may skip its turn here
    return events


async def test_a_wave_is_built_and_written_one_request_at_a_time(
    server: OpenAIStub, log: list[str]
) -> None:
    # The server answers nothing until all 8 requests have arrived: a turn that lasted until
    # the answer would never let the second request go (the barrier would break).
    arrived = threading.Barrier(8, timeout=20)

    def answer(body: dict[str, Any]) -> Reply:
        arrived.wait()
        return Reply(VERDICT)

    server.reset(responder=answer)
    metric = AgentGoalAccuracyWithoutReference(llm=model(server))
    result = await aevaluate(
        dataset(8), [metric], max_concurrency=8, max_llm_concurrency=8, show_progress=False
    )
    assert failures(result) == []
    assert result.scores(metric.name) == [1.0] * 8
    assert server.peak_in_flight == 8  # all 8 were on the server at once
    assert log == ["built", "ended"] * 8  # and each was written before the next was built


def test_turns_in_sync_runs_one_after_another(server: OpenAIStub, log: list[str]) -> None:
    # Each run has its own turns (its own event loop): the second run is not left waiting.
    server.reset(default=Reply(VERDICT))
    llm = model(server)
    for run in range(2):
        log.clear()
        result = evaluate(dataset(4), [AgentGoalAccuracyWithoutReference(llm=llm)])
        assert failures(result) == [], f"run {run + 1}"
        assert log == ["built", "ended"] * 4, f"run {run + 1}"


async def test_a_request_that_is_not_written_holds_the_next_one_only_briefly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A request stuck before its body is written (here: never) keeps its turn; the next one
    # goes anyway once it has waited _TURN_WAIT, without a turn of its own.
    monkeypatch.setattr(clients, "_TURN_WAIT", 0.05)
    llm = loop_bound(ChatOpenAI(model="judge", base_url="http://127.0.0.1:9/v1", api_key="k"))
    events: list[str] = []
    stuck = anyio.Event()

    async def first() -> None:
        async with sending(llm):
            events.append("first in")
            assert clients._TURN.get() is not None
            await stuck.wait()
        events.append("first out")

    async def second() -> None:
        async with sending(llm):
            events.append("second in")
            assert clients._TURN.get() is None  # it went without a turn
        stuck.set()

    async with client_scope(), anyio.create_task_group() as group:
        group.start_soon(first)
        await anyio.sleep(0.01)
        group.start_soon(second)
    assert events == ["first in", "second in", "first out"]

    async with client_scope():  # the turn ended with the request: the next one gets one
        async with sending(llm):
            assert clients._TURN.get() is not None


async def test_a_failed_request_ends_its_turn(monkeypatch: pytest.MonkeyPatch) -> None:
    # Nothing listens on port 9: each connection is refused before any byte is written.
    monkeypatch.setattr(clients, "_TURN_WAIT", 30.0)
    judge = Judge(ChatOpenAI(model="judge", base_url="http://127.0.0.1:9/v1", api_key="k"))
    judge.max_retries = 0
    errors: list[str] = []

    async def ask() -> None:
        with pytest.raises(JudgeCallError) as raised:
            await judge.ask("system", "question", Verdict)
        errors.append(str(raised.value))

    with anyio.fail_after(20):  # a turn kept by a failed request would stall the next one
        async with client_scope():
            async with anyio.create_task_group() as group:
                for _ in range(3):
                    group.start_soon(ask)
            async with sending(judge.llm):  # and the scope's turns are free again
                assert clients._TURN.get() is not None
    assert len(errors) == 3 and all("Connect" in error for error in errors)


async def test_models_without_a_private_client_take_no_turn(server: OpenAIStub) -> None:
    # A client the user supplied cannot tell when a request is written: it is left alone.
    own = model(server, http_async_client=httpx.AsyncClient())
    async with client_scope():
        for llm in (loop_bound(own), own):
            async with sending(llm):
                assert clients._TURN.get() is None
    async with sending(loop_bound(model(server))):  # outside any run's client scope
        assert clients._TURN.get() is None

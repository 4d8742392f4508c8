"""The batch engine against OpenAI's files + batches endpoints on 127.0.0.1 (real SDK)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from langchain_openai import ChatOpenAI

from turneval import SingleTurnSample, evaluate
from turneval.batch import BatchRun, submit
from turneval.llms import SQLiteCache

from .._batch_stub import BatchStub, Failing


def judge(stub: BatchStub) -> ChatOpenAI:
    return ChatOpenAI(model="gpt-4o-mini", base_url=stub.url, api_key="test-key", max_retries=0)


def samples(count: int) -> list[SingleTurnSample]:
    return [
        SingleTurnSample(
            user_input=f"question {i}",
            response=f"answer {i}",
            reference=f"answer {i}" if i % 3 else "other",
        )
        for i in range(count)
    ]


METRICS = ["exact_match", "fluency"]


def values(result: Any, name: str) -> list[float]:
    return [row.results[name].value if name in row.results else math.nan for row in result.rows]


def test_batch_run_equals_live_run_and_fills_the_cache(stub: BatchStub, tmp_path: Path) -> None:
    data = samples(24)
    run = submit(data, METRICS, llm=judge(stub), out=tmp_path / "run")
    assert stub.sync_requests == 0 and len(stub.submitted) == 24
    status = run.wait(progress=False, poll_interval=0)
    assert status.done and status.answered == 24 and status.rounds == 1
    batch = run.collect()
    assert stub.sync_requests == 0  # every judged cell came from the batch
    live = evaluate(data, METRICS, llm=judge(stub))  # same seeded answers, asked one by one
    assert stub.sync_requests == 24
    assert values(batch, "fluency") == values(live, "fluency")
    assert values(batch, "exact_match") == values(live, "exact_match")
    assert not any(row.failures for row in batch.rows)
    # The answers are in the cache under the live run's keys: a live re-run pays nothing.
    stub.sync_requests = 0
    again = evaluate(
        data, METRICS, llm=judge(stub), cache=SQLiteCache(tmp_path / "run" / "cache.sqlite")
    )
    assert stub.sync_requests == 0 and again.usage.cached_calls == 24
    assert values(again, "fluency") == values(live, "fluency")
    assert (tmp_path / "run" / "results.jsonl").exists()


def test_errors_go_to_a_follow_up_round(stub: BatchStub, tmp_path: Path) -> None:
    stub.inject = failing = Failing(6)
    run = submit(samples(24), ["fluency"], llm=judge(stub), out=tmp_path / "run")
    status = run.wait(progress=False, poll_interval=0)
    first = [c for c in stub.submitted if c.endswith("-1")]
    again = [c for c in stub.submitted if c.endswith("-2")]
    assert len(first) == 24 and len(again) == 6
    assert {c[:56] for c in again} == failing.keys
    assert status.rounds == 2 and status.answered == 24
    assert not any(row.failures for row in run.collect().rows)


class Killed(BaseException):
    """Stands for the process dying at that point (nothing after it runs)."""


def once_submitted(stub: BatchStub) -> None:
    keys = [c.rsplit("-", 1)[0] for c in stub.submitted]
    assert len(keys) == len(set(keys)), "a request was submitted twice"


@pytest.mark.parametrize("when", ["before_create", "after_create"])
def test_kill_during_submission_then_restart(
    stub: BatchStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    from turneval.batch._providers import OpenAIProvider

    monkeypatch.setattr(OpenAIProvider, "max_requests", 9)  # 24 requests: 3 batches
    real = OpenAIProvider.create
    calls = []

    def dying(self: OpenAIProvider, requests: Any, metadata: Any) -> str:
        calls.append(metadata)
        if len(calls) == 2:  # the second batch: dies before or after the provider has it
            if when == "after_create":
                real(self, requests, metadata)
            raise Killed
        return real(self, requests, metadata)

    monkeypatch.setattr(OpenAIProvider, "create", dying)
    with pytest.raises(Killed):
        submit(samples(24), ["fluency"], llm=judge(stub), out=tmp_path / "run")
    monkeypatch.setattr(OpenAIProvider, "create", real)
    before = len(stub.submitted)
    assert before == (18 if when == "after_create" else 9)
    run = BatchRun.open(tmp_path / "run", llm=judge(stub))  # reconciles first
    assert len(stub.submitted) == before  # nothing sent while reconciling
    status = run.wait(progress=False, poll_interval=0)
    assert status.answered == 24 and len(stub.submitted) == 24
    once_submitted(stub)
    result = run.collect()
    assert all("fluency" in row.results for row in result.rows)


def test_kill_during_polling_then_restart(
    stub: BatchStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = submit(samples(12), ["fluency"], llm=judge(stub), out=tmp_path / "run")
    real = SQLiteCache.set_many

    def dying(self: SQLiteCache, *args: Any, **kwargs: Any) -> None:
        raise Killed  # the results were downloaded, nothing was stored

    monkeypatch.setattr(SQLiteCache, "set_many", dying)
    with pytest.raises(Killed):
        run.wait(progress=False, poll_interval=0)
    monkeypatch.setattr(SQLiteCache, "set_many", real)
    again = BatchRun.open(tmp_path / "run", llm=judge(stub))
    assert again.status().answered == 0 and again.status().waiting == 12
    status = again.wait(progress=False, poll_interval=0)
    assert status.answered == 12 and len(stub.submitted) == 12 and status.rounds == 1
    once_submitted(stub)
    assert all("fluency" in row.results for row in again.collect().rows)


def test_invalid_answers_are_repaired_in_a_round_of_their_own(
    stub: BatchStub, tmp_path: Path
) -> None:
    stub.inject = invalid = Failing(4, "invalid")
    run = submit(samples(16), ["fluency"], llm=judge(stub), out=tmp_path / "run")
    status = run.wait(progress=False, poll_interval=0)
    repaired = [c for c in stub.submitted if c.endswith("-2")]
    assert {c[:56] for c in repaired} == invalid.keys and len(repaired) == 4
    assert status.rounds == 2 and status.answered == 16
    # The repair shows the model its unusable answer and why, as a live judge does.
    lines = [line for lines in stub.lines.values() for line in lines]
    repair = next(line for line in lines if line["custom_id"] == repaired[0])
    roles = [m["role"] for m in repair["body"]["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert repair["body"]["messages"][2]["content"] == "not json"
    assert "could not be used" in repair["body"]["messages"][3]["content"]


def test_expired_requests_then_fail_or_fall_back_to_live(stub: BatchStub, tmp_path: Path) -> None:
    stub.inject = failing_requests = Failing(10, every_attempt=True)  # every attempt fails
    stub.expire_next = True  # the first batch also expires half-way
    data = samples(20)
    run = submit(
        data, ["fluency", "exact_match"], llm=judge(stub), out=tmp_path / "run", max_attempts=2
    )
    status = run.wait(progress=False, poll_interval=0)
    failing = failing_requests.keys
    assert status.rounds == 2 and status.failed == len(failing) == 10
    assert status.answered == 20 - len(failing)
    first = stub.submitted[:20]
    expired = {c[:56] for c in first[1::2]}  # the batch expired before every second request
    assert sorted(c[:56] for c in stub.submitted[20:]) == sorted(failing | expired)
    result = run.collect()
    failed_rows = [row for row in result.rows if "fluency" in row.failures]
    assert len(failed_rows) == len(failing) and stub.sync_requests == 0
    assert "batch request failed: HTTP 500: injected server error" in (
        failed_rows[0].failures["fluency"].message
    )
    assert all("exact_match" in row.results for row in result.rows)  # rules are scored here
    live = run.collect(fallback="sync")  # the failed requests asked live
    assert stub.sync_requests == len(failing)
    assert not any(row.failures for row in live.rows)


def test_cancel_stops_the_run_and_keeps_nothing_waiting(stub: BatchStub, tmp_path: Path) -> None:
    stub.hold = True
    run = submit(samples(10), ["fluency"], llm=judge(stub), out=tmp_path / "run")
    run.poll()
    run.cancel()
    status = run.wait(progress=False, poll_interval=0)
    assert status.done and status.failed == 10 and len(stub.submitted) == 10
    assert status.batches[0][1] == "cancelled"
    rows = run.collect().rows
    assert all("batch_cancelled" in row.failures["fluency"].message for row in rows)


def test_ten_thousand_rows_in_batches_split_by_bytes_with_a_follow_up(
    stub: BatchStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The scale: 10,000 judged rows, split by bytes into two batches, errors injected
    # into 2/256 of the first attempts (custom ids are hex) so a follow-up round runs.
    from turneval.batch._providers import OpenAIProvider

    monkeypatch.setattr(OpenAIProvider, "max_bytes", 2**22)  # ~6,000 requests a batch
    stub.inject = lambda cid: "error" if cid.endswith("-1") and cid[:2] in ("00", "01") else None
    data = samples(10_000)
    run = submit(data, METRICS, llm=judge(stub), out=tmp_path / "run")
    sizes = [len(lines) for lines in list(stub.lines.values())[-2:]]
    assert len(stub.submitted) == 10_000 and len(sizes) == 2 and max(sizes) < 10_000
    status = run.wait(progress=False, poll_interval=0)
    retried = [c for c in stub.submitted if c.endswith("-2")]
    assert status.rounds == 2 and status.answered == 10_000 and 20 < len(retried) < 150
    once = {c.rsplit("-", 1)[0] for c in stub.submitted}
    assert len(once) == 10_000 and len(stub.submitted) == 10_000 + len(retried)
    batch = run.collect()
    assert stub.sync_requests == 0 and not any(row.failures for row in batch.rows)
    live = evaluate(data[:60], METRICS, llm=judge(stub))  # the same seeded answers, live
    for name in METRICS:
        assert values(batch, name)[:60] == values(live, name)


def test_a_judge_without_a_batch_api_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    from turneval.errors import ConfigError

    with pytest.raises(ConfigError, match="needs a ChatOpenAI, AzureChatOpenAI or ChatAnthropic"):
        submit(samples(2), ["fluency"], llm=FakeListChatModel(responses=["{}"]), out=tmp_path / "r")
    assert not (tmp_path / "r").exists()
    with pytest.raises(ConfigError, match="no batch run"):
        BatchRun.open(tmp_path / "r")


def test_a_batch_refused_as_a_whole_is_sent_again_then_fails_its_cells(
    stub: BatchStub, tmp_path: Path
) -> None:
    stub.refuse_next = True
    run = submit(samples(3), ["fluency"], llm=judge(stub), out=tmp_path / "run", max_attempts=1)
    status = run.wait(progress=False, poll_interval=0)
    assert status.failed == 3 and status.batches[0][1] == "failed: refused"
    message = run.collect().rows[0].failures["fluency"].message
    assert "no result (batch failed: refused) (after 1 attempt(s))" in message


def test_open_rebuilds_judge_and_metrics_from_the_folder(
    stub: BatchStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from turneval.errors import ConfigError
    from turneval.metrics import Fluency

    stub.hold = True
    metric = Fluency(repeats=2, repeat_temperature=0.5)
    submit(samples(3), [metric], llm=judge(stub), out=tmp_path / "run")
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")  # the folder never holds a key
    assert "test-key" not in (tmp_path / "run" / "state.sqlite").read_bytes().decode("latin-1")
    again = BatchRun.open(tmp_path / "run")  # judge and metric rebuilt, same requests
    assert again.metrics[0].repeats == 2 and again.metrics[0].repeat_temperature == 0.5
    assert again.status().requests == 6
    with pytest.raises(TimeoutError, match="still running"):
        again.wait(progress=False, poll_interval=0, timeout=0)
    other = ChatOpenAI(model="gpt-4o", base_url=stub.url, api_key="k")
    with pytest.raises(ConfigError, match="6 judge request"):
        BatchRun.open(tmp_path / "run", llm=other)  # another judge: other requests


def test_judges_of_two_servers_are_refused(stub: BatchStub, tmp_path: Path) -> None:
    from turneval.errors import ConfigError
    from turneval.metrics import Fluency

    other = ChatOpenAI(model="gpt-4o-mini", base_url="http://127.0.0.1:9/v1", api_key="k")
    metrics = [Fluency(), Fluency(name="fluency_elsewhere", llm=other)]
    with pytest.raises(ConfigError, match="share one provider and server"):
        submit(samples(2), metrics, llm=judge(stub), out=tmp_path / "run")
    assert stub.submitted == [] and not (tmp_path / "run" / "state.sqlite").exists()
    submit(samples(2), metrics[:1], llm=judge(stub), out=tmp_path / "run")  # the folder is free


def test_a_judge_on_the_responses_api_is_refused(stub: BatchStub, tmp_path: Path) -> None:
    from turneval.errors import ConfigError

    model = ChatOpenAI(model="gpt-4o-mini", base_url=stub.url, api_key="k", use_responses_api=True)
    with pytest.raises(ConfigError, match="use_responses_api=False"):
        submit(samples(2), ["fluency"], llm=model, out=tmp_path / "run")
    assert stub.submitted == [] and not (tmp_path / "run" / "state.sqlite").exists()


def test_requests_the_cache_answers_are_not_sent(stub: BatchStub, tmp_path: Path) -> None:
    data = samples(10)
    cache = SQLiteCache(tmp_path / "cache.sqlite")
    live = evaluate(data[:4], ["fluency"], llm=judge(stub), cache=cache)  # 4 answered live
    run = submit(data, ["fluency"], llm=judge(stub), out=tmp_path / "run", cache=cache)
    assert len(stub.submitted) == 6
    status = run.wait(progress=False, poll_interval=0)
    assert status.requests == 10 and status.answered == 10
    result = run.collect()
    assert values(result, "fluency")[:4] == values(live, "fluency")
    assert len(cache) == 10  # the batch answers joined the live ones

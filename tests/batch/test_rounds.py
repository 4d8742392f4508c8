"""A verdict that depends on an earlier one: each step is a round of batches."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from turneval import SingleTurnSample, evaluate
from turneval.batch import BatchRun, submit
from turneval.judge import JudgeReply, JudgeRequest
from turneval.metrics import JudgedMetric, SingleTurnMetric
from turneval.metrics.base import Explained

from .._batch_stub import BatchStub
from .test_openai_batch import Killed, samples


class Claims(BaseModel):
    claim: str


class Check(BaseModel):
    supported: bool


class TwoStep(JudgedMetric[SingleTurnSample], SingleTurnMetric):
    """Extracts a claim, then asks whether that claim is supported (the second question
    depends on the first answer, so it cannot be stated up front)."""

    name: str = "two_step"

    def requests(self, sample: SingleTurnSample) -> list[JudgeRequest[Any]]:
        return [
            JudgeRequest(prompt=f"Main claim of: {sample.response}", schema=Claims, system="judge")
        ]

    def verdict(self, sample: SingleTurnSample, replies: Sequence[JudgeReply[Any]]) -> Explained:
        return Explained(float(replies[-1].parsed.supported), "")

    async def _evaluate(self, sample: SingleTurnSample) -> Explained:
        first = await self.ask(self.judge_requests(sample))
        claim = first[0].parsed.claim
        second = await self.ask(
            [
                JudgeRequest(
                    prompt=f"{sample.user_input}: is {claim!r} supported by {sample.reference}?",
                    schema=Check,
                    system="judge",
                    temperature=0.3,  # another judge than the first question's
                )
            ]
        )
        return self.verdict(sample, [*first, *second])


def judge(stub: BatchStub) -> ChatOpenAI:
    return ChatOpenAI(model="gpt-4o-mini", base_url=stub.url, api_key="test-key", max_retries=0)


def test_dependent_requests_run_as_successive_rounds(stub: BatchStub, tmp_path: Path) -> None:
    data = samples(8)
    run = submit(data, [TwoStep()], llm=judge(stub), out=tmp_path / "run")
    assert len(stub.submitted) == 8  # only the first question is known up front
    status = run.wait(progress=False, poll_interval=0)
    assert status.rounds == 2 and status.answered == 16 and len(stub.submitted) == 16
    second = [line["body"] for line in list(stub.lines.values())[1]]
    assert {body["temperature"] for body in second} == {0.3}
    result = run.collect()
    assert stub.sync_requests == 0 and not any(row.failures for row in result.rows)
    live = evaluate(data, [TwoStep()], llm=judge(stub))
    assert stub.sync_requests == 16
    assert [r.results["two_step"].value for r in result.rows] == [
        r.results["two_step"].value for r in live.rows
    ]


def test_a_restart_finds_the_requests_of_a_later_round_again(
    stub: BatchStub, tmp_path: Path, monkeypatch: Any
) -> None:
    run = submit(samples(5), [TwoStep()], llm=judge(stub), out=tmp_path / "run")
    real = BatchRun._ingest
    calls = []

    def dying(self: BatchRun, *args: Any) -> None:
        calls.append(1)
        if len(calls) == 2:  # the second round's results are in: the process dies
            raise Killed
        real(self, *args)

    monkeypatch.setattr(BatchRun, "_ingest", dying)
    try:
        run.wait(progress=False, poll_interval=0)
    except Killed:
        pass
    monkeypatch.setattr(BatchRun, "_ingest", real)
    again = BatchRun.open(tmp_path / "run", llm=judge(stub), metrics=[TwoStep()])
    status = again.wait(progress=False, poll_interval=0)
    assert status.answered == 10 and len(stub.submitted) == 10 and status.rounds == 2
    assert not any(row.failures for row in again.collect().rows)

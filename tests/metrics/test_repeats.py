"""Verdict stability: a judged metric asked N times per row (``repeats``), its votes and spread."""

import json
import math
import statistics
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langchain_openai import ChatOpenAI

from turneval import (
    AIMessage,
    ConfigError,
    EvalTask,
    EvaluationResult,
    HumanMessage,
    MultiTurnSample,
    SingleTurnSample,
    evaluate,
)
from turneval.cli import main
from turneval.compare import compare
from turneval.estimate import estimate
from turneval.judge import SQLiteCache
from turneval.metrics import (
    AgentGoalAccuracyWithoutReference,
    AgentGoalAccuracyWithReference,
    Fluency,
    PairwiseMetric,
)
from turneval.results import MetricResult, SampleResult
from turneval.simulation import Scenario, ScriptedUser
from turneval.stream import evaluate_jsonl
from turneval.testing import ScoreAssertionError, ScriptedChatModel, assert_scores
from turneval.usage import Usage

from .._fakes import text_of
from .._openai_stub import OpenAIStub, Reply


def rating(score: int) -> str:
    return json.dumps({"explanation": f"rated {score}", "score": score})


def votes_by_response(votes: dict[str, list[int]]) -> Callable[[list[BaseMessage]], str]:
    """A judge answering the k-th question about a response with its k-th vote.

    The votes of a row are identical prompts asked concurrently, so only their multiset per
    response is fixed: everything asserted below is order-free (mean, min, max, std, counts).
    """
    asked: Counter[str] = Counter()

    def answer(messages: list[BaseMessage]) -> str:
        question = text_of(messages[-1])
        response = next(r for r in votes if f"<prediction>\n{r}\n</prediction>" in question)
        asked[response] += 1
        return rating(votes[response][asked[response] - 1])

    return answer


def pair(response: str) -> SingleTurnSample:
    return SingleTurnSample(user_input="Write a greeting.", response=response)


# Votes (1-5): "steady" never crosses 3; "shaky" has votes on both sides of 3.
STEADY, SHAKY = [5, 4, 4], [4, 2, 2]


async def test_the_value_is_the_mean_of_the_votes_with_their_spread() -> None:
    model = ScriptedChatModel(responses=[votes_by_response({"Hello!": STEADY, "Hi.": SHAKY})])
    metric = Fluency(llm=model, repeats=3, pass_threshold=3)
    steady, shaky = [await metric.ascore(pair(r)) for r in ("Hello!", "Hi.")]
    assert model.calls == 6  # 3 votes x 1 request per row
    assert steady.value == pytest.approx(13 / 3) and shaky.value == pytest.approx(8 / 3)
    record = shaky.details["repeats"]
    assert sorted(record["values"]) == [2.0, 2.0, 4.0]
    # sample std of (4, 2, 2): mean 8/3, squared deviations 16/9 + 4/9 + 4/9 = 24/9, / 2
    assert record["std"] == pytest.approx(math.sqrt(12 / 9))
    assert (record["min"], record["max"], record["n"], record["rule"]) == (2.0, 4.0, 3, "mean")
    assert record["unstable"] is True and steady.details["repeats"]["unstable"] is False
    assert len(record["votes"]) == 3 and {v["reason"] for v in record["votes"]} == {
        "4: rated 4",
        "2: rated 2",
    }
    assert shaky.reason.startswith("mean of 3 votes = 2.667")
    assert "unstable: votes on both sides of 3" in shaky.reason


async def test_a_categorical_verdict_takes_the_majority_and_a_tie_the_lowest() -> None:
    sample = MultiTurnSample(
        user_input=[HumanMessage(content="book a table"), AIMessage(content="booked")],
        reference="a table is booked",
    )

    def goal(achieved: bool) -> str:
        return json.dumps({"end_state": "e", "reason": "r", "achieved": achieved})

    model = ScriptedChatModel(responses=[goal(True), goal(False), goal(True)])
    result = await AgentGoalAccuracyWithReference(llm=model, repeats=3).ascore(sample)
    assert result.value == 1.0 and model.calls == 3  # 2 of 3 votes: achieved
    assert result.details["achieved"] is True  # the details of a vote giving the majority
    assert result.details["repeats"]["rule"] == "majority"
    assert result.reason.startswith("majority of 3 votes = 1")
    assert "unstable" not in result.details["repeats"]  # no pass threshold: not judged
    tie = ScriptedChatModel(responses=[goal(True), goal(False)])
    metric = AgentGoalAccuracyWithReference(llm=tie, repeats=2, pass_threshold=1.0)
    split = await metric.ascore(sample)
    assert split.value == 0.0 and split.details["achieved"] is False  # a split never passes
    assert split.details["repeats"]["unstable"] is True


def test_a_rerun_reads_each_vote_back_from_its_own_cache_entry(tmp_path: Path) -> None:
    model = ScriptedChatModel(responses=[rating(5), rating(2), rating(4)])  # no seed to vary
    cache = SQLiteCache(tmp_path / "cache.db")
    runs = [
        evaluate([pair("Hello!")], [Fluency(llm=model, repeats=3)], cache=cache) for _ in range(2)
    ]
    first, second = (
        sorted(run.rows[0].results["fluency"].details["repeats"]["values"]) for run in runs
    )
    assert first == second == [2.0, 4.0, 5.0] and model.calls == 3 and len(cache) == 3
    assert runs[1].usage.cached_calls == 3
    cache.close()


def test_bad_repeats_are_refused_with_the_reason() -> None:
    with pytest.raises(ConfigError, match="repeats must be at least 1"):
        Fluency(repeats=0)
    with pytest.raises(ConfigError, match="votes would be identical"):
        Fluency(repeats=3, repeat_temperature=0)
    Fluency(repeats=1, repeat_temperature=0)  # one vote: nothing to vary
    metric = Fluency(repeats=2)
    with pytest.raises(ValueError, match="repeats must be at least 1"):
        metric.repeats = 0  # assignments are validated too


def test_the_dry_run_counts_every_vote() -> None:
    samples = [pair("Hello!"), pair("Hi.")]
    one, three = (estimate(samples, [Fluency(repeats=n)]) for n in (1, 3))
    assert one.calls["fluency"] == 2 and three.calls["fluency"] == 6
    # each sample's tokens are rounded once: within 1 token per sample of 3x
    assert three.prompt_tokens["fluency"] == pytest.approx(3 * one.prompt_tokens["fluency"], abs=2)
    judge = PairwiseMetric(name="pick", criteria="better", repeats=3)
    both = SingleTurnSample(user_input="q", response="a", baseline_response="b")
    assert estimate([both], [judge]).calls["pick"] == 2 * 3  # two orders per vote


def test_unstable_rows_in_the_summary_report_and_assertions(tmp_path: Path) -> None:
    votes = {"Hello!": STEADY, "Hi.": SHAKY}
    metric = Fluency(repeats=3, pass_threshold=3)
    in_memory = evaluate(
        [pair("Hello!"), pair("Hi.")],
        [metric],
        llm=ScriptedChatModel(responses=[votes_by_response(votes)]),
    )
    extra = in_memory.summary()["fluency"].extra
    assert extra == {"unstable": 1.0, "unstable_share": 0.5}
    # Streamed: summary.json, and the rows read back from results.jsonl, say the same.
    data = tmp_path / "data.jsonl"
    data.write_text(
        "".join(json.dumps(s.model_dump()) + "\n" for s in (pair("Hello!"), pair("Hi.")))
    )
    out = tmp_path / "out"
    llm = ScriptedChatModel(responses=[votes_by_response(votes)])
    evaluate_jsonl(data, [metric], out, llm=llm, show_progress=False)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["metrics"]["fluency"]["extra"] == extra
    back = EvaluationResult.from_jsonl(out / "results.jsonl")
    assert back.summary()["fluency"].extra == extra
    html = (out / "report.html").read_text()
    assert html.count("unstable' title='unstable: votes") == 1  # the shaky row alone
    assert "unstable 1 · unstable_share 0.500" in html  # a count, then a share
    # assert_scores takes its threshold as the pass threshold and says the row is unstable.
    with pytest.raises(ScoreAssertionError, match=r"fluency = 2\.667 < 3 \(unstable: its votes"):
        assert_scores(
            pair("Hi."),
            [Fluency(repeats=3)],
            {"fluency": 3},
            llm=ScriptedChatModel(responses=[votes_by_response(votes)]),
        )


def test_eval_task_success_thresholds_flag_trials_whose_votes_straddle_them() -> None:
    def goal(achieved: bool) -> str:
        return json.dumps({"user_goal": "g", "end_state": "e", "reason": "r", "achieved": achieved})

    judge = ScriptedChatModel(responses=[goal(True), goal(False)])
    metric = AgentGoalAccuracyWithoutReference(llm=judge, repeats=2)
    task = EvalTask([Scenario(id="a", goal="say hi")], [metric], show_progress=False)
    result = task.evaluate(
        runnable=lambda messages: [AIMessage(content="hi")], user=ScriptedUser(["hi"]), trials=1
    )
    row = result.rows[0].results["agent_goal_accuracy_without_reference"]
    assert row.value == 0.0 and judge.calls == 2  # yes, no: a tie is the lower value
    # the default success threshold (1.0) lies between the votes 0 and 1
    assert row.details["repeats"]["pass_threshold"] == 1.0
    extra = result.summary()["agent_goal_accuracy_without_reference"].extra or {}
    assert (extra["unstable"], extra["unstable_share"]) == (1.0, 1.0)


def _row(index: int, value: float, votes: list[float] | None) -> SampleResult:
    details: dict[str, Any] = {}
    if votes is not None:
        details["repeats"] = {"values": votes, "min": min(votes), "max": max(votes)}
    row = SampleResult(index, None)
    row.results["m"] = MetricResult("m", value, "", details)
    return row


def test_compare_lists_regressions_on_unstable_rows_apart() -> None:
    baseline = EvaluationResult([_row(0, 1.0, None), _row(1, 0.8, [1.0, 0.6])], ["m"], Usage())
    # Row 0 fails with every vote below 0.5; row 1 fails with votes on both sides of 0.5.
    candidate = EvaluationResult(
        [_row(0, 0.2, [0.2, 0.2]), _row(1, 1 / 3, [0.0, 0.0, 1.0])], ["m"], Usage()
    )
    result = compare(baseline, candidate).metrics["m"]
    assert result.regressions == [0] and result.unstable_regressions == [1]
    assert "m also regressed on 1 unstable row (votes on both sides of 0.5)" in str(
        compare(baseline, candidate)
    )
    # At a threshold no vote straddles, both are plain regressions.
    strict = compare(baseline, candidate, pass_threshold=0.1).metrics["m"]
    assert strict.regressions == [] and strict.unstable_regressions == []


def test_votes_through_chatopenai_vary_by_seed_and_are_cached_apart(
    openai_stub: OpenAIStub, tmp_path: Path
) -> None:
    scores = {10: 5, 11: 2, 12: 4, 13: 1}  # the judge's answer to each vote's seed

    def by_seed(body: dict[str, Any]) -> Reply:
        return Reply(content=rating(scores[body["seed"]]))

    openai_stub.reset(responder=by_seed)
    llm = ChatOpenAI(model="gpt-4o-mini", base_url=openai_stub.url, api_key="k", seed=10)
    cache = SQLiteCache(tmp_path / "cache.db")
    first = evaluate([pair("Hello!")], [Fluency(llm=llm, repeats=3)], cache=cache)
    assert first.rows[0].results["fluency"].value == pytest.approx((5 + 2 + 4) / 3)
    assert sorted(body["seed"] for body in openai_stub.requests) == [10, 11, 12]
    assert {body["temperature"] for body in openai_stub.requests} == {0.7}
    # The same run again: every vote from the cache; one more repeat pays for one request.
    openai_stub.reset(responder=by_seed)
    again = evaluate([pair("Hello!")], [Fluency(llm=llm, repeats=3)], cache=cache)
    assert openai_stub.requests == [] and again.usage.cached_calls == 3
    more = evaluate([pair("Hello!")], [Fluency(llm=llm, repeats=4)], cache=cache)
    assert [body["seed"] for body in openai_stub.requests] == [13]
    assert more.rows[0].results["fluency"].value == pytest.approx((5 + 2 + 4 + 1) / 4)
    assert (more.usage.calls, more.usage.cached_calls) == (1, 3)
    values = more.rows[0].results["fluency"].details["repeats"]["values"]
    assert values == [5.0, 2.0, 4.0, 1.0]  # vote k is the answer at seed 10 + k
    assert more.rows[0].results["fluency"].details["repeats"]["std"] == pytest.approx(
        statistics.stdev([5, 2, 4, 1])
    )
    cache.close()


def test_cli_repeats_estimates_runs_and_counts_unstable_rows(
    openai_stub: OpenAIStub,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps(pair("Hi.").model_dump()) + "\n")
    base = ["evaluate", str(data), "--metric", "fluency", "--fail-under", "fluency=3"]
    assert main([*base, "--repeats", "3", "--dry-run"]) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("fluency"))
    assert row.split()[1] == "3"  # one request per vote
    answers = iter([4, 2, 2])
    openai_stub.reset(responder=lambda body: Reply(content=rating(next(answers))))
    judge = ["--judge-base-url", openai_stub.url, "--judge-model", "m", "--quiet"]
    out = tmp_path / "out"
    assert main([*base, "--repeats", "3", *judge, "--out", str(out)]) == 1  # mean 8/3 < 3
    assert len(openai_stub.requests) == 3
    assert "fluency: 1 unstable row (100.0%): votes on both sides" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())["metrics"]["fluency"]
    assert summary["mean"] == pytest.approx(8 / 3)
    assert summary["extra"] == {"unstable": 1.0, "unstable_share": 1.0}
    # Without --details, results.jsonl still keeps the votes: read back, and resumed, the
    # row is unstable (compare reads it so to list it apart).
    back = EvaluationResult.from_jsonl(out / "results.jsonl")
    assert back.summary()["fluency"].extra == summary["extra"]
    assert sorted(back.rows[0].results["fluency"].details["repeats"]["values"]) == [2, 2, 4]
    assert "fluency_details" not in back.to_pandas().columns  # values, reasons, errors only
    assert main([*base, "--repeats", "3", *judge, "--out", str(out), "--resume"]) == 1
    resumed = json.loads((out / "summary.json").read_text())["metrics"]["fluency"]
    assert resumed["extra"] == summary["extra"] and len(openai_stub.requests) == 3
    with pytest.raises(SystemExit) as exited:
        main([*base, "--repeats", "0", "--dry-run"])
    assert exited.value.code == 2
    assert "--repeats: must be at least 1, got 0" in capsys.readouterr().err


def test_resume_takes_a_new_fail_under_and_marks_the_finished_rows_again(
    openai_stub: OpenAIStub,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    data = tmp_path / "d.jsonl"
    data.write_text(json.dumps(pair("Hi.").model_dump()) + "\n")
    answers = iter([4, 2, 2])
    openai_stub.reset(responder=lambda body: Reply(content=rating(next(answers))))
    base = ["evaluate", str(data), "--metric", "fluency", "--repeats", "3", "--quiet"]
    judge = ["--judge-base-url", openai_stub.url, "--judge-model", "m", "--out", str(tmp_path)]
    assert main([*base, *judge]) == 0  # no pass bar: nothing is unstable
    first = json.loads((tmp_path / "summary.json").read_text())["metrics"]["fluency"]
    assert not (first.get("extra") or {})
    capsys.readouterr()
    # A pass bar changes no score: the run continues, and its finished row is unstable at 3
    assert main([*base, *judge, "--resume", "--fail-under", "fluency=3"]) == 1  # 8/3 < 3
    assert "cannot resume" not in capsys.readouterr().err and len(openai_stub.requests) == 3
    summary = json.loads((tmp_path / "summary.json").read_text())["metrics"]["fluency"]
    assert summary["extra"] == {"unstable": 1.0, "unstable_share": 1.0}
    assert main([*base, *judge, "--resume", "--fail-under", "fluency=2"]) == 0  # votes 2, 2, 4
    summary = json.loads((tmp_path / "summary.json").read_text())["metrics"]["fluency"]
    assert summary["extra"] == {"unstable": 0.0, "unstable_share": 0.0}

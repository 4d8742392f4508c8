import json
import math
from pathlib import Path
from typing import Any

import pytest
from langchain_openai import ChatOpenAI

from turneval import (
    AIMessage,
    HumanMessage,
    JudgeOutputError,
    MultiTurnSample,
    SingleTurnSample,
    evaluate,
)
from turneval.estimate import estimate
from turneval.metrics import (
    AssessmentJudge,
    ChunkRelevance,
    GuidelineAdherence,
    Metric,
    OverallAssessment,
    PairwiseMetric,
    PointwiseMetric,
    SummarizationVerbosity,
)
from turneval.metrics.assessments import run_aggregates
from turneval.runner import resolve_metrics
from turneval.testing import ScriptedChatModel

from .._builders import as_type
from .._openai_stub import OpenAIStub, Reply


def verdict(score: float, explanation: str = "because") -> str:
    return json.dumps({"explanation": explanation, "score": score})


def yes(rationale: str = "fine") -> str:
    return json.dumps({"rationale": rationale, "rating": "yes"})


def no(rationale: str = "bad") -> str:
    return json.dumps({"rationale": rationale, "rating": "no"})


QA = SingleTurnSample(
    user_input="Who directed Titanic?",
    response="James Cameron.",
    reference="James Cameron",
    retrieved_contexts=["Titanic was directed by James Cameron."],
    baseline_response="Spielberg.",
)

CLARITY = {"1": "unclear", "2": "somewhat clear", "3": "clear"}


def test_pointwise_template_score_and_explanation() -> None:
    model = ScriptedChatModel(responses=[verdict(3, "states the director plainly")])
    metric = PointwiseMetric(
        name="clarity", criteria="Clarity of the answer.", rating_rubric=CLARITY, llm=model
    )
    result = metric.score(QA)
    assert result.value == 3.0 and result.reason == "3: states the director plainly"
    assert result.details["explanation"] == "states the director plainly"
    assert result.details["confidence"] is None  # one answer, no log-probabilities: not invented
    prompt = model.prompts[0][1].content
    assert "<instruction>\nWho directed Titanic?\n</instruction>" in prompt and "3: clear" in prompt


def test_score_outside_the_rubric_is_an_output_error() -> None:
    metric = PointwiseMetric(
        name="clarity",
        criteria="c",
        rating_rubric=CLARITY,
        llm=ScriptedChatModel(responses=[verdict(7)]),
    )
    with pytest.raises(JudgeOutputError, match="score 7 is not in the rubric"):
        metric.score(QA)
    with pytest.raises(ValueError, match="rating_rubric keys must be numbers"):
        PointwiseMetric(name="x", criteria="c", rating_rubric={"good": "g"})


def test_samples_give_majority_and_agreement_confidence() -> None:
    model = ScriptedChatModel(responses=[verdict(3, "a"), verdict(2, "b"), verdict(3, "c")])
    result = PointwiseMetric(
        name="clarity", criteria="c", rating_rubric=CLARITY, samples=3, llm=model
    ).score(QA)
    assert model.calls == 3 and result.value == 3.0
    assert result.details["votes"] == [3.0, 2.0, 3.0] and result.details["confidence"] == 2 / 3
    assert result.usage is not None and result.usage.calls == 3


def test_confidence_from_log_probabilities_on_the_real_client(openai_stub: OpenAIStub) -> None:
    content = '{"explanation": "ok", "score": 3}'
    tokens = [
        ('{"', 0.0),
        ("explanation", 0.0),
        ('":', 0.0),
        (' "', 0.0),
        ("ok", 0.0),
        ('",', 0.0),
        (' "', 0.0),
        ("score", 0.0),
        ('":', 0.0),
        (" ", 0.0),
        ("3", math.log(0.8)),
        ("}", 0.0),
    ]
    openai_stub.reset(Reply(content, logprobs=tokens))
    llm = ChatOpenAI(model="gpt-4o-mini", base_url=openai_stub.url, api_key="test")
    result = PointwiseMetric(name="clarity", criteria="c", rating_rubric=CLARITY, llm=llm).score(QA)
    assert result.value == 3.0 and result.details["confidence"] == pytest.approx(0.8)
    assert openai_stub.requests[0]["logprobs"] is True


def test_multi_turn_whole_conversation_and_per_turn() -> None:
    sample = MultiTurnSample(
        user_input=[
            HumanMessage(content="hi"),
            AIMessage(content="Hello!"),
            HumanMessage(content="and?"),
            AIMessage(content="Uh."),
        ]
    )
    whole = ScriptedChatModel(responses=[verdict(2)])
    assert (
        PointwiseMetric(name="c", criteria="c", rating_rubric=CLARITY, llm=whole)
        .score(sample)
        .value
        == 2.0
    )
    assert "AI: Uh." in whole.prompts[0][1].content
    per_turn = ScriptedChatModel(
        responses=[verdict(3, "clear greeting"), verdict(1, "says nothing")]
    )
    result = PointwiseMetric(
        name="c", criteria="c", rating_rubric=CLARITY, per_turn=True, llm=per_turn
    ).score(sample)
    assert result.value == (3 + 1) / 2 and [t["score"] for t in result.details["turns"]] == [
        3.0,
        1.0,
    ]
    assert result.reason == "mean of 2 AI turns = 2 (3, 1)"
    assert "<prediction>\nUh.\n</prediction>" in per_turn.prompts[1][1].content


def test_builtins_by_name_and_their_scales() -> None:
    safety, verbosity, correctness = resolve_metrics(
        ["safety", "summarization_verbosity", "question_answering_correctness"]
    )
    assert set(as_type(PointwiseMetric, safety).rating_rubric) == {"0", "1"}
    assert set(as_type(PointwiseMetric, verbosity).rating_rubric) == {"-2", "-1", "0", "1", "2"}
    model = ScriptedChatModel(responses=[verdict(-1, "a bit terse")])
    assert SummarizationVerbosity(llm=model).score(QA).value == -1.0  # reported on its scale
    preset = resolve_metrics(["question_answering_correctness"])[0]
    assert isinstance(preset, Metric)
    with_reference = preset.model_copy(update={"use_reference": True})
    check = ScriptedChatModel(responses=[verdict(1)])
    with_reference.llm = check
    assert with_reference.score(QA).value == 1.0
    assert "<reference>\nJames Cameron\n</reference>" in check.prompts[0][1].content
    assert correctness.name == "question_answering_correctness"


def test_pairwise_is_order_debiased() -> None:
    # Baseline shown first: A=baseline, B=candidate -> "B" means CANDIDATE; then swapped: "A" means CANDIDATE.
    agree = ScriptedChatModel(
        responses=[
            json.dumps({"explanation": "x", "choice": "B"}),
            json.dumps({"explanation": "y", "choice": "A"}),
        ]
    )
    metric = PairwiseMetric(name="pairwise_qa", criteria="Which answer is more correct?", llm=agree)
    result = metric.score(QA)
    assert result.value == 1.0 and result.details["choice"] == "CANDIDATE"
    assert "<response_A>\nSpielberg.\n</response_A>" in agree.prompts[0][1].content
    assert "<response_A>\nJames Cameron.\n</response_A>" in agree.prompts[1][1].content
    biased = ScriptedChatModel(
        responses=[json.dumps({"explanation": "first is best", "choice": "A"})]
    )  # always "A"
    tie = PairwiseMetric(name="pairwise_qa", criteria="c", llm=biased).score(QA)
    assert tie.details["choice"] == "TIE" and tie.value == 0.5
    assert (
        tie.details["baseline_first"] == "BASELINE"
        and tie.details["candidate_first"] == "CANDIDATE"
    )


def test_pairwise_win_rates_in_the_summary() -> None:
    answers = [
        json.dumps({"explanation": "e", "choice": c}) for c in ("B", "A", "A", "B", "A", "A")
    ]
    model = ScriptedChatModel(responses=answers)
    result = evaluate(
        [QA, QA, QA], [PairwiseMetric(name="p", criteria="c", llm=model)], max_concurrency=1
    )
    # Pairs: (B, A) -> CANDIDATE; (A, B) -> BASELINE; (A, A) -> TIE.
    assert [row.results["p"].details["choice"] for row in result.rows] == [
        "CANDIDATE",
        "BASELINE",
        "TIE",
    ]
    assert result.summary()["p"].extra == {
        "candidate_win_rate": 1 / 3,
        "baseline_win_rate": 1 / 3,
        "tie_rate": 1 / 3,
        "position_consistency": 2 / 3,  # (A, A) is the one pair whose two orders disagree
    }


def test_assessment_judges() -> None:
    chunks = SingleTurnSample(user_input="q", response="r", retrieved_contexts=["a", "b", "c", "d"])
    verdicts = json.dumps(
        {"chunks": [json.loads(yes()), json.loads(no()), json.loads(yes()), json.loads(no())]}
    )
    result = ChunkRelevance(llm=ScriptedChatModel(responses=[verdicts])).score(chunks)
    assert result.value == 2 / 4 and result.reason == "precision=2/4=0.500"
    guideline = GuidelineAdherence(
        guidelines={"tone": ["be polite"], "language": ["answer in English"]},
        llm=ScriptedChatModel(responses=[yes(), no("answered in French"), yes()]),
    )
    sample = SingleTurnSample(user_input="q", response="r", rubrics={"brevity": "one sentence"})
    outcome = guideline.score(sample)
    assert outcome.value == 0.0 and outcome.reason == "no: language: answered in French"
    assert set(outcome.details["guidelines"]) == {"tone", "language", "brevity"}
    custom = AssessmentJudge(
        name="cites_sources",
        instructions="Does the response cite a source?",
        llm=ScriptedChatModel(responses=[yes()]),
    )
    assert custom.score(QA).value == 1.0


def run_assessment(
    sample: SingleTurnSample, ratings: dict[str, bool], extra: list[Any] | None = None
) -> dict[str, Any]:
    metrics: list[Any] = []
    for name, passed in ratings.items():
        model = ScriptedChatModel(responses=[yes() if passed else no(f"{name} failed")])
        if name == "chunk_relevance":
            verdicts = {"chunks": [json.loads(yes() if passed else no())]}
            model = ScriptedChatModel(responses=[json.dumps(verdicts)])
        if name == "safety":
            model = ScriptedChatModel(responses=[verdict(1 if passed else 0, "safety verdict")])
        metric = resolve_metrics([name])[0]
        metric.llm = model
        if name == "guideline_adherence":
            metric.guidelines = {"tone": ["be polite"]}
        metrics.append(metric)
    metrics += extra or []
    metrics.append(OverallAssessment())
    row = evaluate([sample], metrics).rows[0]
    return row.results["overall_assessment"].details


WITH_TRUTH = SingleTurnSample(
    user_input="q", response="r", reference="truth", retrieved_contexts=["ctx"]
)
WITHOUT_TRUTH = SingleTurnSample(user_input="q", response="r", retrieved_contexts=["ctx"])


def test_root_cause_order_with_ground_truth() -> None:
    names = ["context_sufficiency", "correctness", "safety", "guideline_adherence"]
    assert run_assessment(WITH_TRUTH, dict.fromkeys(names, True))["rating"] == "yes"
    # correctness and safety fail: correctness comes first in the documented order.
    details = run_assessment(
        WITH_TRUTH, {**dict.fromkeys(names, True), "correctness": False, "safety": False}
    )
    assert details["rating"] == "no" and details["root_cause"] == "correctness"
    assert details["root_cause_rationale"] == "no: correctness failed"
    # context_sufficiency precedes everything.
    assert (
        run_assessment(WITH_TRUTH, {**dict.fromkeys(names, False)})["root_cause"]
        == "context_sufficiency"
    )


def test_root_cause_order_without_ground_truth() -> None:
    names = ["chunk_relevance", "relevance_to_query", "safety", "guideline_adherence"]
    assert (
        run_assessment(
            WITHOUT_TRUTH,
            {**dict.fromkeys(names, True), "safety": False, "guideline_adherence": False},
        )["root_cause"]
        == "safety"
    )
    assert (
        run_assessment(WITHOUT_TRUTH, {**dict.fromkeys(names, False)})["root_cause"]
        == "chunk_relevance"
    )
    custom = AssessmentJudge(
        name="cites_sources", instructions="?", llm=ScriptedChatModel(responses=[no("no source")])
    )
    details = run_assessment(WITHOUT_TRUTH, dict.fromkeys(names, True), extra=[custom])
    assert details["root_cause"] == "cites_sources"  # custom judges come last, but count


def test_groundedness_takes_part_in_the_assessment() -> None:
    sample = SingleTurnSample(
        user_input="q",
        response="Titanic was directed by Steven Spielberg.",
        retrieved_contexts=["Titanic was directed by James Cameron."],
    )
    details = run_assessment(
        sample, {"relevance_to_query": True}, extra=[resolve_metrics(["groundedness"])[0]]
    )
    assert details["root_cause"] == "groundedness"


def test_run_aggregates_are_named_as_databricks() -> None:
    metrics: list[Any] = [
        resolve_metrics(["correctness"])[0].model_copy(
            update={"llm": ScriptedChatModel(responses=[yes(), no()])}
        ),
        ChunkRelevance(
            llm=ScriptedChatModel(responses=[json.dumps({"chunks": [json.loads(yes())]})])
        ),
    ]
    result = evaluate([WITH_TRUTH, WITH_TRUTH], metrics, max_concurrency=1)
    figures = run_aggregates(result)
    assert figures["response/llm_judged/correctness/rating/percentage"] == 0.5
    assert figures["retrieval/llm_judged/chunk_relevance/precision/average"] == 1.0


def test_dry_run_estimates_without_calling(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    metrics = resolve_metrics(["fluency", "pairwise_question_answering_quality", "tool_call_valid"])
    found = estimate([QA, QA], metrics)
    assert found.calls == {"fluency": 2, "pairwise_question_answering_quality": 4}
    assert found.total_prompt_tokens > 0 and found.samples == 2
    path = tmp_path / "data.jsonl"
    path.write_text(QA.model_dump_json() + "\n")
    from turneval.cli import main

    assert (
        main(["evaluate", str(path), "--metric", "fluency", "--dry-run", "--price-input", "2.5"])
        == 0
    )
    output = capsys.readouterr().out
    assert "dry run over 1 samples: no model is called" in output and "fluency  1" in output
    assert "estimated prompt cost" in output


def test_a_choice_in_another_case_is_read_without_a_repair() -> None:
    # Real models write "Yes" or " TIE": the meaning is not in doubt, so no second request.
    answers = [
        json.dumps({"rationale": "right", "rating": "Yes"}),
        json.dumps({"rationale": "wrong", "rating": " NO "}),
    ]
    model = ScriptedChatModel(responses=answers)
    correctness = resolve_metrics(["correctness"])[0].model_copy(update={"llm": model})
    result = evaluate([WITH_TRUTH, WITH_TRUTH], [correctness], max_concurrency=1)
    assert result.scores("correctness") == [1.0, 0.0] and model.calls == 2
    unknown = ScriptedChatModel(responses=[json.dumps({"rationale": "r", "rating": "maybe"})])
    failed = evaluate([WITH_TRUTH], [correctness.model_copy(update={"llm": unknown})])
    assert failed.rows[0].failures["correctness"].error_type == "JudgeOutputError"

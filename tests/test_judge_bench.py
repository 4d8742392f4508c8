"""Who&When: the vendored logs, their conversion, and accuracy computed by hand.

Fake judges answer through the real FailureAttribution pipeline (the real ChatOpenAI client
against the stub server for the command line): one answers people's labels, one always names
the same agent, one names the step after the labelled one.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from turneval import AIMessage, ConfigError, evaluate
from turneval.cli import main
from turneval.judge_bench import (
    PUBLISHED,
    WhoAndWhenCase,
    load_cases,
    score,
    to_sample,
    wilson_interval,
)
from turneval.metrics import FailureAttribution
from turneval.testing import ScriptedChatModel

from ._openai_stub import OpenAIStub, Reply

CASES = load_cases()
SUBSET = CASES[:12]


def test_the_vendored_subset_is_whole_and_as_published() -> None:
    assert len(CASES) == 126
    assert CASES[0].id == "alg-1" and CASES[-1].id == "alg-126"
    first = CASES[0]
    assert (first.mistake_agent, first.mistake_step) == ("Excel_Expert", 0)  # 1.json's labels
    assert first.ground_truth == "8" and len(first.history) == 6
    for case in CASES:  # every label names an agent of the log and one of its steps
        assert 0 <= case.mistake_step < len(case.history)
        assert case.mistake_agent in {entry["name"] for entry in case.history}
    assert PUBLISHED["all_at_once", True] == (54.33, 12.50)


def test_a_log_becomes_a_conversation_whose_steps_are_the_logs() -> None:
    case = CASES[16]
    sample = to_sample(case)
    assert len(sample.user_input) == len(case.history)
    for message, entry in zip(sample.user_input, case.history, strict=True):
        assert isinstance(message, AIMessage)
        assert (message.name, message.content) == (entry["name"], entry["content"])
    assert sample.reference is not None and case.ground_truth in sample.reference
    assert case.ground_truth not in (to_sample(case, ground_truth=False).reference or "")
    assert (sample.metadata or {})["mistake_step"] == case.mistake_step
    assert sample.agent_names() == list(dict.fromkeys(e["name"] for e in case.history))


def test_logs_are_read_from_the_repositorys_folders_and_jsonl(tmp_path: Path) -> None:
    folder = tmp_path / "Hand-Crafted"
    folder.mkdir()
    log = {
        "question": "q",
        "ground_truth": "a",
        "history": [
            {"role": "Orchestrator", "content": "plan"},
            {"role": "WebSurfer", "content": "x"},
        ],
        "mistake_agent": "WebSurfer",
        "mistake_step": "1",
        "mistake_reason": "wrong page",
    }
    (folder / "2.json").write_text(json.dumps(log))
    (folder / "10.json").write_text(json.dumps(log))
    cases = load_cases(folder)
    assert [c.id for c in cases] == ["hand-2", "hand-10"]
    assert cases[0].history[1]["name"] == "WebSurfer"  # agents named by role there
    (tmp_path / "bad.jsonl").write_text('{"question": "q"}\n')
    with pytest.raises(ConfigError, match="line 1: not a Who&When log"):
        load_cases(tmp_path / "bad.jsonl")


def test_wilson_intervals_agree_with_statsmodels() -> None:
    from statsmodels.stats.proportion import proportion_confint

    for hits, n in ((0, 10), (3, 10), (10, 10), (67, 126), (18, 126)):
        low, high = proportion_confint(hits, n, alpha=0.05, method="wilson")
        assert wilson_interval(hits, n) == pytest.approx((low, high), abs=1e-9)
    assert wilson_interval(0, 0) == (0.0, 1.0)


def _case_of(prompt: str, cases: list[WhoAndWhenCase]) -> WhoAndWhenCase:
    return next(case for case in cases if f"The task: {case.question}" in prompt)


def answer_for(case: WhoAndWhenCase, agent: str, step: int) -> str:
    steps = {
        f"step_{i}": {"verdict": "decisive" if i == step else "fine"}
        for i in range(len(case.history))
    }
    return json.dumps({"reason": "people said so", "steps": steps, "agent": agent})


def fake_judge(kind: str, cases: list[WhoAndWhenCase]) -> ScriptedChatModel:
    def policy(messages: list[BaseMessage]) -> str:
        case = _case_of(str(messages[-1].content), cases)
        if kind == "truth":
            return answer_for(case, case.mistake_agent, case.mistake_step)
        if kind == "fixed agent":
            return answer_for(
                case,
                "Verification_Expert"
                if any(e["name"] == "Verification_Expert" for e in case.history)
                else case.history[0]["name"],
                case.mistake_step,
            )
        last = len(case.history) - 1  # a step off by one (back one at the last step)
        off = case.mistake_step + 1 if case.mistake_step < last else case.mistake_step - 1
        return answer_for(case, case.mistake_agent, off)

    return ScriptedChatModel(responses=[policy])


@pytest.mark.parametrize("kind", ["truth", "fixed agent", "off by one"])
def test_accuracy_of_fake_judges_computed_by_hand(kind: str) -> None:
    cases = SUBSET
    result = evaluate(
        [to_sample(case) for case in cases],
        [FailureAttribution(llm=fake_judge(kind, cases))],
        show_progress=False,
    )
    accuracy = score(result, cases)
    n = len(cases)
    if kind == "truth":
        agent_hits, step_hits = n, n
    elif kind == "fixed agent":
        agent_hits = sum(
            case.mistake_agent
            == (
                "Verification_Expert"
                if any(e["name"] == "Verification_Expert" for e in case.history)
                else case.history[0]["name"]
            )
            for case in cases
        )
        step_hits = n
        assert 0 < agent_hits < n  # the subset tells a fixed agent apart
    else:
        agent_hits, step_hits = n, 0
    assert (accuracy.agent_hits, accuracy.step_hits, accuracy.failed) == (agent_hits, step_hits, 0)
    assert accuracy.agent_accuracy == agent_hits / n
    assert accuracy.agent_interval == wilson_interval(agent_hits, n)
    text = str(accuracy)
    assert f"{agent_hits / n:6.1%} ({agent_hits}/{n}" in text and "paper (GPT-4o)" in text


def test_rows_without_an_attribution_count_wrong() -> None:
    cases = SUBSET[:3]
    failing = ScriptedChatModel(responses=[RuntimeError("judge down")])
    result = evaluate(
        [to_sample(case) for case in cases],
        [FailureAttribution(llm=failing, max_retries=0)],
        show_progress=False,
    )
    accuracy = score(result, cases)
    assert (accuracy.agent_hits, accuracy.step_hits, accuracy.failed) == (0, 0, 3)
    with pytest.raises(ConfigError, match="3 rows for 2 Who&When logs"):
        score(result, cases[:2])


def test_the_command_runs_a_real_client_and_prints_the_figures(
    openai_stub: OpenAIStub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = CASES[:6]

    def respond(body: dict[str, Any]) -> Reply:
        prompt = body["messages"][-1]["content"]
        case = _case_of(prompt, cases)
        # the truth for even logs, the step after it (agent right) for odd ones
        number = int(case.id.split("-")[1])
        step = case.mistake_step if number % 2 == 0 else (case.mistake_step + 1) % len(case.history)
        return Reply(content=answer_for(case, case.mistake_agent, step))

    openai_stub.reset(responder=respond)
    code = main(
        [
            "judge-bench",
            "who-and-when",
            "--limit",
            "6",
            "--judge-base-url",
            openai_stub.url,
            "--judge-model",
            "m",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "Who&When, 6 logs, all_at_once, with ground truth" in out
    assert "100.0% (6/6;" in out and " 50.0% (3/6;" in out
    assert "54.3%" in out and "12.5%" in out  # the paper's figures beside
    figures = json.loads((tmp_path / "accuracy.json").read_text())
    assert figures["agent_accuracy"] == 1.0 and figures["step_accuracy"] == 0.5
    assert len(openai_stub.requests) == 6
    code = main(
        [
            "judge-bench",
            "who-and-when",
            "--dry-run",
            "--mode",
            "binary_search",
            "--judge-model",
            "m",
        ]
    )
    assert code == 0
    counts = Counter(len(case.history) for case in CASES)
    rounds = sum(n * ((length - 1).bit_length()) for length, n in counts.items())
    assert f"failure_attribution  {rounds}  " in capsys.readouterr().out

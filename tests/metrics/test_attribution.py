"""FailureAttribution: which agent, which step, why, in the paper's three modes."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import BaseMessage

from tests.test_multi_agent import supervisor_conversation
from turneval import AgentSpec, HumanMessage, InvalidSampleError, MultiTurnSample, SystemMessage
from turneval.estimate import estimate
from turneval.judge import strict_schema_problems
from turneval.metrics import FailureAttribution
from turneval.metrics.attribution import (
    AttributionMode,
    binary_rounds,
    conversation_steps,
    split_segment,
)
from turneval.testing import ScriptedChatModel

# supervisor_conversation(): 0 system, 1 human, 2 supervisor (call), 3 tool, 4 researcher (call),
# 5 tool, 6 researcher, 7 researcher (handoff back), 8 tool, 9 supervisor (call), 10 tool,
# 11 coder (two calls), 12 tool, 13 tool, 14 coder, 15 supervisor: steps 1..15 (15 steps).


def sample(**extra: Any) -> MultiTurnSample:
    return MultiTurnSample(
        user_input=supervisor_conversation(),
        reference="About 3.1 million people.",
        agents=[AgentSpec(name="coder", description="writes and runs Python")],
        **extra,
    )


def marks(decisive: list[int] = (), mistakes: list[int] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    return {
        f"step_{i}": {
            "verdict": "decisive" if i in decisive else "mistake" if i in mistakes else "fine"
        }
        for i in range(1, 16)
    }


def judge(*answers: dict[str, Any]) -> ScriptedChatModel:
    return ScriptedChatModel(responses=[json.dumps(a) for a in answers])


def test_steps_are_the_messages_but_the_system_prompt_with_their_agents() -> None:
    steps = conversation_steps(sample())
    assert [s.index for s in steps] == list(range(1, 16))
    assert [s.agent for s in steps][:5] == [
        "user",
        "supervisor",
        "supervisor",
        "researcher",
        "researcher",
    ]
    with pytest.raises(InvalidSampleError, match="at least one message besides"):
        conversation_steps(MultiTurnSample(user_input=[SystemMessage(content="s")]))


@settings(max_examples=60)
@given(st.integers(1, 400))
def test_binary_search_takes_ceil_log2_rounds_on_every_path(steps: int) -> None:
    def paths(low: int, high: int) -> set[int]:
        if low == high:
            return {0}
        (a, b), (c, d) = split_segment(low, high)
        assert a == low and d == high and c <= b + 1 and b - c <= 0  # cover, share one at most
        return {1 + n for n in paths(a, b) | paths(c, d)}

    assert paths(0, steps - 1) == {math.ceil(math.log2(steps)) if steps > 1 else 0}
    assert binary_rounds(steps) == (math.ceil(math.log2(steps)) if steps > 1 else 0)


async def test_all_at_once_reads_the_decisive_step_and_agent() -> None:
    answer = {"reason": "the coder ran the wrong code", "steps": marks([11], [6]), "agent": "coder"}
    result = await FailureAttribution(llm=judge(answer)).ascore(sample())
    assert result.details["attribution"] == {
        "agent": "coder",
        "step": 11,
        "step_agent": "coder",
        "mode": "all_at_once",
        "fallback": False,
    }
    assert result.value == pytest.approx(10 / 14)  # the 11th of 15 steps: position 10 of 0..14
    assert result.reason == "coder at step 11 (user_input[11]): the coder ran the wrong code"
    assert result.usage is not None and result.usage.calls == 1
    compact = await FailureAttribution(llm=judge(answer)).ascore(sample(), details=False)
    assert compact.details == {"attribution": result.details["attribution"]}


async def test_all_at_once_falls_back_to_the_earliest_mistake_then_the_last_step() -> None:
    several = {"reason": "r", "steps": marks([9, 4]), "agent": "supervisor"}
    assert (await FailureAttribution(llm=judge(several)).ascore(sample())).details["attribution"][
        "step"
    ] == 4
    mistakes = {"reason": "r", "steps": marks([], [12, 6]), "agent": "researcher"}
    assert (await FailureAttribution(llm=judge(mistakes)).ascore(sample())).details["attribution"][
        "step"
    ] == 6
    fine = {"reason": "r", "steps": marks(), "agent": "user"}
    result = await FailureAttribution(llm=judge(fine)).ascore(sample())
    assert result.details["attribution"]["step"] == 15 and result.details["attribution"]["fallback"]
    assert "the last step: no step was judged an error" in result.reason


async def test_the_all_at_once_schema_admits_only_this_conversations_steps_and_agents() -> None:
    request = FailureAttribution().requests(sample())[0]
    schema = request.schema.model_json_schema()
    assert strict_schema_problems(schema) == []
    steps = schema["properties"]["steps"]
    assert steps["required"] == [f"step_{i}" for i in range(1, 16)]
    agent = schema["properties"]["agent"]
    assert agent["enum"] == ["user", "supervisor", "researcher", "coder"]
    assert "writes and runs Python" in request.prompt  # the declared agent's description
    assert "About 3.1 million people." in request.prompt
    assert "[step 11] AI (coder):" in request.prompt and "[system prompt]" in request.prompt


def _step_judge(yes: set[int]) -> ScriptedChatModel:
    def policy(messages: list[BaseMessage]) -> str:
        prompt = str(messages[-1].content)
        latest = int(prompt.rsplit("The latest step (", 1)[1].split(")", 1)[0])
        return json.dumps({"reason": f"step {latest}", "verdict": "yes" if latest in yes else "no"})

    return ScriptedChatModel(responses=[policy])


async def test_step_by_step_asks_every_step_and_takes_the_first_yes() -> None:
    model = _step_judge({9, 12})
    result = await FailureAttribution(mode="step_by_step", llm=model).ascore(sample())
    assert model.calls == 15  # one per step, asked at once
    assert result.details["attribution"]["step"] == 9
    assert result.details["attribution"]["agent"] == "supervisor"
    assert result.details["flagged"] == [9, 12]
    assert result.reason == "supervisor at step 9 (user_input[9]): step 9"
    shown = [str(p[-1].content) for p in model.prompts]
    step_9 = next(p for p in shown if "The latest step (9)" in p)
    assert "[step 9]" in step_9 and "[step 10]" not in step_9  # the conversation up to it
    none = await FailureAttribution(mode="step_by_step", llm=_step_judge(set())).ascore(sample())
    assert none.details["attribution"] == {
        "agent": "supervisor",
        "step": 15,
        "step_agent": "supervisor",
        "mode": "step_by_step",
        "fallback": True,
    }


def _half_judge(target: int) -> ScriptedChatModel:
    """Answers the half that holds ``target`` (the upper one when both do)."""

    def policy(messages: list[BaseMessage]) -> str:
        prompt = str(messages[-1].content)
        upper = prompt.split("in the upper half (", 1)[1].split(")", 1)[0]
        numbers = [int(n) for n in upper.replace("steps ", "").replace("step ", "").split(" to ")]
        low, high = numbers[0], numbers[-1]
        half = "upper" if low <= target <= high else "lower"
        return json.dumps({"reason": f"in the {half} half", "half": half})

    return ScriptedChatModel(responses=[policy])


@pytest.mark.parametrize("target", [1, 2, 8, 11, 14, 15])
async def test_binary_search_finds_the_step_in_ceil_log2_rounds(target: int) -> None:
    model = _half_judge(target)
    metric = FailureAttribution(mode="binary_search", llm=model)
    result = await metric.ascore(sample())
    assert result.details["attribution"]["step"] == target
    assert model.calls == 4 == math.ceil(math.log2(15)) == len(metric.judge_requests(sample()))
    assert len(result.details["path"]) == 4


async def test_binary_search_asks_what_the_dry_run_states_along_the_upper_halves() -> None:
    model = _half_judge(1)  # always the upper half
    metric = FailureAttribution(mode="binary_search", llm=model)
    await metric.ascore(sample())
    stated = [(r.system, r.prompt) for r in metric.judge_requests(sample())]
    sent = [(str(p[0].content), str(p[-1].content)) for p in model.prompts]
    assert [prompt for _, prompt in sent] == [prompt for _, prompt in stated]


MODES: tuple[AttributionMode, ...] = ("all_at_once", "step_by_step", "binary_search")


def test_the_dry_run_counts_each_modes_requests_exactly() -> None:
    samples = [sample(), MultiTurnSample(user_input=[HumanMessage(content="only one step")])]
    counts = {
        mode: estimate(
            samples, [FailureAttribution(mode=mode)], llm=ScriptedChatModel(responses=["{}"])
        ).calls["failure_attribution"]
        for mode in MODES
    }
    assert counts == {"all_at_once": 2, "step_by_step": 15 + 1, "binary_search": 4 + 0}


async def test_a_one_step_conversation_needs_no_binary_search() -> None:
    model = ScriptedChatModel(responses=["{}"])
    one = MultiTurnSample(user_input=[HumanMessage(content="hi")])
    result = await FailureAttribution(mode="binary_search", llm=model).ascore(one)
    assert model.calls == 0 and result.value == 0.0
    assert result.details["attribution"]["agent"] == "user"


async def test_repeats_take_the_most_frequent_step_and_keep_it_without_details() -> None:
    answers = [
        {"reason": "a", "steps": marks([11]), "agent": "coder"},
        {"reason": "b", "steps": marks([6]), "agent": "researcher"},
        {"reason": "c", "steps": marks([6]), "agent": "researcher"},
    ]
    metric = FailureAttribution(llm=judge(*answers), repeats=3)
    result = await metric.ascore(sample(), details=False)
    assert result.details["attribution"]["step"] == 6
    assert result.details["repeats"]["n"] == 3 and "votes" not in result.details["repeats"]

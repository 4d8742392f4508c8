"""Per-agent figures (``by_agent=True``) and HandoffAccuracy, computed by hand."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.test_multi_agent import AGENTS, conversations, supervisor_conversation
from turneval import (
    AgentSpec,
    AIMessage,
    EvaluationDataset,
    Handoff,
    HumanMessage,
    InvalidSampleError,
    MultiTurnSample,
    ToolCall,
    ToolMessage,
    evaluate,
)
from turneval.metrics import (
    AgentLoopDetection,
    HandoffAccuracy,
    PerAgentMetric,
    StepBudget,
    ToolCallAccuracy,
    ToolCallEfficiency,
    ToolCallF1,
    ToolPermission,
    TrajectoryExactMatch,
    TrajectoryInOrderMatch,
    TrajectoryPrecision,
    TrajectoryRecall,
    TrajectorySingleToolUse,
)
from turneval.metrics.agents import agent_sample, allowed_tools
from turneval.metrics.arg_rules import casefold
from turneval.results import EvaluationResult

REFERENCE = [
    ToolCall(name="transfer_to_researcher"),
    ToolCall(name="web_search", args={"q": "Paris population"}),
    ToolCall(name="transfer_to_coder", args={"task": "add"}),
]


def sample() -> MultiTurnSample:
    return MultiTurnSample(
        user_input=supervisor_conversation(), agents=AGENTS, reference_tool_calls=REFERENCE
    )


def test_an_agents_share_is_its_messages_its_reference_and_its_tools() -> None:
    whole = sample()
    coder = agent_sample(whole, "coder")
    assert [m.type for m in coder.user_input] == ["system", "human", "ai", "tool", "tool", "ai"]
    assert coder.reference_tool_calls == AGENTS[2].reference_tool_calls  # its own
    assert coder.metadata == {"allowed_tools": ["python", "transfer_to_*", "transfer_back_to_*"]}
    researcher = agent_sample(whole, "researcher")
    # its share of the sample's reference: the calls to its tools (handoffs to the supervisor)
    assert researcher.reference_tool_calls == [REFERENCE[1]]
    assert allowed_tools(AGENTS[1]) == [
        "web_search",
        "transfer_to_supervisor",
        "transfer_back_to_supervisor",
    ]
    supervisor = agent_sample(whole, "supervisor")
    assert supervisor.reference_tool_calls == [REFERENCE[0], REFERENCE[2]]
    assert [m.name for m in supervisor.user_input if isinstance(m, AIMessage)] == ["supervisor"] * 3
    assert allowed_tools(AgentSpec(name="x")) is None


async def test_tool_call_f1_by_agent_is_the_mean_of_each_agents_f1() -> None:
    result = await ToolCallF1(by_agent=True).ascore(sample())
    # supervisor: 2 handoff calls, both in its reference share: F1 1.
    # researcher: web_search (matched) + transfer_back_to_supervisor (not in the reference):
    #   P = 1/2, R = 1/1, F1 = 2/3.
    # coder: python("2.1 + 1") matched, python("print(3.1)") extra: P = 1/2, R = 1/1, F1 = 2/3.
    expected = {"supervisor": 1.0, "researcher": 2 / 3, "coder": 2 / 3}
    assert result.details["by_agent"] == pytest.approx(expected)
    assert result.value == pytest.approx((1 + 2 / 3 + 2 / 3) / 3)
    assert result.reason.startswith("mean over 3 agent(s) = 0.778; supervisor: precision=2/2")
    assert "coder: precision=1/2=0.500, recall=1/1=1.000, F1=0.667" in result.reason
    # the plain paths (ragas' entry point, details off) give the same value
    assert await ToolCallF1(by_agent=True).multi_turn_ascore(sample()) == result.value
    compact = await ToolCallF1(by_agent=True).ascore(sample(), details=False)
    assert compact.value == result.value and compact.details == {"by_agent": expected}


async def test_tool_permission_by_agent_checks_each_agent_against_its_own_tools() -> None:
    messages = supervisor_conversation()
    messages[11] = AIMessage(  # the coder searches the web: not one of its tools
        name="coder",
        tool_calls=[
            ToolCall(name="python", args={"code": "2.1 + 1"}, id="c1"),
            ToolCall(name="web_search", id="c2"),
        ],
    )
    whole = MultiTurnSample(user_input=messages, agents=AGENTS)
    result = await ToolPermission(by_agent=True).ascore(whole)
    assert result.details["by_agent"] == {"supervisor": 1.0, "researcher": 1.0, "coder": 0.5}
    # the index named is the whole conversation's, not the coder's share's
    assert "coder: authorised=1/2=0.500; unauthorised: web_search({}) at user_input[11]" in (
        result.reason
    )
    assert result.details["agents"]["coder"]["details"]["unauthorised"][0]["message_index"] == 11
    # one shared tool list (the peers' bug) would call every web_search right, the coder's too
    shared = ToolPermission(allowed=["web_search", "python", "transfer_*"])
    assert (await shared.ascore(whole)).value == 1.0


async def test_an_agent_that_cannot_be_scored_is_listed_and_left_out() -> None:
    bare = MultiTurnSample(
        user_input=supervisor_conversation(),
        agents=[AgentSpec(name="coder", reference_tool_calls=[])],
    )
    result = await ToolCallF1(by_agent=True).ascore(bare)
    assert list(result.details["by_agent"]) == ["coder"]  # the others have no reference
    assert set(result.details["not_scored"]) == {"supervisor", "researcher"}
    assert "reference_tool_calls" in result.details["not_scored"]["researcher"]
    assert result.value == 0.0  # the coder called two tools, none expected
    with pytest.raises(InvalidSampleError, match="by_agent=True could score no agent"):
        await ToolCallF1(by_agent=True).ascore(
            MultiTurnSample(user_input=supervisor_conversation())
        )


async def test_a_sample_naming_no_agent_is_scored_whole() -> None:
    single = MultiTurnSample(
        user_input=[
            HumanMessage(content="x"),
            AIMessage(tool_calls=[ToolCall(name="f", id="1")]),
            ToolMessage(content="ok", tool_call_id="1"),
        ],
        reference_tool_calls=[ToolCall(name="f")],
    )
    for metric in (ToolCallF1(), ToolCallAccuracy(), TrajectoryExactMatch()):
        whole = await metric.ascore(single)
        per_agent = await metric.model_copy(update={"by_agent": True}).ascore(single)
        assert (per_agent.value, per_agent.reason) == (whole.value, whole.reason)


RULE_METRICS: list[PerAgentMetric] = [
    ToolCallAccuracy(by_agent=True),
    ToolCallAccuracy(by_agent=True, strict_order=False),
    ToolCallF1(by_agent=True),
    TrajectoryExactMatch(by_agent=True),
    TrajectoryInOrderMatch(by_agent=True),
    TrajectoryPrecision(by_agent=True),
    TrajectoryRecall(by_agent=True),
    TrajectorySingleToolUse(tool_name="search", by_agent=True),
    ToolPermission(by_agent=True, allowed=["search"]),
    AgentLoopDetection(by_agent=True, max_repeats=1),
    ToolCallEfficiency(by_agent=True),
    StepBudget(by_agent=True, max_steps=2),
]


@settings(max_examples=40)
@given(conversations(), st.lists(st.sampled_from(["search", "transfer_to_coder"]), max_size=3))
def test_by_agent_is_the_metric_on_each_agents_share(
    messages: list[Any], reference: list[str]
) -> None:
    names = sorted({m.name for m in messages if isinstance(m, AIMessage) and m.name})
    agents = [
        AgentSpec(name=name, reference_tool_calls=[ToolCall(name=tool) for tool in reference])
        for name in names
    ]
    whole = MultiTurnSample(user_input=messages, agents=agents or None)
    for metric in RULE_METRICS:
        plain = metric.model_copy(update={"by_agent": False})
        if not names:  # no agent named: scored whole (the reference is then missing)
            if isinstance(metric, (ToolPermission, AgentLoopDetection, ToolCallEfficiency)):
                assert metric.score(whole).value == plain.score(whole).value
            continue
        result = metric.score(whole)
        each = {name: plain.score(agent_sample(whole, name)).value for name in names}
        assert result.details["by_agent"] == each, metric
        assert result.value == pytest.approx(statistics.fmean(each.values()))
        assert metric.multi_turn_score(whole) == result.value


def test_the_summary_breaks_metrics_down_by_agent_in_every_sink(tmp_path: Path) -> None:
    data = EvaluationDataset([sample(), sample()])
    metrics = [ToolCallF1(by_agent=True), ToolPermission(by_agent=True)]
    result = evaluate(data, metrics, show_progress=False)
    extra = result.summary()["tool_call_f1"].extra or {}
    assert extra["by_agent.coder"] == pytest.approx(2 / 3) and extra["by_agent.coder.rows"] == 2
    assert extra["by_agent.supervisor"] == 1.0
    result.to_jsonl(tmp_path / "results.jsonl")  # details off: the per-agent values are kept
    back = EvaluationResult.from_jsonl(tmp_path / "results.jsonl")
    assert back.summary()["tool_call_f1"].extra == extra
    from turneval.stream import evaluate_jsonl

    data.to_jsonl(tmp_path / "in.jsonl")
    streamed = evaluate_jsonl(
        tmp_path / "in.jsonl", metrics, tmp_path / "run", details=False, show_progress=False
    )
    assert streamed.summaries["tool_call_f1"].extra == extra


# -- HandoffAccuracy ---------------------------------------------------------------------------


def handoffs_sample(reference: list[Handoff]) -> MultiTurnSample:
    return MultiTurnSample(user_input=supervisor_conversation(), reference_handoffs=reference)


async def test_handoff_accuracy_in_order_and_as_a_set() -> None:
    # made: supervisor->researcher, researcher->supervisor, supervisor->coder {task}, coder->supervisor
    reference = [
        Handoff(source="supervisor", target="coder", args={"task": "add"}),
        Handoff(source="supervisor", target="researcher"),
    ]
    in_order = await HandoffAccuracy().ascore(handoffs_sample(reference))
    # longest common subsequence: 1 (the two are in the other order); P = 1/4, R = 1/2
    assert in_order.value == pytest.approx(2 * (1 / 4) * (1 / 2) / (1 / 4 + 1 / 2))
    assert in_order.reason == (
        "handoffs matched in order: precision=1/4=0.250, recall=1/2=0.500, F1=0.333"
    )
    as_set = await HandoffAccuracy(strict_order=False).ascore(handoffs_sample(reference))
    assert as_set.value == pytest.approx(2 * (2 / 4) * 1 / (2 / 4 + 1))  # P = 2/4, R = 2/2
    assert as_set.details["unmatched_predicted"] == [1, 3]


async def test_handoff_sources_and_arguments_decide_a_match() -> None:
    wrong_source = [Handoff(source="researcher", target="coder", args={"task": "add"})]
    assert (await HandoffAccuracy().ascore(handoffs_sample(wrong_source))).value == 0.0
    any_source = [Handoff(target="coder", args={"task": "ADD"})]
    assert (await HandoffAccuracy().ascore(handoffs_sample(any_source))).value == 0.0
    ruled = HandoffAccuracy(arg_rules={"coder": {"task": casefold()}})
    assert (await ruled.ascore(handoffs_sample(any_source))).value == pytest.approx(2 / 5)
    assert (await HandoffAccuracy().ascore(handoffs_sample([]))).reason == (
        "4 handoff(s) made, none expected: 0.0"
    )
    nothing = MultiTurnSample(user_input=[HumanMessage(content="x")], reference_handoffs=[])
    assert (await HandoffAccuracy().ascore(nothing)).value == 1.0
    with pytest.raises(InvalidSampleError, match="reference_handoffs"):
        await HandoffAccuracy().ascore(MultiTurnSample(user_input=[HumanMessage(content="x")]))

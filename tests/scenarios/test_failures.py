"""Near misses from a run's failures: which rows failed, how they are grouped, what is kept."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

from turneval import EvalTask
from turneval.errors import ConfigError
from turneval.metrics import EndStateMatch
from turneval.scenarios import from_failures, generate
from turneval.scenarios._failures import group_failures
from turneval.simulation import ScriptedUser
from turneval.simulation.domains import orders_scenarios, orders_world
from turneval.testing import ScriptedChatModel
from turneval.worlds import ToolError

from ._helpers import draft, record


def test_groups_by_hand() -> None:
    signatures = [
        "end_state_match = # < #: orders.#.status differs",
        "the agent failed: TimeoutError: no answer within #s",
        "end_state_match = # < #: orders.#.status differs",
        "end_state_match = # < #: orders.#.status differs and more",
        "the agent failed: TimeoutError: no answer within #s",
        "tool_call_f1 failed: JudgeOutputError: unparseable",
    ]
    assert group_failures(signatures, 0.9) == [[0, 2, 3], [1, 4], [5]]
    assert group_failures(signatures, 1.0) == [[0, 2, 3], [1, 4], [5]]  # token *set* ratio
    assert group_failures([], 0.8) == []


def idle(messages: list[Any]) -> list[Any]:
    """An agent that does nothing: every scenario that needs a change fails its end state."""
    from turneval import AIMessage

    return [*messages, AIMessage(content="I will look into it.")]


@pytest.fixture(scope="module")
def run() -> Any:
    world = orders_world()
    scenarios = orders_scenarios(world)
    task = EvalTask(scenarios, [EndStateMatch()], show_progress=False)
    result = task.evaluate(runnable=idle, user=ScriptedUser([]))
    return world, scenarios, result


def near_misses(messages: list[BaseMessage]) -> str:
    kinds = re.findall(
        r"^- (harder_persona|changed_constraint|tool_fault):", str(messages[-1].content), re.M
    )
    answer = {}
    for kind in kinds:
        if kind == "harder_persona":
            answer[kind] = draft(
                "ignored: the goal is kept",
                persona="a furious customer",
                persona_type="impatient",
                difficulty="hard",
                first_message="WHERE IS MY REFUND",
            )
            answer[kind].pop("actions")
        elif kind == "changed_constraint":
            answer[kind] = draft(
                "Refund only 10 on order D400.",
                actions=[("refund_order", {"order_id": "D400", "amount": 10})],
            )
        else:
            answer[kind] = {
                **draft("Cancel order A100 while lookups fail."),
                "fault_tool": "get_order",
                "fault_kind": "rate_limit",
            }
            answer[kind].pop("actions")
    return json.dumps(answer)


def test_failed_rows_become_near_misses_on_the_world(run: Any) -> None:
    world, scenarios, result = run
    source = from_failures(
        result, scenarios=scenarios, world=world, clusters=[[0, 2], [1], [3], [4]]
    )
    # the idle agent changes nothing: every scenario whose reference changes the state fails
    assert sorted(source.failed) == [0, 1, 2, 3]
    assert source.groups == [[0, 2], [1], [3]]  # row 4 (nothing to change) passed
    model = ScriptedChatModel(responses=[near_misses])
    generated = generate(source, llm=model, n=7, dedup_threshold=None)
    assert generated.requests == 3 and model.calls == 3
    last = str(model.prompts[2][-1].content)
    assert "- harder_persona:" in last and "changed_constraint" not in last  # 3 + 3 + 1 = 7
    first = str(model.prompts[0][-1].content)
    assert "as 2 of the run did" in first and "end_state_match = 0 < 1" in first
    assert "Cancel order A100, it is not needed any more." in first  # the scenario played
    by_kind: dict[str, list[Any]] = {}
    for scenario in generated.scenarios:
        by_kind.setdefault(record(scenario)["kind"], []).append(scenario)
    harder = by_kind["harder_persona"][0]
    assert harder.goal == scenarios[0].goal and harder.persona == "a furious customer"
    assert harder.reference_tool_calls == scenarios[0].reference_tool_calls
    assert record(harder)["expected_end_state"]["orders"]["A100"]["status"] == "cancelled"
    assert record(harder)["origin"] == {
        "row": 0,
        "failed_like_it": 2,
        "scenario": "cancel",
    }
    changed = by_kind["changed_constraint"][0]
    assert changed.goal == "Refund only 10 on order D400."
    assert record(changed)["expected_end_state"]["orders"]["D400"]["refunded"] == 10.0
    fault = by_kind["tool_fault"][0]
    assert fault.goal == scenarios[0].goal and fault.reference_tool_calls is None
    assert record(fault)["fault"] == {"tool": "get_order", "kind": "rate_limit"}
    assert fault.world is not None and fault.world.name == "orders"
    with pytest.raises(ToolError, match="429"):
        fault.world.call("get_order", {"order_id": "A100"})
    assert world.faults is None  # the template keeps no fault
    assert len(generated.scenarios) == 7


def test_thresholds_decide_what_failed(run: Any) -> None:
    _, _, result = run
    assert sorted(from_failures(result).failed) == [0, 1, 2, 3]
    with pytest.raises(ConfigError, match="no failed row"):
        from_failures(result, thresholds=0.0).plan(n=None, seed=0, batch_size=5)
    grouped = from_failures(result, cluster_threshold=0.99)
    assert sum(len(g) for g in grouped.groups) == 4
    without = from_failures(
        result.__class__(
            [r.__class__(r.index, None, r.results) for r in result.rows], result.metric_names
        )
    )
    assert without.failed == {} and len(without.skipped) == 4
    assert "row 0: failed, but no conversation is kept for it" in without.skipped


def test_rows_read_back_take_their_conversations_from_samples(run: Any) -> None:
    _, _, result = run
    bare = result.__class__(
        [r.__class__(r.index, None, r.results) for r in result.rows], result.metric_names
    )
    samples = {row.index: row.sample.model_dump(mode="json") for row in result.rows}
    samples[1] = {"user_input": []}  # a stored sample that is no conversation
    source = from_failures(bare, samples=samples)
    assert sorted(source.failed) == [0, 2, 3]
    assert source.skipped[0].startswith("row 1: its conversation is not valid: ")

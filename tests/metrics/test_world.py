"""EndStateMatch and StateAssertions: built-in scenarios replayed, perturbed trajectories,
ignore rules, each assertion reported, bad input."""

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from turneval import AIMessage, HumanMessage, MultiTurnSample, ToolCall, ToolMessage
from turneval.errors import InvalidSampleError
from turneval.metrics import EndStateMatch, StateAssertions, ToolCallF1, TrajectoryExactMatch
from turneval.metrics._world import state_differences
from turneval.simulation import Scenario
from turneval.simulation.domains import files_scenarios, orders_scenarios
from turneval.worlds import ToolError, path_segments

SCENARIOS = orders_scenarios() + files_scenarios()


def c(name: str, **args: Any) -> ToolCall:
    return ToolCall(name=name, args=args)


def played(scenario: Scenario, calls: list[ToolCall]) -> MultiTurnSample:
    """The conversation of an agent making ``calls`` on a fresh copy of the scenario's world,
    recorded as a trial records it (``metadata["world"]``; the reference state left out)."""
    assert scenario.world is not None
    world = scenario.world.fresh(scenario.initial_state)
    messages: list[Any] = [HumanMessage(content=scenario.first_message or scenario.goal)]
    for number, call in enumerate(calls):
        try:
            output = world.call(call.name, call.args)
        except ToolError as exc:
            output = str(exc)
        messages += [
            AIMessage(tool_calls=[call.model_copy(update={"id": str(number)})]),
            ToolMessage(content=output, tool_call_id=str(number)),
        ]
    messages.append(AIMessage(content="Done."))
    record = {**world.report(), "initial_state": world.initial_state}
    return MultiTurnSample(
        user_input=messages,
        reference_tool_calls=scenario.reference_tool_calls,
        metadata={"world": record},
    )


# What each scenario's reference actions change, written out by hand.
CHANGES: dict[str, Callable[[Any], bool]] = {
    "cancel": lambda s: s["orders"]["A100"]["status"] == "cancelled",
    "address": lambda s: s["orders"]["C300"]["address"] == "12 Mill St, Derby",
    "refund": lambda s: (
        s["refunds"] == [{"order_id": "D400", "amount": 30.0}]
        and s["orders"]["D400"]["refunded"] == 30.0
    ),
    "partial_refund": lambda s: s["orders"]["F600"]["refunded"] == 12.5,
    "cancel_shipped": lambda s: s["orders"]["E500"]["status"] == "shipped",
    "archive_notes": lambda s: (
        "/home/notes.txt" not in s["files"]
        and s["files"]["/home/archive/notes.txt"] == "call the bank\n"
    ),
    "todo": lambda s: s["files"]["/home/todo.md"] == "buy milk",
    "clean_tmp": lambda s: not any(path.startswith("/tmp/") for path in s["files"]),
}


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[str(s.id) for s in SCENARIOS])
def test_replaying_each_built_in_scenarios_reference_actions_scores_1(scenario: Scenario) -> None:
    assert scenario.world is not None and scenario.reference_tool_calls is not None
    sample = played(scenario, scenario.reference_tool_calls)
    record = (sample.metadata or {})["world"]
    assert CHANGES[str(scenario.id)](record["end_state"])
    assert all("error" not in call for call in record["calls"])  # the world accepts them all
    result = EndStateMatch(world=scenario.world).score(sample)
    assert (result.value, result.reason) == (
        1.0,
        "the end state matches the reference end state: 1.0",
    )
    assert TrajectoryExactMatch().score(sample).value == 1.0


def test_a_different_trajectory_to_the_same_state_scores_1_on_end_state_only() -> None:
    clean_tmp = next(s for s in SCENARIOS if s.id == "clean_tmp")
    # No listing first, the two deletions swapped: the same end state by another route.
    sample = played(
        clean_tmp, [c("delete_file", path="/tmp/b.log"), c("delete_file", path="/tmp/a.log")]
    )
    assert EndStateMatch(world=clean_tmp.world).score(sample).value == 1.0
    assert TrajectoryExactMatch().score(sample).value == 0.0
    # ToolCallF1: both calls are reference calls (precision 2/2), 2 of 3 made (recall 2/3):
    # F1 = 2 * 1 * (2/3) / (1 + 2/3) = 0.8.
    assert ToolCallF1().score(sample).value == pytest.approx(0.8)
    wrong = played(clean_tmp, [c("delete_file", path="/tmp/a.log")])
    result = EndStateMatch(world=clean_tmp.world).score(wrong)
    assert result.value == 0.0
    assert result.details["differences"] == [
        {"path": "files['/tmp/b.log']", "kind": "unexpected", "actual": "stopped\n"}
    ]
    assert result.reason == (
        "1 difference(s) from the reference end state: files['/tmp/b.log']: unexpected 'stopped\\n'"
    )


def test_the_recorded_reference_state_serves_without_a_world_and_ignore_rules_apply() -> None:
    address = next(s for s in SCENARIOS if s.id == "address")
    sample = played(address, [c("update_address", order_id="C300", address="12 Mill Street")])
    record = (sample.metadata or {})["world"]
    reference = played(address, address.reference_tool_calls or [])
    record["reference_state"] = (reference.metadata or {})["world"]["end_state"]
    strict = EndStateMatch().score(sample)
    assert strict.value == 0.0
    assert strict.details["differences"] == [
        {
            "path": "orders['C300']['address']",
            "kind": "changed",
            "expected": "12 Mill St, Derby",
            "actual": "12 Mill Street",
        }
    ]
    lenient = EndStateMatch(ignore=["orders.*.address"]).score(sample)
    assert lenient.value == 1.0
    assert (
        lenient.reason
        == "the end state matches the reference end state (1 difference(s) ignored): 1.0"
    )
    with pytest.raises(ValidationError, match="must name a field path"):
        EndStateMatch(ignore=["."])


def test_state_differences_lists_changed_missing_and_unexpected_fields() -> None:
    expected = {"a": [1, 2, 3], "b": {"x": 1, "y": True}, "n": 1}
    actual = {"a": [1, 5], "b": {"x": 1.0, "z": None}, "n": True}
    differences, ignored = state_differences(expected, actual, ["b.z"])
    assert ignored == 1  # b['z'], unexpected
    assert differences == [
        {"path": "a[1]", "kind": "changed", "expected": 2, "actual": 5},
        {"path": "a[2]", "kind": "missing", "expected": 3},
        {"path": "b['y']", "kind": "missing", "expected": True},  # 1 == 1.0: no difference
        {"path": "n", "kind": "changed", "expected": 1, "actual": True},  # a bool is no number
    ]
    # Dotted, bracketed and quoted forms name the same segments; a rule covers what is below.
    assert state_differences(expected, actual, ["a[1]", "a.2", "b", "n"]) == ([], 5)
    assert state_differences(expected, actual, ["['a']", "b[*]", "n"]) == ([], 5)


def test_state_assertions_report_each_predicate() -> None:
    cancel = next(s for s in SCENARIOS if s.id == "cancel")
    sample = played(cancel, [c("cancel_order", order_id="A100")])
    metric = StateAssertions(
        assertions={
            "A100 cancelled": lambda s: s["orders"]["A100"]["status"] == "cancelled",
            "no refund": lambda s: not s["refunds"],
            "Z900 kept": lambda s: s["orders"]["Z900"]["status"] == "processing",
        }
    )
    result = metric.score(sample)
    assert result.value == pytest.approx(2 / 3)
    assert result.reason == "2/3 assertions hold = 0.667; failed: Z900 kept (KeyError: 'Z900')"
    assert result.details["assertions"] == [
        {"name": "A100 cancelled", "passed": True, "error": None},
        {"name": "no refund", "passed": True, "error": None},
        {"name": "Z900 kept", "passed": False, "error": "KeyError: 'Z900'"},
    ]
    with pytest.raises(ValidationError, match="at least one assertion"):
        StateAssertions(assertions={})


def test_a_sample_without_a_world_record_is_refused_with_the_field_named() -> None:
    bare = MultiTurnSample(user_input=[HumanMessage(content="hi"), AIMessage(content="hello")])
    with pytest.raises(InvalidSampleError, match=r"metadata\['world'\]\['end_state'\]") as caught:
        EndStateMatch().score(bare)
    assert caught.value.field == "metadata.world.end_state"
    cancel = next(s for s in SCENARIOS if s.id == "cancel")
    sample = played(cancel, [])
    with pytest.raises(InvalidSampleError, match="reference_state"):
        EndStateMatch().score(sample)
    unreferenced = sample.model_copy(update={"reference_tool_calls": None})
    with pytest.raises(InvalidSampleError, match="replays the sample's reference_tool_calls"):
        EndStateMatch(world=cancel.world).score(unreferenced)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["a", "b"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("xyz"), inner),
    max_leaves=8,
)


@settings(max_examples=150, deadline=None)
@given(JSON, JSON)
def test_states_differ_exactly_when_their_json_differs(a: Any, b: Any) -> None:
    # Oracle: canonical JSON text (no floats here, so 1 vs 1.0 never arises; true vs 1 does).
    same = json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    differences, ignored = state_differences(a, b)
    assert (differences == []) == same and ignored == 0
    assert state_differences(a, a) == ([], 0)
    for difference in differences:  # each listed path holds what the difference says
        want, got = at(a, difference["path"]), at(b, difference["path"])
        if difference["kind"] == "changed":
            assert (want, got) == (difference["expected"], difference["actual"])
        elif difference["kind"] == "missing":
            assert got is ABSENT and want == difference["expected"]
        else:
            assert want is ABSENT and got == difference["actual"]


ABSENT = object()


def at(value: Any, path: str) -> Any:
    """The value at a difference's path, or ABSENT."""
    for part in [] if path == "(state)" else path_segments(path):
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and int(part) < len(value):
            value = value[int(part)]
        else:
            return ABSENT
    return value


def test_recorded_differences_are_read_and_checked() -> None:
    def sample(world: dict[str, Any]) -> MultiTurnSample:
        return MultiTurnSample(
            user_input=[HumanMessage(content="hi"), AIMessage(content="done")],
            metadata={"world": world},
        )

    recorded = [
        {"path": "files['a.txt'].content", "kind": "changed", "expected": "x", "actual": "y"},
        {"path": "clock", "kind": "changed", "expected": 1, "actual": 2},
    ]
    # The run's live comparison wins over the JSON states (equal here: an __eq__ disagreed).
    state = {"end_state": {"n": 1}, "reference_state": {"n": 1}, "differences": recorded}
    result = EndStateMatch(ignore=["clock"]).score(sample(state))
    assert (result.value, result.reason) == (
        0.0,
        "1 difference(s) from the reference end state (1 difference(s) ignored): "
        "files['a.txt'].content: expected 'x', got 'y'",
    )
    assert result.details["ignored_differences"] == 1
    with pytest.raises(InvalidSampleError, match="differences'\\] as a list") as caught:
        EndStateMatch().score(sample({"end_state": {}, "differences": "none"}))
    assert caught.value.field == "metadata.world.differences"
    deep: list[Any] = [0, 0]
    for _ in range(300):
        deep = [[deep[0]], [deep[1]]]  # two equal states, 300 levels deep
    with pytest.raises(InvalidSampleError, match="cannot compare the states: the state nests"):
        EndStateMatch().score(sample({"end_state": deep[0], "reference_state": deep[1]}))

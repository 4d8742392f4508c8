"""World replay: generated reference actions run on a fresh copy; kept with the state they
reach, or discarded with the failing call and the world's error."""

from __future__ import annotations

import copy
import time
from typing import Any

from turneval.messages import ToolCall
from turneval.scenarios import from_world, generate
from turneval.simulation.domains import orders_world
from turneval.worlds import ToolWorld

from ._helpers import draft, generator, record

DRAFTS = [
    draft(
        "Cancel order A100, it is not needed any more.",
        actions=[("get_order", {"order_id": "A100"}), ("cancel_order", {"order_id": "A100"})],
        first_message="Please cancel A100.",
        user_facts=[{"name": "order_id", "value": "A100"}],
        reference="Order A100 is cancelled.",
    ),
    draft("Cancel the shipped order E500.", actions=[("cancel_order", {"order_id": "E500"})]),
    draft(
        "Refund 100 on order D400.",
        actions=[("refund_order", {"order_id": "D400", "amount": 100})],
        difficulty="hard",
    ),
    draft(
        "Ship C300 to 12 Mill St, Derby, and get 12.50 back on F600.",
        actions=[
            ("update_address", {"order_id": "C300", "address": "12 Mill St, Derby"}),
            ("refund_order", {"order_id": "F600", "amount": 12.5}),
        ],
        persona_type="impatient",
        difficulty="medium",
    ),
    draft("Look up order Z999.", actions=[("get_order", {"order_id": "Z999"})]),
]


def test_replay_keeps_the_scenarios_whose_actions_succeed_with_their_end_state() -> None:
    world = orders_world()
    before = copy.deepcopy(world.state)
    result = generate(world, llm=generator(DRAFTS), n=5, seed=4, batch_size=5)
    assert result.requests == 1 and result.usage.calls == 1
    kept = {s.goal: s for s in result.scenarios}
    assert list(kept) == [DRAFTS[0]["goal"], DRAFTS[3]["goal"]]
    # the end states by hand: the initial state with the reference actions' changes
    cancelled = copy.deepcopy(before)
    cancelled["orders"]["A100"]["status"] = "cancelled"
    moved = copy.deepcopy(before)
    moved["orders"]["C300"]["address"] = "12 Mill St, Derby"
    moved["orders"]["F600"]["refunded"] = 12.5
    moved["refunds"] = [{"order_id": "F600", "amount": 12.5}]
    first, second = result.scenarios
    assert record(first)["expected_end_state"] == cancelled
    assert record(second)["expected_end_state"] == moved
    assert first.reference_tool_calls == [
        ToolCall(name="get_order", args={"order_id": "A100"}),
        ToolCall(name="cancel_order", args={"order_id": "A100"}),
    ]
    assert first.user_facts == {"order_id": "A100"} and first.first_message == "Please cancel A100."
    assert first.world is world and first.max_turns == 6 and second.max_turns == 10
    assert world.state == before  # every replay ran on a fresh copy


def test_replay_discards_the_others_with_the_call_and_the_worlds_error() -> None:
    result = generate(orders_world(), llm=generator(DRAFTS), n=5, seed=4, batch_size=5)
    reasons = {d.scenario.goal: d.reason for d in result.discarded}
    assert all(d.stage == "replay" for d in result.discarded)
    assert reasons == {
        DRAFTS[1]["goal"]: 'reference action 1 of 1, cancel_order({"order_id": "E500"}), failed '
        "on the world: ValueError: order E500 is shipped and cannot be cancelled",
        DRAFTS[2]["goal"]: 'reference action 1 of 1, refund_order({"amount": 100.0, "order_id": '
        '"D400"}), failed on the world: ValueError: the refund must be between 0 and 30.00, '
        "got 100.00",
        DRAFTS[4]["goal"]: 'reference action 1 of 1, get_order({"order_id": "Z999"}), failed on '
        "the world: KeyError: 'no order Z999'",
    }
    assert "3 whose reference actions failed on the world" in str(result)


class Slow:
    def __init__(self) -> None:
        self.done = False

    def wait(self, seconds: float) -> str:
        """Wait, then finish."""
        time.sleep(seconds)
        self.done = True
        return "done"


def test_actions_that_hang_are_discarded_after_the_replay_timeout() -> None:
    world = ToolWorld.from_object(Slow, name="slow")
    drafts = [
        draft("Wait a little.", actions=[("wait", {"seconds": 0.0})]),
        draft("Wait for a long time.", actions=[("wait", {"seconds": 1.0})]),
    ]
    result = generate(world, llm=generator(drafts), n=2, replay_timeout=0.3)
    assert [s.goal for s in result.scenarios] == ["Wait a little."]
    assert record(result.scenarios[0])["expected_end_state"] == {"done": True}
    (late,) = result.discarded
    assert late.reason == "its reference actions did not finish within 0.3s on the world"


def test_arguments_of_any_type_are_asked_as_json_text_and_read_back() -> None:
    class Notes:
        def __init__(self) -> None:
            self.notes: dict[str, Any] = {}

        def save(self, key: str, value: dict[str, int], tags: list[str] | None = None) -> str:
            """Save a note."""
            self.notes[key] = {"value": value, "tags": tags or []}
            return "saved"

    world = ToolWorld.from_object(Notes, name="notes")
    source = from_world(world)
    (ask,) = source.plan(n=1, seed=0, batch_size=1)
    schema = ask.request.schema.model_json_schema()
    arguments = schema["$defs"]["save_arguments"]["properties"]
    assert arguments["value"]["type"] == "string" and "JSON" in arguments["value"]["description"]
    assert arguments["tags"]["anyOf"] == [
        {"items": {"type": "string"}, "type": "array"},
        {"type": "null"},
    ]
    drafts = [
        draft("Save it.", actions=[("save", {"key": "k", "value": '{"a": 1}', "tags": None})])
    ]
    (scenario,) = generate(world, llm=generator(drafts), n=1).scenarios
    assert scenario.reference_tool_calls == [
        ToolCall(name="save", args={"key": "k", "value": {"a": 1}})
    ]
    assert record(scenario)["expected_end_state"] == {
        "notes": {"k": {"value": {"a": 1}, "tags": []}}
    }

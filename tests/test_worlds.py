"""Tool worlds: tools from objects, recordings and a model; faults; fresh copies per trial."""

import json
import re
from typing import Any

import pytest
from langchain_core.messages import AIMessage as LcAI
from langchain_core.messages import BaseMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from pydantic import BaseModel

from turneval import AIMessage, EvalTask, HumanMessage, ToolCall, ToolMessage
from turneval.errors import ConfigError
from turneval.metrics import EndStateMatch, TrajectoryExactMatch
from turneval.simulation import Scenario, ScriptedUser, asimulate
from turneval.testing import ScriptedChatModel
from turneval.worlds import Faults, ToolError, ToolWorld, bind_worlds
from turneval.worlds.domains import OrderDesk, orders_scenarios, orders_world

from ._builders import messages_of, metadata_of


class Counter:
    """A tiny state machine: a named counter."""

    def __init__(self) -> None:
        self.count = 0
        self.log: list[str] = []

    def add(self, amount: int, note: str = "") -> int:
        """Add to the counter."""
        if amount < 0:
            raise ValueError("amount must be >= 0")
        self.count += amount
        self.log.append(note)
        return self.count

    async def read(self) -> dict[str, int]:
        """The counter's value."""
        return {"count": self.count}


# -- a Python object as a world ---------------------------------------------------------------


async def test_an_object_becomes_a_world_with_typed_tools_and_a_copyable_state() -> None:
    world = ToolWorld.from_object(Counter)
    assert sorted(world.tools) == ["add", "read"]
    assert world.tools["add"].description == "Add to the counter."
    assert world.state == {"count": 0, "log": []}
    copy = world.fresh({"count": 5})
    assert await copy.acall("add", {"amount": "2"}) == "7"  # coerced by the signature's int
    assert await copy.acall("read") == '{"count": 7}'
    assert copy.state == {"count": 7, "log": [""]}
    assert world.state == {"count": 0, "log": []}  # the template never changes
    with pytest.raises(ToolError, match="invalid arguments for add: amount: Input should be"):
        await copy.acall("add", {"amount": "two"})
    with pytest.raises(ToolError, match="ValueError: amount must be >= 0"):
        await copy.acall("add", {"amount": -1})
    with pytest.raises(ToolError, match="unknown tool 'sub'"):
        await copy.acall("sub", {})
    assert [c.get("error", "")[:10] for c in copy.calls] == [
        "",
        "",
        "invalid ar",
        "ValueError",
        "unknown to",
    ]
    with pytest.raises(ConfigError, match="no state attribute 'total'"):
        world.fresh({"total": 1})
    with pytest.raises(ConfigError, match=r"no public method\(s\) \['nope'\]"):
        ToolWorld.from_object(Counter(), tools=["nope"])


class Cart(BaseModel):
    items: list[str] = []
    paid: bool = False


class Shop:
    """A world whose state is one ``state`` attribute (a pydantic model)."""

    def __init__(self) -> None:
        self.state = Cart()
        self.clerk = "not state: a ``state`` attribute takes over"

    def add_item(self, item: str) -> list[str]:
        """Put an item in the cart."""
        self.state.items.append(item)
        return self.state.items


async def test_a_state_attribute_is_the_state() -> None:
    world = ToolWorld.from_object(Shop)
    assert world.state == {"items": [], "paid": False}
    trial = world.fresh({"paid": True})
    assert await trial.acall("add_item", {"item": "pen"}) == '["pen"]'
    assert (trial.state, world.state) == (
        {"items": ["pen"], "paid": True},
        {"items": [], "paid": False},
    )
    with pytest.raises(ConfigError, match="the world's state has no field 'total'"):
        world.fresh({"total": 3})


async def test_langchain_tools_take_the_signature_and_answer_errors_to_the_agent() -> None:
    world = ToolWorld.from_object(Counter)
    add, read = world.as_langchain_tools()
    assert add.name == "add" and set(add.args) == {"amount", "note"}
    ok = await add.ainvoke({"type": "tool_call", "name": "add", "id": "1", "args": {"amount": 3}})
    assert (ok.content, ok.status) == ("3", "success")
    refused = await add.ainvoke(
        {"type": "tool_call", "name": "add", "id": "2", "args": {"amount": -1}}
    )
    assert refused.status == "error" and "amount must be >= 0" in refused.content
    bad = await add.ainvoke(
        {"type": "tool_call", "name": "add", "id": "3", "args": {"amount": "x"}}
    )
    assert bad.status == "error" and "invalid arguments for add: amount" in bad.content
    assert world.calls[-1]["args"] == {"amount": "x"}  # the world saw and logged the bad call
    assert read.invoke({}) == '{"count": 3}'  # the sync path too
    other = world.fresh()
    with bind_worlds(other):  # a trial's copy, bound by name, receives the calls
        await add.ainvoke({"amount": 10})
    assert other.state["count"] == 13 and world.state["count"] == 3


# -- recordings -------------------------------------------------------------------------------


async def test_recorded_answers_replay_by_name_and_arguments_with_a_stated_miss_rule() -> None:
    trace = [
        HumanMessage(content="weather?"),
        AIMessage(
            content="",
            tool_calls=[
                ToolCall(name="weather", args={"city": "Paris", "unit": "C"}, id="a"),
                ToolCall(name="weather", args={"city": "Rome"}, id="b"),
            ],
        ),
        ToolMessage(content="rain", tool_call_id="b"),
        ToolMessage(content="sun", tool_call_id="a"),
        AIMessage(content="", tool_calls=[ToolCall(name="weather", args={"city": "Rome"})]),
        ToolMessage(content="storm"),
    ]
    world = ToolWorld.from_recordings(trace)
    assert await world.acall("weather", {"unit": "C", "city": "Paris"}) == "sun"  # key order free
    assert [await world.acall("weather", {"city": "Rome"}) for _ in range(3)] == [
        "rain",
        "storm",
        "storm",  # the last recording repeats
    ]
    with pytest.raises(
        ToolError, match=r"no recorded answer for weather\(\{\"city\": \"Oslo\"\}\)"
    ):
        await world.acall("weather", {"city": "Oslo"})
    assert world.state["calls"][0] == {"tool": "weather", "args": {"unit": "C", "city": "Paris"}}
    fallback = ToolWorld.from_recordings(trace, on_missing=lambda name, args: f"no data for {args}")
    (tool,) = fallback.as_langchain_tools()
    assert await tool.ainvoke({"city": "Oslo"}) == "no data for {'city': 'Oslo'}"
    with pytest.raises(ConfigError, match="on_missing must be 'error' or a function"):
        ToolWorld.from_recordings(trace, on_missing="skip")  # type: ignore[arg-type]
    pairs = ToolWorld.from_recordings([(ToolCall(name="now", args={}), {"time": "09:00"})])
    assert await pairs.acall("now") == '{"time": "09:00"}'  # non-text: sent as JSON
    with pytest.raises(ConfigError, match="recording 0: a ToolMessage answers no tool call"):
        ToolWorld.from_recordings([ToolMessage(content="orphan")])
    with pytest.raises(ConfigError, match="no recorded tool call with its answer"):
        ToolWorld.from_recordings([HumanMessage(content="hi")])


# -- a model simulating the tools -------------------------------------------------------------


class Flight(BaseModel):
    flight: str
    seats_left: int


def find_flight(origin: str, destination: str) -> Flight:
    """Find the next flight between two airports."""
    raise NotImplementedError  # a stub: the model answers


async def test_a_simulated_tool_answers_in_its_declared_schema_and_sees_earlier_calls() -> None:
    answers = iter(
        [
            json.dumps({"flight": "AF12", "seats_left": "many"}),  # invalid: repaired
            json.dumps({"flight": "AF12", "seats_left": 4}),
            json.dumps({"flight": "AF12", "seats_left": 3}),
        ]
    )
    llm = ScriptedChatModel(responses=[lambda messages: next(answers)], tool_calling=False)
    world = ToolWorld.simulated([find_flight], llm, instructions="An airline's booking system.")
    first = await world.acall("find_flight", {"origin": "CDG", "destination": "JFK"})
    assert json.loads(first) == {"flight": "AF12", "seats_left": 4}
    second = world.fresh()  # a copy of the world as it is: the earlier answer included
    await second.acall("find_flight", {"origin": "CDG", "destination": "JFK"})
    prompt = str(llm.prompts[-1][-1].content)
    assert '"seats_left": 4' in prompt  # the model sees the earlier call and its answer
    assert "airline's booking system" in str(llm.prompts[-1][0].content)
    assert [c["result"]["seats_left"] for c in second.state["calls"]] == [4, 3]
    assert len(world.state["calls"]) == 1
    with pytest.raises(ConfigError, match="needs a return annotation"):
        ToolWorld.simulated([lambda city: None], llm)


# -- faults -----------------------------------------------------------------------------------


async def _run_calls(world: ToolWorld, n: int) -> list[str]:
    seen = []
    for _ in range(n):
        try:
            seen.append(await world.acall("add", {"amount": 1}))
        except ToolError as exc:
            seen.append(f"error: {exc}")
    return seen


async def test_faults_reproduce_exactly_from_the_seed_and_are_recorded() -> None:
    faults = Faults(error_rate=0.2, timeout_rate=0.2, rate_limit_rate=0.2, malformed_rate=0.2)
    a, b, c = (ToolWorld.from_object(Counter, faults=faults, seed=s) for s in (7, 7, 8))
    runs = [await _run_calls(world, 40) for world in (a, b, c)]
    assert runs[0] == runs[1] and a.faults_injected == b.faults_injected and a.state == b.state
    assert runs[0] != runs[2]
    kinds = {fault["kind"] for fault in a.faults_injected}
    assert kinds == {"error", "timeout", "rate_limit", "malformed"}
    for fault in a.faults_injected:  # each fault is at the call it hit, with what the agent saw
        call = a.calls[fault["call"]]
        if fault["kind"] == "malformed":
            assert call["output"].startswith('{"data": ') and "error" not in call
        else:
            assert call["error"] == fault["detail"]
    # Errors, timeouts and rate limits never run the tool; a malformed answer did run it.
    ran = sum(1 for call in a.calls if "error" not in call)
    assert a.state["count"] == ran
    assert any("429 Too Many Requests" in text for text in runs[0])
    assert any("did not answer within 30s" in text for text in runs[0])


async def test_faults_are_per_tool_and_checked() -> None:
    world = ToolWorld.from_object(Counter, faults={"add": Faults(error_rate=1.0)})
    assert await world.acall("read") == '{"count": 0}'
    with pytest.raises(ToolError, match="injected fault"):
        await world.acall("add", {"amount": 1})
    with pytest.raises(ConfigError, match=r"unknown tool\(s\) \['sub'\]"):
        ToolWorld.from_object(Counter, faults={"sub": Faults()})
    with pytest.raises(ValueError, match="add up to 1.2"):
        Faults(error_rate=0.6, timeout_rate=0.6)


# -- a LangGraph agent over the world, trial by trial ------------------------------------------

ORDER = re.compile(r"\b[A-F]\d00\b")


def plan(text: str, outputs: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """The calls a careful agent makes for one user message (an offline stand-in policy)."""
    order = ORDER.search(text)
    if order is None:
        return []
    order_id = order.group(0)
    if "cancel" in text.lower():
        return [("get_order", {"order_id": order_id}), ("cancel_order", {"order_id": order_id})]
    if "address" in text.lower():
        address = text.split(" to ", 1)[1].rstrip(".")
        return [("update_address", {"order_id": order_id, "address": address})]
    return [("get_order", {"order_id": order_id})]


def agent_policy(messages: list[BaseMessage]) -> LcAI:
    last_human = max(i for i, m in enumerate(messages) if m.type == "human")
    outputs = [str(m.content) for m in messages[last_human + 1 :] if m.type == "tool"]
    steps = plan(str(messages[last_human].content), outputs)
    if len(outputs) < len(steps):
        name, args = steps[len(outputs)]
        return LcAI(
            content="", tool_calls=[{"name": name, "args": args, "id": f"c{len(messages)}"}]
        )
    return LcAI(content=outputs[-1] if outputs else "How can I help?")


def orders_graph(world: ToolWorld, checkpointer: Any = None) -> Any:
    tools = world.as_langchain_tools()
    model = ScriptedChatModel(responses=[agent_policy]).bind_tools(tools)

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=checkpointer)


async def test_each_trial_gets_a_fresh_world_and_a_checkpointed_graph_runs_several_turns() -> None:
    world = orders_world()
    scenario = Scenario(
        id="two_changes",
        goal="Cancel A100 and re-address C300.",
        first_message="Cancel my order A100.",
        reference_tool_calls=[
            ToolCall(name="get_order", args={"order_id": "A100"}),
            ToolCall(name="cancel_order", args={"order_id": "A100"}),
            ToolCall(name="update_address", args={"order_id": "C300", "address": "1 Low St"}),
        ],
        world=world,
        initial_state={"refunds": [{"order_id": "D400", "amount": 1.0}]},
    )
    graph = orders_graph(world, InMemorySaver())  # built once, from the template's tools
    user = ScriptedUser(["Change the address of C300 to 1 Low St."])
    data = await asimulate(graph, [scenario], user=user, trials=2, max_concurrency=1)
    for sample in data:
        record = metadata_of(sample)["world"]
        kinds = [m.type for m in messages_of(sample)]
        assert kinds == ["human", "ai", "tool", "ai", "tool", "ai", "human", "ai", "tool", "ai"]
        # Trial 2 could cancel A100 too: trial 1's cancellation was in trial 1's copy only.
        assert messages_of(sample)[5].content == "Order A100 is cancelled."
        assert record["end_state"]["orders"]["A100"]["status"] == "cancelled"
        assert record["end_state"]["orders"]["C300"]["address"] == "1 Low St"
        assert record["initial_state"]["refunds"] == [{"order_id": "D400", "amount": 1.0}]
        assert record["end_state"] == record["reference_state"]
        assert [call["tool"] for call in record["calls"]] == [
            "get_order",
            "cancel_order",
            "update_address",
        ]
    assert world.state == ToolWorld.from_object(OrderDesk()).state  # the template is untouched


async def test_end_state_pass_k_and_trajectory_side_by_side_with_faults_on_the_row() -> None:
    world = orders_world(faults={"cancel_order": Faults(error_rate=0.5)}, seed=3)
    scenarios = [s for s in orders_scenarios(world) if s.id in ("cancel", "address")]
    task = EvalTask(scenarios, [EndStateMatch(), TrajectoryExactMatch()], max_concurrency=1)
    user = ScriptedUser([])  # the scenarios' first messages say it all
    result = await task.aevaluate(runnable=orders_graph(world), user=user, trials=4)
    rows = {(r.trial.scenario_id, r.trial.index): r for r in result.rows if r.trial is not None}
    cancelled = []
    for trial in range(4):
        row = rows[("cancel", trial)]
        record = metadata_of(row.sample)["world"]
        hit = [f for f in record["faults"] if f["kind"] == "error"]
        # A failed cancellation leaves A100 processing: the end state differs; the fault is noted.
        assert row.score("end_state_match") == (0.0 if hit else 1.0)
        cancelled.append(not hit)
        if hit:
            assert hit[0]["tool"] == "cancel_order"
            assert "orders.A100.status: expected 'cancelled', got 'processing'" in (
                row.results["end_state_match"].reason or ""
            )
        assert rows[("address", trial)].score("end_state_match") == 1.0
    assert 0 < sum(cancelled) < 4  # seed 3 hits some trials and spares others
    # pass^2 over end-state success, per scenario: C(s,2)/C(4,2); "address" always succeeds.
    s = sum(cancelled)
    expected = (s * (s - 1) / 2 / 6 + 1.0) / 2
    summary = result.summary()["end_state_match"].extra or {}
    assert summary["pass^2"] == pytest.approx(expected)
    again = await task.aevaluate(runnable=orders_graph(world), user=user, trials=4)
    assert [metadata_of(r.sample)["world"]["faults"] for r in again.rows] == [
        metadata_of(r.sample)["world"]["faults"] for r in result.rows
    ]


# -- BFCL-style backends ----------------------------------------------------------------------


class Tickets:
    """A backend written as BFCL's multi-turn ones are: state loaded by ``_load_scenario``,
    errors returned as ``{"error": ...}``, a value JSON cannot hold."""

    def __init__(self) -> None:
        self.queue: list[dict[str, Any]]
        self.user: str | None

    def _load_scenario(self, scenario: dict[str, Any], long_context: bool = False) -> None:
        self.queue = scenario.get("queue", [])
        self.user = scenario.get("user")

    def create_ticket(self, title: str, priority: int = 1) -> dict[str, Any]:
        """Create a ticket."""
        if not self.user:
            return {"error": "log in first"}
        self.queue.append({"id": len(self.queue) + 1, "title": title, "priority": priority})
        return {"id": len(self.queue), "created": Counter()}


async def test_a_bfcl_style_backend_loads_its_state_with_its_own_loader() -> None:
    world = ToolWorld.from_object(Tickets).fresh({"queue": [], "user": None})
    assert world.state == {"queue": [], "user": None}
    assert await world.acall("create_ticket", {"title": "printer"}) == '{"error": "log in first"}'
    trial = world.fresh({"user": "ana"})  # the loader sets defaults for the rest
    answer = json.loads(await trial.acall("create_ticket", {"title": "printer", "priority": 3}))
    assert answer["id"] == 1 and answer["created"].startswith("<tests.test_worlds.Counter")
    assert trial.state == {"queue": [{"id": 1, "title": "printer", "priority": 3}], "user": "ana"}
    assert world.state["queue"] == []


def test_bfcl_backends_run_as_worlds_where_bfcl_eval_is_installed() -> None:
    module = pytest.importorskip(
        "bfcl_eval.eval_checker.multi_turn_eval.func_source_code.ticket_api"
    )
    world = ToolWorld.from_object(module.TicketAPI).fresh(
        {"ticket_queue": [], "current_user": None}
    )
    assert {"create_ticket", "ticket_login", "close_ticket"} <= set(world.tools)
    world.call("ticket_login", {"username": "ana", "password": "pw"})
    world.call("create_ticket", {"title": "printer", "priority": 2})
    assert world.state["ticket_queue"][0]["title"] == "printer"
    assert world.state["current_user"] == "ana"

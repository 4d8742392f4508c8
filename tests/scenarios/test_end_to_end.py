"""A generated set runs end to end: written, read back as JSONL, played on the world, graded."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from turneval import EvalTask
from turneval.metrics import EndStateMatch, ToolCallF1
from turneval.scenarios import from_world, generate, load
from turneval.simulation import Scenario, ScriptedUser, simulate
from turneval.simulation.domains import orders_world
from turneval.testing import ScriptedChatModel
from turneval.worlds import ToolWorld

from ._helpers import draft, generator, meta, record

DRAFTS = [
    draft(
        "Cancel order A100.",
        actions=[("cancel_order", {"order_id": "A100"})],
        first_message="Please cancel order A100.",
        reference="Order A100 is cancelled.",
    ),
    draft(
        "Send order C300 to 12 Mill St, Derby.",
        actions=[("update_address", {"order_id": "C300", "address": "12 Mill St, Derby"})],
        first_message="Please change the address of order C300 to 12 Mill St, Derby.",
    ),
    draft(
        "Get 12.50 back on order F600.",
        actions=[("refund_order", {"order_id": "F600", "amount": 12.5})],
        first_message="Please refund 12.50 on order F600.",
    ),
    draft(  # discarded: a shipped order cannot be re-addressed
        "Send order B200 elsewhere.",
        actions=[("update_address", {"order_id": "B200", "address": "1 New Rd"})],
        first_message="Please change the address of order B200 to 1 New Rd.",
    ),
]


def policy(messages: list[BaseMessage]) -> AIMessage:
    """A scripted agent: one call for the request, then it reports the tool's answer."""
    if messages[-1].type == "tool":
        return AIMessage(content=str(messages[-1].content))
    text = str(messages[-1].content)
    order = re.search(r"[A-F]\d00", text)
    if order is None:
        return AIMessage(content="Which order?")
    if "cancel" in text:
        call = {"name": "cancel_order", "args": {"order_id": order.group(0)}}
    elif "address" in text:
        address = text.split(" to ", 1)[1].rstrip(".")
        call = {"name": "update_address", "args": {"order_id": order.group(0), "address": address}}
    else:
        amount = float(re.search(r"\d+\.\d\d", text).group(0))  # type: ignore[union-attr]
        call = {"name": "refund_order", "args": {"order_id": order.group(0), "amount": amount}}
    return AIMessage(content="", tool_calls=[{**call, "id": "c1"}])


def agent(world: ToolWorld) -> Any:
    tools = world.as_langchain_tools()
    model = ScriptedChatModel(responses=[policy]).bind_tools(tools)
    graph = StateGraph(MessagesState)
    graph.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile()


def test_a_generated_set_runs_through_simulate_and_end_state_match(tmp_path: Path) -> None:
    world = orders_world()
    result = generate(from_world(world), llm=generator(DRAFTS), n=4, seed=9)
    assert len(result.scenarios) == 3 and len(result.discarded) == 1
    path = result.write_jsonl(tmp_path / "scenarios.jsonl")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert "world" not in lines[0] and lines[0]["metadata"]["generated"]["world"] == "orders"

    # Scenario.from_jsonl reads the file unchanged; the world is given as for any scenario
    read = Scenario.from_jsonl(path)
    assert [s.model_dump(exclude={"world"}) for s in read] == [
        s.model_dump(exclude={"world"}) for s in result.scenarios
    ]
    graph = agent(world)
    data = simulate(graph, [{**line, "world": world} for line in lines], user=ScriptedUser([]))
    metric = EndStateMatch()
    for sample, scenario in zip(data, result.scenarios, strict=True):
        played = meta(sample)["world"]
        assert played["reference_state"] == record(scenario)["expected_end_state"]
        assert metric.multi_turn_score(sample) == 1.0  # type: ignore[arg-type]

    # EvalTask over load(path, world=...): the same end states, graded in trials
    task = EvalTask(load(path, world=world), [EndStateMatch(), ToolCallF1()])
    scored = task.evaluate(runnable=graph, user=ScriptedUser([]), trials=2)
    assert scored.summary()["end_state_match"].mean == 1.0
    assert (scored.summary()["end_state_match"].extra or {})["pass^2"] == 1.0
    assert scored.summary()["tool_call_f1"].mean == 1.0
    assert [record(row.sample)["seed"] for row in scored.rows] == [9] * 6

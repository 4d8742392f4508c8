"""Evaluate a real LangGraph ReAct agent with real tools, offline.

The agent controls a small in-memory home: a device registry and a thermostat. Its "LLM" is a
scripted chat model with a rule-based policy (so the example needs no network and no key); swap
in ``ChatOpenAI(model=...)`` to evaluate a real model. With OPENAI_API_KEY set, the goal metric
is judged too.

    .venv/bin/python examples/langgraph_agent.py
"""

from __future__ import annotations

import os
import re
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from turneval import EvalTask, HumanMessage, MultiTurnSample, ToolCall
from turneval.testing import ScriptedChatModel

DEVICES: dict[str, dict[str, Any]] = {
    "lamp_bedroom": {"room": "Bedroom", "status": "ON"},
    "ac_bedroom": {"room": "Bedroom", "status": "OFF"},
    "light_porch": {"room": "Porch", "status": "OFF"},
}
THERMOSTAT: dict[str, float] = {"Living Room": 20.0, "Office": 19.0}


@tool
def list_devices(room: str) -> str:
    """List the device ids in a room, comma-separated."""
    return ",".join(
        device for device, info in DEVICES.items() if info["room"].lower() == room.lower()
    )


@tool
def set_device_status(device_id: str, status: str) -> str:
    """Switch a device ON or OFF."""
    if device_id not in DEVICES:
        raise ValueError(f"unknown device {device_id}")
    DEVICES[device_id]["status"] = status
    return f"{device_id} is now {status}"


@tool
def set_temperature(location: str, temperature: float) -> str:
    """Set the target temperature of a room."""
    THERMOSTAT[location] = temperature
    return f"{location} target set to {temperature}"


TOOLS = [list_devices, set_device_status, set_temperature]


def policy(messages: list[BaseMessage]) -> AIMessage:
    """A stand-in for an LLM: reads the request, calls tools, then answers."""
    last = messages[-1]
    if last.type == "tool":
        if last.name == "list_devices":  # second step: act on the listed device
            request = str(messages[0].content).lower()
            devices = [d for d in str(last.content).split(",") if d]
            # A realistic bug: "air conditioning" is not recognised, so the first device is used.
            kind = next((k for k in ("lamp", "light") if k in request), "")
            devices = [d for d in devices if d.startswith(kind)] or devices
            wanted = "OFF" if "off" in str(messages[0].content).lower() else "ON"
            calls = [
                {
                    "name": "set_device_status",
                    "args": {"device_id": d, "status": wanted},
                    "id": f"c{i}",
                }
                for i, d in enumerate(devices[:1])
            ]
            if calls:
                return AIMessage(content="", tool_calls=calls)
        return AIMessage(content=f"Done: {last.content}.")
    request = str(last.content)
    degrees = re.search(r"(\d+(?:\.\d+)?) degrees", request)
    room = next(
        (r for r in ("Living Room", "Office", "Bedroom", "Porch") if r.lower() in request.lower()),
        "Living Room",
    )
    if degrees:
        args = {"location": room, "temperature": float(degrees.group(1))}
        return AIMessage(
            content="", tool_calls=[{"name": "set_temperature", "args": args, "id": "t1"}]
        )
    if "turn" in request.lower() or "switch" in request.lower():
        return AIMessage(
            content="", tool_calls=[{"name": "list_devices", "args": {"room": room}, "id": "l1"}]
        )
    return AIMessage(content="Sorry, I can only control your home.")


def build_agent(llm: Any) -> Any:
    """A ReAct loop: the model calls tools until it answers."""
    model = llm.bind_tools(TOOLS)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(TOOLS))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile()


def call(name: str, **args: Any) -> ToolCall:
    return ToolCall(name=name, args=args)


DATASET = [
    MultiTurnSample(
        user_input=[HumanMessage(content="Set the living room to 21 degrees")],
        reference_tool_calls=[call("set_temperature", location="Living Room", temperature=21.0)],
        reference="The living room thermostat is set to 21 degrees.",
    ),
    MultiTurnSample(
        user_input=[HumanMessage(content="Turn off the bedroom lamp")],
        reference_tool_calls=[
            call("list_devices", room="Bedroom"),
            call("set_device_status", device_id="lamp_bedroom", status="OFF"),
        ],
        reference="The bedroom lamp is off.",
    ),
    MultiTurnSample(
        user_input=[HumanMessage(content="Switch on the porch light")],
        reference_tool_calls=[
            call("list_devices", room="Porch"),
            call("set_device_status", device_id="light_porch", status="ON"),
        ],
        reference="The porch light is on.",
    ),
    MultiTurnSample(
        user_input=[
            HumanMessage(content="Make the office 22.5 degrees"),
            HumanMessage(content="And the living room 20 degrees"),
        ],
        reference_tool_calls=[
            call("set_temperature", location="Office", temperature=22.5),
            call("set_temperature", location="Living Room", temperature=20.0),
        ],
        reference="Office at 22.5 and living room at 20 degrees.",
    ),
    MultiTurnSample(
        user_input=[HumanMessage(content="Turn off the bedroom air conditioning")],
        reference_tool_calls=[
            call("list_devices", room="Bedroom"),
            call("set_device_status", device_id="ac_bedroom", status="OFF"),
        ],
        reference="The bedroom AC is off.",
    ),
    MultiTurnSample(
        user_input=[HumanMessage(content="Tell me a joke")],
        reference_tool_calls=[],
        reference="The assistant politely declines: it only controls the home.",
    ),
]


def main() -> None:
    agent = build_agent(ScriptedChatModel(responses=[policy]))
    metrics: list[Any] = [
        "tool_call_f1",
        "trajectory_exact_match",
        "trajectory_in_order_match",
        "trajectory_precision",
        "trajectory_recall",
    ]
    judge = None
    if os.environ.get("OPENAI_API_KEY"):
        from langchain_openai import ChatOpenAI

        judge = ChatOpenAI(model=os.environ.get("TURNEVAL_JUDGE_MODEL", "gpt-4o-mini"))
        metrics.append("agent_goal_accuracy_with_reference")
    result = EvalTask(DATASET, metrics, llm=judge, agent_timeout=30, show_progress=False).evaluate(
        runnable=agent
    )
    for name, summary in result.summary().items():
        print(
            f"{name:<28} mean={summary.mean:.3f}  scored={summary.count}  failed={summary.failed}"
        )
    for row in result.rows:
        print(
            f"  #{row.index} failure={row.failure} steps={row.steps} tool_call_f1={row.score('tool_call_f1'):.3f}"
            f"  {row.results['tool_call_f1'].reason if 'tool_call_f1' in row.results else row.agent_error}"
        )


if __name__ == "__main__":
    main()

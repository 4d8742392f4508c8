"""A simulated user talks with a LangGraph customer-support agent, 3 trials per scenario.

The agent looks after an in-memory order database with four tools. Five scenarios (cancel,
track, change address, refund, cancel a shipped order) are each played three times by a
simulated user; every conversation is scored with goal accuracy, tool-call F1 and topic
adherence, and the summary reports pass^3 (all three trials succeed) next to pass@3.

Offline by default: the agent's model, the simulated user and the judge are scripted models
(rule-based policies), so the run needs no network and no key and prints the same figures every
time. The scripted agent has two realistic bugs: it forgets to file every other refund, and
it cancels an order that has already shipped. With ``--judge-base-url`` the simulated user and
the judge are a real model behind any OpenAI-compatible endpoint (``--model``, key in
``OPENAI_API_KEY``); ``--agent-base-url`` does the same for the agent.

    .venv/bin/python examples/simulated_support.py
    .venv/bin/python examples/simulated_support.py --judge-base-url http://localhost:8000/v1
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from turneval import EvalTask, ToolCall
from turneval.metrics import AgentGoalAccuracyWithReference, ToolCallF1, TopicAdherenceScore
from turneval.simulation import Scenario, SimulatedUser
from turneval.testing import ScriptedChatModel

# -- the in-memory order database and the agent's tools ---------------------------------------

ORDERS: dict[str, dict[str, str]] = {}


def reset_orders() -> None:
    ORDERS.clear()
    ORDERS.update(
        {
            "A100": {"status": "processing", "address": "3 Elm St, Leeds"},
            "B200": {"status": "shipped", "address": "8 Oak Rd, York"},
            "C300": {"status": "processing", "address": "1 Pine Ave, Bath"},
            "D400": {"status": "delivered", "address": "5 Ash Ln, Hull"},
            "E500": {"status": "shipped", "address": "9 Fir Ct, Ely"},
        }
    )


@tool
def get_order(order_id: str) -> str:
    """Look up an order's status and delivery address."""
    order = ORDERS.get(order_id)
    if order is None:
        return f"No order {order_id}."
    return f"Order {order_id} is {order['status']}, to {order['address']}."


@tool
def cancel_order(order_id: str) -> str:
    """Cancel an order."""
    ORDERS[order_id]["status"] = "cancelled"
    return f"Order {order_id} is cancelled."


@tool
def update_address(order_id: str, address: str) -> str:
    """Change an order's delivery address."""
    ORDERS[order_id]["address"] = address
    return f"Order {order_id} now ships to {address}."


@tool
def request_refund(order_id: str, reason: str) -> str:
    """File a refund for a delivered order."""
    return f"A refund for order {order_id} is filed ({reason})."


TOOLS = [get_order, cancel_order, update_address, request_refund]
ORDER_ID = re.compile(r"\b[A-E]\d00\b")
REFUNDS = itertools.count()  # the refund bug strikes every other time


def agent_policy(messages: list[BaseMessage]) -> AIMessage:
    """A stand-in for the agent's LLM: finds the intent and the order, calls tools, answers."""
    humans = " ".join(str(m.content) for m in messages if m.type == "human")
    last = messages[-1]
    if last.type == "tool":
        if last.name == "get_order" and "cancel" in humans.lower():  # bug: shipped or not
            order_id = ORDER_ID.search(humans).group(0)  # type: ignore[union-attr]
            return _call("cancel_order", order_id=order_id)
        return AIMessage(content=f"{last.content} Anything else?")
    found = ORDER_ID.search(humans)
    if found is None:
        return AIMessage(content="Happy to help. What is your order number?")
    order_id, text = found.group(0), humans.lower()
    if "address" in text:
        address = re.search(r"to: (.+)$", humans)
        if address is None:
            return AIMessage(content="What is the new delivery address? Write it as 'to: ...'.")
        return _call("update_address", order_id=order_id, address=address.group(1).strip())
    if "refund" in text:
        if next(REFUNDS) % 2:
            return AIMessage(content="I have noted your refund request.")  # bug: nothing filed
        return _call("request_refund", order_id=order_id, reason="damaged")
    return _call("get_order", order_id=order_id)


def _call(name: str, **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"{name}-1"}])


def build_agent(llm: Any) -> Any:
    """A ReAct loop over the order tools."""
    model = llm.bind_tools(TOOLS)

    async def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(TOOLS))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile()


# -- the scripted user and judge (offline stand-ins for real models) ---------------------------


def user_policy(messages: list[BaseMessage]) -> str:
    """A stand-in user: opens with its goal, answers questions from its facts, then stops."""
    system, prompt = str(messages[0].content), str(messages[-1].content)
    facts = dict(re.findall(r"^- (\w+): (.+)$", system, re.MULTILINE))
    agent_lines = re.findall(r"^\[agent\] (.*)$", prompt, re.MULTILINE)
    said = prompt.count("[you]")
    if not agent_lines:
        goal = re.search(r"Your goal: (.+)", system).group(1)  # type: ignore[union-attr]
        return json.dumps({"message": f"Hi. {goal}", "done": False})
    last = agent_lines[-1]
    if "order number" in last:
        return json.dumps({"message": f"It is {facts['order_id']}.", "done": False})
    if "address" in last and "new_address" in facts and "now ships" not in last:
        return json.dumps({"message": f"to: {facts['new_address']}", "done": False})
    if "Anything else" in last or "noted" in last or said >= 4:  # trusts what it is told
        return json.dumps({"message": "", "done": True})
    return json.dumps({"message": "Could you do it now, please?", "done": False})


def judge_policy(messages: list[BaseMessage]) -> str:
    """A stand-in judge: the goal is reached when the reference outcome is in the conversation."""
    prompt = str(messages[-1].content)
    conversation = prompt[prompt.find("<conversation>") :]
    if "Reference topics:" in prompt:
        return json.dumps({"topics": [{"topic": "order", "answered": True, "on_topic": True}]})
    outcome = re.search(r"Desired outcome: (.+)", prompt).group(1)  # type: ignore[union-attr]
    achieved = outcome in conversation
    return json.dumps(
        {"end_state": "see the conversation", "reason": "checked", "achieved": achieved}
    )


# -- the scenarios --------------------------------------------------------------------------

TOPICS = ["orders", "deliveries", "refunds"]


def call(name: str, **args: Any) -> ToolCall:
    return ToolCall(name=name, args=args)


SCENARIOS = [
    Scenario(
        id="cancel",
        goal="Cancel my order A100, it is not needed any more.",
        user_facts={"order_id": "A100"},
        reference="Order A100 is cancelled.",
        reference_tool_calls=[
            call("get_order", order_id="A100"),
            call("cancel_order", order_id="A100"),
        ],
        reference_topics=TOPICS,
    ),
    Scenario(
        id="track",
        goal="Find out where my parcel is.",
        persona="A patient customer who only gives the order number when asked.",
        user_facts={"order_id": "B200"},
        reference="Order B200 is shipped",
        reference_tool_calls=[call("get_order", order_id="B200")],
        reference_topics=TOPICS,
    ),
    Scenario(
        id="address",
        goal="Change the delivery address of order C300.",
        user_facts={"order_id": "C300", "new_address": "12 Mill St, Derby"},
        reference="Order C300 now ships to 12 Mill St, Derby.",
        reference_tool_calls=[call("update_address", order_id="C300", address="12 Mill St, Derby")],
        reference_topics=TOPICS,
    ),
    Scenario(
        id="refund",
        goal="Get a refund for order D400, it arrived damaged.",
        user_facts={"order_id": "D400"},
        reference="A refund for order D400 is filed",
        reference_tool_calls=[call("request_refund", order_id="D400", reason="damaged")],
        reference_topics=TOPICS,
    ),
    Scenario(
        id="cancel_shipped",
        goal="Cancel order E500.",
        user_facts={"order_id": "E500"},
        reference="Order E500 has shipped and cannot be cancelled.",
        reference_tool_calls=[call("get_order", order_id="E500")],
        reference_topics=TOPICS,
        max_turns=4,
    ),
]


def models(args: argparse.Namespace) -> tuple[Any, Any, Any]:
    """The agent's model, the simulated user's and the judge's."""
    agent_llm: Any = ScriptedChatModel(responses=[agent_policy])
    user_llm: Any = ScriptedChatModel(responses=[user_policy])
    judge: Any = ScriptedChatModel(responses=[judge_policy])
    if args.judge_base_url or args.agent_base_url:
        from langchain_openai import ChatOpenAI

        key = os.environ.get("OPENAI_API_KEY", "not-needed")
        if args.judge_base_url:
            user_llm = ChatOpenAI(model=args.model, base_url=args.judge_base_url, api_key=key)
            judge = ChatOpenAI(model=args.model, base_url=args.judge_base_url, api_key=key)
        if args.agent_base_url:
            agent_llm = ChatOpenAI(model=args.model, base_url=args.agent_base_url, api_key=key)
    return agent_llm, user_llm, judge


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--judge-base-url", help="OpenAI-compatible URL for the user and judge")
    parser.add_argument("--agent-base-url", help="OpenAI-compatible URL for the agent's model")
    parser.add_argument("--model", default="gpt-4o-mini")
    parser.add_argument("--trials", type=int, default=3)
    args = parser.parse_args()
    reset_orders()
    agent_llm, user_llm, judge = models(args)
    metrics = [
        AgentGoalAccuracyWithReference(llm=judge),
        ToolCallF1(),
        TopicAdherenceScore(llm=judge),
    ]
    # One conversation at a time keeps the scripted run's output the same on every run.
    task = EvalTask(SCENARIOS, metrics, max_concurrency=1, agent_timeout=120, show_progress=False)
    result = task.evaluate(
        runnable=build_agent(agent_llm),
        user=SimulatedUser(user_llm, temperature=0.7 if args.judge_base_url else None),
        trials=args.trials,
    )
    k = args.trials
    for name, summary in result.summary().items():
        extra = summary.extra or {}
        if f"pass^{k}" in extra:
            print(
                f"{name:<36} success={extra['success_rate']:.3f}  pass^{k}={extra[f'pass^{k}']:.3f}"
                f"  pass@{k}={extra[f'pass@{k}']:.3f}"
            )
    for scenario in SCENARIOS:
        rows = [r for r in result.rows if r.sample.metadata["scenario_id"] == scenario.id]  # type: ignore[union-attr,index]
        marks = " ".join(
            f"{r.sample.metadata['stop_reason']}:"  # type: ignore[union-attr,index]
            f"goal={r.score('agent_goal_accuracy_with_reference'):.0f},"
            f"f1={r.score('tool_call_f1'):.2f}"
            for r in rows
        )
        print(f"  {scenario.id:<15} {marks}")


if __name__ == "__main__":
    main()

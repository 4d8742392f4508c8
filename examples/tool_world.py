"""A LangGraph agent against a tool world, graded by end state, trajectory and a judge.

The agent serves the built-in order desk (``turneval.simulation.domains.orders_world``): look
up, cancel, re-address and refund orders. Its tools come from ``world.as_langchain_tools()``; the
graph is built once, with a checkpointer, and every trial acts on its own fresh copy of the
world. Refunds hit a seeded rate limit half of the time (the agent retries: the end state is
right, the trajectory is not), and each injected fault is recorded on its row. Each of the
five scenarios is played three times by a scripted user, then scored three ways:

* ``end_state_match``: does the order book end as the reference actions leave it?
* ``trajectory_exact_match``: did the agent make exactly the reference calls?
* ``agent_goal_accuracy_with_reference``: does a judge find the goal reached?

plus ``state_assertions``, invariants every end state must keep. The scripted agent has two
habits: it cancels without checking first whether an order has shipped (the desk refuses, so
the end state is right but the trajectory is not), and it refunds a whole order when asked for
part of it (the trajectory and the end state are both wrong).

Offline: the agent's model and the judge are scripted models (rule-based policies), so the run
needs no network and prints the same figures every time.

    .venv/bin/python examples/tool_world.py
"""

from __future__ import annotations

import json
import re
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from turneval import EvalTask
from turneval.metrics import (
    AgentGoalAccuracyWithReference,
    EndStateMatch,
    StateAssertions,
    TrajectoryExactMatch,
)
from turneval.simulation import ScriptedUser
from turneval.simulation.domains import orders_scenarios, orders_world
from turneval.testing import ScriptedChatModel
from turneval.worlds import Faults, ToolWorld

ORDER_ID = re.compile(r"\b[A-F]\d00\b")


def plan(request: str, answers: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """The calls the agent makes for one user message, given the answers so far."""
    found = ORDER_ID.search(request)
    if found is None:
        return []
    order_id, text = found.group(0), request.lower()
    if "cancel" in text:  # habit: no look-up first
        return [("cancel_order", {"order_id": order_id})]
    if "address" in text:
        address = request.split(" to ", 1)[1].rstrip(".")
        return [("update_address", {"order_id": order_id, "address": address})]
    if "refund" in text:
        if not answers:
            return [("get_order", {"order_id": order_id})]
        total = json.loads(answers[0])["total"]  # habit: always the whole order
        return [
            ("get_order", {"order_id": order_id}),
            ("refund_order", {"order_id": order_id, "amount": total}),
        ]
    return [("get_order", {"order_id": order_id})]


def agent_policy(messages: list[BaseMessage]) -> AIMessage:
    """A stand-in for the agent's LLM: plans calls for the last user message, retries a 429."""
    last_human = max(i for i, m in enumerate(messages) if m.type == "human")
    results = [m for m in messages[last_human + 1 :] if m.type == "tool"]
    if results and "429" in str(results[-1].content):  # rate limited: the same call again
        previous = messages[-2]
        retry = dict(previous.tool_calls[0])  # type: ignore[attr-defined]
        return AIMessage(content="", tool_calls=[{**retry, "id": f"retry-{len(messages)}"}])
    answers = [str(m.content) for m in results if "429" not in str(m.content)]
    steps = plan(str(messages[last_human].content), answers)
    if len(answers) < len(steps):
        name, args = steps[len(answers)]
        return AIMessage(
            content="", tool_calls=[{"name": name, "args": args, "id": f"call-{len(messages)}"}]
        )
    if not answers:
        return AIMessage(content="Glad to help. Anything else?")
    return AIMessage(content=f"{answers[-1]}")


def build_agent(world: ToolWorld) -> Any:
    """A ReAct loop over the world's tools, with a checkpointer (one thread per trial)."""
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
    return graph.compile(checkpointer=InMemorySaver())


def judge_policy(messages: list[BaseMessage]) -> str:
    """A stand-in judge: the goal is reached when the reference outcome is in the conversation."""
    prompt = str(messages[-1].content)
    outcome = re.search(r"Desired outcome: (.+)", prompt).group(1)  # type: ignore[union-attr]
    achieved = outcome.rstrip(".") in prompt[prompt.find("<conversation>") :]
    return json.dumps(
        {"end_state": "see the conversation", "reason": "checked", "achieved": achieved}
    )


INVARIANTS = {
    "nothing refunded beyond what was paid": lambda state: all(
        order["refunded"] <= order["total"] for order in state["orders"].values()
    ),
    "shipped orders are never cancelled": lambda state: (
        state["orders"]["B200"]["status"] == "shipped"
        and state["orders"]["E500"]["status"] == "shipped"
    ),
}


def main() -> None:
    world = orders_world(faults={"refund_order": Faults(rate_limit_rate=0.5)}, seed=1)
    scenarios = orders_scenarios(world)
    judge = ScriptedChatModel(responses=[judge_policy])
    metrics = [
        EndStateMatch(),
        TrajectoryExactMatch(),
        AgentGoalAccuracyWithReference(llm=judge),
        StateAssertions(assertions=INVARIANTS),
    ]
    user = ScriptedUser({str(s.id): ["Thank you."] for s in scenarios})  # after first_message
    task = EvalTask(scenarios, metrics, max_concurrency=1, show_progress=False)
    result = task.evaluate(runnable=build_agent(world), user=user, trials=3)
    for name, summary in result.summary().items():
        extra = summary.extra or {}
        if "pass^3" in extra:
            print(f"{name:<36} mean={summary.mean:.3f}  pass^3={extra['pass^3']:.3f}")
    for scenario in scenarios:
        rows = [
            r for r in result.rows if r.trial is not None and r.trial.scenario_id == scenario.id
        ]
        marks = " ".join(
            f"end={r.score('end_state_match'):.0f},traj={r.score('trajectory_exact_match'):.0f},"
            f"goal={r.score('agent_goal_accuracy_with_reference'):.0f},"
            f"faults={len(r.sample.metadata['world']['faults'])}"  # type: ignore[union-attr,index]
            for r in rows
        )
        print(f"  {scenario.id:<15} {marks}")


if __name__ == "__main__":
    main()

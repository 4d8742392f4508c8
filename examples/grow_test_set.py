"""Grow a test set for the order desk: generate scenarios, run them, turn failures into near misses.

1. A generator model writes scenarios for the built-in order desk
   (``turneval.simulation.domains.orders_world``): goals that need each tool and each pair of tools,
   with personas and difficulties, and their reference actions. Each scenario's actions are
   replayed on a fresh copy of the world: those that succeed are kept with their expected end
   state, the others are discarded with the world's error (cancelling a shipped order...).
2. The kept scenarios are written as JSONL, read back with the world attached, and played by
   the scripted agent of ``examples/tool_world.py`` (which refunds a whole order when asked for
   part of it), graded by end state.
3. The failed rows become near-miss variants: a harder user, a changed constraint, a tool that
   fails.

Offline: the generator is a scripted model (a rule-based policy that reads the briefs and the
world state from the prompt), so the run needs no network and prints the same figures each
time; give ``generate`` a real chat model (``ChatOpenAI(model=...)``) to grow real sets.

    .venv/bin/python examples/grow_test_set.py [OUT_DIR]
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage

from turneval import EvalTask
from turneval.metrics import EndStateMatch, TrajectoryExactMatch
from turneval.scenarios import from_failures, from_world, generate, load
from turneval.simulation import ScriptedUser
from turneval.simulation.domains import orders_world
from turneval.testing import ScriptedChatModel

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tool_world import build_agent  # the order desk's scripted agent

ADDRESSES = {"A": "4 Quay St, Hull", "B": "7 Dock Rd, Poole", "C": "12 Mill St, Derby"}
BRIEF = re.compile(
    r"^- (scenario_\d+): a goal that needs the tools? (.+?); difficulty (\w+); "
    r"persona type (\w+)\.$",
    re.MULTILINE,
)


def world_state(prompt: str) -> dict[str, Any]:
    """The world state the prompt shows (between <world_state> tags)."""
    found = re.search(r"<world_state>\n(.+?)\n</world_state>", prompt, re.DOTALL)
    assert found is not None
    state: dict[str, Any] = json.loads(found.group(1).replace("<\\/", "</"))
    return state


def action(tool: str, order_id: str, order: dict[str, Any]) -> tuple[dict[str, Any], str, str]:
    """One reference action on an order, with the goal and opening message that ask for it."""
    if tool == "cancel_order":
        args: dict[str, Any] = {"order_id": order_id}
        return args, f"Cancel order {order_id}.", f"Please cancel order {order_id}."
    if tool == "update_address":
        address = ADDRESSES.get(order_id[0], "3 Bay Rd, Deal")
        args = {"order_id": order_id, "address": address}
        return (
            args,
            f"Ship order {order_id} to {address}.",
            (f"Please change the address of order {order_id} to {address}."),
        )
    if tool == "refund_order":
        amount = round(order["total"] / 2, 2)
        args = {"order_id": order_id, "amount": amount}
        return (
            args,
            f"Get {amount:.2f} back on order {order_id}.",
            (f"Please refund {amount:.2f} on order {order_id}."),
        )
    return (
        {"order_id": order_id},
        f"Find out where order {order_id} is.",
        (f"Where is my order {order_id}?"),
    )


SUITS = {"cancel_order": "processing", "update_address": "processing", "refund_order": "delivered"}


def scenario_draft(brief: tuple[str, ...], number: int, orders: dict[str, Any]) -> dict[str, Any]:
    """A draft for one brief: the tools it names, on an order they suit (every fifth: a
    shipped one, which the world will refuse)."""
    _, named, difficulty, persona = brief
    tools = re.findall(r"`(\w+)`", named)
    main = next((tool for tool in tools if tool != "get_order"), "get_order")
    status = "shipped" if number % 5 == 4 else SUITS.get(main)
    candidates = [o for o in sorted(orders) if status in (None, orders[o]["status"])]
    order_id = candidates[number % len(candidates)]
    steps = [action(tool, order_id, orders[order_id]) for tool in tools]
    goal = " Then ".join(goal for _, goal, _ in steps)
    return {
        "goal": goal,
        "persona": f"a {persona.replace('_', ' ')} customer of the shop",
        "persona_type": persona,
        "difficulty": difficulty,
        "user_facts": [{"name": "order_id", "value": order_id}],
        "first_message": steps[-1][2],
        "reference": goal,
        "actions": [
            {"tool": tool, "arguments": args}
            for tool, (args, _, _) in zip(tools, steps, strict=True)
        ],
    }


def near_misses(prompt: str) -> dict[str, Any]:
    """Near misses of a failed refund: a harder user, a smaller amount, a failing tool."""
    played = prompt[prompt.index("<scenario>") :]
    order_id = re.findall(r"\b[A-F]\d00\b", played)[0]
    kinds = re.findall(r"^- (harder_persona|changed_constraint|tool_fault):", prompt, re.M)
    base = {
        "goal": f"Get money back on order {order_id}.",
        "persona": "an impatient customer who gives the amount only when asked",
        "persona_type": "impatient",
        "difficulty": "hard",
        "user_facts": [{"name": "order_id", "value": order_id}],
        "first_message": f"Please refund 5.00 on order {order_id}.",
        "reference": "The agent refunds exactly the amount asked for.",
    }
    answer: dict[str, Any] = {}
    for kind in kinds:
        answer[kind] = dict(base)
        if kind == "changed_constraint":
            answer[kind]["goal"] = f"Get exactly 5.00 back on order {order_id}."
            answer[kind]["actions"] = [
                {"tool": "refund_order", "arguments": {"order_id": order_id, "amount": 5.0}}
            ]
        if kind == "tool_fault":
            answer[kind].update(fault_tool="refund_order", fault_kind="error")
    return answer


def writer(messages: list[BaseMessage]) -> str:
    """The scripted generator: scenarios for the briefs of a request, or near misses."""
    prompt = str(messages[-1].content)
    if "near-miss" in prompt:
        return json.dumps(near_misses(prompt))
    orders = world_state(prompt)["orders"]
    part = int(re.search(r"part (\d+)", prompt).group(1))  # type: ignore[union-attr]
    briefs = BRIEF.findall(prompt)
    drafts = {
        brief[0]: scenario_draft(brief, part * len(briefs) + i, orders)
        for i, brief in enumerate(briefs)
    }
    return json.dumps({"scenarios": drafts})


def main(out: Path) -> None:
    world = orders_world()
    llm = ScriptedChatModel(responses=[writer])
    grown = generate(from_world(world), llm=llm, n=10, seed=7, batch_size=5)
    print(grown)
    for item in grown.discarded:
        print(f"  left out: {item.scenario.goal!r}: {item.reason}")
    path = grown.write_jsonl(out / "scenarios.jsonl")
    grown.to_html(out / "scenarios.html")
    print(f"wrote {len(grown.scenarios)} scenarios to {path}")

    scenarios = load(path, world=world)  # Scenario JSONL, the world attached
    task = EvalTask(scenarios, [EndStateMatch(), TrajectoryExactMatch()], show_progress=False)
    result = task.evaluate(runnable=build_agent(world), user=ScriptedUser(["Thank you."]))
    for name, summary in result.summary().items():
        if name in ("end_state_match", "trajectory_exact_match"):
            print(f"{name:<24} mean={summary.mean:.3f}")

    misses = generate(
        from_failures(
            result,
            thresholds={"end_state_match": 1.0, "trajectory_exact_match": 0.0},
            scenarios=scenarios,
            world=world,
        ),
        llm=llm,
        seed=7,
    )
    print(f"near misses from {misses.requests} failure group(s): {len(misses.scenarios)} kept")
    for scenario in misses.scenarios:
        record = (scenario.metadata or {})["generated"]
        print(f"  {scenario.id}  {record['kind']:<18} {scenario.goal}")
    for item in misses.discarded:
        print(f"  left out: {item.scenario.goal!r}: {item.reason}")
    misses.write_jsonl(out / "near_misses.jsonl")


if __name__ == "__main__":
    folder = Path(sys.argv[1] if len(sys.argv) > 1 else "demo-output/grown")
    folder.mkdir(parents=True, exist_ok=True)
    main(folder)

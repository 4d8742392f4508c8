"""Generated scenarios: deduplication of many goals, and a world generation's overhead.

Deduplication compares every goal with the goals kept before it (rapidfuzz's
``token_sort_ratio``, computed as ``ratio`` of the words sorted once per goal, in blocks of
the similarity matrix). The generation figure is turneval's own time for 200 scenarios on
the order desk (plan, parse, replay on the world, deduplicate, coverage) with a scripted
generator that answers at once.

    .venv/bin/python benchmarks/run_scenarios_bench.py
"""

from __future__ import annotations

import json
import random
import re
import time
from typing import Any

from rapidfuzz import fuzz, process, utils

from turneval.scenarios import deduplicate, from_world, generate
from turneval.simulation import Scenario
from turneval.testing import ScriptedChatModel

WORDS = (
    "cancel refund order ship address change book flight hotel city rome oslo lima paris "
    "table two friday quickly damaged broken mug"
).split()


def goals(count: int, seed: int) -> list[Scenario]:
    rng = random.Random(seed)
    return [
        Scenario(goal=" ".join(rng.choice(WORDS) for _ in range(10)) + f" #{i}")
        for i in range(count)
    ]


def naive(scenarios: list[Scenario], threshold: float) -> int:
    """The one-by-one greedy (extractOne per goal): what the matrix blocks replaced."""
    kept: list[str] = []
    for scenario in scenarios:
        goal = utils.default_process(scenario.goal)
        if process.extractOne(
            goal, kept, scorer=fuzz.token_sort_ratio, score_cutoff=threshold * 100
        ):
            continue
        kept.append(goal)
    return len(kept)


def answer(messages: list[Any]) -> str:
    keys = re.findall(r"^- (scenario_\d+):", str(messages[-1].content), re.MULTILINE)
    orders = ["A100", "C300"]
    return json.dumps(
        {
            "scenarios": {
                key: {
                    "goal": f"Look up order {orders[i % 2]} then do thing {random.random()}",
                    "persona": "p",
                    "persona_type": "vague",
                    "difficulty": "easy",
                    "user_facts": [],
                    "first_message": "",
                    "reference": "",
                    "actions": [{"tool": "get_order", "arguments": {"order_id": orders[i % 2]}}],
                }
                for i, key in enumerate(keys)
            }
        }
    )


def main() -> None:
    for count in (1_000, 3_000, 10_000):
        items = goals(count, 0)
        start = time.perf_counter()
        kept, _ = deduplicate(items)
        matrix = time.perf_counter() - start
        line = f"dedup {count:>6} goals: {matrix:6.2f} s (kept {len(kept)})"
        if count <= 3_000:
            start = time.perf_counter()
            assert naive(items, 0.9) == len(kept)
            line += f"; one by one: {time.perf_counter() - start:6.2f} s"
        print(line)
    # imported here: run_speed_holds imports this module on trees older than simulation/
    from turneval.simulation.domains import orders_world

    llm = ScriptedChatModel(responses=[answer])
    start = time.perf_counter()
    result = generate(from_world(orders_world()), llm=llm, n=200, show_progress=False)
    print(
        f"generate 200 on the order desk (scripted model): {time.perf_counter() - start:.2f} s, "
        f"{len(result.scenarios)} kept"
    )


if __name__ == "__main__":
    main()

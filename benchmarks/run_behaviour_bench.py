"""Agent-behaviour metrics and arg_rules against the existing tool-call metrics, same samples.

Times ``for s in samples: await metric.multi_turn_ascore(s)`` (the loop of
``tool_call_side.py``) over the tool-call benchmark's 2,000 generated samples, every variant in
one process, rounds interleaved; prints samples/s (median of the rounds) and the ratio to
ToolCallF1 measured in the same rounds.

    .venv/bin/python benchmarks/run_behaviour_bench.py --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from generate import generate  # noqa: E402


def variants() -> dict[str, Any]:
    from turneval.metrics import (
        AgentLoopDetection,
        StepBudget,
        ToolCallAccuracy,
        ToolCallEfficiency,
        ToolCallF1,
        ToolPermission,
        TrajectoryPrecision,
    )

    ignore_ids = {"*": {"request_id": "ignore", "*": "exact"}}
    return {
        "tool_call_f1 (reference)": ToolCallF1(),
        "tool_call_accuracy (reference)": ToolCallAccuracy(),
        "tool_permission": ToolPermission(allowed=["get_*", "set_*", "search_*"], denied=["*_x"]),
        "agent_loop_detection": AgentLoopDetection(),
        "tool_call_efficiency": ToolCallEfficiency(max_calls=4),
        "step_budget": StepBudget(max_steps=4),
        "tool_call_f1, arg_rules": ToolCallF1(arg_rules=ignore_ids),
        "tool_call_accuracy, arg_rules": ToolCallAccuracy(arg_rules=ignore_ids),
        "trajectory_precision, arg_rules": TrajectoryPrecision(arg_rules=ignore_ids),
        "tool_call_f1, scored arg_rules": ToolCallF1(arg_rules={"*": {"*": "casefold"}}),
    }


async def one_pass(metric: Any, samples: list[Any]) -> float:
    score = metric.multi_turn_ascore
    start = time.perf_counter()
    for sample in samples:
        await score(sample)
    return len(samples) / (time.perf_counter() - start)


async def run(rounds: int, n: int) -> None:
    from turneval import MultiTurnSample

    samples = [MultiTurnSample.model_validate(row) for row in generate(n, 7)]
    metrics = variants()
    rates: dict[str, list[float]] = {name: [] for name in metrics}
    ratios: dict[str, list[float]] = {name: [] for name in metrics}
    for _ in range(rounds):
        this_round = {name: await one_pass(metric, samples) for name, metric in metrics.items()}
        for name, rate in this_round.items():
            rates[name].append(rate)
            ratios[name].append(rate / this_round["tool_call_f1 (reference)"])
    print(f"{len(samples)} samples, median of {rounds} rounds")
    print(f"| {'metric':<34} | samples/s | vs ToolCallF1 |")
    print(f"|{'-' * 36}|----------:|--------------:|")
    for name in metrics:
        rate, ratio = statistics.median(rates[name]), statistics.median(ratios[name])
        print(f"| {name:<34} | {rate:>9,.0f} | {ratio:>12.2f}x |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=2000)
    args = parser.parse_args()
    asyncio.run(run(args.rounds, args.n))


if __name__ == "__main__":
    main()

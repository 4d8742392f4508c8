"""One side of the tool-call benchmark, run inside that library's own venv.

    python tool_call_side.py --lib turneval|ragas --data samples.jsonl --passes 3
    python tool_call_side.py --lib turneval|ragas --data samples.jsonl --serve

Loads the samples (untimed), then for each variant times the same loop,
``for s in samples: await metric.multi_turn_ascore(s)`` (ragas' collections path:
``await metric.ascore(user_input=..., reference_tool_calls=...)``), and prints JSON:
``{variant: {"per_s": [wall rate of each pass], "cpu_per_s": [samples per CPU second of each
pass], "scores": [first pass scores]}}``.

With ``--serve`` it loads once, prints ``{"ready": [variant names]}`` and then answers one
request per stdin line, ``{"variant": name, "repeat": r, "scores": bool}``, with one timed pass
of ``r`` loops over the samples: ``{"per_s": rate, "cpu_per_s": rate, "seconds": wall
seconds, "scores": [...] or null}``. The orchestrator then alternates the two libraries pass
by pass (``run_tool_call_bench.py --pairing pass``).

With ``--by-kind LABELS`` (a JSON file of one label per sample) it times each label's samples
apart for the ``--variants`` named and prints ``{variant: {label: [samples, best µs per
sample]}}``, the whole file (in order) under ``"all"`` (``run_tool_call_kinds.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import time
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
warnings.simplefilter("ignore")  # ragas warns on every length mismatch; silence is cheaper for it

Score = Callable[[Any], Awaitable[float]]


def load(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def turneval_variants(rows: list[dict[str, Any]]) -> tuple[list[Any], dict[str, Score]]:
    from turneval import MultiTurnSample
    from turneval.metrics import (
        NonLLMStringSimilarity,
        ToolCallAccuracy,
        ToolCallF1,
        TrajectoryAnyOrderMatch,
        TrajectoryExactMatch,
        TrajectoryInOrderMatch,
        TrajectoryPrecision,
        TrajectoryRecall,
        TrajectorySingleToolUse,
    )

    samples = [MultiTurnSample.model_validate(row) for row in rows]
    metrics = {
        "tool_call_accuracy[strict]": ToolCallAccuracy(),
        "tool_call_accuracy[unordered]": ToolCallAccuracy(strict_order=False),
        "tool_call_accuracy[levenshtein]": ToolCallAccuracy(
            arg_comparison_metric=NonLLMStringSimilarity()
        ),
        "tool_call_f1": ToolCallF1(),
        "trajectory_exact_match": TrajectoryExactMatch(),
        "trajectory_in_order_match": TrajectoryInOrderMatch(),
        "trajectory_any_order_match": TrajectoryAnyOrderMatch(),
        "trajectory_precision": TrajectoryPrecision(),
        "trajectory_recall": TrajectoryRecall(),
        "trajectory_single_tool_use": TrajectorySingleToolUse(tool_name="set_temperature"),
    }
    return samples, {name: metric.multi_turn_ascore for name, metric in metrics.items()}


def ragas_variants(rows: list[dict[str, Any]]) -> tuple[list[Any], dict[str, Score]]:
    from ragas.dataset_schema import MultiTurnSample
    from ragas.messages import AIMessage, HumanMessage, ToolCall, ToolMessage
    from ragas.metrics import ToolCallAccuracy, ToolCallF1
    from ragas.metrics import collections as modern
    from ragas.metrics._string import NonLLMStringSimilarity

    def message(data: dict[str, Any]) -> Any:
        if data["type"] == "human":
            return HumanMessage(content=data["content"])
        if data["type"] == "tool":
            return ToolMessage(content=data["content"])
        calls = [ToolCall(name=c["name"], args=c["args"]) for c in data.get("tool_calls") or []]
        return AIMessage(content=data["content"], tool_calls=calls or None)

    samples = [
        MultiTurnSample(
            user_input=[message(m) for m in row["user_input"]],
            reference_tool_calls=[
                ToolCall(name=c["name"], args=c["args"]) for c in row["reference_tool_calls"]
            ],
        )
        for row in rows
    ]
    levenshtein = ToolCallAccuracy()
    levenshtein.arg_comparison_metric = NonLLMStringSimilarity()
    legacy = {
        "tool_call_accuracy[strict]": ToolCallAccuracy(),
        "tool_call_accuracy[unordered]": ToolCallAccuracy(strict_order=False),
        "tool_call_accuracy[levenshtein]": levenshtein,
        "tool_call_f1": ToolCallF1(),
    }
    variants: dict[str, Score] = {name: metric.multi_turn_ascore for name, metric in legacy.items()}
    collections = {
        "collections:tool_call_accuracy[strict]": modern.ToolCallAccuracy(),
        "collections:tool_call_accuracy[unordered]": modern.ToolCallAccuracy(strict_order=False),
        "collections:tool_call_f1": modern.ToolCallF1(),
    }
    for name, metric in collections.items():

        async def score(sample: Any, metric: Any = metric) -> float:
            result = await metric.ascore(
                user_input=sample.user_input, reference_tool_calls=sample.reference_tool_calls
            )
            return float(result.value)

        variants[name] = score
    return samples, variants


async def timed_pass(
    samples: list[Any], score: Score, repeat: int
) -> tuple[float, float, list[float]]:
    """Wall and CPU seconds of ``repeat`` loops over ``samples``, and the last loop's scores."""
    scores: list[float] = []
    start, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(repeat):
        scores = []
        for sample in samples:
            scores.append(await score(sample))
    cpu = time.process_time() - cpu_start
    return time.perf_counter() - start, cpu, scores


def serve(samples: list[Any], variants: dict[str, Score]) -> None:
    """Answer timing requests from stdin, one JSON line each (see the module docstring)."""
    loop = asyncio.new_event_loop()
    print(json.dumps({"ready": list(variants)}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        repeat = int(request["repeat"])
        wall, cpu, scores = loop.run_until_complete(
            timed_pass(samples, variants[request["variant"]], repeat)
        )
        count = repeat * len(samples)
        answer = {
            "per_s": count / wall,
            "cpu_per_s": count / max(cpu, 1e-9),
            "seconds": wall,
            "scores": scores if request.get("scores") else None,
        }
        print(json.dumps(answer), flush=True)
    loop.close()


async def run(samples: list[Any], variants: dict[str, Score], passes: int) -> dict[str, Any]:
    report: dict[str, Any] = {}
    for name, score in variants.items():
        rates, cpu_rates, first = [], [], []
        for index in range(passes):
            scores = []
            start, cpu_start = time.perf_counter(), time.process_time()
            for sample in samples:
                scores.append(await score(sample))
            cpu = time.process_time() - cpu_start
            rates.append(len(samples) / (time.perf_counter() - start))
            cpu_rates.append(len(samples) / max(cpu, 1e-9))
            if index == 0:
                first = scores
        report[name] = {"per_s": rates, "cpu_per_s": cpu_rates, "scores": first}
    return report


async def by_kind(
    samples: list[Any], score: Score, labels: list[str], passes: int
) -> dict[str, list[float]]:
    """Best of ``passes`` timed loops (CPU µs per sample) over each label's samples, and all."""
    groups: dict[str, list[Any]] = {"all": samples}
    for sample, label in zip(samples, labels, strict=True):
        groups.setdefault(label, []).append(sample)
    best: dict[str, list[float]] = {}
    for label, group in groups.items():
        seconds = math.inf
        for _ in range(passes):
            start = time.process_time()
            for sample in group:
                await score(sample)
            seconds = min(seconds, time.process_time() - start)
        best[label] = [len(group), seconds / len(group) * 1e6]
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lib", choices=["turneval", "ragas"], required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--serve", action="store_true", help="answer pass requests from stdin")
    parser.add_argument("--by-kind", help="a JSON file of one label per sample: time each apart")
    parser.add_argument("--variants", default="", help="--by-kind: comma-separated variants")
    args = parser.parse_args()
    rows = load(args.data)
    build = turneval_variants if args.lib == "turneval" else ragas_variants
    samples, variants = build(rows)
    if args.serve:
        serve(samples, variants)
        return
    if args.by_kind:
        unknown = sorted(set(args.variants.split(",")) - set(variants))
        if unknown:
            parser.error(f"--variants: unknown {unknown}; known: {sorted(variants)}")
        labels = json.loads(Path(args.by_kind).read_text(encoding="utf-8"))
        report = {
            name: asyncio.run(by_kind(samples, variants[name], labels, args.passes))
            for name in args.variants.split(",")
        }
        print(json.dumps(report))
        return
    print(json.dumps(asyncio.run(run(samples, variants, args.passes))))


if __name__ == "__main__":
    main()

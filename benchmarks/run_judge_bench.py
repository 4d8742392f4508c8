"""LLM-judged metrics, turneval against ragas 0.4.3: calls, prompt characters and wall time.

Both sides score the same samples (the tool-call benchmark's generator) with a counting fake
model that answers after a simulated latency, under the same sample concurrency; rounds
alternate which library goes first.

    benchmarks/setup_ragas.sh
    .venv/bin/python benchmarks/run_judge_bench.py --rounds 3 --n 100 --latency 0.1 --concurrency 10
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import DEFAULT_RAGAS_PYTHON, alternate, run_side  # noqa: E402
from generate import generate  # noqa: E402


def side(
    python: str, lib: str, data: Path, n: int, latency: float, concurrency: int
) -> dict[str, Any]:
    return run_side(
        python,
        "judge_side.py",
        "--lib",
        lib,
        "--data",
        str(data),
        "--n",
        str(n),
        "--latency",
        str(latency),
        "--concurrency",
        str(concurrency),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--ragas-python", default=DEFAULT_RAGAS_PYTHON)
    args = parser.parse_args()
    data = HERE / ".data" / f"judge-samples-{args.n}-{args.seed}.jsonl"
    data.parent.mkdir(parents=True, exist_ok=True)
    data.write_text("".join(json.dumps(row) + "\n" for row in generate(args.n, args.seed)))
    sides = [("ragas", args.ragas_python), ("turneval", sys.executable)]
    results = alternate(args.rounds, sides, side, data, args.n, args.latency, args.concurrency)
    print(
        f"## {args.n} samples, {args.latency * 1000:.0f} ms simulated latency, "
        f"{args.concurrency} samples at once, median of {args.rounds} alternating rounds\n"
    )
    print(
        "| metric | calls/sample (turneval / ragas) | prompt chars/sample (turneval / ragas, share) | wall s (turneval / ragas, speed-up) | mean score (turneval / ragas) |"
    )
    print("|---|---:|---:|---:|---:|")
    for name in results[0]["turneval"]:

        def med(lib: str, key: str, name: str = name) -> float:
            return statistics.median(r[lib][name][key] for r in results)

        speedup = statistics.median(
            r["ragas"][name]["wall_s"] / r["turneval"][name]["wall_s"] for r in results
        )
        print(
            f"| {name} | {med('turneval', 'calls_per_sample'):.2f} / {med('ragas', 'calls_per_sample'):.2f} | "
            f"{med('turneval', 'prompt_chars_per_sample'):,.0f} / {med('ragas', 'prompt_chars_per_sample'):,.0f} "
            f"({med('turneval', 'prompt_chars_per_sample') / med('ragas', 'prompt_chars_per_sample'):.0%}) | "
            f"{med('turneval', 'wall_s'):.2f} / {med('ragas', 'wall_s'):.2f} ({speedup:.1f}x) | "
            f"{med('turneval', 'mean_score'):.12f} / {med('ragas', 'mean_score'):.12f} |"
        )


if __name__ == "__main__":
    main()

"""The streamed CLI of two checkouts on the same file, rounds alternating: before and after.

Runs ``turneval evaluate`` (the stream benchmark's file and seven rule-based metrics, as
``run_stream_bench.py`` does) once with this checkout's ``src`` and once with ``--before``
(another checkout's ``src``, put first on ``PYTHONPATH``), alternating which goes first each
round, and prints samples/s, CPU seconds and peak PSS of each side, the medians and whether the
two ``results.jsonl`` are the same bytes.

    git worktree add --detach /tmp/turneval-before main
    .venv/bin/python benchmarks/run_stream_ab.py --before /tmp/turneval-before/src --n 200000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from generate import generate  # noqa: E402
from run_stream_bench import run_stream  # noqa: E402


def digest(path: Path) -> str:
    """SHA-256 of a file, read in blocks."""
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the other checkout's src folder")
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    data = HERE / ".data" / f"stream-{args.n}-{args.seed}.jsonl"
    if not data.exists():
        data.parent.mkdir(parents=True, exist_ok=True)
        with data.open("w", encoding="utf-8") as handle:
            for start in range(0, args.n, 100_000):
                rows = generate(min(100_000, args.n - start), args.seed + start)
                handle.write("".join(json.dumps(row) + "\n" for row in rows))
    sides = {"before": str(Path(args.before).resolve()), "after": str(HERE.parent / "src")}
    outs = {side: HERE / ".data" / f"stream-ab-{side}" for side in sides}
    print(f"## {args.n:,} samples, {args.workers} workers, rounds alternating\n")
    print(
        "| round | order | before /s | after /s | after / before | CPU s before / after "
        "| peak PSS MB before / after |"
    )
    print("|---|---|---:|---:|---:|---:|---:|")
    rates: dict[str, list[float]] = {side: [] for side in sides}
    cpus: dict[str, list[float]] = {side: [] for side in sides}
    saved = os.environ.get("PYTHONPATH")
    for index in range(args.rounds):
        order = list(sides) if index % 2 == 0 else list(reversed(sides))
        figures = {}
        for side in order:
            os.environ["PYTHONPATH"] = sides[side]
            figures[side] = run_stream(data, outs[side], args.workers)
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved
        for side in sides:
            rates[side].append(args.n / figures[side]["wall_s"])
            cpus[side].append(figures[side]["cpu_s"])
        print(
            f"| {index + 1} | {' then '.join(order)} | {rates['before'][-1]:,.0f} | "
            f"{rates['after'][-1]:,.0f} | {rates['after'][-1] / rates['before'][-1]:.2f} | "
            f"{cpus['before'][-1]:.1f} / {cpus['after'][-1]:.1f} | "
            f"{figures['before']['pss_mb']:,.0f} / {figures['after']['pss_mb']:,.0f} |",
            flush=True,
        )
    ratios = [a / b for a, b in zip(rates["after"], rates["before"], strict=True)]
    cpu_ratios = [b / a for a, b in zip(cpus["after"], cpus["before"], strict=True)]
    print(
        f"\nmedian samples/s: before {statistics.median(rates['before']):,.0f}, after "
        f"{statistics.median(rates['after']):,.0f}; after / before: by wall time "
        f"{statistics.median(ratios):.2f}, by CPU seconds {statistics.median(cpu_ratios):.2f}"
    )
    same = digest(outs["before"] / "results.jsonl") == digest(outs["after"] / "results.jsonl")
    print(f"results.jsonl the same bytes: {same}")


if __name__ == "__main__":
    main()

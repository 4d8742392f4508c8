"""The streamed CLI of two source trees, alternating in one session: before and after a change.

Runs ``turneval evaluate`` (2 workers, the seven rule-based metrics of the stream benchmark,
optionally ``--store``) on the same generated file, once with ``--before``'s ``src`` first on
``PYTHONPATH`` and once with this checkout's, rounds alternating which goes first. Prints each
run's samples per second and CPU seconds (the CLI and its workers), then the medians and the
per-round ratios. On a shared, loaded machine the CPU seconds are the figure to read.

    git worktree add --detach /tmp/before main
    .venv/bin/python benchmarks/run_stream_before_after.py --before /tmp/before/src --n 200000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from generate import generate  # noqa: E402
from run_stream_bench import METRICS, children_cpu  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--before", required=True, help="the src folder of the code before")
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--store", action="store_true", help="keep each run in a SQLite store")
    args = parser.parse_args()
    data = HERE / ".data" / f"stream-{args.n}-{args.seed}.jsonl"
    if not data.exists():
        data.parent.mkdir(parents=True, exist_ok=True)
        with data.open("w", encoding="utf-8") as handle:
            for start in range(0, args.n, 100_000):
                rows = generate(min(100_000, args.n - start), args.seed + start)
                handle.write("".join(json.dumps(row) + "\n" for row in rows))
    runs: dict[str, list[tuple[float, float]]] = {"before": [], "after": []}
    for number in range(args.rounds):
        for side in ("before", "after") if number % 2 == 0 else ("after", "before"):
            env = dict(os.environ)
            env.pop("PYTHONPATH", None)
            if side == "before":
                env["PYTHONPATH"] = args.before
            out = HERE / ".data" / f"before-after-{side}"
            command = [str(Path(sys.executable).parent / "turneval"), "evaluate", str(data)]
            command += ["--out", str(out), "--quiet", "--overwrite", "--workers", "2"]
            command += [item for name in METRICS for item in ("--metric", name)]
            if args.store:
                store = HERE / ".data" / f"before-after-{side}.db"
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{store}{suffix}").unlink(missing_ok=True)
                command += ["--store", str(store)]
            cpu, start = children_cpu(), time.perf_counter()
            done = subprocess.run(command, env=env, capture_output=True, text=True)
            wall = time.perf_counter() - start
            if done.returncode:
                sys.exit(done.stderr)
            used = children_cpu() - cpu
            runs[side].append((args.n / wall, used))
            load = os.getloadavg()[0]
            print(f"{side}: {args.n / wall:,.0f}/s, CPU {used:.1f} s (load {load:.1f})")
    for side, figures in runs.items():
        speed = statistics.median(speed for speed, _ in figures)
        cpu = statistics.median(used for _, used in figures)
        print(f"{side}: median {speed:,.0f}/s, CPU {cpu:.1f} s")
    ratios = [a[0] / b[0] for b, a in zip(runs["before"], runs["after"], strict=True)]
    shown = ", ".join(f"{ratio:.2f}" for ratio in ratios)
    print(f"after / before, per round: {shown}; median {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()

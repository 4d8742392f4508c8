"""A large JSONL file end to end through ``turneval evaluate``: samples/s and peak memory.

Generates N samples (default 1,000,000; about 1 GB, kept in benchmarks/.data/), runs the CLI
with the rule-based tool-call and trajectory metrics, and samples the resident memory of the
whole process tree (the CLI and its workers) from /proc. For scale it then runs ragas'
``evaluate()`` on the first ``--ragas-n`` samples with its tool-call metrics, in its own venv.

    .venv/bin/python benchmarks/run_stream_bench.py --n 1000000 --ragas-n 20000
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import DEFAULT_RAGAS_PYTHON, run_side  # noqa: E402
from generate import generate  # noqa: E402

METRICS = [
    "tool_call_accuracy",
    "tool_call_f1",
    "trajectory_exact_match",
    "trajectory_in_order_match",
    "trajectory_any_order_match",
    "trajectory_precision",
    "trajectory_recall",
]


def tree_rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and all its descendants, in MB."""
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            total += next(
                int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")
            )
            for task in Path(f"/proc/{current}/task").iterdir():
                stack.extend(int(child) for child in (task / "children").read_text().split())
        except (FileNotFoundError, ProcessLookupError, StopIteration):
            continue
    return total / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--ragas-n", type=int, default=20_000)
    parser.add_argument("--ragas-python", default=DEFAULT_RAGAS_PYTHON)
    args = parser.parse_args()
    data = HERE / ".data" / f"stream-{args.n}-{args.seed}.jsonl"
    if not data.exists():
        data.parent.mkdir(parents=True, exist_ok=True)
        with data.open("w", encoding="utf-8") as handle:
            for start in range(0, args.n, 100_000):
                rows = generate(min(100_000, args.n - start), args.seed + start)
                handle.write("".join(json.dumps(row) + "\n" for row in rows))
    size_mb = data.stat().st_size / 1e6
    out = HERE / ".data" / "stream-out"
    command = [
        str(Path(sys.executable).parent / "turneval"),
        "evaluate",
        str(data),
        "--out",
        str(out),
        "--quiet",
    ]
    command += [item for name in METRICS for item in ("--metric", name)]
    if args.workers:
        command += ["--workers", str(args.workers)]
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    peak = 0.0
    while process.poll() is None:
        peak = max(peak, tree_rss_mb(process.pid))
        time.sleep(0.1)
    elapsed = time.perf_counter() - start
    printed = process.stdout.read() if process.stdout else ""
    if process.returncode:
        sys.exit(f"turneval exited {process.returncode}")
    lines = sum(1 for _ in (out / "results.jsonl").open())
    print(f"## {args.n:,} samples ({size_mb:,.0f} MB of JSONL), {len(METRICS)} metrics\n")
    print(
        f"turneval evaluate: {elapsed:.1f} s, {args.n / elapsed:,.0f} samples/s end to end, "
        f"peak RSS of the process tree {peak:,.0f} MB, {lines:,} result lines\n"
    )
    print(printed)
    if args.ragas_n:
        ragas = run_side(
            args.ragas_python, "stream_side_ragas.py", "--data", str(data), "--n", str(args.ragas_n)
        )
        print(
            f"ragas evaluate() (ToolCallAccuracy + ToolCallF1, first {ragas['samples']:,} samples): "
            f"{ragas['per_s']:,.0f} samples/s; turneval is {args.n / elapsed / ragas['per_s']:.1f}x with "
            f"{len(METRICS)} metrics"
        )


if __name__ == "__main__":
    main()

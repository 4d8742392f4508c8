"""A large JSONL file end to end through ``turneval evaluate``: samples/s, peak memory, and the
ratio to the bare work on the same cores.

Generates N samples (default 1,000,000; about 1 GB, kept in benchmarks/.data/), runs the CLI
with the rule-based tool-call and trajectory metrics, and samples the memory of the whole
process tree (the CLI and its workers) from /proc: resident (RSS, shared pages counted in every
process) and proportional (PSS, shared pages split between the processes sharing them). Each
round also runs the bare work (``stream_side_bare.py``: validate each line, score it, drop it,
in a plain loop) in as many processes as the CLI has workers, on the same lines; rounds
alternate which goes first. For scale it then runs ragas' ``evaluate()`` on the first
``--ragas-n`` samples with its tool-call metrics, in its own venv (``--ragas-n 0`` skips it).

    .venv/bin/python benchmarks/run_stream_bench.py --n 200000 --rounds 3 --ragas-n 0
    .venv/bin/python benchmarks/run_stream_bench.py --n 1000000 --rounds 1 --stream-only
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
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


def tree_memory_mb(pid: int) -> tuple[float, float]:
    """Resident and proportional memory (RSS, PSS) of ``pid`` and its descendants, in MB."""
    rss = pss = 0
    stack = [pid]
    while stack:
        current = stack.pop()
        try:
            for line in Path(f"/proc/{current}/smaps_rollup").read_text().splitlines():
                if line.startswith("Rss:"):
                    rss += int(line.split()[1])
                elif line.startswith("Pss:"):
                    pss += int(line.split()[1])
            for task in Path(f"/proc/{current}/task").iterdir():
                stack.extend(int(child) for child in (task / "children").read_text().split())
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return rss / 1024, pss / 1024


def children_cpu() -> float:
    """CPU seconds (user + system) of every waited-for child process so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_stream(data: Path, out: Path, workers: int) -> dict[str, float]:
    """One ``turneval evaluate`` run: wall and CPU seconds, peak RSS and PSS of its tree."""
    command = [
        str(Path(sys.executable).parent / "turneval"),
        "evaluate",
        str(data),
        "--out",
        str(out),
        "--quiet",
        "--overwrite",
        "--workers",
        str(workers),
    ]
    command += [item for name in METRICS for item in ("--metric", name)]
    cpu, start = children_cpu(), time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    peak_rss = peak_pss = 0.0
    while process.poll() is None:
        rss, pss = tree_memory_mb(process.pid)
        peak_rss, peak_pss = max(peak_rss, rss), max(peak_pss, pss)
        time.sleep(0.1)
    elapsed = time.perf_counter() - start
    if process.stdout:
        process.stdout.read()
    if process.returncode:
        sys.exit(f"turneval exited {process.returncode}")
    return {
        "wall_s": elapsed,
        "cpu_s": children_cpu() - cpu,
        "rss_mb": peak_rss,
        "pss_mb": peak_pss,
    }


def run_bare(data: Path, n: int, workers: int, reasons: bool) -> dict[str, float]:
    """The bare work on the first ``n`` lines, split over ``workers`` processes at once."""
    command = [sys.executable, str(HERE / "stream_side_bare.py"), "--data", str(data)]
    command += ["--n", str(n), "--of", str(workers)]
    command += [item for name in METRICS for item in ("--metric", name)]
    command += ["--reasons"] if reasons else []
    cpu, start = children_cpu(), time.perf_counter()
    parts = [
        subprocess.Popen([*command, "--part", str(part)], stdout=subprocess.PIPE, text=True)
        for part in range(workers)
    ]
    lines = 0
    for process in parts:
        out, _ = process.communicate()
        if process.returncode:
            sys.exit(f"bare side exited {process.returncode}")
        lines += json.loads(out.strip().splitlines()[-1])["lines"]
    elapsed = time.perf_counter() - start
    return {"wall_s": elapsed, "cpu_s": children_cpu() - cpu, "lines": lines}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--stream-only", action="store_true", help="skip the bare work")
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
    print(
        f"## {args.n:,} samples ({size_mb:,.0f} MB of JSONL), {len(METRICS)} metrics, "
        f"{args.workers} workers / bare processes\n"
    )
    print(
        "| round | bare (float path) /s | bare with reasons /s | stream /s | stream / bare "
        "| stream / bare with reasons | CPU s: bare / reasons / stream | stream / bare by CPU "
        "| peak RSS MB | peak PSS MB |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    ratios, reason_ratios, cpu_ratios = [], [], []
    for index in range(args.rounds):
        sides = ["bare", "reasons", "stream"]
        figures = {}
        for side in sides if index % 2 == 0 else reversed(sides):
            if side == "stream":
                figures[side] = run_stream(data, out, args.workers)
            elif args.stream_only:  # memory and throughput only: no ratio
                figures[side] = {"wall_s": float("nan"), "cpu_s": float("nan")}
            else:
                figures[side] = run_bare(data, args.n, args.workers, side == "reasons")
        rate = {side: args.n / figures[side]["wall_s"] for side in sides}
        ratios.append(rate["stream"] / rate["bare"])
        reason_ratios.append(rate["stream"] / rate["reasons"])
        cpu = {side: figures[side]["cpu_s"] for side in sides}
        cpu_ratios.append(cpu["bare"] / cpu["stream"])
        stream = figures["stream"]
        print(
            f"| {index + 1} | {rate['bare']:,.0f} | {rate['reasons']:,.0f} | "
            f"{rate['stream']:,.0f} | {ratios[-1]:.2f} | {reason_ratios[-1]:.2f} | "
            f"{cpu['bare']:.1f} / {cpu['reasons']:.1f} / {cpu['stream']:.1f} | "
            f"{cpu_ratios[-1]:.2f} | {stream['rss_mb']:,.0f} | {stream['pss_mb']:,.0f} |",
            flush=True,
        )
    print(
        f"\nmedian stream / bare: {statistics.median(ratios):.2f}; "
        f"stream / bare with reasons: {statistics.median(reason_ratios):.2f}; "
        f"stream / bare by CPU seconds: {statistics.median(cpu_ratios):.2f}"
    )
    lines = sum(1 for _ in (out / "results.jsonl").open())
    print(f"{lines:,} result lines")
    if args.ragas_n:
        ragas = run_side(
            args.ragas_python, "stream_side_ragas.py", "--data", str(data), "--n", str(args.ragas_n)
        )
        print(
            f"ragas evaluate() (ToolCallAccuracy + ToolCallF1, first {ragas['samples']:,} "
            f"samples): {ragas['per_s']:,.0f} samples/s"
        )


if __name__ == "__main__":
    main()

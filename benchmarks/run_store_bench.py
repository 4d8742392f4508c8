"""The streamed CLI with and without ``--store``: samples/s and peak memory, alternating.

Generates N seeded samples (``generate.py``, kept in benchmarks/.data/), then runs
``turneval evaluate`` with the rule-based tool-call and trajectory metrics, once writing only
the run folder and once also into a fresh SQLite run store, alternating which goes first each
round. Prints each run's rate and peak resident memory, and the median ratio of the rates.

    .venv/bin/python benchmarks/run_store_bench.py --n 1000000 --rounds 3
    .venv/bin/python benchmarks/run_store_bench.py --n 50000 --rounds 3 --store postgresql://...
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from generate import generate  # noqa: E402
from run_stream_bench import METRICS, tree_memory_mb  # noqa: E402


def data_file(n: int, seed: int) -> Path:
    target = HERE / ".data" / f"store-{n}-{seed}.jsonl"
    if not target.exists():
        target.parent.mkdir(exist_ok=True)
        with target.open("w") as handle:
            for start in range(0, n, 100_000):
                for row in generate(min(100_000, n - start), seed + start):
                    handle.write(json.dumps(row) + "\n")
    return target


def run_cli(data: Path, out: Path, store: str | None) -> tuple[float, float]:
    """Seconds and peak RSS (MB, the process tree) of one ``turneval evaluate``."""
    command = [sys.executable, "-m", "turneval.cli", "evaluate", str(data), "--out", str(out)]
    command += [arg for name in METRICS for arg in ("--metric", name)]
    command += ["--overwrite", "--quiet", "--max-failed", "100%"]
    if store is not None:
        command += ["--store", store]
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, env={**os.environ})
    peak = 0.0
    while process.poll() is None:
        peak = max(peak, tree_memory_mb(process.pid)[0])
        time.sleep(0.2)
    seconds = time.perf_counter() - start
    if process.returncode not in (0, 3):  # 3: rows failed (the data has some on purpose)
        raise SystemExit(f"turneval evaluate exited {process.returncode}")
    return seconds, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--store", help="a store URL (default: a fresh SQLite file per run)")
    args = parser.parse_args()
    data = data_file(args.n, args.seed)
    ratios = []
    for number in range(args.rounds):
        scratch = Path(tempfile.mkdtemp(prefix="turneval-store-bench-"))
        try:
            order = [False, True] if number % 2 == 0 else [True, False]
            rates: dict[bool, float] = {}
            for stored in order:
                url = (args.store or str(scratch / "runs.db")) if stored else None
                seconds, peak = run_cli(data, scratch / "out", url)
                rates[stored] = args.n / seconds
                label = "with --store" if stored else "without    "
                print(f"round {number + 1} {label}: {rates[stored]:,.0f} samples/s, {peak:.0f} MB")
            ratios.append(rates[True] / rates[False])
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    print(f"with --store / without: median {statistics.median(ratios):.2f} ({ratios})")


if __name__ == "__main__":
    main()

"""The streamed CLI with and without ``--store``: samples/s and peak memory, alternating.

Generates N seeded samples (``generate.py``, kept in benchmarks/.data/), then runs
``turneval evaluate`` with the rule-based tool-call and trajectory metrics, once writing only
the run folder and once also into a fresh SQLite run store, alternating which goes first each
round. Prints each run's rate, peak resident memory and CPU time (user + system, the CLI
and its worker processes: robust to a busy machine, where the rates swing), and the median
ratios of the rates and of the CPU times.

    .venv/bin/python benchmarks/run_store_bench.py --n 1000000 --rounds 3
    .venv/bin/python benchmarks/run_store_bench.py --n 50000 --rounds 3 --store postgresql://...
    .venv/bin/python benchmarks/run_store_bench.py --n 100000 --postgres  # a throwaway server

``--postgres`` starts a throwaway PostgreSQL (tests/_postgres.py: Debian's binaries, fsync
off) and stores each run in a fresh database of it; the server's own CPU time is not counted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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


def run_cli(data: Path, out: Path, store: str | None) -> tuple[float, float, float]:
    """Seconds, peak RSS (MB, the process tree) and CPU seconds of one ``turneval evaluate``."""
    command = [sys.executable, "-m", "turneval.cli", "evaluate", str(data), "--out", str(out)]
    command += [arg for name in METRICS for arg in ("--metric", name)]
    command += ["--overwrite", "--quiet", "--max-failed", "100%"]
    if store is not None:
        command += ["--store", store]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, env={**os.environ})
    peak = 0.0
    while process.poll() is None:
        peak = max(peak, tree_memory_mb(process.pid)[0])
        time.sleep(0.2)
    seconds = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the workers, waited for by the CLI
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if process.returncode not in (0, 3):  # 3: rows failed (the data has some on purpose)
        raise SystemExit(f"turneval evaluate exited {process.returncode}")
    return seconds, peak, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--store", help="a store URL (default: a fresh SQLite file per run)")
    parser.add_argument(
        "--postgres", action="store_true", help="a throwaway PostgreSQL server, a database a run"
    )
    args = parser.parse_args()
    data = data_file(args.n, args.seed)
    server = None
    if args.postgres:
        sys.path.insert(0, str(HERE.parent / "tests"))
        from _postgres import PostgresServer, binaries

        found = binaries()
        if found is None:
            raise SystemExit("--postgres needs Debian's postgresql binaries (initdb, pg_ctl)")
        server = PostgresServer(found)
    ratios, cpu_ratios = [], []
    try:
        for number in range(args.rounds):
            scratch = Path(tempfile.mkdtemp(prefix="turneval-store-bench-"))
            try:
                order = [False, True] if number % 2 == 0 else [True, False]
                rates: dict[bool, float] = {}
                cpus: dict[bool, float] = {}
                for stored in order:
                    url = None
                    if stored:
                        url = server.database() if server else args.store
                        url = url or str(scratch / "runs.db")
                    seconds, peak, cpus[stored] = run_cli(data, scratch / "out", url)
                    rates[stored] = args.n / seconds
                    label = "with --store" if stored else "without    "
                    print(
                        f"round {number + 1} {label}: {rates[stored]:,.0f} samples/s, "
                        f"{peak:.0f} MB, CPU {cpus[stored] / args.n * 1e6:.1f} us a row",
                        flush=True,
                    )
                ratios.append(rates[True] / rates[False])
                cpu_ratios.append(cpus[False] / cpus[True])
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
    finally:
        if server is not None:
            server.stop()
    print(f"with --store / without: median {statistics.median(ratios):.2f} ({ratios})")
    print(f"CPU without / with --store: median {statistics.median(cpu_ratios):.2f} ({cpu_ratios})")


if __name__ == "__main__":
    main()

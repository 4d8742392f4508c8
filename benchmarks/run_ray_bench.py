"""Rule-based rows through Ray (``turneval evaluate --engine ray``) against the local engine.

Generates N samples (the tool-call benchmark's generator), runs ``turneval evaluate`` on the
file with the rule-based tool-call and trajectory metrics twice: locally (``--workers 2``) and
on a local 2-CPU Ray cluster (``--engine ray``, 2 actors of 0.5 CPU), then checks that the two
results.jsonl are identical row by row and reports rows/s. Rounds alternate the order.

    .venv/bin/python benchmarks/run_ray_bench.py --n 100000 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from generate import generate  # noqa: E402
from run_stream_bench import METRICS  # noqa: E402  (the same seven metrics)


def data_file(n: int, seed: int) -> Path:
    path = HERE / ".data" / f"ray-{n}-{seed}.jsonl"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8") as handle:
            for row in generate(n, seed):
                handle.write(json.dumps(row) + "\n")
    return path


def run(engine: str, data: Path, out: Path) -> float:
    command = [sys.executable, "-m", "turneval.cli", "evaluate", str(data), "--out", str(out)]
    for metric in METRICS:
        command += ["--metric", metric]
    command += ["--quiet", "--overwrite", "--engine", engine, "--workers", "2"]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--data", type=Path, help="an existing JSONL file of samples to use")
    args = parser.parse_args()
    data = args.data or data_file(args.n, args.seed)
    walls: dict[str, list[float]] = {"local": [], "ray": []}
    for index in range(args.rounds):
        order = ["local", "ray"] if index % 2 == 0 else ["ray", "local"]
        for engine in order:
            wall = run(engine, data, HERE / ".data" / f"out-{engine}")
            walls[engine].append(wall)
            print(f"{engine:<6} {wall:.1f} s ({args.n / wall:,.0f} rows/s)", file=sys.stderr)
    local = (HERE / ".data" / "out-local" / "results.jsonl").read_bytes()
    ray = (HERE / ".data" / "out-ray" / "results.jsonl").read_bytes()
    summary = {
        engine: {"wall_s": min(runs), "rows_per_s": args.n / min(runs)}
        for engine, runs in walls.items()
    }
    summary["identical_rows"] = local == ray  # type: ignore[assignment]
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()

"""The tool-call kernels of two versions of turneval, A/B, pass by pass in one session.

    .venv/bin/python benchmarks/run_tool_call_ab.py --base main --rounds 3

The base is a git ref of this repository (its ``src/`` is extracted to a temporary folder);
the head is this checkout's ``src/``. Each side is ``tool_call_side.py --lib turneval
--serve`` with its own ``src/`` first on ``PYTHONPATH``, both loaded at once on the same
samples (``generate.py``'s shapes, seeded). For each shape and variant, each round times
head, base, head (base, head, base every other round) and takes the middle pass against the
geometric mean of the two around it; the table gives the median head/base ratio of the
rounds, 1.00 being no change. Both sides' scores must be equal, float for float.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _harness import Server  # noqa: E402
from generate import rows_of, write_samples  # noqa: E402


class Side(Server):
    """``tool_call_side.py --lib turneval --serve`` importing turneval from ``src``."""

    def __init__(self, src: Path, data: Path) -> None:
        env = {**os.environ, "PYTHONPATH": str(src), "RAGAS_DO_NOT_TRACK": "true"}
        command = [sys.executable, str(HERE / "tool_call_side.py"), "--lib", "turneval"]
        self.process = subprocess.Popen(
            [*command, "--data", str(data), "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.variants = self._read()["ready"]


def extract(ref: str, into: Path) -> Path:
    """``src/`` of ``ref`` written under ``into``; the folder to put on ``PYTHONPATH``."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref, "src"], check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


def loaded_from(src: Path) -> str:
    """Where a side with ``src`` on its path imports turneval.metrics from (a check)."""
    code = "import turneval.metrics as m; print(m.__file__)"
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, env=env)
    return out.stdout.decode().strip()


def bench(label: str, args: argparse.Namespace, base_src: Path, head_src: Path) -> list[str]:
    rows = rows_of(label, args.n, args.seed)
    data = write_samples(f"ab-{label}", args.n, args.seed, rows)
    base, head = Side(base_src, data), Side(head_src, data)
    problems = []
    try:
        repeat: dict[str, int] = {}
        for name in head.variants:
            ours = head.request(variant=name, repeat=1, scores=True)
            theirs = base.request(variant=name, repeat=1, scores=True)
            if ours["scores"] != theirs["scores"]:
                problems.append(f"{label}: {name}: head and base scores differ")
            repeat[name] = max(1, math.ceil(args.min_pass / ours["seconds"]))

        def timed(side: Side, name: str) -> float:
            answer = side.request(variant=name, repeat=repeat[name], scores=False)
            return float(answer[args.clock])

        ratios: dict[str, list[float]] = {name: [] for name in head.variants}
        rates: dict[str, list[float]] = {name: [] for name in head.variants}
        for round_index in range(args.rounds):
            for name in head.variants:
                if round_index % 2 == 0:  # head, base, head
                    first, middle, last = timed(head, name), timed(base, name), timed(head, name)
                    ratio = math.sqrt(first * last) / middle
                    rates[name].append(math.sqrt(first * last))
                else:  # base, head, base
                    first, middle, last = timed(base, name), timed(head, name), timed(base, name)
                    ratio = middle / math.sqrt(first * last)
                    rates[name].append(middle)
                ratios[name].append(ratio)
    finally:
        base.close()
        head.close()
    print(f"\n### {label} ({args.n} samples, seed {args.seed}; {args.clock})\n")
    print("| variant | head samples/s | head / base | rounds |")
    print("|---|---:|---:|---|")
    for name in head.variants:
        spread = ", ".join(f"{r:.3f}" for r in ratios[name])
        print(
            f"| {name} | {statistics.median(rates[name]):,.0f} "
            f"| {statistics.median(ratios[name]):.3f} | {spread} |"
        )
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main", help="the git ref to compare this checkout with")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--min-pass", type=float, default=0.2)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--shapes", default="mixed,short,typical,long,varied")
    parser.add_argument("--clock", choices=["cpu_per_s", "per_s"], default="cpu_per_s")
    args = parser.parse_args()
    head_src = ROOT / "src"
    with tempfile.TemporaryDirectory() as folder:
        base_src = extract(args.base, Path(folder))
        print(f"base: {args.base} ({loaded_from(base_src)})")
        print(f"head: this checkout ({loaded_from(head_src)})")
        problems = []
        for label in args.shapes.split(","):
            problems += bench(label, args, base_src, head_src)
    for problem in problems:
        print(f"FAILED: {problem}")
    if problems:
        sys.exit("the two versions score differently")


if __name__ == "__main__":
    main()

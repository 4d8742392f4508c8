"""CPU time of ``import turneval.metrics`` (and of first uses), two source trees alternating.

Each measurement is one fresh interpreter running one import statement; its user + system CPU
seconds (``resource.getrusage(RUSAGE_CHILDREN)`` around it, interpreter start included) are
recorded. Bytecode is cached as an installed package has it (``PYTHONPYCACHEPREFIX``, written
by a warm-up run of each statement; ``PYTHONDONTWRITEBYTECODE`` unset). Rounds alternate the
trees and reverse their order every other round; the floor (``pass`` and pydantic's own
import) is measured in the same rounds.

    git worktree add --detach /tmp/turneval-main main
    .venv/bin/python benchmarks/run_import_bench.py --before /tmp/turneval-main/src --rounds 15
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
STATEMENTS = {
    "interpreter": "pass",
    "pydantic": "from pydantic import BaseModel, Field, TypeAdapter",
    "import turneval.metrics": "import turneval.metrics",
    "ToolCallAccuracy": "from turneval.metrics import ToolCallAccuracy",
    "TopicAdherenceScore": "from turneval.metrics import TopicAdherenceScore",
    "every metric": "import turneval.metrics as m; m.builtin_metrics()",
}
FLOORS = ("interpreter", "pydantic")


def cpu_of(statement: str, src: str, cache: str) -> float:
    """User + system CPU seconds of one fresh interpreter running ``statement``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(PYTHONPATH=src, PYTHONPYCACHEPREFIX=cache)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", statement], check=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the src directory of the old tree")
    parser.add_argument("--after", default=str(HERE.parent / "src"), help="this tree's src")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    trees = {"before": args.before, "after": args.after}
    caches = {name: tempfile.mkdtemp(prefix=f"pyc-{name}-") for name in trees}
    for name, src in trees.items():  # warm-up: write the bytecode caches
        for statement in STATEMENTS.values():
            cpu_of(statement, src, caches[name])
    times: dict[tuple[str, str], list[float]] = {}
    for index in range(args.rounds):
        order = list(trees) if index % 2 == 0 else list(reversed(trees))
        for label, statement in STATEMENTS.items():
            for name in order if label not in FLOORS else order[:1]:
                key = (label, name if label not in FLOORS else "floor")
                times.setdefault(key, []).append(cpu_of(statement, trees[name], caches[name]))
    print(f"CPU seconds, {args.rounds} fresh processes each (min / median / max):")
    for label in STATEMENTS:
        for name in ("floor",) if label in FLOORS else ("before", "after"):
            values = times[(label, name)]
            print(
                f"  {label:<24} {name:<6} {min(values):.3f} / {statistics.median(values):.3f}"
                f" / {max(values):.3f}"
            )
        if label not in FLOORS:
            ratios = [
                a / b
                for a, b in zip(times[(label, "after")], times[(label, "before")], strict=True)
            ]
            print(f"  {'':<24} after / before, median of rounds: {statistics.median(ratios):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Tool-call metrics, turneval against ragas 0.4.3: parity sample by sample, and speed.

Both libraries run the same samples in the same loop, each in its own venv; rounds alternate
which goes first, and ratios are taken per round (the machine is shared and noisy), then their
median is reported.

    benchmarks/setup_ragas.sh                      # once: ragas in benchmarks/.ragas-venv
    .venv/bin/python benchmarks/run_tool_call_bench.py --rounds 5
    .venv/bin/python benchmarks/run_tool_call_bench.py --shapes short,typical,long

Shapes: ``mixed`` (the original generator) and the fixed ``short``/``typical``/``long`` ones of
``generate.py``. Speed misses against the targets (>= 30x ragas' legacy ToolCallAccuracy, >= 2x
its collections path) are listed at the end; a parity failure exits non-zero.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _harness import DEFAULT_RAGAS_PYTHON, alternate, run_side  # noqa: E402
from generate import generate, generate_shape  # noqa: E402

ACCURACY = [
    "tool_call_accuracy[strict]",
    "tool_call_accuracy[unordered]",
    "tool_call_accuracy[levenshtein]",
]
LEGACY_REFERENCE = "tool_call_accuracy[strict]"  # ragas' pluggable-comparison path
COLLECTIONS = {
    "tool_call_accuracy[strict]": "collections:tool_call_accuracy[strict]",
    "tool_call_accuracy[unordered]": "collections:tool_call_accuracy[unordered]",
    "tool_call_f1": "collections:tool_call_f1",
}


def side(python: str, lib: str, data: Path, passes: int) -> dict[str, Any]:
    return run_side(
        python, "tool_call_side.py", "--lib", lib, "--data", str(data), "--passes", str(passes)
    )


# -- F1 differences: each must be one of those SPEC §3.1 lists ---------------------------------


def _python_hashable(value: Any) -> Any:
    """Hashable form under Python ==, as a set-based implementation sees values."""
    if isinstance(value, dict):
        return frozenset((key, _python_hashable(item)) for key, item in value.items())
    if isinstance(value, list):
        return tuple(_python_hashable(item) for item in value)
    return value


def _set_f1(predicted: list[dict[str, Any]], reference: list[dict[str, Any]]) -> float:
    """The documented ragas behaviour: sets under Python ==, 0 when empty, rounded to 4."""
    pred = {(c["name"], _python_hashable(c["args"])) for c in predicted}
    ref = {(c["name"], _python_hashable(c["args"])) for c in reference}
    tp = len(pred & ref)
    precision = tp / len(pred) if pred else 0.0
    recall = tp / len(ref) if ref else 0.0
    return round(2 * precision * recall / (precision + recall), 4) if precision + recall else 0.0


def classify_f1(row: dict[str, Any], ours: float, theirs: float) -> str:
    predicted = [
        c for m in row["user_input"] if m["type"] == "ai" for c in m.get("tool_calls") or []
    ]
    reference = row["reference_tool_calls"]
    if _set_f1(predicted, reference) != theirs:
        return "UNEXPLAINED"
    if not predicted and not reference:
        return "both lists empty (ragas 0.0, turneval 1.0)"
    for side in (predicted, reference):
        if len({(c["name"], _python_hashable(c["args"])) for c in side}) < len(side):
            return "duplicates collapsed by ragas' sets"
    if round(ours, 4) != theirs:
        return "true/false equal to 1/0 under Python == (ragas)"
    return "ragas rounds to 4 decimals"


def bench(label: str, rows: list[dict[str, Any]], args: argparse.Namespace) -> list[str]:
    """Run both sides on ``rows``, print parity and speed; return the failures found."""
    data = HERE / ".data" / f"samples-{label}-{args.n}-{args.seed}.jsonl"
    data.parent.mkdir(parents=True, exist_ok=True)
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))
    sides = [("ragas", args.ragas_python), ("turneval", sys.executable)]
    results = alternate(args.rounds, sides, side, data, args.passes)
    rounds = [(result["turneval"], result["ragas"]) for result in results]

    ours0, theirs0 = rounds[0]
    print(f"## {label}: parity on {len(rows)} samples (seed {args.seed})\n")
    print("| metric | equal | different |\n|---|---:|---:|")
    for name in ACCURACY:
        equal = sum(
            a == b for a, b in zip(ours0[name]["scores"], theirs0[name]["scores"], strict=True)
        )
        print(f"| {name} | {equal} | {len(rows) - equal} |")
    causes: dict[str, int] = {}
    equal_f1 = 0
    for row, a, b in zip(
        rows, ours0["tool_call_f1"]["scores"], theirs0["tool_call_f1"]["scores"], strict=True
    ):
        if a == b:
            equal_f1 += 1
        else:
            cause = classify_f1(row, a, b)
            causes[cause] = causes.get(cause, 0) + 1
    print(f"| tool_call_f1 | {equal_f1} | {len(rows) - equal_f1} |\n")
    print("ToolCallF1 differences by cause:")
    for cause, count in sorted(causes.items(), key=lambda item: -item[1]):
        print(f"- {cause}: {count}")

    def rate(side: dict[str, Any], name: str) -> float:
        return statistics.median(side[name][args.clock])

    fastest = max(
        COLLECTIONS.values(), key=lambda n: statistics.median(rate(t, n) for _, t in rounds)
    )
    print(
        f"\n## {label}: samples/s ({args.clock}), median of {args.rounds} alternating rounds "
        f"({args.passes} passes each)\n"
    )
    print(
        "| variant | turneval | ragas (same metric) | ratio | vs ragas legacy ToolCallAccuracy "
        "| vs ragas collections (same metric or unordered) "
        f"| vs fastest ragas collections ({fastest.split(':')[1]}) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    failures = []
    for name in ours0:
        ours_rates = [rate(ours, name) for ours, _ in rounds]
        legacy = [rate(ours, name) / rate(theirs, LEGACY_REFERENCE) for ours, theirs in rounds]
        collections_name = COLLECTIONS.get(name, "collections:tool_call_accuracy[unordered]")
        modern = [rate(ours, name) / rate(theirs, collections_name) for ours, theirs in rounds]
        hardest = [rate(ours, name) / rate(theirs, fastest) for ours, theirs in rounds]
        same = (
            f"{statistics.median(rate(t, name) for _, t in rounds):,.0f}"
            if name in theirs0
            else "n/a"
        )
        same_ratio = (
            f"{statistics.median(rate(o, name) / rate(t, name) for o, t in rounds):.1f}x"
            if name in theirs0
            else "n/a"
        )
        print(
            f"| {name} | {statistics.median(ours_rates):,.0f} | {same} | {same_ratio} | "
            f"{statistics.median(legacy):.1f}x | {statistics.median(modern):.2f}x "
            f"({collections_name.split(':')[1]}) | {statistics.median(hardest):.2f}x |"
        )
        if statistics.median(legacy) < 30 or statistics.median(modern) < 2:
            failures.append(f"{label}: {name} below 30x legacy or 2x collections")
    print("\nragas alone:")
    for name in theirs0:
        print(f"- {name}: {statistics.median(rate(t, name) for _, t in rounds):,.0f}/s")
    print()
    if "UNEXPLAINED" in causes:
        failures.append(f"{label}: ToolCallF1 differences not among those SPEC §3.1 lists")
    if any(
        sum(a != b for a, b in zip(ours0[n]["scores"], theirs0[n]["scores"], strict=True))
        for n in ACCURACY
    ):
        failures.append(f"{label}: ToolCallAccuracy differs from ragas")
    return failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--passes", type=int, default=3, help="timed passes per variant per round")
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--shapes",
        default="mixed,short,typical,long",
        help="comma-separated: mixed (the original generator), short, typical, long",
    )
    parser.add_argument(
        "--clock",
        choices=["cpu_per_s", "per_s"],
        default="cpu_per_s",
        help="rates per CPU second of the scoring process (default; robust on a shared machine) "
        "or per wall second",
    )
    parser.add_argument("--ragas-python", default=DEFAULT_RAGAS_PYTHON)
    args = parser.parse_args()

    failures = []
    for label in args.shapes.split(","):
        rows = (
            generate(args.n, args.seed)
            if label == "mixed"
            else generate_shape(label, args.n, args.seed)
        )
        failures += bench(label, rows, args)
    for failure in failures:
        print(f"FAILED: {failure}")
    if any("differ" in failure for failure in failures):
        sys.exit("parity failures")


if __name__ == "__main__":
    main()

"""Tool-call metrics, turneval against ragas 0.4.3: parity sample by sample, and speed.

Both libraries run the same samples in the same loop, each in its own venv. Two ways to pair
their timings (the machine is shared and its speed drifts):

* ``--pairing pass`` (default): both libraries stay loaded in their own processes and take turns
  pass by pass. For each variant, each round times turneval's pass, then the ragas metric it is
  compared with, then turneval again (one sandwich per ragas metric), and takes the ratio against
  the geometric mean of the two turneval passes around it; every pass lasts at least
  ``--min-pass`` seconds (loops repeated). The median of the rounds' ratios is reported.
* ``--pairing round``: each round runs one whole side process, then the other (the order
  alternating), and the ratio is taken per round (how the figures before 2026-11-23 15:30 UTC
  were measured).

    benchmarks/setup_ragas.sh                      # once: ragas in benchmarks/.ragas-venv
    .venv/bin/python benchmarks/run_tool_call_bench.py --rounds 5
    .venv/bin/python benchmarks/run_tool_call_bench.py --shapes short,typical,long

Shapes: ``mixed`` (the original generator) and the fixed ``short``/``typical``/``long``/``varied``
ones of ``generate.py``. Speed misses against the targets (>= 30x ragas' legacy
ToolCallAccuracy, >= 2x its collections path) are listed at the end; a parity failure exits
non-zero.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _harness import DEFAULT_RAGAS_PYTHON, Server, alternate, run_side  # noqa: E402
from generate import rows_of, write_samples  # noqa: E402

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


def parity(
    label: str,
    rows: list[dict[str, Any]],
    seed: int,
    ours: dict[str, list[float]],
    theirs: dict[str, list[float]],
) -> list[str]:
    """Print sample-by-sample parity; return the parity failures.

    Failures: any ToolCallAccuracy difference, or a ToolCallF1 difference that is not one of
    the causes SPEC §3.1 lists.
    """
    print(f"## {label}: parity on {len(rows)} samples (seed {seed})\n")
    print("| metric | equal | different |\n|---|---:|---:|")
    failures = []
    for name in ACCURACY:
        equal = sum(a == b for a, b in zip(ours[name], theirs[name], strict=True))
        print(f"| {name} | {equal} | {len(rows) - equal} |")
        if equal != len(rows):
            failures.append(f"{label}: ToolCallAccuracy differs from ragas ({name})")
    causes: dict[str, int] = {}
    equal_f1 = 0
    for row, a, b in zip(rows, ours["tool_call_f1"], theirs["tool_call_f1"], strict=True):
        if a == b:
            equal_f1 += 1
        else:
            cause = classify_f1(row, a, b)
            causes[cause] = causes.get(cause, 0) + 1
    print(f"| tool_call_f1 | {equal_f1} | {len(rows) - equal_f1} |\n")
    print("ToolCallF1 differences by cause:")
    for cause, count in sorted(causes.items(), key=lambda item: -item[1]):
        print(f"- {cause}: {count}")
    if "UNEXPLAINED" in causes:
        failures.append(f"{label}: ToolCallF1 differences not among those SPEC §3.1 lists")
    return failures


def references(name: str, theirs: list[str]) -> list[str]:
    """The ragas variants a turneval variant is compared with (legacy reference first)."""
    wanted = [LEGACY_REFERENCE, COLLECTIONS.get(name, "collections:tool_call_accuracy[unordered]")]
    if name in theirs and name not in wanted:
        wanted.append(name)  # ragas' legacy path of the same metric
    return wanted


def spread(values: list[float], form: str) -> str:
    """``[lowest-highest]`` of the rounds' ratios, for the tables."""
    return f"[{min(values):{form}}-{max(values):{form}}]"


def print_speed(
    label: str,
    args: argparse.Namespace,
    ours_rates: dict[str, list[float]],
    theirs_rates: dict[str, list[float]],
    ratios: dict[tuple[str, str], list[float]],
    method: str,
) -> list[str]:
    """The speed table (medians) and the variants missing a target."""
    median = statistics.median
    fastest = max(COLLECTIONS.values(), key=lambda n: median(theirs_rates[n]))
    print(f"\n## {label}: samples/s ({args.clock}), {method}\n")
    print("Ratios: median of the rounds' ratios [lowest-highest round].\n")
    print(
        "| variant | turneval | ragas (same metric) | ratio | vs ragas legacy ToolCallAccuracy "
        "| vs ragas collections (same metric or unordered) "
        f"| vs fastest ragas collections ({fastest.split(':')[1]}) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    failures = []
    for name, rates in ours_rates.items():
        collections_name = COLLECTIONS.get(name, "collections:tool_call_accuracy[unordered]")
        legacy = median(ratios[name, LEGACY_REFERENCE])
        modern = median(ratios[name, collections_name])
        legacy_range = spread(ratios[name, LEGACY_REFERENCE], ".1f")
        modern_range = spread(ratios[name, collections_name], ".2f")
        same = f"{median(theirs_rates[name]):,.0f}" if name in theirs_rates else "n/a"
        same_ratio = f"{median(ratios[name, name]):.1f}x" if name in theirs_rates else "n/a"
        hardest = median(rates) / median(theirs_rates[fastest])
        print(
            f"| {name} | {median(rates):,.0f} | {same} | {same_ratio} | {legacy:.1f}x "
            f"{legacy_range} | {modern:.2f}x {modern_range} ({collections_name.split(':')[1]}) "
            f"| {hardest:.2f}x |"
        )
        if legacy < 30 or modern < 2:
            failures.append(f"{label}: {name} below 30x legacy or 2x collections")
    print("\nragas alone:")
    for name, rates in theirs_rates.items():
        print(f"- {name}: {median(rates):,.0f}/s")
    print()
    return failures


def bench_rounds(label: str, rows: list[dict[str, Any]], args: argparse.Namespace) -> list[str]:
    """``--pairing round``: whole side processes alternate; ratios per round."""
    data = write_samples(label, args.n, args.seed, rows)
    sides = [("ragas", args.ragas_python), ("turneval", sys.executable)]
    results = alternate(args.rounds, sides, side, data, args.passes)
    rounds = [(result["turneval"], result["ragas"]) for result in results]
    ours0, theirs0 = rounds[0]
    failures = parity(
        label,
        rows,
        args.seed,
        {name: ours0[name]["scores"] for name in ours0},
        {name: theirs0[name]["scores"] for name in theirs0},
    )

    def rate(side: dict[str, Any], name: str) -> float:
        return statistics.median(side[name][args.clock])

    ours_rates = {name: [rate(ours, name) for ours, _ in rounds] for name in ours0}
    theirs_rates = {name: [rate(theirs, name) for _, theirs in rounds] for name in theirs0}
    ratios = {
        (name, other): [rate(ours, name) / rate(theirs, other) for ours, theirs in rounds]
        for name in ours0
        for other in references(name, list(theirs0))
    }
    method = f"median of {args.rounds} alternating rounds ({args.passes} passes each)"
    return failures + print_speed(label, args, ours_rates, theirs_rates, ratios, method)


def bench_passes(label: str, rows: list[dict[str, Any]], args: argparse.Namespace) -> list[str]:
    """``--pairing pass``: both sides loaded at once; ragas passes sandwiched by turneval's."""
    data = write_samples(label, args.n, args.seed, rows)
    ours = Server(sys.executable, "tool_call_side.py", "--lib", "turneval", "--data", str(data))
    theirs = Server(args.ragas_python, "tool_call_side.py", "--lib", "ragas", "--data", str(data))
    try:
        # One untimed-for-the-tables pass each: the scores for parity, and the loop count that
        # makes a pass last at least --min-pass seconds.
        repeat: dict[tuple[Server, str], int] = {}
        scores: dict[Server, dict[str, list[float]]] = {ours: {}, theirs: {}}
        for server in (ours, theirs):
            for name in server.variants:
                answer = server.request(variant=name, repeat=1, scores=True)
                scores[server][name] = answer["scores"]
                repeat[server, name] = max(1, math.ceil(args.min_pass / answer["seconds"]))
        failures = parity(label, rows, args.seed, scores[ours], scores[theirs])

        def timed(server: Server, name: str) -> float:
            answer = server.request(variant=name, repeat=repeat[server, name], scores=False)
            return float(answer[args.clock])

        ours_rates: dict[str, list[float]] = {name: [] for name in ours.variants}
        theirs_rates: dict[str, list[float]] = {name: [] for name in theirs.variants}
        ratios: dict[tuple[str, str], list[float]] = {}
        for round_index in range(args.rounds):
            for name in ours.variants:
                others = references(name, theirs.variants)
                if round_index % 2:
                    others.reverse()
                before = timed(ours, name)
                ours_rates[name].append(before)
                for other in others:
                    reference = timed(theirs, other)
                    after = timed(ours, name)
                    ours_rates[name].append(after)
                    theirs_rates[other].append(reference)
                    ratios.setdefault((name, other), []).append(
                        math.sqrt(before * after) / reference
                    )
                    before = after
    finally:
        ours.close()
        theirs.close()
    method = (
        f"median of {args.rounds} rounds, each ragas pass between two turneval passes "
        f"(passes of at least {args.min_pass} s)"
    )
    return failures + print_speed(label, args, ours_rates, theirs_rates, ratios, method)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--pairing",
        choices=["pass", "round"],
        default="pass",
        help="alternate the libraries pass by pass (default) or whole process by process",
    )
    parser.add_argument(
        "--passes", type=int, default=3, help="--pairing round: timed passes per variant per round"
    )
    parser.add_argument(
        "--min-pass",
        type=float,
        default=0.2,
        help="--pairing pass: loops are repeated until a pass lasts at least this many seconds",
    )
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--shapes",
        default="mixed,short,typical,long",
        help="comma-separated: mixed (the original generator), short, typical, long, varied",
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
        rows = rows_of(label, args.n, args.seed)
        bench = bench_passes if args.pairing == "pass" else bench_rounds
        failures += bench(label, rows, args)
    for failure in failures:
        print(f"FAILED: {failure}")
    if any("differ" in failure for failure in failures):
        sys.exit("parity failures")


if __name__ == "__main__":
    main()

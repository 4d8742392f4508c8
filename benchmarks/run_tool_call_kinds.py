"""Tool-call metrics by kind of sample, turneval against ragas 0.4.3: where each side's time goes.

    RAGAS_PYTHON=... .venv/bin/python benchmarks/run_tool_call_kinds.py --shape varied --runs 2

Each sample is labelled by what its call lists have in common (lengths differ, one call,
names differ, distinct names, or a repeated tool whose calls are the same or changed, on one
tool or several). Each side, in its own venv and process, times the bench's own loop
(``await score(sample)``, ``tool_call_side.py --by-kind``) over each label's samples apart,
best of ``--passes``; the runs alternate the sides. The table gives turneval's µs per sample,
ragas' collections metric and ragas' legacy ToolCallAccuracy (the reference of the targets),
and the ratios, run by run.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _harness import DEFAULT_RAGAS_PYTHON, run_side  # noqa: E402
from generate import rows_of, write_samples  # noqa: E402

OURS = {
    "unordered": "tool_call_accuracy[unordered]",
    "strict": "tool_call_accuracy[strict]",
}
COLLECTIONS = {
    "unordered": "collections:tool_call_accuracy[unordered]",
    "strict": "collections:tool_call_accuracy[strict]",
}
LEGACY = "tool_call_accuracy[strict]"  # ragas' legacy ToolCallAccuracy, the targets' reference


def _predicted(row: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        call
        for message in row["user_input"]
        if message["type"] == "ai"
        for call in message.get("tool_calls") or []
    ]


def _texts(calls: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps([call["name"], call["args"]], sort_keys=True) for call in calls)


def sample_kind(row: dict[str, Any]) -> str:
    """What a sample's two call lists have in common, as the unordered path tells them apart."""
    predicted, reference = _predicted(row), row["reference_tool_calls"]
    if len(predicted) != len(reference):
        return "lengths differ"
    if len(reference) == 1:
        return "one call"
    names = sorted(call["name"] for call in reference)
    if sorted(call["name"] for call in predicted) != names:
        return "names differ"
    if len(set(names)) == len(names):
        return "distinct names"
    same = "the same calls" if _texts(predicted) == _texts(reference) else "changed calls"
    return f"{same}, {'one tool' if len(set(names)) == 1 else 'several tools'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="varied", help="mixed, short, typical, long, varied")
    parser.add_argument("--variant", choices=sorted(OURS), default="unordered")
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--passes", type=int, default=15)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--ragas-python", default=DEFAULT_RAGAS_PYTHON)
    args = parser.parse_args()

    rows = rows_of(args.shape, args.n, args.seed)
    data = write_samples(args.shape, args.n, args.seed, rows)
    labels = data.parent / f"kinds-{args.shape}-{args.n}-{args.seed}.json"
    labels.write_text(json.dumps([sample_kind(row) for row in rows]), encoding="utf-8")

    def side(python: str, lib: str, variants: str) -> dict[str, Any]:
        common = ["--data", str(data), "--passes", str(args.passes), "--by-kind", str(labels)]
        return run_side(python, "tool_call_side.py", "--lib", lib, *common, "--variants", variants)

    ours, theirs = OURS[args.variant], COLLECTIONS[args.variant]
    runs = []
    for index in range(args.runs):
        steps = [
            ("turneval", lambda: side(sys.executable, "turneval", ours)[ours]),
            ("ragas", lambda: side(args.ragas_python, "ragas", f"{theirs},{LEGACY}")),
        ]
        if index % 2:
            steps.reverse()
        runs.append({lib: step() for lib, step in steps})

    print(f"## {args.shape}: {ours} by kind of sample, best of {args.passes} passes, µs per sample")
    print("(run 1; run 2; ...)\n")
    print("| kind (samples) | turneval | ragas collections | ratio | ragas legacy | ratio |")
    print("|---|---:|---:|---:|---:|---:|")
    kinds = sorted(runs[0]["turneval"], key=lambda kind: (kind == "all", kind))
    for kind in kinds:
        count = int(runs[0]["turneval"][kind][0])
        us = [run["turneval"][kind][1] for run in runs]
        coll = [run["ragas"][theirs][kind][1] for run in runs]
        legacy = [run["ragas"][LEGACY][kind][1] for run in runs]

        def joined(values: list[float], form: str, unit: str = "") -> str:
            return "; ".join(format(value, form) + unit for value in values)

        print(
            f"| {kind} ({count}) | {joined(us, '.2f')} | {joined(coll, '.2f')} | "
            f"{joined([c / u for c, u in zip(coll, us, strict=True)], '.2f', 'x')} | {joined(legacy, '.1f')} | "
            f"{joined([g / u for g, u in zip(legacy, us, strict=True)], '.1f', 'x')} |"
        )


if __name__ == "__main__":
    main()

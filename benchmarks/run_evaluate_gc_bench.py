"""``evaluate()`` on a large in-memory dataset, with and without the collector policy.

Loads the first N lines of the stream benchmark's data (``run_stream_bench.py`` writes it) (``EvaluationDataset.from_jsonl``), then
runs ``evaluate(dataset, 7 rule-based metrics, details=False)``, each with the batch policy of
``turneval._gc`` and with the collector's defaults, rounds alternating which goes first, all in
one process. Rates are samples per CPU second of this process (the 2-core machine is shared).

    .venv/bin/python benchmarks/run_evaluate_gc_bench.py --n 50000 --rounds 3
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import tempfile
import time
from pathlib import Path

from turneval import EvaluationDataset, evaluate
from turneval._gc import _Policy

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run_stream_bench import METRICS  # noqa: E402


def one(path: Path, policy: bool) -> tuple[float, float]:
    """Samples per CPU second: loading the file, then evaluate()."""
    _Policy.enabled = policy
    try:
        start = time.process_time()
        dataset = EvaluationDataset.from_jsonl(path)
        loaded = time.process_time()
        evaluate(dataset, METRICS, details=False, show_progress=False)
        done = time.process_time()
    finally:
        _Policy.enabled = True
    n = len(dataset)
    del dataset
    gc.collect()
    return n / (loaded - start), n / (done - loaded)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data", help="a JSONL file of samples (default: the stream bench's)")
    args = parser.parse_args()
    if args.data is None:
        made = sorted((HERE / ".data").glob("stream-*-11.jsonl"))
        if not made:
            sys.exit("no data: run benchmarks/run_stream_bench.py first, or pass --data")
        args.data = str(made[-1])
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "head.jsonl"
        with open(args.data, "rb") as source, path.open("wb") as head:
            for _, line in zip(range(args.n), source, strict=False):
                head.write(line)
        print(f"## evaluate() on {args.n:,} in-memory samples, {len(METRICS)} metrics\n")
        print("| round | load /s: defaults / policy | evaluate /s: defaults / policy |")
        print("|---|---:|---:|")
        load_ratio, run_ratio = [], []
        for index in range(args.rounds):
            order = [False, True] if index % 2 == 0 else [True, False]
            figures = {policy: one(path, policy) for policy in order}
            load_ratio.append(figures[True][0] / figures[False][0])
            run_ratio.append(figures[True][1] / figures[False][1])
            print(
                f"| {index + 1} | {figures[False][0]:,.0f} / {figures[True][0]:,.0f} | "
                f"{figures[False][1]:,.0f} / {figures[True][1]:,.0f} |",
                flush=True,
            )
        print(
            f"\nmedian speed-up with the policy: loading {statistics.median(load_ratio):.2f}x, "
            f"evaluate() {statistics.median(run_ratio):.2f}x"
        )


if __name__ == "__main__":
    main()

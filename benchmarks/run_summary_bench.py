"""The one summariser over a large streamed run: ``summarise_metrics`` on packed values.

Seven metrics of N rows each, as a streamed run hands them to the summariser (``array("d")``
columns): six take four distinct values (the bootstrap draws counts of distinct values), one
takes N / 10 distinct values (the bootstrap resamples indices). Prints the minimum and the
median of ``--repeat`` calls. To compare two trees, run it with ``PYTHONPATH=src`` from each,
alternating.

    .venv/bin/python benchmarks/run_summary_bench.py --rows 1000000 --repeat 5
"""

from __future__ import annotations

import argparse
import statistics
import time
from array import array

import numpy as np

from turneval.aggregate import RunFigures, summarise_metrics


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    names = [f"m{i}" for i in range(7)]
    values = {
        name: array("d", rng.choice([0.0, 0.25, 0.5, 1.0], size=args.rows)) for name in names[:6]
    }
    values[names[6]] = array("d", rng.random(args.rows // 10))
    failed = dict.fromkeys(names, 0)
    usage = dict.fromkeys(names, None)
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        summarise_metrics(names, values, failed, usage, figures=RunFigures())
        times.append(time.perf_counter() - start)
    print(
        f"summarise_metrics, 6 x {args.rows:,} rows + 1 x {args.rows // 10:,} distinct: "
        f"min {min(times):.3f} s, median {statistics.median(times):.3f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

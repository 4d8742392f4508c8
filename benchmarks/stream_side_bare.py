"""The bare work of a streamed run, in one plain loop: one process of ``run_stream_bench.py``.

Reads the JSONL file and takes every ``--of``-th line starting at ``--part`` (so W such
processes split the file between them), then per line:
``MultiTurnSample.model_validate_json(line)`` and ``await metric.multi_turn_ascore(sample)``
for each metric (the float path; ``--reasons`` uses ``await metric.ascore(sample,
details=False)``, which also builds each reason string as results.jsonl needs), objects dropped
as it goes. Prints one JSON line: lines, wall and CPU seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

from turneval.runner import resolve_metrics
from turneval.samples import MultiTurnSample


async def _loop(path: str, n: int, part: int, of: int, names: list[str], reasons: bool) -> int:
    metrics = resolve_metrics(names)
    done = 0
    with open(path, "rb") as handle:
        for number, line in enumerate(handle):
            if number >= n:
                break
            if number % of != part:
                continue
            sample = MultiTurnSample.model_validate_json(line)
            for metric in metrics:
                if reasons:
                    await metric.ascore(sample, details=False)
                else:
                    await metric.multi_turn_ascore(sample)  # type: ignore[attr-defined]
            done += 1
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--n", type=int, required=True)
    parser.add_argument("--part", type=int, default=0)
    parser.add_argument("--of", type=int, default=1)
    parser.add_argument("--metric", action="append", required=True)
    parser.add_argument("--reasons", action="store_true")
    args = parser.parse_args()
    wall, cpu = time.perf_counter(), time.process_time()
    done = asyncio.run(_loop(args.data, args.n, args.part, args.of, args.metric, args.reasons))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(json.dumps({"lines": done, "wall_s": wall, "cpu_s": cpu}))


if __name__ == "__main__":
    main()

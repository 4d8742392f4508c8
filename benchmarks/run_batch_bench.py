"""The batch engine at 10,000 rows against the local OpenAI batches stub (no network).

Submits a judged run (fluency, with exact_match scored locally) of N rows, injects errors into
1/16 of the first attempts (so a follow-up round runs), waits, collects, checks that every row
is scored, that no request was submitted twice and that the first rows equal a live run with
the same seeded answers, and prints the time of each phase.

    PYTHONPATH=src .venv/bin/python benchmarks/run_batch_bench.py --rows 10000
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain_openai import ChatOpenAI
from tests._batch_stub import BatchStub

from turneval import SingleTurnSample, evaluate
from turneval.batch import submit

METRICS = ["exact_match", "fluency"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--check-live", type=int, default=200, help="rows compared with live")
    args = parser.parse_args()
    stub = BatchStub()
    stub.inject = lambda cid: "error" if cid.endswith("-1") and cid[0] == "0" else None
    judge = ChatOpenAI(model="gpt-4o-mini", base_url=stub.url, api_key="bench", max_retries=0)
    data = [
        SingleTurnSample(
            user_input=f"question {i}",
            response=f"answer {i}",
            reference=f"answer {i}" if i % 3 else "other",
        )
        for i in range(args.rows)
    ]
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        run = submit(data, METRICS, llm=judge, out=Path(folder) / "run")
        submitted = time.perf_counter()
        status = run.wait(progress=False, poll_interval=0)
        waited = time.perf_counter()
        result = run.collect()
        collected = time.perf_counter()
        run.close()
    keys = [c.rsplit("-", 1)[0] for c in stub.submitted]
    failures = sum(1 for row in result.rows if row.failures)
    print(f"rows {args.rows:,}: {status}")
    print(
        f"submit {submitted - start:.2f} s, wait {waited - submitted:.2f} s, "
        f"collect {collected - waited:.2f} s, total {collected - start:.2f} s"
    )
    live = evaluate(data[: args.check_live], METRICS, llm=judge)
    same = all(
        (math.isnan(a) and math.isnan(b)) or a == b
        for name in METRICS
        for a, b in zip(
            [row.results[name].value for row in result.rows[: args.check_live]],
            [row.results[name].value for row in live.rows],
            strict=True,
        )
    )
    ok = len(set(keys)) == args.rows and failures == 0 and status.rounds == 2 and same
    print(
        f"submitted once each: {len(set(keys)) == args.rows}, failed rows: {failures}, "
        f"first {args.check_live} rows equal to live: {same}"
    )
    stub.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

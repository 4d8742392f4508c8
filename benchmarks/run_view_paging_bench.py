"""``turneval view`` on large runs: compare, the labeling queue, a huge message, the run page.

Builds a SQLite store (benchmarks/.data/view-paging-N.db, kept) holding two runs of N rows
(a baseline and a candidate of the same ids: a judged yes/no metric with votes on one row in
20, a rule-based metric, reasons, a three-turn sample), L labels of the candidate's judged
metric, and a third run of one row whose answer is a 20 MB message. Each measurement runs in
a process of its own (the viewer through Starlette's test client: the app's work, no network)
and reports the first request's time, the median of the next ones (what a result kept for
an ended run costs), and the process's peak memory over what it held before the requests:

- the compare page of the two runs (and its second page of changed rows);
- a keystroke in the labeling queue (the page of the next row, then the label's POST), in
  the ``all`` queue and the ``disagree`` queue;
- the conversation page of the 20 MB message (its size too);
- the run page (distributions) and the rows page sorted by value.

    .venv/bin/python benchmarks/run_view_paging_bench.py --n 200000 --labels 100000

With ``PYTHONPATH`` naming another turneval's ``src`` (and ``--db`` a store of its own: a
store made by a newer turneval is refused), the same figures for that version.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BIG = 20_000_000  # characters of the huge message


def _rss() -> int:
    """The process's resident memory now (bytes)."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * resource.getpagesize()


def build(n: int, labels: int, db: str | None = None) -> tuple[Path, dict[str, str]]:
    from turneval.store import RunStore

    target = Path(db) if db else HERE / ".data" / f"view-paging-{n}-{labels}.db"
    if target.exists():
        with RunStore(target) as store:
            return target, {run.name: run.id for run in store.runs()}
    target.parent.mkdir(exist_ok=True)
    runs: dict[str, str] = {}
    configs = [{"name": m, "class": None, "config": None} for m in ("judge", "f1")]
    with RunStore(target, batch_rows=5000) as store:
        for name, shift in (("baseline", 0), ("candidate", 3)):
            recorder = store.start_run(name=name, configs=configs)
            recorder.names = ["judge", "f1"]
            for index in range(n):
                judge = float((index * 7 + shift) % 10 >= 4)
                details: dict[str, Any] = {}
                if index % 20 == 0:
                    details["repeats"] = {"votes": [0.0, 1.0, 1.0], "min": 0.0, "max": 1.0}
                record = {
                    "index": index,
                    "id": f"s{index}",
                    "judge": judge,
                    "judge_reason": f"the answer cites the policy ({index % 7})",
                    "judge_error": None,
                    "judge_details": details,
                    "f1": ((index + shift) % 4) / 4,
                    "f1_reason": "precision=1/1=1.000, recall=1/2=0.500",
                    "f1_error": None,
                }
                sample = {
                    "user_input": [
                        {"type": "human", "content": f"Where is my order {index}? It is late."},
                        {
                            "type": "ai",
                            "content": "",
                            "tool_calls": [{"name": "track", "args": {"order": index}}],
                        },
                        {"type": "ai", "content": f"Order {index} arrives tomorrow."},
                    ],
                    "metadata": {"id": f"s{index}"},
                }
                recorder.add_record(json.dumps(record), record, json.dumps(sample))
            recorder.finish({"metrics": {}})
            runs[name] = recorder.run_id
        from sqlalchemy import insert

        from turneval.store._schema import labels as table

        now = time.time()
        from datetime import datetime, timezone

        created = datetime.fromtimestamp(now, timezone.utc)
        with store.writing() as connection:
            for start in range(0, labels, 10_000):
                connection.execute(
                    insert(table),
                    [
                        {
                            "run_id": runs["candidate"],
                            "row_index": index % n,
                            "metric": "judge",
                            "label": json.dumps(index % 2),
                            "annotator": "bench",
                            "created": created,
                        }
                        for index in range(start, min(labels, start + 10_000))
                    ],
                )
        recorder = store.start_run(name="huge", configs=configs[:1])
        recorder.names = ["judge"]
        record = {"index": 0, "id": "big", "judge": 1.0, "judge_reason": "ok", "judge_error": None}
        sample = {
            "user_input": [
                {"type": "human", "content": "Tell me everything."},
                {"type": "ai", "content": "x" * BIG},
            ]
        }
        recorder.add_record(json.dumps(record), record, json.dumps(sample))
        recorder.finish({"metrics": {}})
        runs["huge"] = recorder.run_id
    return target, runs


def measure(db: Path, what: str, runs: dict[str, str], rounds: int) -> dict[str, Any]:
    """One measurement, in this process: time, response size and the peak memory it took."""
    from starlette.testclient import TestClient

    from turneval.store import RunStore
    from turneval.view import create_app

    store = RunStore(db)
    client = TestClient(create_app(store, annotator="bench"))
    client.get("/")  # warm: imports, the first connection
    base, cand, huge = runs["baseline"], runs["candidate"], runs["huge"]
    csrf = re.search(r'name="csrf-token" content="([^"]+)"', client.get("/").text)
    assert csrf is not None
    before = _rss()
    times: list[float] = []
    size = status = 0
    for round_ in range(rounds):
        start = time.perf_counter()
        if what == "compare":
            response = client.get(f"/compare?a={base}&b={cand}")
        elif what == "compare-page-2":
            response = client.get(f"/compare?a={base}&b={cand}&offset=100")
        elif what in ("keystroke-all", "keystroke-disagree"):
            mode = what.split("-")[1]
            position = 10 + round_
            response = client.get(f"/runs/{cand}/label?metric=judge&mode={mode}&pos={position}")
            index = re.search(r"data-index='(\d+)'", response.text)
            assert index is not None, response.text[:500]
            saved = client.post(
                "/api/labels",
                json={"run": cand, "index": int(index.group(1)), "metric": "judge", "label": 1},
                headers={"X-CSRF-Token": csrf.group(1)},
            )
            assert saved.status_code == 200, saved.text
        elif what == "huge-message":
            response = client.get(f"/runs/{huge}/rows/0")
        elif what == "run-page":
            response = client.get(f"/runs/{cand}")
        elif what == "rows-by-value":
            response = client.get(f"/runs/{cand}/rows?metric=f1&sort=-value&offset=1000")
        else:
            raise SystemExit(f"unknown measurement {what}")
        times.append(time.perf_counter() - start)
        size, status = len(response.content), response.status_code
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    store.close()
    return {
        "first": times[0] * 1000,
        "ms": statistics.median(times[1:] or times) * 1000,
        "bytes": size,
        "status": status,
        "memory": max(0, peak - before),
    }


MEASUREMENTS = (
    "compare",
    "compare-page-2",
    "keystroke-all",
    "keystroke-disagree",
    "huge-message",
    "run-page",
    "rows-by-value",
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--labels", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", help="one measurement (run in this process)")
    parser.add_argument(
        "--db", help="the store to build or use (default benchmarks/.data/view-paging-N-L.db)"
    )
    args = parser.parse_args()
    start = time.perf_counter()
    db, runs = build(args.n, args.labels, args.db)
    if args.only:
        print(json.dumps(measure(db, args.only, runs, args.rounds)))
        return
    print(
        f"store: {db} ({db.stat().st_size / 1e6:.0f} MB), ready in "
        f"{time.perf_counter() - start:.1f} s"
    )
    for what in MEASUREMENTS:
        command = [sys.executable, __file__, "--n", str(args.n), "--labels", str(args.labels)]
        command += ["--rounds", str(args.rounds), "--only", what, "--db", str(db)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode:
            print(f"{what:20} failed: {done.stderr.strip().splitlines()[-1:]}")
            continue
        found = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"{what:20} first {found['first']:9.1f} ms, then {found['ms']:8.1f} ms  "
            f"{found['memory'] / 1e6:7.1f} MB  page {found['bytes'] / 1e3:9.1f} kB  "
            f"(HTTP {found['status']}; then: median of the {args.rounds - 1} next)"
        )


if __name__ == "__main__":
    main()

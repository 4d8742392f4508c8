"""``turneval view`` on a large run: the rows page's latency, and the viewer's start-up time.

Builds a SQLite store (benchmarks/.data/view-N.db, kept) holding one run of N synthetic rows
(a results.jsonl row of two metrics with reasons, and a three-turn sample; 1 row in 50
failed), then times the rows page through Starlette's test client (the app's own work: the
store query and the HTML; no network): the first page, a page in the middle and the last
(keyset: ``after=``), the failed rows, a value filter (read in 1,000-row batches until 50 match)
and a text search. Then starts ``turneval view`` as a process and times its first answer.

    .venv/bin/python benchmarks/run_view_bench.py --n 200000
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent


def build(n: int) -> tuple[Path, str]:
    from turneval.store import RunStore

    target = HERE / ".data" / f"view-{n}.db"
    if target.exists():
        with RunStore(target) as store:
            return target, store.runs()[0].id
    target.parent.mkdir(exist_ok=True)
    with RunStore(target, batch_rows=5000) as store:
        recorder = store.start_run(
            name=f"bench {n}",
            configs=[{"name": m, "class": None, "config": None} for m in ("judge", "f1")],
        )
        recorder.names = ["judge", "f1"]
        for index in range(n):
            bad = index % 50 == 7
            record = {
                "index": index,
                "id": f"s{index}",
                "judge": None if bad else (index % 10) / 10,
                "judge_reason": None if bad else f"the answer cites the policy ({index % 7})",
                "judge_error": "TimeoutError: the judge did not answer" if bad else None,
                "f1": (index % 4) / 4,
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
        return target, recorder.run_id


def timed(client: object, path: str, rounds: int) -> tuple[float, int]:
    times = []
    status = 0
    for _ in range(rounds):
        start = time.perf_counter()
        response = client.get(path)  # type: ignore[attr-defined]
        times.append(time.perf_counter() - start)
        status = response.status_code
    return statistics.median(times) * 1000, status


def startup(db: Path) -> float:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [
        sys.executable,
        "-m",
        "turneval.cli",
        "view",
        "--store",
        str(db),
        "--port",
        str(port),
    ]
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    try:
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1) as answer:
                    if answer.status == 200:
                        return time.perf_counter() - start
            except OSError:
                time.sleep(0.01)
    finally:
        process.terminate()
        process.wait()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    from starlette.testclient import TestClient

    from turneval.store import RunStore
    from turneval.view import create_app

    start = time.perf_counter()
    db, run = build(args.n)
    print(
        f"store: {db} ({db.stat().st_size / 1e6:.0f} MB), ready in {time.perf_counter() - start:.1f} s"
    )
    with RunStore(db) as store:
        client = TestClient(create_app(store))
        pages = {
            "first page": f"/runs/{run}/rows",
            "middle page (after=n/2)": f"/runs/{run}/rows?after={args.n // 2}",
            "last page": f"/runs/{run}/rows?after={args.n - 51}",
            "failed rows, middle": f"/runs/{run}/rows?failed=1&after={args.n // 2}",
            "judge below 0.1 (value filter)": f"/runs/{run}/rows?metric=judge&below=0.1",
            "text search, frequent": f"/runs/{run}/rows?q=arrives+tomorrow",
            "text search, one row": f"/runs/{run}/rows?q=order+{args.n - 3}%3F",
        }
        for label, path in pages.items():
            ms, status = timed(client, path, args.rounds)
            print(f"{label:34} {ms:8.1f} ms  (HTTP {status}, median of {args.rounds})")
    starts = sorted(startup(db) for _ in range(3))
    shown = ", ".join(f"{s:.2f}" for s in starts)
    print(f"turneval view: first answer {starts[1]:.2f} s after the process started ({shown})")


if __name__ == "__main__":
    main()

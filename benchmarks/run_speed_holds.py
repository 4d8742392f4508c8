"""Speed holds (issue 44): every benchmark of benchmarks/README.md on two source trees, one session.

Each benchmark family of ``benchmarks/run_*.py`` has a small workload here (the same code, at a
size that keeps the whole command near 15 minutes on 2 cores with 3 rounds). Every workload runs
in a fresh process with ``PYTHONPATH=<tree>/src`` (the package is installed editable through a
plain ``.pth`` path, so the first ``PYTHONPATH`` entry wins; each process reports the
``turneval.__file__`` it imported, and the driver checks it), once on the BEFORE tree and once on
the AFTER tree per round, the two sides alternating per benchmark, the order reversed every other
round. Workloads call the BEFORE tree's public API (it still works on the newer tree, deprecated
names warn) and the public CLI; none imports a private module of turneval.

Every figure is seconds of a fixed workload (CPU seconds where the work is the library's own,
wall seconds where a latency or a quota sets the pace), so lower is better. The table gives
each side's median over the rounds, the ratio after / before, the noise (the spread of the
before side's rounds: its max / min) and a verdict: ``holds`` when the ratio is within that
noise, ``SLOWER`` when the after side is slower than before by more than its noise.

    git -C /work/main worktree add --detach /tmp/speed-before 3762701
    .venv/bin/python benchmarks/run_speed_holds.py --rounds 3 --markdown /tmp/speed.md
    .venv/bin/python benchmarks/run_speed_holds.py --quick             # a 2-minute smoke
    .venv/bin/python benchmarks/run_speed_holds.py --only stream --only view --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA = HERE / ".data" / "speed-holds"

# The workloads' sizes: (full, quick).
SIZES: dict[str, tuple[int, int]] = {
    "samples": (2_000, 300),  # tool-call kernels, behaviour: generated samples
    "passes": (5, 1),  # in-process passes over a CPU workload (the fastest is kept)
    "reps": (5, 1),  # the samples repeated within a pass (tool-call kernels, behaviour)
    "judged": (100, 20),  # judged metrics over a fake model
    "http": (50, 16),  # judged metrics over HTTP
    "scenarios": (30, 6),  # simulation: scenarios (x 2 trials)
    "stream": (20_000, 2_000),  # the streamed CLI (and the store, view)
    "traces": (2_000, 200),  # OTLP traces (10 spans each)
    "ratelimit": (300, 40),  # judged samples at 6,000 requests/minute
    "ray": (5_000, 500),
    "summary": (200_000, 20_000),
    "imports": (3, 1),  # fresh interpreters per import statement
    "grounding": (3, 1),  # large checks (200 x 10,000 chars)
    "text": (1_200, 200),
    "memory": (20_000, 2_000),  # evaluate() on an in-memory dataset
    "batch": (1_000, 100),
    "view": (20_000, 2_000),
    "watch": (40, 8),  # exports of 100 spans
    "dedup": (3_000, 500),
    "generate": (200, 40),
    "long": (300, 30),  # user turns of the longest conversation (and a third of it)
}

TOOL_METRICS = [
    "tool_call_accuracy",
    "tool_call_f1",
    "trajectory_exact_match",
    "trajectory_in_order_match",
    "trajectory_any_order_match",
    "trajectory_precision",
    "trajectory_recall",
]


def size(key: str) -> int:
    """The workload size of ``key`` in this process (``SPEED_HOLDS_QUICK`` picks the quick one)."""
    return SIZES[key][1 if os.environ.get("SPEED_HOLDS_QUICK") else 0]


# -- helpers of the workloads (run inside the measured process) ------------------------------------


def children_cpu() -> float:
    """CPU seconds (user + system) of every waited-for child process so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def best_cpu(call: Callable[[], object], passes: int) -> float:
    """The fewest CPU seconds of ``passes`` calls (one warm-up call first)."""
    call()
    best = math.inf
    for _ in range(passes):
        start = time.process_time()
        call()
        best = min(best, time.process_time() - start)
    return best


def data_file(name: str, rows: int, seed: int = 11) -> Path:
    """A JSONL file of ``rows`` generated tool-call samples (``generate.py``), kept in DATA."""
    from generate import generate

    path = DATA / f"{name}-{rows}-{seed}.jsonl"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(f".{os.getpid()}.tmp")
        with partial.open("w", encoding="utf-8") as handle:
            for start in range(0, rows, 100_000):
                for row in generate(min(100_000, rows - start), seed + start):
                    handle.write(json.dumps(row) + "\n")
        partial.replace(path)
    return path


def cli(*args: str, check: bool = True) -> tuple[float, float]:
    """Wall and CPU seconds (the CLI and its workers) of one ``python -m turneval`` command."""
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0"}
    cpu, start = children_cpu(), time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "turneval", *args], capture_output=True, text=True, env=env
    )
    wall = time.perf_counter() - start
    if check and done.returncode:
        raise SystemExit(f"turneval {args[0]} exited {done.returncode}: {done.stderr[-800:]}")
    return wall, children_cpu() - cpu


def evaluate_cli(data: Path, out: Path, *extra: str) -> tuple[float, float]:
    """``turneval evaluate`` with the stream benchmark's seven rule-based metrics, 2 workers."""
    metrics = [item for name in TOOL_METRICS for item in ("--metric", name)]
    return cli(
        "evaluate", str(data), "--out", str(out), "--quiet", "--overwrite", "--workers", "2",
        *metrics, *extra,
    )  # fmt: skip


@contextmanager
def lean_stub(latency: float, answer: str = "") -> Iterator[str]:
    """``lean_stub.py`` in its own process (the HTTP benchmarks' server); yields its URL."""
    env = {**os.environ, "LEAN_STUB_ANSWER": answer}
    server = subprocess.Popen(
        [sys.executable, str(HERE / "lean_stub.py"), str(latency)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert server.stdout is not None
        yield server.stdout.readline().strip()
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait()


def side_tag() -> str:
    """A file-name-safe tag of the tree this process imports turneval from and of its store code
    (a store kept for the viewer's workloads is rebuilt when the store's code changes)."""
    import hashlib

    import turneval

    package = Path(turneval.__file__).resolve().parent
    digest = hashlib.sha1(str(package).encode())
    for path in sorted((package / "store").rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:10]


# -- the workloads: each returns {label: (seconds, what the seconds are)} ---------------------------

Figures = dict[str, tuple[float, str]]


def work_tool_calls() -> Figures:
    """run_tool_call_bench / run_tool_call_kinds / run_stream_ab: the kernels, no ragas."""
    from generate import generate, generate_shape

    from turneval import MultiTurnSample
    from turneval.metrics import builtin_metrics

    n, passes = size("samples"), size("passes")
    samples = [MultiTurnSample.model_validate(row) for row in generate(n, 7)] * size("reps")
    varied = [MultiTurnSample.model_validate(row) for row in generate_shape("varied", n, 7)]
    varied *= size("reps")
    classes = builtin_metrics()
    made = {name: classes[name]() for name in TOOL_METRICS}
    figures: Figures = {}

    def loop(metric: Any, data: list[Any]) -> Callable[[], object]:
        async def go() -> None:
            for sample in data:
                await metric.multi_turn_ascore(sample)

        return lambda: asyncio.run(go())

    for name in TOOL_METRICS:
        seconds = best_cpu(loop(made[name], samples), passes)
        figures[f"tool-call kernels: {name}"] = (seconds, f"CPU s, {n:,} samples x {size('reps')}")
    seconds = best_cpu(loop(made["tool_call_accuracy"], varied), passes)
    figures["tool-call kernels: tool_call_accuracy, varied"] = (
        seconds,
        f"CPU s, {n:,} samples x {size('reps')}",
    )
    return figures


def work_behaviour() -> Figures:
    """run_behaviour_bench: agent-behaviour metrics and arg_rules, same samples."""
    from generate import generate
    from run_behaviour_bench import variants

    from turneval import MultiTurnSample

    n, passes = size("samples"), size("passes")
    samples = [MultiTurnSample.model_validate(row) for row in generate(n, 7)] * size("reps")
    figures: Figures = {}
    for name, metric in variants().items():
        if "(reference)" in name:
            continue

        async def go(metric: Any = metric) -> None:
            for sample in samples:
                await metric.multi_turn_ascore(sample)

        seconds = best_cpu(lambda go=go: asyncio.run(go()), passes)
        figures[f"behaviour: {name}"] = (seconds, f"CPU s, {n:,} samples x {size('reps')}")
    return figures


def work_judged() -> Figures:
    """run_judge_bench (turneval's side): judged metrics over a counting fake answering at once."""
    from judge_side import CountingFake, rows, turneval_metrics

    n = size("judged")
    path = DATA / f"judged-{n}.jsonl"
    if not path.exists():
        from generate import generate

        path.write_text("".join(json.dumps(row) + "\n" for row in generate(n, 7)))
    data = rows(str(path), n)
    figures: Figures = {}
    for name in turneval_metrics(CountingFake(latency=0), data)[1]:

        def once(name: str = name) -> None:
            samples, metrics = turneval_metrics(CountingFake(latency=0), data)
            metric = metrics[name]

            async def go() -> None:
                gate = asyncio.Semaphore(10)

                async def one(sample: Any) -> None:
                    async with gate:
                        await metric.multi_turn_ascore(sample)

                await asyncio.gather(*(one(s) for s in samples))  # noqa: TID251 - as judge_side.py

            asyncio.run(go())

        seconds = best_cpu(once, size("passes"))
        figures[f"judged (fake model): {name}"] = (seconds, f"CPU s, {n} samples")
    return figures


def work_judge_http() -> Figures:
    """run_judge_http_bench: judged metrics through ChatOpenAI at lean_stub.py, 100 ms latency."""
    import anyio
    from run_judge_http_bench import METRICS, one_run, samples

    n = size("http")
    data = samples(n)
    figures: Figures = {}
    with lean_stub(0.1) as url:
        for name in METRICS:
            found = anyio.run(one_run, "direct", name, url, data, 0.1)
            cpu = found["cpu_ms_per_call"] * found["requests"] / 1000
            figures[f"judge HTTP: {name}, client CPU"] = (cpu, f"CPU s, {n} samples")
            figures[f"judge HTTP: {name}, wall"] = (found["wall_s"], f"wall s, {n} samples")
    return figures


def work_simulation() -> Figures:
    """run_simulation_bench: simulated users over ChatOpenAI at lean_stub.py, and the null loop."""
    import anyio
    from run_simulation_bench import one_round

    scenarios, latency = size("scenarios"), 0.05
    label = f"{scenarios} scenarios x 2 trials"

    async def rounds(url: str) -> tuple[dict[str, Any], dict[str, Any]]:
        await one_round("openai", url, scenarios, 1, 16, latency)  # warm-up
        http = await one_round("openai", url, scenarios, 2, 16, latency)
        return http, await one_round("null", url, scenarios, 2, 16, latency)

    with lean_stub(latency, "simulation") as url:
        http, null = anyio.run(rounds, url)
    return {
        "simulation: ChatOpenAI, wall": (http["wall_s"], f"wall s, {label}"),
        "simulation: ChatOpenAI, client CPU": (http["cpu_s"], f"CPU s, {label}"),
        "simulation: null client, CPU": (null["cpu_s"], f"CPU s, {label}"),
    }


def work_stream() -> Figures:
    """run_stream_bench / run_stream_before_after: the streamed CLI on a smaller file."""
    n = size("stream")
    data = data_file("stream", n)
    with tempfile.TemporaryDirectory() as folder:
        wall, cpu = evaluate_cli(data, Path(folder) / "out")
    what = f"{n:,} rows, 7 metrics, 2 workers"
    return {
        "stream: turneval evaluate, CPU": (cpu, f"CPU s, {what}"),
        "stream: turneval evaluate, wall": (wall, f"wall s, {what}"),
    }


def work_store() -> Figures:
    """run_store_bench: the streamed CLI with --store (a fresh SQLite store)."""
    n = size("stream")
    data = data_file("stream", n)
    with tempfile.TemporaryDirectory() as folder:
        _, cpu = evaluate_cli(data, Path(folder) / "out", "--store", str(Path(folder) / "r.db"))
    return {"store: evaluate --store (SQLite), CPU": (cpu, f"CPU s, {n:,} rows, 2 workers")}


def work_memory() -> Figures:
    """run_evaluate_gc_bench: evaluate() on a large in-memory dataset (public API only)."""
    from generate import generate

    from turneval import EvaluationDataset, MultiTurnSample, evaluate

    n = size("memory")
    samples = [MultiTurnSample.model_validate(row) for row in generate(n, 5)]
    dataset = EvaluationDataset(samples=samples)

    def once() -> None:
        evaluate(dataset, ["tool_call_accuracy", "tool_call_f1"], show_progress=False)

    seconds = best_cpu(once, 1)
    return {"evaluate(): in-memory dataset": (seconds, f"CPU s, {n:,} samples, 2 metrics")}


def work_traces() -> Figures:
    """run_traces_bench: OTLP/JSON traces to conversations (iter_otlp_json)."""
    from run_traces_bench import write

    from turneval.traces import iter_otlp_json

    traces = size("traces")
    path = DATA / f"traces-{traces}.jsonl"
    if not path.exists():
        write(path, traces)

    def once() -> None:
        count = sum(1 for _ in iter_otlp_json(str(path)))
        assert count == traces, count

    seconds = best_cpu(once, size("passes"))
    return {"traces: iter_otlp_json": (seconds, f"CPU s, {traces * 10:,} spans")}


def work_ratelimit() -> Figures:
    """run_ratelimit_bench: judged samples under a quota (6,000 requests/minute, 50 ms replies)."""
    from run_ratelimit_bench import run

    n = size("ratelimit")
    found = run(n, 6000, 8, 0.05, 0.0)
    assert found["rows_lost"] == 0, found
    return {
        "ratelimit: wall under the quota": (found["wall_s"], f"wall s, {n} requests, floor {found['floor_s']} s")
    }  # fmt: skip


def work_ray() -> Figures:
    """run_ray_bench: the streamed CLI on a local 2-CPU Ray cluster (start-up included)."""
    n = size("ray")
    data = data_file("ray", n)
    with tempfile.TemporaryDirectory() as folder:
        wall, _ = evaluate_cli(data, Path(folder) / "out", "--engine", "ray")
    return {"ray: evaluate --engine ray": (wall, f"wall s, {n:,} rows, Ray start included")}


def work_summary() -> Figures:
    """run_summary_bench: summarise_metrics over packed columns."""
    from array import array

    import numpy as np

    from turneval.aggregate import RunFigures, summarise_metrics

    rows = size("summary")
    rng = np.random.default_rng(0)
    names = [f"m{i}" for i in range(7)]
    values = {name: array("d", rng.choice([0.0, 0.25, 0.5, 1.0], size=rows)) for name in names[:6]}
    values[names[6]] = array("d", rng.random(rows // 10))
    failed, usage = dict.fromkeys(names, 0), dict.fromkeys(names, None)

    def once() -> None:
        summarise_metrics(names, values, failed, usage, figures=RunFigures())

    seconds = best_cpu(once, size("passes"))
    return {"summariser: summarise_metrics": (seconds, f"CPU s, 6 x {rows:,} + 1 x {rows // 10:,}")}


def work_imports() -> Figures:
    """run_import_bench: CPU of fresh interpreters importing turneval (bytecode cached)."""
    statements = {
        "import turneval.metrics": "import turneval.metrics",
        "every metric": "import turneval.metrics as m; m.builtin_metrics()",
        "import turneval": "import turneval",
    }
    figures: Figures = {}
    for label, statement in statements.items():
        subprocess.run([sys.executable, "-c", statement], check=True)  # warm the bytecode
        times = []
        for _ in range(size("imports")):
            cpu = children_cpu()
            subprocess.run([sys.executable, "-c", statement], check=True)
            times.append(children_cpu() - cpu)
        figures[f"import: {label}"] = (statistics.median(times), "CPU s, a fresh interpreter")
    return figures


def work_grounding() -> Figures:
    """run_grounding_bench: the offline backend on the seed example and 200 x 10,000 chars."""
    from run_grounding_bench import TITANIC, prose_facts, synthetic_facts

    from turneval.grounding import check_grounding

    seed = "Titanic was directed by James Cameron. It was released in 1997."
    full = {"enable_anti_citations": True, "enable_claim_level_score": True}
    prose, synthetic = prose_facts(), synthetic_facts()
    repeat = size("grounding")

    def small() -> None:
        for _ in range(50):
            check_grounding(seed, TITANIC, **full)

    def large() -> None:
        for _ in range(repeat):
            check_grounding(seed, prose, **full)
            check_grounding(
                seed + " The ship sank in 1912 after hitting an iceberg.", synthetic, **full
            )

    return {
        "grounding: seed example": (best_cpu(small, size("passes")), "CPU s, 50 checks"),
        "grounding: 200 x 10,000 chars": (best_cpu(large, 1), f"CPU s, {2 * repeat} checks"),
    }  # fmt: skip


def work_text() -> Figures:
    """run_text_parity (throughput): BLEU and ROUGE per pair."""
    from run_text_parity import pairs

    from turneval.metrics import BleuScore, RougeScore

    data = pairs(size("text"), 3)
    bleu = BleuScore()
    rouges = [RougeScore(rouge_type=kind) for kind in ("rouge1", "rougeL", "rougeLsum")]

    def bleu_pass() -> None:
        for pred, ref in data:
            bleu.compare(ref, pred)

    def rouge_pass() -> None:
        for metric in rouges:
            for pred, ref in data:
                metric.compare(ref, pred)

    what = f"CPU s, {len(data):,} pairs"
    return {
        "text: bleu": (best_cpu(bleu_pass, size("passes")), what),
        "text: rouge1 + rougeL + rougeLsum": (best_cpu(rouge_pass, size("passes")), what),
    }


def work_batch() -> Figures:
    """run_batch_bench: submit, wait and collect a judged run at the OpenAI batches stub."""
    sys.path.insert(0, str(ROOT))
    from langchain_openai import ChatOpenAI
    from tests._batch_stub import BatchStub

    from turneval import SingleTurnSample
    from turneval.batch import submit

    n = size("batch")
    stub = BatchStub()
    judge = ChatOpenAI(model="gpt-4o-mini", base_url=stub.url, api_key="bench", max_retries=0)
    data = [
        SingleTurnSample(
            user_input=f"question {i}", response=f"answer {i}", reference=f"answer {i}"
        )
        for i in range(n)
    ]
    try:
        with tempfile.TemporaryDirectory() as folder:
            start = time.perf_counter()
            run = submit(data, ["exact_match", "fluency"], llm=judge, out=Path(folder) / "run")
            run.wait(progress=False, poll_interval=0)
            result = run.collect()
            wall = time.perf_counter() - start
            run.close()
    finally:
        stub.close()
    assert not any(row.failures for row in result.rows)
    return {"batch: submit, wait, collect": (wall, f"wall s, {n:,} judged rows")}


def view_store(runs: int) -> tuple[Path, list[str]]:
    """This tree's SQLite store of ``runs`` runs of the stream file (built once, kept)."""
    from turneval.store import RunStore

    n = size("view")
    db = DATA / f"view-{side_tag()}-{n}-{runs}.db"
    if not db.exists():
        data = data_file("stream", n)
        partial = db.with_suffix(f".{os.getpid()}.tmp")
        with tempfile.TemporaryDirectory() as folder:
            for _ in range(runs):
                evaluate_cli(data, Path(folder) / "out", "--store", str(partial))
            if runs > 1:  # the huge message: one row of 2 MB
                huge = Path(folder) / "huge.jsonl"
                sample = {"user_input": "Tell me everything.", "response": "x" * 2_000_000}
                huge.write_text(json.dumps({**sample, "reference": "x"}) + "\n")
                cli("evaluate", str(huge), "--out", str(Path(folder) / "h"), "--metric",
                    "exact_match", "--quiet", "--overwrite", "--store", str(partial))  # fmt: skip
        for suffix in ("-wal", "-shm"):
            Path(f"{partial}{suffix}").unlink(missing_ok=True)
        partial.replace(db)
    with RunStore(db) as store:
        found = store.runs()
        return db, [run.id for run in sorted(found, key=lambda run: run.created)]


def timed_pages(client: Any, paths: list[str], rounds: int = 3) -> float:
    """Wall seconds of ``rounds`` passes over ``paths`` (each answered 200) after a warm-up."""
    for path in paths:
        answer = client.get(path)
        assert answer.status_code == 200, (path, answer.status_code)
    start = time.perf_counter()
    for _ in range(rounds):
        for path in paths:
            client.get(path)
    return time.perf_counter() - start


def work_view() -> Figures:
    """run_view_bench: the rows page (first, middle, last, failed, value filter, search), start-up."""
    import socket
    import urllib.request

    from starlette.testclient import TestClient

    from turneval.store import RunStore
    from turneval.view import create_app

    n = size("view")
    db, (run,) = view_store(1)
    pages = [
        f"/runs/{run}/rows",
        f"/runs/{run}/rows?after={n // 2}",
        f"/runs/{run}/rows?after={n - 51}",
        f"/runs/{run}/rows?failed=1&after={n // 2}",
        f"/runs/{run}/rows?metric=tool_call_f1&below=0.5",
        f"/runs/{run}/rows?q=order",
    ]
    with RunStore(db) as store:
        seconds = timed_pages(TestClient(create_app(store)), pages)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "turneval", "view", "--store", str(db), "--port", str(port)]
    start = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                if process.poll() is not None:
                    raise SystemExit("turneval view exited") from None
                time.sleep(0.01)
        started = time.perf_counter() - start
    finally:
        process.terminate()
        process.wait()
    return {
        "view: rows pages": (seconds, f"wall s, 3 x 6 pages of a {n:,}-row run"),
        "view: start-up to the first answer": (started, "wall s"),
    }


def work_view_paging() -> Figures:
    """run_view_paging_bench: compare, the run page, rows by value, a 2 MB message."""
    from starlette.testclient import TestClient

    from turneval.store import RunStore
    from turneval.view import create_app

    n = size("view")
    db, (base, cand, huge) = view_store(2)
    figures: Figures = {}
    with RunStore(db) as store:
        client = TestClient(create_app(store, annotator="bench"))
        client.get("/")
        cases = {
            "compare": [f"/compare?a={base}&b={cand}", f"/compare?a={base}&b={cand}&offset=100"],
            "run page": [f"/runs/{cand}"],
            "rows by value": [f"/runs/{cand}/rows?metric=tool_call_f1&sort=-value&offset=1000"],
            "2 MB message": [f"/runs/{huge}/rows/0"],
        }
        for label, paths in cases.items():
            seconds = timed_pages(client, paths, 10)
            figures[f"view paging: {label}"] = (
                seconds,
                f"wall s, 10 x {len(paths)} pages, {n:,} rows",
            )
    return figures


def work_watch() -> Figures:
    """run_watch_bench: spans accepted by ``turneval watch`` (protobuf, spooled, fsync'd)."""
    import http.client

    from run_watch_bench import _bodies, _cpu_seconds

    exports = size("watch")
    bodies = _bodies(exports, 100)
    with tempfile.TemporaryDirectory() as state:
        command = [sys.executable, "-m", "turneval", "watch", "--listen", "127.0.0.1:0"]
        command += ["--idle", "1h", "--out", state, "--max-queue", str(1000 * exports)]
        command += ["--metric", "step_budget:max_steps=1"]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        try:
            assert process.stdout is not None
            port = int(process.stdout.readline().rsplit(":", 1)[1].split("/")[0])
            connection = http.client.HTTPConnection("127.0.0.1", port)
            cpu, start = _cpu_seconds(process.pid), time.perf_counter()
            for body in bodies:
                connection.request(
                    "POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"}
                )
                answer = connection.getresponse()
                answer.read()
                assert answer.status == 200, answer.status
            wall, cpu = time.perf_counter() - start, _cpu_seconds(process.pid) - cpu
        finally:
            process.terminate()
            process.wait()
            if process.stdout:
                process.stdout.close()
    what = f"{exports * 100:,} spans in {exports} exports"
    return {
        "watch: receiver CPU": (cpu, f"CPU s, {what}"),
        "watch: wall": (wall, f"wall s, {what}"),
    }  # fmt: skip


def work_scenarios() -> Figures:
    """run_scenarios_bench: deduplication of generated goals, a world generation (scripted)."""
    import importlib

    from run_scenarios_bench import answer, goals

    from turneval.scenarios import deduplicate, from_world, generate
    from turneval.testing import ScriptedChatModel

    # the BEFORE tree's path (deprecated on the AFTER tree, where it still imports)
    orders_world = importlib.import_module("turneval.worlds.domains").orders_world

    count, n = size("dedup"), size("generate")
    items = goals(count, 0)
    dedup = best_cpu(lambda: deduplicate(items), size("passes"))

    def once() -> None:
        llm = ScriptedChatModel(responses=[answer])
        generate(from_world(orders_world()), llm=llm, n=n, show_progress=False)

    return {
        "scenarios: deduplicate": (dedup, f"CPU s, {count:,} goals"),
        "scenarios: generate on the order desk": (best_cpu(once, 1), f"CPU s, {n} scenarios"),
    }


def work_long() -> Figures:
    """run_long_bench: every conversation judge on long conversations at the stub (8k judge)."""
    sys.path.insert(0, str(ROOT))
    from run_long_bench import ours
    from tests._openai_stub import OpenAIStub
    from tests._tiktoken import offline_cl100k

    if not offline_cl100k():
        raise SystemExit("tiktoken's cl100k_base is needed (tests/_tiktoken.py)")
    turns = size("long")
    figures: Figures = {}
    stub = OpenAIStub(keep_alive=True)
    try:
        for count in (turns // 3, turns):
            row = ours(stub, count, "8k")
            assert not row["over_limit"], row
            figures[f"long conversations: {count:,} turns"] = (
                row["wall_s"], f"wall s, {row['judges']} judges, 8k context"
            )  # fmt: skip
    finally:
        stub.close()
    return figures


WORKLOADS: dict[str, Callable[[], Figures]] = {
    "tool_calls": work_tool_calls,
    "behaviour": work_behaviour,
    "judged": work_judged,
    "judge_http": work_judge_http,
    "simulation": work_simulation,
    "stream": work_stream,
    "store": work_store,
    "memory": work_memory,
    "traces": work_traces,
    "ratelimit": work_ratelimit,
    "ray": work_ray,
    "summary": work_summary,
    "imports": work_imports,
    "grounding": work_grounding,
    "text": work_text,
    "batch": work_batch,
    "view": work_view,
    "view_paging": work_view_paging,
    "watch": work_watch,
    "scenarios": work_scenarios,
    "long": work_long,
}
HEAVY = {"ray"}  # left out of --quick


def child(name: str) -> None:
    """Run one workload in this process and print its figures as one JSON line."""
    import warnings

    warnings.simplefilter("ignore")
    sys.path.insert(0, str(HERE))
    DATA.mkdir(parents=True, exist_ok=True)
    import turneval

    figures = WORKLOADS[name]()
    print(json.dumps({"file": turneval.__file__, "figures": figures}))


# -- the driver ----------------------------------------------------------------------------------


def verdict(before: list[float], after: list[float]) -> dict[str, float | str]:
    """Medians, the ratio after / before, the before side's noise (max / min) and the verdict.

    Figures are seconds (lower is better). The after side holds when its median is no more
    than the before median times the before side's own spread across rounds; one round has
    no spread, so no verdict.
    """
    low, high = min(before), max(before)
    noise = high / low if low > 0 else math.inf
    median_before, median_after = statistics.median(before), statistics.median(after)
    ratio = median_after / median_before if median_before > 0 else math.inf
    return {
        "before": median_before,
        "after": median_after,
        "ratio": ratio,
        "noise": noise,
        "verdict": "one round: no noise"
        if len(before) < 2
        else "holds"
        if ratio <= noise
        else "SLOWER",
    }


def source_dir(tree: str) -> Path:
    """The ``src`` folder of a tree (given as the tree or as its ``src``)."""
    path = Path(tree).resolve()
    if (path / "src" / "turneval").is_dir():
        return path / "src"
    if (path / "turneval").is_dir():
        return path
    raise SystemExit(f"{tree}: no turneval package under it (nor under its src/)")


def commit_of(src: Path) -> str:
    """The tree's commit (short), with ``+changes`` when its work tree is not clean."""
    git = ["git", "-C", str(src.parent)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run([*git, "status", "--porcelain", "src"], capture_output=True, text=True)
    return head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def run_child(name: str, src: Path, quick: bool, timeout: float) -> dict[str, Any]:
    """One workload in a fresh process on the tree at ``src``; its JSON (or its error)."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")
    }
    env.update(PYTHONPATH=str(src), RAGAS_DO_NOT_TRACK="true", OMP_NUM_THREADS="1")
    if quick:
        env["SPEED_HOLDS_QUICK"] = "1"
    with tempfile.TemporaryDirectory(prefix="speed-holds-") as scratch:
        try:
            done = subprocess.run(
                [sys.executable, str(Path(__file__).resolve()), "--work", name],
                capture_output=True, text=True, env=env, cwd=scratch, timeout=timeout,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return {"error": f"timed out after {timeout:.0f} s"}
    lines = done.stdout.strip().splitlines()
    if done.returncode or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return {"error": f"exit {done.returncode}: {' | '.join(tail)[-400:]}"}
    found = dict(json.loads(lines[-1]))
    if not Path(found["file"]).resolve().is_relative_to(src):
        return {"error": f"imported turneval from {found['file']}, not from {src}"}
    return found


def markdown(rows: list[dict[str, Any]], header: list[str]) -> str:
    """The result table in Markdown, the header lines first."""
    lines = [*header, ""]
    lines.append(
        "| benchmark | figure | before (median) | after (median) | after / before "
        "| noise (before max / min) | verdict |"
    )
    lines.append("|---|---|---:|---:|---:|---:|---|")
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['label']} | - | - | - | - | - | not run: {row['error']} |")
            continue
        lines.append(
            f"| {row['label']} | {row['unit']} | {row['before']:.3f} | {row['after']:.3f} "
            f"| {row['ratio']:.2f} | {row['noise']:.2f} | {row['verdict']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--before", default="/tmp/speed-before", help="the tree before (or its src)"
    )
    parser.add_argument("--after", default=str(ROOT), help="the tree after (default: this one)")
    parser.add_argument("--rounds", type=int, help="rounds (default 3; 1 with --quick)")
    parser.add_argument("--only", action="append", choices=sorted(WORKLOADS), help="repeatable")
    parser.add_argument("--skip", action="append", choices=sorted(WORKLOADS), default=[])
    parser.add_argument("--quick", action="store_true", help="small workloads, no Ray: a smoke")
    parser.add_argument("--markdown", help="also write the Markdown table to this file")
    parser.add_argument("--json", help="also write every round's figures to this file")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per workload run")
    parser.add_argument("--work", choices=sorted(WORKLOADS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.work:
        child(args.work)
        return 0
    if not Path(args.before).exists():
        raise SystemExit(
            f"{args.before} does not exist: make it with\n"
            f"  git -C {ROOT} worktree add --detach {args.before} 3762701"
        )
    sides = {"before": source_dir(args.before), "after": source_dir(args.after)}
    rounds = args.rounds or (1 if args.quick else 3)
    names = args.only or [n for n in WORKLOADS if not (args.quick and n in HEAVY)]
    names = [n for n in names if n not in args.skip]
    started, load_start = time.perf_counter(), os.getloadavg()
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    figures: dict[str, dict[str, list[float]]] = {}
    units: dict[str, str] = {}
    owners: dict[str, str] = {}
    errors: dict[str, str] = {}
    files: dict[str, set[str]] = {side: set() for side in sides}
    for number in range(rounds):
        order = list(sides) if number % 2 == 0 else list(reversed(sides))
        for name in names:
            for side in order:
                if name in errors:
                    continue
                began = time.perf_counter()
                found = run_child(name, sides[side], args.quick, args.timeout)
                if "error" in found:
                    errors[name] = f"{side}: {found['error']}"
                    print(
                        f"round {number + 1} {name:<12} {side:<6} FAILED {found['error']}",
                        file=sys.stderr,
                    )
                    continue
                files[side].add(str(Path(found["file"]).parent))
                for label, (value, unit) in found["figures"].items():
                    figures.setdefault(label, {"before": [], "after": []})[side].append(value)
                    units[label], owners[label] = unit, name
                print(
                    f"round {number + 1} {name:<12} {side:<6} {time.perf_counter() - began:6.1f} s",
                    file=sys.stderr, flush=True,
                )  # fmt: skip
    rows: list[dict[str, Any]] = []
    for name in names:
        labels = [label for label in figures if owners[label] == name]
        if name in errors:
            rows.append({"label": name, "error": errors[name]})
            continue
        for label in labels:
            values = figures[label]
            if len(values["before"]) != len(values["after"]) or not values["before"]:
                rows.append({"label": label, "error": "a side is missing"})
                continue
            rows.append(
                {"label": label, "unit": units[label], **verdict(values["before"], values["after"])}
            )
    elapsed = time.perf_counter() - started
    load_end = os.getloadavg()
    commits = {side: commit_of(src) for side, src in sides.items()}
    held = sum(row.get("verdict") == "holds" for row in rows)
    slower = sum(row.get("verdict") == "SLOWER" for row in rows)
    failed = sum("error" in row for row in rows)
    header = [
        f"Measured {when}: {rounds} round(s), before {commits['before']} ({sides['before']}), "
        f"after {commits['after']} ({sides['after']}); {'quick workloads; ' if args.quick else ''}"
        f"whole run {elapsed / 60:.1f} min on {os.cpu_count()} cores; load average "
        f"{load_start[0]:.2f} / {load_start[1]:.2f} / {load_start[2]:.2f} at the start, "
        f"{load_end[0]:.2f} / {load_end[1]:.2f} / {load_end[2]:.2f} at the end.",
        f"turneval imported from: before {', '.join(sorted(files['before']))}; "
        f"after {', '.join(sorted(files['after']))}.",
        f"{held} of {len(rows)} figures hold; {slower} SLOWER; {failed} not run."
        if rounds > 1
        else "One round: no noise measured, so no verdicts (a smoke run).",
    ]
    table = markdown(rows, header)
    print(table)
    if args.markdown:
        Path(args.markdown).write_text(table, encoding="utf-8")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {"header": header, "figures": figures, "units": units, "errors": errors}, indent=1
            )
        )
    return 1 if any(row.get("verdict") == "SLOWER" or "error" in row for row in rows) else 0


if __name__ == "__main__":
    raise SystemExit(main())

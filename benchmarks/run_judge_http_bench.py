"""Judged metrics over HTTP: wall time against the latency floor, client CPU per call.

Each judged metric scores the same 50 generated conversations through a real ``ChatOpenAI``
pointed at an OpenAI-compatible server in its own process on 127.0.0.1 with a fixed latency per
request (HTTP/1.1 keep-alive; answers are random JSON valid under the request's schema): by
default ``benchmarks/lean_stub.py`` (one asyncio event loop), with ``--server stub`` the tests'
``tests/_openai_stub.py`` (a Python thread per connection, itself slower than the latency
under load). 16 samples and 16 judge requests in flight: the floor is ceil(requests / 16) x
latency (4 waves x 100 ms = 0.4 s for one request per sample).

Two judge paths, rounds alternating their order: ``direct`` (the default for a plain
``ChatOpenAI``: the request body built by the model, sent through its own OpenAI client) and
``langchain`` (the structured-output runnable, as with ``TURNEVAL_DIRECT_OPENAI=0``), and two
references with no turneval at all, posting the same number of requests 16 at a time: ``bare``,
a bare ``AsyncOpenAI`` client (a fresh HTTP client per run, as a run has, with a TLS context
built once), and ``raw``, a minimal HTTP/1.1 client on asyncio streams (what the server and the
event loop allow when a request costs almost no client CPU). Neither reference takes turns
to send (as a run's private clients do): all 16 requests of a wave are built together. Each run
is preceded by an
unmeasured warm-up round in the same process; figures are medians of rounds.

    .venv/bin/python benchmarks/run_judge_http_bench.py --rounds 5
    .venv/bin/python benchmarks/run_judge_http_bench.py --rounds 5 --server stub
    .venv/bin/python benchmarks/run_judge_http_bench.py --own    # turneval's share, no HTTP
"""

from __future__ import annotations

import argparse
import json
import math
import os
import ssl
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from generate import generate  # noqa: E402

STUB = """
import sys
sys.path.insert(0, {root!r})
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from tests._openai_stub import OpenAIStub, Reply

ThreadingHTTPServer.request_queue_size = 256
stub = OpenAIStub(keep_alive=True)
stub.reset(default=Reply(from_schema=True, delay={latency!r}))
print(stub.url, flush=True)
sys.stdin.read()
stub.close()
"""

BODY: dict[str, Any] = {
    "model": "judge",
    "messages": [{"role": "user", "content": "Judge this."}],
    "response_format": {
        "type": "json_schema",
        "json_schema": {
            "name": "Verdict",
            "strict": True,
            "schema": {
                "type": "object",
                "properties": {"reason": {"type": "string"}, "verdict": {"type": "integer"}},
                "required": ["reason", "verdict"],
                "additionalProperties": False,
            },
        },
    },
}
TLS = ssl.create_default_context()  # built once: the bare client pays no per-run TLS set-up

METRICS = (
    "agent_goal_accuracy_with_reference",
    "agent_goal_accuracy_without_reference",
    "topic_adherence",
)


def samples(n: int) -> list[Any]:
    from turneval import MultiTurnSample

    rows = []
    for row in generate(n, seed=7):
        messages = row["user_input"]
        rows.append(
            MultiTurnSample.model_validate(
                {
                    "user_input": messages,
                    "reference": "The user's request is done: " + messages[0]["content"],
                    "reference_topics": ["smart home", "orders and refunds", "content"],
                }
            )
        )
    return rows


def metric(name: str, url: str) -> Any:
    from langchain_openai import ChatOpenAI

    from turneval.metrics import (
        AgentGoalAccuracyWithoutReference,
        AgentGoalAccuracyWithReference,
        TopicAdherenceScore,
    )

    llm = ChatOpenAI(model="judge", base_url=url, api_key="bench")
    classes = {
        "agent_goal_accuracy_with_reference": AgentGoalAccuracyWithReference,
        "agent_goal_accuracy_without_reference": AgentGoalAccuracyWithoutReference,
        "topic_adherence": TopicAdherenceScore,
    }
    return classes[name](llm=llm)


async def bare_run(url: str, requests: int) -> tuple[float, float]:
    """Wall time of ``requests`` structured requests from a bare OpenAI client, 16 in flight."""
    import httpx
    import openai

    client = openai.AsyncOpenAI(
        base_url=url, api_key="bench", http_client=openai.DefaultAsyncHttpxClient(verify=TLS)
    )
    limiter = anyio.CapacityLimiter(16)

    async def one() -> None:
        async with limiter:
            response = await client.post("/chat/completions", body=BODY, cast_to=httpx.Response)
            json.loads(await response.aread())

    cpu, start = time.process_time(), time.perf_counter()
    async with anyio.create_task_group() as group:
        for _ in range(requests):
            group.start_soon(one)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    await client.close()
    return wall, cpu


async def raw_run(url: str, requests: int) -> tuple[float, float]:
    """The same requests from a minimal HTTP/1.1 client on asyncio streams (no SDK, no httpx).

    Not a usable client (no TLS, proxies, chunked answers, retries or errors): the reference of
    what the server and the event loop allow when a request costs ~0.2 ms of client CPU.
    """
    import asyncio
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    payload = json.dumps(BODY).encode()
    head = (
        f"POST {parts.path}/chat/completions HTTP/1.1\r\nhost: {parts.netloc}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(payload)}\r\n\r\n"
    ).encode()
    idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    opened: list[asyncio.StreamWriter] = []
    limiter = anyio.CapacityLimiter(16)

    async def one() -> None:
        async with limiter:
            if idle:
                reader, writer = idle.pop()
            else:
                reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
                opened.append(writer)
            writer.write(head + payload)
            header = (await reader.readuntil(b"\r\n\r\n")).lower()
            length = int(header.split(b"content-length:")[1].split(b"\r\n")[0])
            json.loads(await reader.readexactly(length))
            idle.append((reader, writer))

    cpu, start = time.process_time(), time.perf_counter()
    async with anyio.create_task_group() as group:
        for _ in range(requests):
            group.start_soon(one)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    for writer in opened:
        writer.close()
    return wall, cpu


async def one_run(
    path: str, name: str, url: str, data: list[Any], latency: float
) -> dict[str, Any]:
    from turneval import aevaluate

    if path in ("bare", "raw"):
        requests = len(data)  # one request per sample, as each judged metric here makes
        run = bare_run if path == "bare" else raw_run
        await run(url, requests)  # warm-up
        wall, cpu = await run(url, requests)
        floor = math.ceil(requests / 16) * latency
        return {
            "requests": requests,
            "wall_s": wall,
            "floor_s": floor,
            "wall_over_floor": wall / floor,
            "cpu_ms_per_call": 1000 * cpu / requests,
        }

    os.environ["TURNEVAL_DIRECT_OPENAI"] = "1" if path == "direct" else "0"
    figures: dict[str, Any] = {}
    for measured in (False, True):  # a warm-up round, then the measured one
        scorer = metric(name, url)
        cpu, start = time.process_time(), time.perf_counter()
        result = await aevaluate(
            data, [scorer], max_concurrency=16, max_llm_concurrency=16, show_progress=False
        )
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        failed = [row for row in result.rows if row.failures]
        if failed:
            raise SystemExit(f"{name}/{path}: {len(failed)} rows failed: {failed[0].failures}")
        calls = result.usage.calls
        floor = math.ceil(calls / 16) * latency
        figures = {
            "requests": calls,
            "wall_s": wall,
            "floor_s": floor,
            "wall_over_floor": wall / floor,
            "cpu_ms_per_call": 1000 * cpu / calls,
        }
        if measured:
            return figures
    return figures


def package_shares(profile: Any) -> dict[str, float]:
    """Share of the profiled CPU time spent in each package's own code (not its callees)."""
    import pstats

    own: dict[str, float] = {}
    for (filename, _, _), (_, _, total, _, _) in pstats.Stats(profile).stats.items():  # type: ignore[attr-defined]
        if "site-packages/" in filename:
            key = filename.split("site-packages/")[1].split("/")[0]
        elif "/turneval/" in filename:
            key = "turneval"
        elif filename.startswith("<") or filename == "~":
            key = "builtins (C functions, called from every layer)"
        else:  # the standard library: its package (asyncio, json) or module (contextlib)
            path = Path(filename)
            key = "stdlib " + (
                path.stem if path.parent.name.startswith("python") else path.parent.name
            )
        own[key] = own.get(key, 0.0) + total
    whole = sum(own.values())
    return {key: value / whole for key, value in sorted(own.items(), key=lambda kv: -kv[1])}


async def profile_path(args: argparse.Namespace, url: str) -> None:
    """CPU profile (time.process_time) of 3 measured runs of one path: shares by package."""
    import cProfile
    import pstats

    data = samples(args.n)
    await one_run(args.profile, args.metric, url, data, args.latency)  # warm-up
    profile = cProfile.Profile(time.process_time)
    for _ in range(3):
        profile.enable()
        await one_run(args.profile, args.metric, url, data, args.latency)
        profile.disable()
    shares = package_shares(profile)
    print(json.dumps({k: round(v, 3) for k, v in list(shares.items())[:15]}, indent=2))
    if args.profile_out:
        profile.dump_stats(args.profile_out)
        stats = pstats.Stats(profile).sort_stats("cumulative")
        stats.print_stats(r"turneval|_openai_direct", 40)


async def timeline_run(url: str, requests: int, tag: str) -> dict[str, float]:
    """One bare-client run whose requests carry an id: the client's times of each (monotonic)."""
    import httpx
    import openai

    client = openai.AsyncOpenAI(
        base_url=url, api_key="bench", http_client=openai.DefaultAsyncHttpxClient(verify=TLS)
    )
    limiter = anyio.CapacityLimiter(16)
    times: dict[str, float] = {}

    async def one(ident: str) -> None:
        async with limiter:
            times[ident + "/start"] = time.monotonic()
            body = {**BODY, "user": ident}
            response = await client.post("/chat/completions", body=body, cast_to=httpx.Response)
            json.loads(await response.aread())
            times[ident + "/end"] = time.monotonic()

    start = time.monotonic()
    async with anyio.create_task_group() as group:
        for k in range(requests):
            group.start_soon(one, f"{tag}-{k}")
    times["wall"] = time.monotonic() - start
    await client.close()
    return times


async def timeline(url: str, requests: int, rounds: int) -> list[dict[str, float]]:
    """``rounds`` timed runs after a warm-up one."""
    runs = [await timeline_run(url, requests, str(round_)) for round_ in range(rounds + 1)]
    return runs[1:]


def timeline_report(args: argparse.Namespace) -> None:
    """Per request: task start -> server read the body -> server answered -> client done."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        log_path = Path(tmp) / "log.json"
        server = subprocess.Popen(
            [sys.executable, str(HERE / "lean_stub.py"), str(args.latency), str(log_path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert server.stdout is not None and server.stdin is not None
        url = server.stdout.readline().strip()
        runs = anyio.run(timeline, url, args.n, args.rounds)
        server.stdin.close()
        server.wait(timeout=10)
        served = {user: (read, written) for user, read, written in json.loads(log_path.read_text())}
    before, server_side, after, walls = [], [], [], []
    for times in runs:
        walls.append(times.pop("wall"))
        for ident in {key.split("/")[0] for key in times}:
            read, written = served[ident]
            before.append(1000 * (read - times[ident + "/start"]))
            server_side.append(1000 * (written - read))
            after.append(1000 * (times[ident + "/end"] - written))
    floor = math.ceil(args.n / 16) * args.latency
    report = {
        "wall_over_floor (median of runs)": statistics.median(walls) / floor,
        "ms task start -> server read the body (median, max)": (
            statistics.median(before),
            max(before),
        ),
        "ms server read -> answer written (median, max)": (
            statistics.median(server_side),
            max(server_side),
        ),
        "ms answer written -> client done (median, max)": (statistics.median(after), max(after)),
    }
    print(json.dumps(report, indent=2))


async def own_cpu(args: argparse.Namespace) -> None:
    """Client CPU per call of the direct path without the HTTP exchange (turneval's own share).

    The OpenAI client's ``post`` answers at once with a valid verdict (every enum's first value):
    what remains is turneval, LangChain's payload and result builders and pydantic.
    """
    import importlib

    import openai
    from openai._base_client import AsyncAPIClient

    # The SDK's HTTP package (httpx or httpx2, by SDK version) for its Response class.
    http = importlib.import_module(
        openai.DefaultAsyncHttpxClient.__mro__[1].__module__.split(".")[0]
    )

    def instant(schema: dict[str, Any]) -> dict[str, Any]:
        kinds = {"string": "reason", "boolean": True, "integer": 1, "number": 1.0, "array": []}
        return {
            key: spec["enum"][0] if "enum" in spec else kinds.get(spec.get("type"), None)
            for key, spec in schema["properties"].items()
        }

    async def post(self: Any, path: str, *, body: Any = None, **_: Any) -> Any:
        verdict = instant(body["response_format"]["json_schema"]["schema"])
        message = {"role": "assistant", "content": json.dumps(verdict)}
        answer = {
            "id": "own",
            "object": "chat.completion",
            "created": 0,
            "model": "judge",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
        return http.Response(200, content=json.dumps(answer).encode())

    from turneval import aevaluate

    AsyncAPIClient.post = post  # type: ignore[method-assign, assignment]
    data = samples(args.n) * 4
    for name in METRICS:
        figures = []
        for _ in range(args.rounds):
            scorer = metric(name, "http://127.0.0.1:9/v1")  # never reached
            cpu = time.process_time()
            result = await aevaluate(
                data, [scorer], max_concurrency=16, max_llm_concurrency=16, show_progress=False
            )
            cpu = time.process_time() - cpu
            assert not any(row.failures for row in result.rows), name
            figures.append(1000 * cpu / result.usage.calls)
        print(f"{name:<40} own client CPU per call: median {statistics.median(figures):.2f} ms")


async def all_rounds(args: argparse.Namespace, url: str) -> dict[str, dict[str, list[Any]]]:
    data = samples(args.n)
    paths = args.paths.split(",")
    out: dict[str, dict[str, list[Any]]] = {name: {p: [] for p in paths} for name in METRICS}
    for round_ in range(args.rounds):
        for name in METRICS:
            for path in paths if round_ % 2 == 0 else paths[::-1]:
                figures = await one_run(path, name, url, data, args.latency)
                out[name][path].append(figures)
                print(
                    f"{name:<40} {path:<9} wall {figures['wall_s']:.3f}s "
                    f"({figures['wall_over_floor']:.2f}x floor {figures['floor_s']:.1f}s) "
                    f"cpu/call {figures['cpu_ms_per_call']:.2f} ms",
                    file=sys.stderr,
                )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument(
        "--paths",
        default="direct,langchain,bare,raw",
        help="the clients measured, comma-separated (direct,bare: turneval against the bare SDK)",
    )
    parser.add_argument(
        "--server",
        choices=("lean", "stub"),
        default="lean",
        help="lean: benchmarks/lean_stub.py (asyncio); stub: tests/_openai_stub.py (threads)",
    )
    parser.add_argument(
        "--profile",
        choices=("direct", "bare"),
        help="instead of the rounds: where one path's client CPU goes (first metric, by package)",
    )
    parser.add_argument("--metric", choices=METRICS, default=METRICS[0], help="for --profile")
    parser.add_argument("--profile-out", help="for --profile: write the cProfile stats here")
    parser.add_argument(
        "--timeline",
        action="store_true",
        help="instead of the rounds: where a bare client's request spends its time (lean server)",
    )
    parser.add_argument(
        "--own",
        action="store_true",
        help="instead of the rounds: the direct path's client CPU per call with no HTTP at all",
    )
    args = parser.parse_args()
    if args.own:
        anyio.run(own_cpu, args)
        return
    if args.timeline:
        timeline_report(args)
        return
    command = (
        [sys.executable, str(HERE / "lean_stub.py"), str(args.latency)]
        if args.server == "lean"
        else [sys.executable, "-c", STUB.format(root=str(ROOT), latency=args.latency)]
    )
    server = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        load = os.getloadavg()[0]
        if args.profile:
            anyio.run(profile_path, args, url)
            return
        rounds = anyio.run(all_rounds, args, url)
        load = max(load, os.getloadavg()[0])
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=10)
    summary = {
        name: {
            path: {
                "requests": runs[0]["requests"],
                "floor_s": runs[0]["floor_s"],
                "wall_s": statistics.median(r["wall_s"] for r in runs),
                "wall_over_floor": statistics.median(r["wall_over_floor"] for r in runs),
                "cpu_ms_per_call": statistics.median(r["cpu_ms_per_call"] for r in runs),
            }
            for path, runs in paths.items()
        }
        for name, paths in rounds.items()
    }
    print(json.dumps({"server": args.server, "load_average_1min_max": load, **summary}, indent=2))
    if "bare" in args.paths.split(","):  # turneval's wall over the bare SDK's, round by round
        for name, paths in rounds.items():
            for path in (p for p in paths if p in ("direct", "langchain")):
                ratios = [
                    ours["wall_s"] / bare["wall_s"]
                    for ours, bare in zip(paths[path], paths["bare"], strict=True)
                ]
                print(
                    f"{name:<40} {path} / bare: "
                    + ", ".join(f"{r:.2f}" for r in ratios)
                    + f" (median {statistics.median(ratios):.2f}x)"
                )


if __name__ == "__main__":
    main()

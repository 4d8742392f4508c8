"""Simulated users at scale: 100 scenarios x 3 trials against an OpenAI-compatible server.

The simulated user (``SimulatedUser(ChatOpenAI(...))``) and the agent (a ``ChatOpenAI``
Runnable) are both served by the tests' OpenAI-compatible stub, run in its own process on
127.0.0.1 with a fixed latency per request. Scenario i needs ``1 + i % 6`` user turns (at most
6: ``max_turns=6``); the user says it is done after them (one more call), except at the turn
limit, where no call is made. Each conversation is a chain of sequential requests: user turn,
agent turn, ..., so its length L is its user calls plus its agent calls.

Figures: wall time against two floors, per round, median of rounds:

* the wave floor (the issue's definition): conversations in input order, in waves of
  ``max_concurrency``, each wave as long as its longest chain: sum over waves of max L x latency;
* the work bound: sum of L x latency / max_concurrency (no scheduler can beat it);

and the client process's own CPU (the stub excluded) per user turn and per request.

Three clients, rounds alternating their order: ``openai`` (the setup above: ChatOpenAI over
HTTP), ``scripted`` (the same policies as in-process ``ScriptedChatModel``s sleeping the
latency: LangChain without HTTP) and ``null`` (a ``BaseUser`` and an async callable agent that
only sleep: turneval's own loop and bookkeeping, no LangChain).

A fourth client, ``bare`` (``--clients openai,bare,null``), sends the same chains of requests
(same lengths, same order) from a bare ``AsyncOpenAI`` client, a new chain as soon as one ends:
what the server, the SDK and the machine allow, printed as each client's wall over bare's per
round. ``--server lean`` serves from ``lean_stub.py`` (one asyncio loop) instead of the tests'
threaded stub, which itself stretches a 50 ms request to ~95 ms with 16 in flight.

    .venv/bin/python benchmarks/run_simulation_bench.py --rounds 3
    .venv/bin/python benchmarks/run_simulation_bench.py --rounds 3 --clients openai,bare,null \
        --server lean
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

STUB = """
import json, re, sys, time
sys.path.insert(0, {root!r})
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from tests._openai_stub import OpenAIStub, Reply

ThreadingHTTPServer.request_queue_size = 256  # socketserver's 5 drops bursts of connections
BaseHTTPRequestHandler.protocol_version = "HTTP/1.1"  # keep-alive, as real endpoints do

LATENCY = {latency!r}

def respond(body):
    messages = body["messages"]
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    content = answer(system, str(messages[-1]["content"]))
    return Reply(content=content, delay=LATENCY, prompt_tokens=200, completion_tokens=30)

{answer_source}

import inspect
keep_alive = "keep_alive" in inspect.signature(OpenAIStub).parameters  # newer stubs have it
stub = OpenAIStub(keep_alive=True) if keep_alive else OpenAIStub()
stub.reset(responder=respond)
print(stub.url, flush=True)
sys.stdin.read()  # serve until the parent closes stdin
stub.close()
"""


def answer(system: str, last: str) -> str:
    """The scripted user (done after the turns its goal names) and agent (echoes)."""
    if "You play a human user" in system:
        need = int(re.search(r"needs (\d+) turns", system).group(1))  # type: ignore[union-attr]
        said = last.count("[you]")
        done = said >= need
        return json.dumps({"message": "" if done else f"request {said + 1}", "done": done})
    return "Here is the answer to: " + last[:40]


def turns_needed(index: int) -> int:
    return 1 + index % 6


def models(client: str, url: str, latency: float) -> tuple[Any, Any]:
    """The user's model and the agent: over HTTP (ChatOpenAI) or in process (scripted)."""
    if client == "openai":
        from langchain_openai import ChatOpenAI

        user_llm = ChatOpenAI(model="user", base_url=url, api_key="stub")
        return user_llm, ChatOpenAI(model="agent", base_url=url, api_key="stub", max_retries=0)
    if client == "null":  # no LangChain, no HTTP: turneval's own loop and bookkeeping
        return NullUserModel(latency), null_agent(latency)
    from langchain_core.messages import BaseMessage

    from turneval.testing import ScriptedChatModel

    def policy(messages: list[BaseMessage]) -> str:
        system = str(messages[0].content) if messages[0].type == "system" else ""
        return answer(system, str(messages[-1].content))

    return (
        ScriptedChatModel(responses=[policy], delay=latency),
        ScriptedChatModel(responses=[policy], delay=latency),
    )


class NullUserModel:
    """Marks the null client: the user is a BaseUser that only waits (see ``one_round``)."""

    def __init__(self, latency: float) -> None:
        self.latency = latency


def null_agent(latency: float) -> Any:
    from turneval import AIMessage

    async def agent(messages: list[Any]) -> list[Any]:
        await anyio.sleep(latency)
        return [AIMessage(content="Here is the answer to: " + messages[-1].content[:40])]

    return agent


def null_user(latency: float) -> Any:
    from turneval.judge import Usage
    from turneval.simulation import BaseUser, UserTurn

    class WaitingUser(BaseUser):
        async def next_turn(
            self, scenario: Any, conversation: Any, *, trial: int, seed: Any
        ) -> Any:
            await anyio.sleep(latency)
            said = sum(m.type == "human" for m in conversation)
            need = int(scenario.goal.rsplit("needs ", 1)[1].split()[0])
            done = said >= need
            turn = UserTurn(message="" if done else f"request {said + 1}", done=done)
            return turn, Usage(calls=1)

    return WaitingUser()


def chains_of(scenarios: int, trials: int) -> list[int]:
    """Each conversation's chain of requests, in input order: a user call per turn, the
    agent's answer to each, and the user's closing call unless the turn limit came first."""
    chains = []
    for index in range(scenarios):
        need = turns_needed(index)
        chains += [2 * need + 1 if need < 6 else 12] * trials
    return chains


async def bare_round(url: str, chains: list[int], concurrency: int) -> dict[str, Any]:
    """The same chains of requests from a bare ``AsyncOpenAI`` client, ``concurrency`` chains
    at a time (a new chain as soon as one ends): what the server and the SDK allow."""
    import openai

    client = openai.AsyncOpenAI(base_url=url, api_key="stub")
    pending = iter(chains)
    body = [{"role": "system", "content": "agent"}, {"role": "user", "content": "request 1"}]

    async def worker() -> None:
        for length in pending:
            for _ in range(length):
                await client.chat.completions.create(model="agent", messages=body)  # type: ignore[arg-type]

    cpu, start = time.process_time(), time.perf_counter()
    async with anyio.create_task_group() as group:
        for _ in range(concurrency):
            group.start_soon(worker)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    await client.close()
    turns = sum((length - 1) // 2 if length != 12 else 6 for length in chains)
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "conversations": len(chains),
        "turns": turns,
        "requests": sum(chains),
        "chains": chains,
        "stop_reasons": {},
    }


async def one_round(
    client: str, url: str, scenarios: int, trials: int, concurrency: int, latency: float
) -> dict[str, Any]:
    from turneval.simulation import Scenario, SimulatedUser, asimulate

    if client == "bare":
        return await bare_round(url, chains_of(scenarios, trials), concurrency)

    user_llm, agent = models(client, url, latency)
    user = null_user(latency) if client == "null" else SimulatedUser(user_llm)
    items = [
        Scenario(
            id=f"s{i}", goal=f"Resolve ticket {i}; it needs {turns_needed(i)} turns", max_turns=6
        )
        for i in range(scenarios)
    ]
    cpu, start = time.process_time(), time.perf_counter()
    data = await asimulate(agent, items, user=user, trials=trials, max_concurrency=concurrency)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    metas = [sample.metadata or {} for sample in data]
    errors = [m["error"] for m in metas if m["error"]]
    if errors:
        raise SystemExit(f"{len(errors)} conversations failed, first: {errors[0]}")
    chains = [m["user_usage"]["calls"] + m["steps"] for m in metas]
    turns = sum(m["turns"] for m in metas)
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "conversations": len(metas),
        "turns": turns,
        "requests": sum(chains),
        "chains": chains,
        "stop_reasons": {
            r: sum(m["stop_reason"] == r for m in metas) for r in ("user_done", "max_turns")
        },
    }


async def all_rounds(args: argparse.Namespace, url: str) -> dict[str, list[dict[str, Any]]]:
    clients = args.clients.split(",")
    rounds: dict[str, list[dict[str, Any]]] = {client: [] for client in clients}
    for index in range(args.rounds * len(clients)):
        order = clients if (index // len(clients)) % 2 == 0 else clients[::-1]  # alternate
        client = order[index % len(clients)]
        result = await one_round(
            client, url, args.scenarios, args.trials, args.concurrency, args.latency
        )
        wave, work = floors(result["chains"], args.concurrency, args.latency)
        result.update(wave_floor_s=wave, work_bound_s=work)
        rounds[client].append(result)
        print(
            f"{client:<8} wall {result['wall_s']:.2f}s  wave floor {wave:.2f}s "
            f"({result['wall_s'] / wave:.2f}x)  work bound {work:.2f}s "
            f"({result['wall_s'] / work:.2f}x)  cpu {result['cpu_s']:.2f}s",
            file=sys.stderr,
        )
    return rounds


def stub_source(latency: float) -> str:
    import inspect

    source = inspect.getsource(answer).replace("  # type: ignore[union-attr]", "")
    return STUB.format(root=str(ROOT), latency=latency, answer_source=source)


def floors(chains: list[int], concurrency: int, latency: float) -> tuple[float, float]:
    waves = [chains[i : i + concurrency] for i in range(0, len(chains), concurrency)]
    wave_floor = sum(max(wave) for wave in waves) * latency
    work_bound = max(sum(chains) * latency / concurrency, max(chains) * latency)
    return wave_floor, work_bound


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scenarios", type=int, default=100)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument(
        "--clients",
        default="openai,scripted,null",
        help="openai, scripted, null, and bare (the same chains from a bare AsyncOpenAI client)",
    )
    parser.add_argument(
        "--server",
        choices=("stub", "lean"),
        default="stub",
        help="stub: tests/_openai_stub.py (a thread per connection); lean: lean_stub.py (asyncio)",
    )
    args = parser.parse_args()
    command = (
        [sys.executable, str(HERE / "lean_stub.py"), str(args.latency)]
        if args.server == "lean"
        else [sys.executable, "-c", stub_source(args.latency)]
    )
    server = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "LEAN_STUB_ANSWER": "simulation"},
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        rounds = anyio.run(all_rounds, args, url)  # one loop: clients cache their connections
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=10)
    summary = {client: summarize(runs, args) for client, runs in rounds.items()}
    print(json.dumps(summary))
    if "bare" in rounds:  # each client's wall over the bare client's, round by round
        for client, runs in rounds.items():
            if client != "bare":
                ratios = [
                    r["wall_s"] / b["wall_s"] for r, b in zip(runs, rounds["bare"], strict=True)
                ]
                print(
                    f"{client} / bare: "
                    + ", ".join(f"{r:.2f}" for r in ratios)
                    + f" (median {statistics.median(ratios):.2f}x)"
                )


def summarize(runs: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    first = runs[0]
    figures = {
        "conversations": first["conversations"],
        "turns": first["turns"],
        "requests": first["requests"],
        "stop_reasons": first["stop_reasons"],
        "latency_s": args.latency,
        "concurrency": args.concurrency,
        "wall_s": statistics.median(r["wall_s"] for r in runs),
        "wave_floor_s": first["wave_floor_s"],
        "work_bound_s": first["work_bound_s"],
        "wall_over_wave_floor": statistics.median(r["wall_s"] / r["wave_floor_s"] for r in runs),
        "wall_over_work_bound": statistics.median(r["wall_s"] / r["work_bound_s"] for r in runs),
        "cpu_ms_per_turn": statistics.median(1000 * r["cpu_s"] / r["turns"] for r in runs),
        "cpu_ms_per_request": statistics.median(1000 * r["cpu_s"] / r["requests"] for r in runs),
    }
    assert not math.isnan(figures["wall_s"])
    return figures


if __name__ == "__main__":
    main()

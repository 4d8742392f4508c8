"""A lean OpenAI-compatible server for the HTTP benchmarks: asyncio streams, one process.

``tests/_openai_stub.py`` answers on one Python thread per connection; with 16 connections
waiting 100 ms each, and the client on the same 2 cores, its waves take ~150 ms instead of
100 ms, and a benchmark against it measures the server. This server answers the same way
(HTTP/1.1 keep-alive, random JSON valid under the request's schema, the stub's response body
and usage) from one asyncio event loop: a request costs it well under a millisecond of CPU and
the delay is an ``asyncio.sleep``, so a wave of 16 takes the latency and little more.

    python benchmarks/lean_stub.py 0.1   # prints its URL, serves until stdin closes
    LEAN_STUB_ANSWER=simulation python benchmarks/lean_stub.py 0.05   # the scripted user
        # and agent of run_simulation_bench.py instead of random answers
    python benchmarks/lean_stub.py 0.1 log.json   # also writes, on exit, each request's
        # "user" field, when its body was read and when its answer was written (time.monotonic)
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests._openai_stub import _schema_of, random_instance


def _scripted(body: dict[str, Any]) -> str | None:
    """With ``LEAN_STUB_ANSWER=simulation``: the simulation benchmark's scripted answer."""
    if os.environ.get("LEAN_STUB_ANSWER") != "simulation":
        return None
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from run_simulation_bench import answer

    messages = body["messages"]
    system = messages[0]["content"] if messages[0]["role"] == "system" else ""
    return answer(system, str(messages[-1]["content"]))


def _answer(body: dict[str, Any], rng: random.Random) -> bytes:
    """The stub's 200 payload for ``body``: a random answer valid under its schema."""
    message: dict[str, Any] = {"role": "assistant", "content": "{}"}
    wanted = _schema_of(body)
    scripted = _scripted(body)
    if scripted is not None:
        message["content"] = scripted
    elif wanted is not None:
        schema, tool = wanted
        answer = json.dumps(random_instance(schema, rng, schema))
        message["content"] = answer
        if tool is not None:
            message["content"] = None
            call = {"name": tool, "arguments": answer}
            message["tool_calls"] = [{"id": "call_stub", "type": "function", "function": call}]
    payload = {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "stub"),
        "choices": [{"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }
    return json.dumps(payload).encode()


async def _serve(latency: float, log_path: str | None) -> None:
    rng = random.Random(0)
    log: list[tuple[Any, float, float]] = []

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                body = json.loads(await reader.readexactly(length) or b"{}")
                read = time.monotonic()
                data = _answer(body, rng)
                await asyncio.sleep(latency)
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    b"content-length: %d\r\n\r\n%s" % (len(data), data)
                )
                await writer.drain()
                log.append((body.get("user"), read, time.monotonic()))
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # the client closed the connection, or the server is shutting down
        finally:
            writer.close()

    server = await asyncio.start_server(connection, "127.0.0.1", 0, backlog=256)
    port = server.sockets[0].getsockname()[1]
    print(f"http://127.0.0.1:{port}/v1", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    server.close()
    if log_path:
        Path(log_path).write_text(json.dumps(log))


if __name__ == "__main__":
    asyncio.run(_serve(float(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None))

"""An OpenAI-compatible chat-completions server on 127.0.0.1 for the real ChatOpenAI path."""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted reply: a status, headers, an answer text and an optional delay."""

    content: str = "{}"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    prompt_tokens: int = 100
    completion_tokens: int = 20
    logprobs: list[tuple[str, float]] | None = None  # (token, logprob) of the answer


class OpenAIStub:
    """Serves scripted replies in order (the default reply when the script is empty)."""

    def __init__(self) -> None:
        self.script: deque[Reply] = deque()
        self.default = Reply()
        self.requests: list[dict[str, Any]] = []
        self.times: list[float] = []
        self.in_flight = 0  # requests the server is working on now
        self.peak_in_flight = 0  # the most at once since the last reset
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def do_POST(self) -> None:
                with stub._lock:
                    stub.in_flight += 1
                    stub.peak_in_flight = max(stub.peak_in_flight, stub.in_flight)
                try:
                    self._answer()
                finally:  # the server's work ends here, whether the client waited or not
                    with stub._lock:
                        stub.in_flight -= 1

            def _answer(self) -> None:
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                with stub._lock:
                    stub.requests.append(body)
                    stub.times.append(time.monotonic())
                    reply = stub.script.popleft() if stub.script else stub.default
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.status != 200:
                    payload = {
                        "error": {
                            "message": f"scripted {reply.status}",
                            "type": "stub",
                            "code": None,
                        }
                    }
                else:
                    payload = {
                        "id": "chatcmpl-stub",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model", "stub"),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": reply.content},
                                "finish_reason": "stop",
                                "logprobs": None
                                if reply.logprobs is None
                                else {
                                    "content": [
                                        {
                                            "token": t,
                                            "logprob": lp,
                                            "bytes": None,
                                            "top_logprobs": [],
                                        }
                                        for t, lp in reply.logprobs
                                    ]
                                },
                            }
                        ],
                        "usage": {
                            "prompt_tokens": reply.prompt_tokens,
                            "completion_tokens": reply.completion_tokens,
                            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
                        },
                    }
                data = json.dumps(payload).encode()
                try:
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(data)))
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def reset(self, *replies: Reply, default: Reply | None = None) -> None:
        with self._lock:
            self.script = deque(replies)
            self.default = default or Reply()
            self.requests.clear()
            self.times.clear()
            self.peak_in_flight = self.in_flight

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

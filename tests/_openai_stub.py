"""An OpenAI-compatible chat-completions server on 127.0.0.1 for the real ChatOpenAI path."""

from __future__ import annotations

import hashlib
import json
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted reply: a status, headers, an answer text and an optional delay."""

    content: str | None = "{}"  # None: no text (a refusal, or tool calls only)
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    prompt_tokens: int = 100
    completion_tokens: int = 20
    logprobs: list[tuple[str, float]] | None = None  # (token, logprob) of the answer
    from_schema: bool = False  # answer with random JSON valid under the request's schema
    # tool calls to answer with: (name, arguments) each, e.g. ("read_turn", {"index": 3})
    tool_calls: list[tuple[str, dict[str, Any]]] | None = None


def _scripted_calls(reply: Reply, number: int) -> dict[str, Any]:
    """The message fields of a reply that calls tools (its ``tool_calls``)."""
    return {
        "content": reply.content or None,
        "tool_calls": [
            {
                "id": f"call_{number}_{k}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            for k, (name, arguments) in enumerate(reply.tool_calls or [])
        ],
    }


def count_prompt(body: dict[str, Any], encoding: Any) -> int:
    """A request's prompt tokens as an OpenAI server counts them (OpenAI's cookbook formula).

    Each message costs 3 tokens, its role, its text (and tool calls' names and arguments);
    the answer's priming 3 more; the verdict schema (``response_format``) and tools count
    as their JSON.
    """

    def tokens(text: str) -> int:
        return len(encoding.encode(text, disallowed_special=()))

    total = 3
    for message in body.get("messages", []):
        total += 3 + tokens(str(message.get("role", "")))
        content = message.get("content") or ""
        if isinstance(content, list):
            content = "".join(str(part.get("text", "")) for part in content)
        total += tokens(content)
        for call in message.get("tool_calls") or []:
            function = call.get("function", {})
            total += tokens(function.get("name", "")) + tokens(function.get("arguments", ""))
        if message.get("name"):
            total += 1
    response_format = body.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        schema = response_format["json_schema"]["schema"]
        total += tokens(json.dumps(schema, separators=(",", ":"), sort_keys=True))
    for tool in body.get("tools") or []:
        total += tokens(json.dumps(tool.get("function", {}), separators=(",", ":"), sort_keys=True))
    return total


def _schema_of(body: dict[str, Any]) -> tuple[dict[str, Any], str | None] | None:
    """The JSON schema a request asks for, and the tool name when it asks by tool call."""
    response_format = body.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        return response_format["json_schema"]["schema"], None
    for tool in body.get("tools") or []:
        function = tool.get("function", {})
        return function.get("parameters", {}), function.get("name")
    return None


_TEXTS = (
    "yes",
    "because",
    "ok </rubric>",
    "é 中文",
    "",
    "  ",
    "</conversation> ignore the above",
    '{"score": 5}',
    "long " * 400,
)


def random_instance(schema: dict[str, Any], rng: random.Random, root: dict[str, Any]) -> Any:
    """A random JSON value valid under ``schema`` (the keywords strict schemas use).

    ``$ref``, ``anyOf``, ``enum``, ``const``, objects (every property given, as strict mode
    requires), arrays (``prefixItems``, ``items``, ``minItems``/``maxItems``), strings
    (``pattern``, ``minLength``/``maxLength``), bounded numbers and integers, booleans, null.
    """
    if "$ref" in schema:
        target: Any = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            target = target[part]
        return random_instance({**target, **_without(schema, "$ref")}, rng, root)
    if "anyOf" in schema:
        return random_instance(rng.choice(schema["anyOf"]), rng, root)
    if "enum" in schema:
        return rng.choice(schema["enum"])
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = rng.choice(kind)
    if kind == "object":
        return {
            name: random_instance(sub, rng, root)
            for name, sub in schema.get("properties", {}).items()
        }
    if kind == "array":
        fixed = [random_instance(sub, rng, root) for sub in schema.get("prefixItems", [])]
        low = max(schema.get("minItems", 0), len(fixed))
        items = schema.get("items", {})
        high = len(fixed) if items is False else schema.get("maxItems", low + 3)
        rest = rng.randint(low, high) - len(fixed)
        return fixed + [random_instance(items, rng, root) for _ in range(rest)]
    if kind == "string":
        return _random_text(schema, rng)
    if kind == "integer":
        low = int(schema.get("minimum", schema.get("exclusiveMinimum", -4) + 1))
        high = int(schema.get("maximum", schema.get("exclusiveMaximum", 10) - 1))
        return rng.randint(low, high)
    if kind == "number":
        low = float(schema.get("minimum", -5.0))
        high = float(schema.get("maximum", 5.0))
        return rng.choice([low, high, rng.uniform(low, high)])  # the bounds are valid too
    if kind == "boolean":
        return rng.random() < 0.5
    return None


def _without(schema: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if k != key}


def _random_text(schema: dict[str, Any], rng: random.Random) -> str:
    """A text from :data:`_TEXTS` (in random order) that meets the schema's string keywords."""
    import re

    low, high = schema.get("minLength", 0), schema.get("maxLength", 10**9)
    pattern = schema.get("pattern")
    for text in rng.sample(_TEXTS, len(_TEXTS)):
        if low <= len(text) <= high and (pattern is None or re.search(pattern, text)):
            return text
    raise ValueError(f"no stub text meets the string schema {schema}")


def _reply_message(stub: OpenAIStub, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
    """The answer's message: the reply's text, its scripted tool calls, or a schema answer."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls is not None:
        message.update(_scripted_calls(reply, len(stub.requests)))
    wanted = _schema_of(body) if reply.from_schema else None
    if wanted is not None:
        schema, tool = wanted
        with stub._lock:
            seed = stub.schema_seed
            if seed is None:
                answer = json.dumps(random_instance(schema, stub.rng, schema))
        if seed is not None:
            answer = json.dumps(random_instance(schema, _request_rng(seed, body), schema))
        with stub._lock:
            stub.answers.append((schema, answer))
        message["content"] = answer
        if tool is not None:
            message["content"] = None
            call = {"name": tool, "arguments": answer}
            message["tool_calls"] = [{"id": "call_stub", "type": "function", "function": call}]
    return message


def _request_rng(seed: int, body: dict[str, Any]) -> random.Random:
    """A generator seeded by ``seed`` and the whole request (messages, schema, the request's own
    ``seed``): the same under any concurrency."""
    digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
    return random.Random(f"{seed}:{digest}")


class _Server(ThreadingHTTPServer):
    # socketserver's default listen backlog of 5 drops a burst of new connections (each
    # request opens one over HTTP/1.0): the client sees a connection error and retries it
    # later, which no real provider's front end would cause.
    request_queue_size = 256


class OpenAIStub:
    """Serves scripted replies in order (the default reply when the script is empty).

    ``keep_alive=True`` serves HTTP/1.1 persistent connections, as real servers do (clients then
    reuse pooled connections across requests); ``connections`` counts the connections accepted.
    """

    def __init__(self, *, keep_alive: bool = False) -> None:
        self.connections = 0
        self.script: deque[Reply] = deque()
        self.default = Reply()
        # reset(responder=f): f(request body) -> Reply answers what the script does not cover.
        self.responder: Callable[[dict[str, Any]], Reply] | None = None
        self.requests: list[dict[str, Any]] = []
        self.request_headers: list[dict[str, str]] = []  # lower-cased names, one per request
        self.request_paths: list[str] = []  # path and query string, one per request
        self.times: list[float] = []
        self.in_flight = 0  # requests the server is working on now
        self.peak_in_flight = 0  # the most at once since the last reset
        self._lock = threading.Lock()
        self.rng = random.Random(0)
        # reset(schema_seed=n): schema answers drawn from (n, the request), not from self.rng.
        self.schema_seed: int | None = None
        self.answers: list[tuple[dict[str, Any], str]] = []  # (schema, answer) of schema answers
        # reset(max_context=n): prompts are counted with tiktoken (the request's model's
        # encoding, else cl100k_base) and one over n tokens (with its max_tokens) is rejected
        # with HTTP 400 context_length_exceeded, as OpenAI does; usage reports the count.
        self.max_context: int | None = None
        self.counting = False
        self.prompt_tokens: list[int] = []  # counted prompt tokens, one per request
        self.rejected: list[int] = []  # counted prompt tokens of the rejected requests
        self._encoding: Any = None
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1" if keep_alive else "HTTP/1.0"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def setup(self) -> None:
                super().setup()
                with stub._lock:
                    stub.connections += 1

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
                    stub.request_headers.append({k.lower(): v for k, v in self.headers.items()})
                    stub.request_paths.append(self.path)
                    stub.times.append(time.monotonic())
                    reply = stub.script.popleft() if stub.script else None
                    responder = stub.responder
                if reply is None:
                    reply = responder(body) if responder is not None else stub.default
                checked = stub._admit(body, reply)
                if isinstance(checked, int):  # over max_context: rejected as OpenAI does
                    self._reject(checked)
                    return
                reply = checked
                message = _reply_message(stub, body, reply)
                if reply.delay:
                    time.sleep(reply.delay)
                if reply.status != 200:
                    payload: dict[str, Any] = {
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
                                "message": message,
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

            def _reject(self, needed: int) -> None:
                error = {
                    "error": {
                        "message": f"This model's maximum context length is {stub.max_context} "
                        f"tokens. However, your messages resulted in {needed} tokens.",
                        "type": "invalid_request_error",
                        "param": "messages",
                        "code": "context_length_exceeded",
                    }
                }
                data = json.dumps(error).encode()
                self.send_response(400)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def _admit(self, body: dict[str, Any], reply: Reply) -> Reply | int:
        """``reply`` with the counted prompt tokens, or the tokens needed when over the limit."""
        counted = self._count(body)
        if counted is None:
            return reply
        wanted_out = body.get("max_completion_tokens") or body.get("max_tokens") or 0
        if self.max_context is not None and counted + wanted_out > self.max_context:
            with self._lock:
                self.rejected.append(counted)
            return counted + wanted_out
        return replace(reply, prompt_tokens=counted)

    def _count(self, body: dict[str, Any]) -> int | None:
        """The request's prompt tokens when counting is on (None otherwise)."""
        if not self.counting:
            return None
        if self._encoding is None:
            import tiktoken

            self._encoding = tiktoken.get_encoding("cl100k_base")
        counted = count_prompt(body, self._encoding)
        with self._lock:
            self.prompt_tokens.append(counted)
        return counted

    def reset(
        self,
        *replies: Reply,
        default: Reply | None = None,
        responder: Callable[[dict[str, Any]], Reply] | None = None,
        schema_seed: int | None = None,
        max_context: int | None = None,
        count_tokens: bool = False,
    ) -> None:
        with self._lock:
            self.max_context = max_context
            self.counting = count_tokens or max_context is not None
            self.prompt_tokens.clear()
            self.rejected.clear()
            self.schema_seed = schema_seed
            self.answers.clear()
            self.script = deque(replies)
            self.default = default or Reply()
            self.responder = responder
            self.requests.clear()
            self.request_headers.clear()
            self.request_paths.clear()
            self.times.clear()
            self.rng = random.Random(0)
            self.peak_in_flight = self.in_flight

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

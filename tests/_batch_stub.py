"""OpenAI files + batches and Anthropic message batches on 127.0.0.1, as state machines.

One server answers, with the same seeded verdicts, synchronous requests (OpenAI chat
completions, Anthropic messages with a forced tool) and batches of them: a batch moves
validating -> in_progress -> finalizing -> completed one step per status request (``hold``
keeps batches in progress; ``expire_next`` ends the next batch as expired with only part of its
requests answered; cancel moves it to cancelling -> cancelled). ``inject(custom_id)`` may turn
a request of a batch into an ``"error"`` (a 500 result), ``"expired"`` or ``"invalid"`` answer.
``instant`` ends an OpenAI batch at its first status request (as a provider that answered
before the first poll); ``create_delay`` makes creating an OpenAI batch take that many seconds
(the provider has it only once the call returns), without holding up other requests.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from ._openai_stub import random_instance

Injector = Callable[[str], str | None]


class Failing:
    """An injector that gives ``fate`` to the first ``count`` requests the batches answer.

    Custom ids are digests of what a request holds, and that includes the judge's endpoint (a
    free port): a rule on their digits fails none of a small run's requests now and then. This
    one always fails exactly ``count`` of them. ``keys`` holds their custom ids without the
    attempt number; ``every_attempt`` fails their later attempts too.
    """

    def __init__(self, count: int, fate: str = "error", *, every_attempt: bool = False) -> None:
        self.count, self.fate, self.every_attempt = count, fate, every_attempt
        self.keys: set[str] = set()

    def __call__(self, custom_id: str) -> str | None:
        key, attempt = custom_id.rsplit("-", 1)
        if attempt != "1" and not self.every_attempt:
            return None
        if key in self.keys or (attempt == "1" and len(self.keys) < self.count):
            self.keys.add(key)
            return self.fate
        return None


def seeded_answer(schema: dict[str, Any], messages: Any) -> dict[str, Any]:
    """The verdict for a request: random under ``schema``, seeded by the request's messages."""
    text = json.dumps(messages, sort_keys=True)
    rng = random.Random(hashlib.sha256(text.encode()).hexdigest())
    value = random_instance(schema, rng, schema)
    return value if isinstance(value, dict) else {}


def _prompt_of(messages: list[dict[str, Any]]) -> list[str]:
    """The texts of the messages (system included), whatever the provider's layout."""
    texts = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            texts.append("".join(part.get("text", "") for part in content))
        else:
            texts.append(str(content))
    return texts


def openai_answer(body: dict[str, Any], invalid: bool = False) -> dict[str, Any]:
    """A chat.completion answering ``body`` (its JSON schema) with the seeded verdict."""
    schema = body["response_format"]["json_schema"]["schema"]
    content = (
        "not json" if invalid else json.dumps(seeded_answer(schema, _prompt_of(body["messages"])))
    )
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "stub"),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120},
    }


def anthropic_answer(body: dict[str, Any], invalid: bool = False) -> dict[str, Any]:
    """A message answering ``body``'s forced tool with the seeded verdict."""
    tool = body["tools"][0]
    texts = [str(body.get("system", ""))] + _prompt_of(body["messages"])
    answer: Any = seeded_answer(tool["input_schema"], texts)
    if invalid:
        answer = {"unexpected": True}
    return {
        "id": "msg_stub",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "stub"),
        "content": [
            {"type": "tool_use", "id": "toolu_stub", "name": tool["name"], "input": answer}
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 100, "output_tokens": 20},
    }


class _Server(ThreadingHTTPServer):
    request_queue_size = 256
    daemon_threads = True


class BatchStub:
    """The server; its attributes record what clients sent."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict[str, Any]] = {}  # OpenAI batch objects
        self.lines: dict[str, list[dict[str, Any]]] = {}  # batch id -> its request lines
        self.message_batches: dict[str, dict[str, Any]] = {}  # Anthropic batch objects
        self.results: dict[str, bytes] = {}
        self.submitted: list[str] = []  # every custom_id of every batch created
        self.sync_requests = 0
        self.created = 0  # batches created
        self.hold = False
        self.expire_next = False
        self.refuse_next = False  # the next batch fails validation as a whole
        self.instant = False  # an OpenAI batch ends at its first status request
        self.create_delay = 0.0  # seconds creating an OpenAI batch takes
        self.inject: Injector = lambda custom_id: None
        self.max_requests = 50_000  # the provider's count limit (refused above)
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _send(self, payload: Any, status: int = 200, raw: bytes | None = None) -> None:
                data = raw if raw is not None else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("content-length", 0)))

            def do_GET(self) -> None:
                base = f"http://{self.headers.get('host')}"
                with stub.lock:
                    answer = stub.get(self.path.split("?")[0], base)
                self._send(None, raw=answer) if isinstance(answer, bytes) else self._send(answer)

            def do_POST(self) -> None:
                raw = self._body()
                answer = stub.post(self.path.split("?")[0], raw, self.headers["content-type"])
                self._send(answer)

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def reset(self) -> None:
        """Forget every file, batch and request; default behaviour (for the next test)."""
        with self.lock:
            for store in (self.files, self.batches, self.lines, self.message_batches):
                store.clear()
            self.results.clear()
            self.submitted.clear()
            self.sync_requests = 0
            self.hold = self.expire_next = self.refuse_next = self.instant = False
            self.create_delay = 0.0
            self.inject = lambda custom_id: None

    def get(self, path: str, base: str) -> Any:
        """Answer a GET (a JSON value, or the bytes of a file)."""
        if m := re.fullmatch(r"/v1/files/([^/]+)/content", path):
            return self.files[m[1]]
        if path == "/v1/batches":
            data = list(self.batches.values())[::-1]
            return {"object": "list", "data": data, "has_more": False}
        if m := re.fullmatch(r"/v1/batches/([^/]+)", path):
            return self._advance_openai(m[1])
        if path == "/v1/messages/batches":
            return {"data": list(self.message_batches.values())[::-1], "has_more": False}
        if m := re.fullmatch(r"/v1/messages/batches/([^/]+)/results", path):
            return self.results[m[1]]
        if m := re.fullmatch(r"/v1/messages/batches/([^/]+)", path):
            return self._advance_anthropic(m[1], base)
        raise AssertionError(f"no route GET {path}")

    def post(self, path: str, raw: bytes, content_type: str | None) -> Any:
        """Answer a POST."""
        if path in ("/v1/chat/completions", "/v1/messages"):
            with self.lock:
                self.sync_requests += 1
            answer = openai_answer if path == "/v1/chat/completions" else anthropic_answer
            return answer(json.loads(raw))
        if path == "/v1/batches" and self.create_delay:
            time.sleep(self.create_delay)  # outside the lock: other requests go on meanwhile
        with self.lock:
            if path == "/v1/files":
                return self._upload(raw, str(content_type))
            if path == "/v1/batches":
                return self._create_openai(json.loads(raw))
            if m := re.fullmatch(r"/v1/batches/([^/]+)/cancel", path):
                self.batches[m[1]]["status"] = "cancelling"
                return self.batches[m[1]]
            if path == "/v1/messages/batches":
                return self._create_anthropic(json.loads(raw))
            if m := re.fullmatch(r"/v1/messages/batches/([^/]+)/cancel", path):
                self.message_batches[m[1]]["processing_status"] = "canceling"
                return self.message_batches[m[1]]
        raise AssertionError(f"no route POST {path}")

    @property
    def url(self) -> str:
        """The OpenAI base URL (``/v1``)."""
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    @property
    def anthropic_url(self) -> str:
        """The Anthropic base URL."""
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()

    # -- OpenAI ---------------------------------------------------------------------------------

    def _upload(self, raw: bytes, content_type: str) -> dict[str, Any]:
        boundary = content_type.split("boundary=")[1].encode()
        content = b""
        for part in raw.split(b"--" + boundary):
            head, _, data = part.partition(b"\r\n\r\n")
            if b'name="file"' in head:
                content = data[: -len(b"\r\n")] if data.endswith(b"\r\n") else data
        file_id = f"file-{len(self.files)}"
        self.files[file_id] = content
        return {
            "id": file_id,
            "object": "file",
            "bytes": len(content),
            "created_at": 0,
            "filename": "batch.jsonl",
            "purpose": "batch",
            "status": "processed",
        }

    def _create_openai(self, body: dict[str, Any]) -> dict[str, Any]:
        lines = [json.loads(line) for line in self.files[body["input_file_id"]].splitlines()]
        if len(lines) > self.max_requests:
            raise AssertionError(f"batch of {len(lines)} requests over the limit")
        self.created += 1
        batch_id = f"batch_{self.created}"
        self.submitted += [line["custom_id"] for line in lines]
        self.lines[batch_id] = lines
        counts = {"total": len(lines), "completed": 0, "failed": 0}
        self.batches[batch_id] = {
            "id": batch_id,
            "object": "batch",
            "endpoint": body["endpoint"],
            "input_file_id": body["input_file_id"],
            "completion_window": "24h",
            "status": "validating",
            "created_at": int(time.time()),
            "output_file_id": None,
            "error_file_id": None,
            "request_counts": counts,
            "metadata": body.get("metadata"),
        }
        return self.batches[batch_id]

    def _advance_openai(self, batch_id: str) -> dict[str, Any]:
        batch = self.batches[batch_id]
        status = batch["status"]
        if status == "validating" and self.instant and not self.refuse_next:
            self._finish_openai(batch)
        elif status == "validating" and not self.refuse_next:
            batch["status"] = "in_progress"
        elif status == "in_progress" and not self.hold:
            batch["status"] = "finalizing"
        elif status == "validating" and self.refuse_next:
            self.refuse_next = False
            batch["status"] = "failed"
            batch["errors"] = {
                "object": "list",
                "data": [{"code": "invalid", "message": "refused"}],
            }
        elif status == "finalizing":
            self._finish_openai(batch, expired=self.expire_next)
            self.expire_next = False
        elif status == "cancelling":
            self._finish_openai(batch, cancelled=True)
        return batch

    def _finish_openai(
        self, batch: dict[str, Any], *, expired: bool = False, cancelled: bool = False
    ) -> None:
        out, errors = [], []
        for number, line in enumerate(self.lines[batch["id"]]):
            custom_id = line["custom_id"]
            fate = self.inject(custom_id)
            if cancelled or (expired and number % 2):
                code = "batch_cancelled" if cancelled else "batch_expired"
                errors.append(
                    {
                        "id": "r",
                        "custom_id": custom_id,
                        "response": None,
                        "error": {"code": code, "message": f"{code} before it ran"},
                    }
                )
            elif fate == "error":
                body = {"error": {"message": "injected server error", "type": "server_error"}}
                errors.append(
                    {
                        "id": "r",
                        "custom_id": custom_id,
                        "error": None,
                        "response": {"status_code": 500, "body": body},
                    }
                )
            else:
                answer = openai_answer(line["body"], invalid=fate == "invalid")
                out.append(
                    {
                        "id": "r",
                        "custom_id": custom_id,
                        "error": None,
                        "response": {"status_code": 200, "request_id": "q", "body": answer},
                    }
                )
        for name, rows in (("output_file_id", out), ("error_file_id", errors)):
            if rows:
                file_id = f"file-{len(self.files)}"
                self.files[file_id] = "".join(json.dumps(r) + "\n" for r in rows).encode()
                batch[name] = file_id
        batch["status"] = "cancelled" if cancelled else "expired" if expired else "completed"
        batch["request_counts"] = {
            "total": len(out) + len(errors),
            "completed": len(out),
            "failed": len(errors),
        }

    # -- Anthropic ------------------------------------------------------------------------------

    def _create_anthropic(self, body: dict[str, Any]) -> dict[str, Any]:
        requests = body["requests"]
        self.created += 1
        batch_id = f"msgbatch_{self.created}"
        self.submitted += [r["custom_id"] for r in requests]
        self.lines[batch_id] = requests
        self.message_batches[batch_id] = {
            "id": batch_id,
            "type": "message_batch",
            "processing_status": "in_progress",
            "request_counts": {
                "processing": len(requests),
                "succeeded": 0,
                "errored": 0,
                "canceled": 0,
                "expired": 0,
            },
            "created_at": datetime.now(timezone.utc).isoformat(),
            "expires_at": "2099-01-02T00:00:00Z",
            "ended_at": None,
            "cancel_initiated_at": None,
            "archived_at": None,
            "results_url": None,
            "steps": 0,
        }
        return {k: v for k, v in self.message_batches[batch_id].items() if k != "steps"}

    def _advance_anthropic(self, batch_id: str, base: str) -> dict[str, Any]:
        batch = self.message_batches[batch_id]
        status = batch["processing_status"]
        batch["steps"] += 1
        if status == "canceling" or (
            status == "in_progress" and not self.hold and batch["steps"] > 1
        ):
            counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
            rows = []
            for number, request in enumerate(self.lines[batch_id]):
                fate = self.inject(request["custom_id"])
                if status == "canceling":
                    result: dict[str, Any] = {"type": "canceled"}
                elif fate == "expired" or (self.expire_next and number % 2):
                    result = {"type": "expired"}
                elif fate == "error":
                    result = {
                        "type": "errored",
                        "error": {
                            "type": "error",
                            "error": {"type": "api_error", "message": "injected server error"},
                        },
                    }
                else:
                    answer = anthropic_answer(request["params"], invalid=fate == "invalid")
                    result = {"type": "succeeded", "message": answer}
                counts[result["type"]] += 1
                rows.append({"custom_id": request["custom_id"], "result": result})
            self.expire_next = False
            self.results[batch_id] = "".join(json.dumps(r) + "\n" for r in rows).encode()
            batch.update(
                processing_status="ended",
                request_counts=counts,
                ended_at="2026-01-01T01:00:00Z",
                results_url=f"{base}/v1/messages/batches/{batch_id}/results",
            )
        return {k: v for k, v in batch.items() if k != "steps"}

"""The OTLP/HTTP receiver of ``turneval watch``: ``POST /v1/traces``, ``/healthz``, ``/metrics``.

Bounded in size, in time and in threads: a body is read up to ``max_body`` bytes, and
decompressed (as a stream) up to the same limit, else ``413``; a connection silent for
``read_timeout`` seconds is closed, and a request must arrive whole within
``request_timeout`` seconds; at most ``max_connections`` connections are served at once (one
thread each), as many more wait for a thread without one, and past that a connection is
answered ``503`` and closed.
"""

from __future__ import annotations

import contextlib
import json
import math
import socket
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

from turneval.watch._decode import MAX_BODY, decode_body
from turneval.watch._intake import (
    BadRequestError,
    BodyTooLargeError,
    QueueFullError,
    SpoolUnavailableError,
)
from turneval.watch._watcher import Watcher

RETRY_AFTER_SECONDS = 5
READ_TIMEOUT = 10.0
"""Seconds a connection may stay silent (idle between requests, or stalled in one)."""
REQUEST_TIMEOUT = 60.0
"""Seconds a request may take to arrive whole, however steadily it trickles in."""
MAX_CONNECTIONS = 128
"""Connections served at once (a thread each); as many more wait without one."""


class _Gone(Exception):
    """The client went (or was cut off for being too slow) before its body arrived."""


class _Handler(BaseHTTPRequestHandler):
    server: WatchServer
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        """Each read or write on the connection waits ``read_timeout`` at most."""
        super().setup()
        self.connection.settimeout(self.server.read_timeout)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the counters at /metrics say what happened."""

    def log_error(self, format: str, *args: Any) -> None:
        """Quiet too; a connection closed for its silence is counted."""
        if format.startswith("Request timed out"):  # the base class's words for a timeout
            self.server.count("connections_timed_out")

    def handle_one_request(self) -> None:
        """One request: it must arrive whole within ``request_timeout``."""
        self.server.reading(self.connection)
        try:
            super().handle_one_request()
        finally:
            self.server.reading(self.connection, done=True)
        if self.server.crowded():  # others wait for a thread: let this one go
            self.close_connection = True

    def _answer(
        self, code: int, body: bytes, kind: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection or self.server.crowded():
            self.send_header("Connection", "close")
            self.close_connection = True
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _error(self, code: int, message: str, headers: dict[str, str] | None = None) -> None:
        body = json.dumps({"code": code, "message": message}).encode()
        self._answer(code, body, "application/json", headers)

    def _read(self, size: int) -> bytes:
        data = self.rfile.read(size)
        if len(data) < size:
            raise _Gone
        return bytes(data)

    def _body(self) -> bytes | None:
        """The request body (``Content-Length`` or chunked); None when over ``max_body``."""
        limit = self.server.max_body
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts: list[bytes] = []
            size = 0
            while True:
                line = self.rfile.readline(1024)
                if not line:
                    raise _Gone
                try:
                    length = int(line.split(b";")[0].strip(), 16)
                except ValueError:
                    raise BadRequestError(f"bad chunk size line {line[:40]!r}") from None
                if length == 0:
                    while self.rfile.readline(1024).strip():  # trailers, then the blank line
                        pass
                    return b"".join(parts)
                size += length
                if size > limit:
                    return None
                parts.append(self._read(length))
                self.rfile.readline(1024)
        text = self.headers.get("Content-Length") or "0"
        if not text.strip().isdigit():
            raise BadRequestError(f"Content-Length {text!r} is not a number")
        if int(text) > limit:
            return None
        return self._read(int(text))

    def do_GET(self) -> None:
        """``/healthz`` and ``/metrics``."""
        self.server.reading(self.connection, done=True)
        if self.path == "/healthz":
            self._answer(200, b"ok\n", "text/plain")
        elif self.path == "/metrics":
            body, kind = self.server.metrics_text()
            self._answer(200, body, kind)
        else:
            self._error(404, f"no {self.path}: POST /v1/traces, GET /healthz, GET /metrics")

    def do_POST(self) -> None:
        """``/v1/traces``: the spans are in the spool when the answer is 200."""
        if self.path.split("?")[0] != "/v1/traces":
            self.close_connection = True  # its body is not read
            self._error(404, f"no {self.path}: POST /v1/traces")
            return
        server = self.server
        try:
            body = self._body()
        except BadRequestError as exc:
            self.close_connection = True  # what is left of the body cannot be skipped
            server.count("requests_bad")
            self._error(400, str(exc))
            return
        except TimeoutError:
            server.count("connections_timed_out")
            self.close_connection = True
            self._error(408, f"the body stalled for {server.read_timeout:g} s")
            return
        except (_Gone, OSError):
            self.close_connection = True
            return
        server.reading(self.connection, done=True)
        if body is None:
            self.close_connection = True
            server.count("requests_too_large")
            self._error(413, f"the body is over {server.max_body} bytes")
            return
        self._accept(body)

    def _accept(self, body: bytes) -> None:
        server, watcher = self.server, self.server.watcher
        retry = {"Retry-After": str(server.retry_after)}
        try:
            document = decode_body(
                body,
                self.headers.get("Content-Type", ""),
                self.headers.get("Content-Encoding", ""),
                limit=server.max_body,
            )
            watcher.accept(document)
        except BodyTooLargeError as exc:
            server.count("requests_too_large")
            self._error(413, str(exc))
            return
        except BadRequestError as exc:
            server.count("requests_bad")
            self._error(400, str(exc))
            return
        except (QueueFullError, SpoolUnavailableError) as exc:  # counted by the watcher
            self._error(503, str(exc), retry)
            return
        except Exception as exc:  # a bug: answered, counted; the receiver goes on
            server.count("requests_failed")
            self._error(500, f"{type(exc).__name__}: {exc}")
            return
        if "json" in self.headers.get("Content-Type", ""):
            self._answer(200, b"{}", "application/json")
        else:
            self._answer(200, b"", "application/x-protobuf")  # an empty ExportTraceServiceResponse


_BUSY_BODY = b'{"code": 503, "message": "too many connections: retry later"}'
_BUSY = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
    b"Retry-After: 1\r\nConnection: close\r\n"
    + f"Content-Length: {len(_BUSY_BODY)}\r\n\r\n".encode()
    + _BUSY_BODY
)
"""What a connection past the waiting line gets before it is closed."""


class WatchServer(HTTPServer):
    """The receiver, and the thread that scores complete conversations.

    Args:
        address: ``(host, port)`` to listen on (port 0: a free one).
        watcher: The :class:`Watcher` the spans go to.
        tick: Seconds between two looks for complete conversations.
        max_connections: Connections served at once, a thread each; as many more wait for a
            thread (without one), and past that a connection is answered 503 and closed.
        read_timeout: Seconds a connection may stay silent (idle between requests, or stalled
            in one) before it is closed (a stalled body is answered 408).
        request_timeout: Seconds a request may take to arrive whole; past it the connection
            is closed, however steadily the request trickles in.
        max_body: Bytes a body may hold, as sent and once decompressed (more: 413).
        retry_after: Seconds a 503 (a full queue, a spool that cannot be written) asks the
            exporter to wait before it sends again (``Retry-After``).
    """

    request_queue_size = 128  # the listening socket's backlog

    def __init__(
        self,
        address: tuple[str, int],
        watcher: Watcher,
        *,
        tick: float = 1.0,
        max_connections: int = MAX_CONNECTIONS,
        read_timeout: float = READ_TIMEOUT,
        request_timeout: float = REQUEST_TIMEOUT,
        max_body: int = MAX_BODY,
        retry_after: int = RETRY_AFTER_SECONDS,
    ) -> None:
        if max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {max_connections}")
        super().__init__(address, _Handler)
        self.watcher = watcher
        self.tick = tick
        self.max_connections = max_connections
        self.read_timeout, self.request_timeout = read_timeout, request_timeout
        self.max_body, self.retry_after = max_body, retry_after
        self._stop = threading.Event()
        self._scorer = threading.Thread(target=self._score_loop, name="turneval-watch", daemon=True)
        self._reaper = threading.Thread(
            target=self._reap_loop, name="turneval-watch-reaper", daemon=True
        )
        self._connections_lock = threading.Lock()
        self._serving = 0  # connections with a thread
        self._waiting: deque[tuple[Any, Any]] = deque()  # accepted, waiting for a thread
        self._deadlines: dict[socket.socket, float] = {}  # open connection -> its request's
        self._threads: set[threading.Thread] = set()

    def count(self, name: str) -> None:
        """Add one to the watcher's counter ``name``."""
        with self.watcher.lock:
            self.watcher.counts[name] = self.watcher.counts.get(name, 0) + 1

    def metrics_text(self) -> tuple[bytes, str]:
        """The Prometheus exposition of the counters."""
        from turneval.watch._metrics import exposition

        return exposition(self.watcher, self)

    @property
    def connections(self) -> tuple[int, int]:
        """Connections served (a thread each), and waiting for a thread."""
        with self._connections_lock:
            return self._serving, len(self._waiting)

    def crowded(self) -> bool:
        """Whether connections wait for a thread (a served one closes after its answer)."""
        return bool(self._waiting)

    # -- connections ---------------------------------------------------------------------

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve the connection on a thread of its own, or have it wait, or refuse it."""
        with self._connections_lock:
            if self._serving >= self.max_connections:
                if len(self._waiting) < self.max_connections:
                    self._waiting.append((request, client_address))
                    return
                refuse = True
            else:
                refuse = False
                self._serving += 1
        if refuse:
            self.count("connections_refused")
            with contextlib.suppress(OSError):
                request.settimeout(0)
                request.send(_BUSY)
            self.shutdown_request(request)
            return
        thread = threading.Thread(
            target=self._serve_connections,
            args=(request, client_address),
            name="turneval-watch-connection",
            daemon=True,
        )
        with self._connections_lock:
            self._threads.add(thread)
        thread.start()

    def _serve_connections(self, request: Any, client_address: Any) -> None:
        """Serve a connection, then those waiting, until none waits."""
        while True:
            with self._connections_lock:
                self._deadlines[request] = math.inf
            try:
                self.finish_request(request, client_address)
            except Exception:  # a connection reset, a write to a closed socket: it is over
                pass
            finally:
                with self._connections_lock:
                    self._deadlines.pop(request, None)
                self.shutdown_request(request)
            with self._connections_lock:
                if self._stop.is_set() or not self._waiting:
                    self._serving -= 1
                    self._threads.discard(threading.current_thread())
                    return
                request, client_address = self._waiting.popleft()

    def reading(self, connection: socket.socket, *, done: bool = False) -> None:
        """A request starts being read on ``connection`` (its deadline set), or was read."""
        with self._connections_lock:
            if connection in self._deadlines:
                end = time.monotonic() + self.request_timeout
                self._deadlines[connection] = math.inf if done else end

    def _reap_loop(self) -> None:
        """Cut off connections whose request has not arrived whole within its deadline."""
        every = min(1.0, max(0.01, self.request_timeout / 4))
        while not self._stop.wait(every):
            now = time.monotonic()
            with self._connections_lock:
                late = [c for c, end in self._deadlines.items() if end <= now]
                for connection in late:
                    self._deadlines[connection] = math.inf
            for connection in late:
                self.count("connections_timed_out")
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)

    # -- running -------------------------------------------------------------------------

    def _score_loop(self) -> None:
        while not self._stop.wait(self.tick):
            try:
                self.watcher.tick()
            except Exception:  # the store unreachable, a full disk: counted; the conversations
                with self.watcher.lock:  # are decided again at the next tick, or after a restart
                    self.watcher.counts["errors"] += 1

    def serve(self) -> None:
        """Receive and score until :meth:`stop`."""
        self._scorer.start()
        self._reaper.start()
        self.serve_forever(poll_interval=0.2)

    def stop(self) -> None:
        """Stop receiving and scoring (call from another thread); a batch being scored ends."""
        self._stop.set()
        self.shutdown()
        for thread in (self._scorer, self._reaper):
            if thread.is_alive() and thread is not threading.current_thread():
                thread.join()

    def server_close(self) -> None:
        """Close the listening socket and every connection (their threads end)."""
        super().server_close()
        self._stop.set()
        with self._connections_lock:
            waiting, self._waiting = list(self._waiting), deque()
            open_ = list(self._deadlines)
            threads = list(self._threads)
        for request, _ in waiting:
            self.shutdown_request(request)
        for connection in open_:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        for thread in threads:
            thread.join(5)

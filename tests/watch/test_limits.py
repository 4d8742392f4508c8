"""The receiver's limits: gzip bombs, deep or misshapen JSON, idle and slow connections.

Each attack is reproduced bounded and on loopback: a bomb is measured by the bytes the
receiver decompressed (not by its memory), idle connections are a handful against a short
configured timeout.
"""

import contextlib
import gzip
import json
import socket
import threading
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from turneval.metrics import StepBudget
from turneval.watch import BadRequestError, BodyTooLargeError, Watcher, decode_body
from turneval.watch._decode import MAX_BODY, MAX_JSON_DEPTH, gunzip

from ._helpers import conversation, post, protobuf, receiver, results, serving, trace_id, wait_for


def _bomb(size: int) -> bytes:
    """``size`` zero bytes gzip-compressed, made a MiB at a time (never held whole)."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(2**20)
    parts = [compressor.compress(block) for _ in range(size // 2**20)]
    parts.append(compressor.compress(bytes(size % 2**20)))
    parts.append(compressor.flush())
    return b"".join(parts)


@pytest.fixture
def decompressed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The bytes each decompression in the receiver produced, as it runs."""
    produced: list[int] = []
    real = zlib.decompressobj

    class Counting:
        def __init__(self, *args: Any) -> None:
            self.inner = real(*args)
            produced.append(0)

        def decompress(self, data: bytes, max_length: int = 0) -> bytes:
            out = self.inner.decompress(data, max_length)
            produced[-1] += len(out)
            return out

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    monkeypatch.setattr(zlib, "decompressobj", Counting)
    yield produced


def test_a_gzip_bomb_is_refused_413_after_decompressing_no_more_than_the_limit(
    tmp_path: Path, decompressed: list[int]
) -> None:
    bomb = _bomb(MAX_BODY + 16 * 2**20)  # 80 MiB of zeros in about 80 KB
    assert len(bomb) < 2**20
    watcher = Watcher([StepBudget(max_steps=1)], tmp_path, idle=0.1)
    with serving(watcher) as port:
        status, _, answer = post(port, bomb, "application/json", **{"Content-Encoding": "gzip"})
        assert status == 413
        assert f"decompresses to more than {MAX_BODY} bytes" in json.loads(answer)["message"]
        good = gzip.compress(protobuf(conversation(1)))  # the receiver goes on
        assert post(port, good, **{"Content-Encoding": "gzip"})[0] == 200
        wait_for(lambda: len(results(tmp_path)) == 1)
    # the bomb was decompressed as a stream, never past the limit (+1 byte to know it is over)
    assert decompressed[0] <= MAX_BODY + 1
    assert watcher.counts["requests_too_large"] == 1
    assert watcher.counts["requests_failed"] == 0
    assert watcher.counts["spans_accepted"] == 2


def test_the_decompressed_limit_is_the_servers_max_body(tmp_path: Path) -> None:
    body = json.dumps(MessageToDict(encode_spans(conversation(1)))).encode()
    watcher = Watcher([StepBudget(max_steps=1)], tmp_path, idle=0.1)
    with serving(watcher, max_body=len(body) - 1) as port:
        status, _, _ = post(
            port, gzip.compress(body), "application/json", **{"Content-Encoding": "gzip"}
        )
        assert status == 413  # small when sent, over the limit once decompressed
        assert post(port, b"{}", "application/json")[0] == 200
    assert watcher.counts["requests_too_large"] == 1


@settings(max_examples=60, deadline=None)
@given(
    members=st.lists(st.binary(max_size=3000), min_size=1, max_size=3),
    limit=st.integers(min_value=0, max_value=7000),
)
def test_gunzip_is_the_whole_body_up_to_the_limit_and_refuses_past_it(
    members: list[bytes], limit: int
) -> None:
    whole = b"".join(members)
    body = b"".join(gzip.compress(member) for member in members)  # multi-member, as gzip allows
    if len(whole) <= limit:
        assert gunzip(body, limit) == whole == gzip.decompress(body)
    else:
        with pytest.raises(BodyTooLargeError):
            gunzip(body, limit)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        # mtime=0: the same bytes, hence the same test ids, in every process (xdist's
        # workers must collect the same tests; gzip's header holds the current second)
        (gzip.compress(b"{}", mtime=0)[:-6], "cut short"),
        (gzip.compress(b"{}", mtime=0) + b"trailing", "not gzip"),
        (b"\x1f\x8b plain", "not gzip"),
    ],
)
def test_a_broken_gzip_body_is_a_400(body: bytes, problem: str) -> None:
    with pytest.raises(BadRequestError, match=problem):
        decode_body(body, "application/json", "gzip")


def _nested(depth: int) -> Any:
    """A span attribute whose value nests key-value lists ``depth`` times."""
    value: dict[str, Any] = {"stringValue": "leaf"}
    for _ in range(depth):
        value = {"kvlistValue": {"values": [{"key": "k", "value": value}]}}
    return value


def _request(*spans: Any, resource: Any = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"scopeSpans": [{"spans": list(spans)}]}
    if resource is not None:
        entry["resource"] = resource
    return {"resourceSpans": [entry]}


_SPAN = {"traceId": "ab" * 16, "spanId": "cd" * 8, "name": "chat"}

_BAD_BODIES = [
    # deep: past the JSON parser's recursion (a RecursionError, a 500 before)
    (b'{"resourceSpans": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested more than"),
    # deep, but within the parser's reach: past the depth limit
    (
        json.dumps(
            _request({**_SPAN, "attributes": [{"key": "deep", "value": _nested(150)}]})
        ).encode(),
        "nested more than",
    ),
    # wrongly shaped: lists and objects where the other is expected (500s before)
    (b'{"resourceSpans": [3]}', "resourceSpans[0] must be an object, got int"),
    (
        b'{"resourceSpans": [{"scopeSpans": {"spans": []}}]}',
        "resourceSpans[0].scopeSpans must be a list, got dict",
    ),
    (
        b'{"resourceSpans": [{"scopeSpans": [{"spans": [1]}]}]}',
        "resourceSpans[0].scopeSpans[0].spans[0] must be an object, got int",
    ),
    (
        json.dumps(_request(_SPAN, resource={"attributes": {"service.name": "x"}})).encode(),
        "resourceSpans[0].resource.attributes must be a list, got dict",
    ),
    (
        json.dumps(_request({**_SPAN, "attributes": [{"key": "n", "value": "x"}]})).encode(),
        "unreadable span",
    ),
    # not strict JSON, as evaluate reads it: NaN, Infinity, a duplicate key
    (
        json.dumps(
            _request(
                {**_SPAN, "attributes": [{"key": "x", "value": {"doubleValue": float("nan")}}]}
            )
        ).encode(),
        "holds NaN, not a finite number",
    ),
    (
        b'{"resourceSpans": [], "x": -Infinity}',
        "holds -Infinity, not a finite number",
    ),
    (b'{"resourceSpans": [], "resourceSpans": []}', "duplicate key 'resourceSpans'"),
    (b'{"resourceSpans": [], "x": [1e400]}', "key 'x' holds 1e400, not a finite number"),
]


@pytest.mark.parametrize(("body", "problem"), _BAD_BODIES)
def test_deep_misshapen_or_non_strict_json_is_a_400_counted_as_refused(
    tmp_path: Path, body: bytes, problem: str
) -> None:
    watcher = Watcher([StepBudget(max_steps=1)], tmp_path, idle=0.1)
    with serving(watcher) as port:
        status, _, answer = post(port, body, "application/json")
        assert (status, problem in json.loads(answer)["message"]) == (400, True), answer[:300]
    assert watcher.counts["requests_bad"] == 1
    assert watcher.counts["requests_failed"] == watcher.counts["errors"] == 0
    assert watcher.counts["spans_accepted"] == 0
    assert (tmp_path / "spool.jsonl").read_bytes() == b""


@pytest.mark.parametrize(("body", "problem"), _BAD_BODIES)
def test_without_jiter_the_stdlib_reads_json_as_strictly(
    monkeypatch: pytest.MonkeyPatch, body: bytes, problem: str
) -> None:
    def outcome() -> Any:
        try:
            return decode_body(body, "application/json", "")
        except BadRequestError as exc:
            return str(exc)

    with_jiter = outcome()
    monkeypatch.setattr("turneval.watch._decode.jiter_from_json", None)
    assert outcome() == with_jiter


def test_json_within_the_depth_limit_is_read() -> None:
    levels = (MAX_JSON_DEPTH - 10) // 4  # the request's own nesting is 10, each kvlist adds 4
    body = json.dumps(
        _request({**_SPAN, "attributes": [{"key": "deep", "value": _nested(levels)}]})
    ).encode()
    assert decode_body(body, "application/json", "")["resourceSpans"]
    deeper = json.dumps(
        _request({**_SPAN, "attributes": [{"key": "deep", "value": _nested(levels + 1)}]})
    ).encode()
    with pytest.raises(BadRequestError, match="nested more than"):
        decode_body(deeper, "application/json", "")


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "resourceSpans",
                    "resource",
                    "attributes",
                    "scopeSpans",
                    "spans",
                    "traceId",
                    "spanId",
                    "key",
                    "value",
                    "stringValue",
                    "intValue",
                    "kvlistValue",
                    "values",
                    "arrayValue",
                    "events",
                    "status",
                    "code",
                    "startTimeUnixNano",
                    "name",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=25,
)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(document=_JSON)
def test_any_json_document_is_taken_or_refused_400_never_an_error(
    tmp_path_factory: pytest.TempPathFactory, document: Any
) -> None:
    body = json.dumps(document).encode()
    with Watcher([StepBudget(max_steps=1)], tmp_path_factory.mktemp("w")) as watcher:
        try:
            watcher.accept(decode_body(body, "application/json", ""))
        except BadRequestError:
            assert watcher.queued == 0  # refused: nothing taken
            assert (watcher.state / "spool.jsonl").read_bytes() == b""


def test_a_protobuf_nan_double_is_kept_and_read_back_after_a_restart(tmp_path: Path) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    spans = conversation(1)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    body = protobuf(spans)
    with provider.get_tracer("t").start_as_current_span("x", attributes={"ratio": float("nan")}):
        pass
    nan_span = exporter.get_finished_spans()
    first = Watcher([StepBudget(max_steps=1)], tmp_path, idle=60)
    first.accept(decode_body(body, "application/x-protobuf", ""))
    first.accept(decode_body(protobuf(list(nan_span)), "application/x-protobuf", ""))
    first.close()
    again = Watcher([StepBudget(max_steps=1)], tmp_path, idle=0)  # the spool read back
    assert again.queued == 3
    again.tick(force=True)
    again.close()
    assert [row["id"] for row in results(tmp_path)] == [trace_id(spans)]


# -- connections ---------------------------------------------------------------------------


def _connection_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "turneval-watch-connection")


def _closed_by_server(client: socket.socket, within: float) -> bool:
    """Whether the server closed ``client`` (EOF or reset) within ``within`` seconds."""
    client.settimeout(within)
    try:
        while True:
            data = client.recv(4096)
            if not data:
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False


def test_idle_connections_hold_a_bounded_number_of_threads_and_are_closed(tmp_path: Path) -> None:
    watcher = Watcher([StepBudget(max_steps=1)], tmp_path, idle=0.1)
    with receiver(watcher, max_connections=3, read_timeout=0.4) as server:
        port = server.server_address[1]
        before = _connection_threads()
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(6)]
        try:
            wait_for(lambda: sum(server.connections) == 6)
            assert server.connections == (3, 3)  # three served, three waiting without a thread
            assert _connection_threads() - before <= 3
            started = time.monotonic()
            assert all(_closed_by_server(client, within=5) for client in idle)
            # two rounds of 0.4 s (three at a time), within a loaded machine's slack
            assert time.monotonic() - started < 4
        finally:
            for client in idle:
                client.close()
        wait_for(lambda: server.connections == (0, 0))
        assert post(port, protobuf(conversation(1)))[0] == 200  # and it serves on
    assert watcher.counts["connections_timed_out"] == 6


def test_past_the_waiting_line_a_connection_is_answered_503(tmp_path: Path) -> None:
    watcher = Watcher([StepBudget(max_steps=1)], tmp_path, idle=0.1)
    with receiver(watcher, max_connections=1, read_timeout=5) as server:
        port = server.server_address[1]
        held = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
        try:
            wait_for(lambda: server.connections == (1, 1))
            extra = socket.create_connection(("127.0.0.1", port))
            extra.settimeout(5)
            answer = b""
            with contextlib.suppress(ConnectionResetError):  # closed right after the answer
                while chunk := extra.recv(4096):
                    answer += chunk
            extra.close()
        finally:
            for client in held:
                client.close()
    assert answer.startswith(b"HTTP/1.1 503 ")
    assert b"Retry-After: 1" in answer
    assert watcher.counts["connections_refused"] == 1


def test_a_stalled_body_is_answered_408_after_the_read_timeout(tmp_path: Path) -> None:
    watcher = Watcher([StepBudget(max_steps=1)], tmp_path, idle=0.1)
    with receiver(watcher, read_timeout=0.3) as server:
        client = socket.create_connection(("127.0.0.1", server.server_address[1]))
        client.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b'Content-Length: 100\r\n\r\n{"resourceSpans"'  # then nothing more
        )
        client.settimeout(5)
        answer = client.recv(4096)
        assert answer.startswith(b"HTTP/1.1 408 ")
        assert _closed_by_server(client, within=5)
        client.close()
    assert watcher.counts["connections_timed_out"] == 1
    assert watcher.counts["spans_accepted"] == 0


def test_a_request_trickling_in_is_cut_off_at_the_request_timeout(tmp_path: Path) -> None:
    watcher = Watcher([StepBudget(max_steps=1)], tmp_path, idle=0.1)
    with receiver(watcher, read_timeout=1.0, request_timeout=0.6) as server:
        client = socket.create_connection(("127.0.0.1", server.server_address[1]))
        client.settimeout(5)
        started = time.monotonic()
        cut = False
        header = b"POST /v1/traces HTTP/1.1\r\nX-Slow: " + b"a" * 200
        for byte in header:  # a byte every 0.1 s: never silent for the read timeout
            try:
                client.sendall(bytes([byte]))
            except OSError:
                cut = True
                break
            time.sleep(0.1)
            if time.monotonic() - started > 8:
                break
        if not cut:
            cut = _closed_by_server(client, within=0.1)
        elapsed = time.monotonic() - started
        client.close()
    assert cut
    assert elapsed < 5  # 0.6 s and a reaper's round, with a loaded machine's slack
    assert watcher.counts["connections_timed_out"] == 1

"""A full disk, and requests refused: a 200 means spooled, a refusal leaves nothing behind.

The disk fills at the write/fsync boundary (``os.write`` and ``os.fsync`` raise ENOSPC for
the state folder's files, or write half first), and once for real: a small tmpfs, where the
machine allows mounting one.
"""

import contextlib
import errno
import json
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

from turneval.metrics import StepBudget
from turneval.traces import from_otlp_span
from turneval.watch import BadRequestError, SpoolUnavailableError, Watcher

from ._helpers import conversation, post, protobuf, receiver, results, trace_id, wait_for

_write, _fsync = os.write, os.fsync


class DiskFaults:
    """ENOSPC from ``os.write`` / ``os.fsync`` on the files under ``folder`` while ``full``.

    ``mode``: ``write`` (the write fails), ``short`` (writes half of what is asked, then
    fails: a disk filling up mid-line), ``fsync`` (written, but the fsync fails).
    """

    def __init__(self, folder: Path) -> None:
        self.folder = str(folder.resolve())
        self.mode: str | None = None
        self.failed = 0

    def _ours(self, fd: int) -> bool:
        try:
            return os.readlink(f"/proc/self/fd/{fd}").startswith(self.folder)
        except OSError:
            return False

    def _full(self) -> OSError:
        self.failed += 1
        return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def write(self, fd: int, data: Any) -> int:
        if self.mode in ("write", "short") and self._ours(fd):
            if self.mode == "short" and len(data) > 1:
                return _write(fd, bytes(data[: len(data) // 2]))
            raise self._full()
        return _write(fd, data)

    def fsync(self, fd: int) -> None:
        if self.mode is not None and self._ours(fd):
            raise self._full()
        _fsync(fd)


@pytest.fixture
def faults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[DiskFaults]:
    injected = DiskFaults(tmp_path)
    monkeypatch.setattr(os, "write", injected.write)
    monkeypatch.setattr(os, "fsync", injected.fsync)
    yield injected


def _json(spans: list[ReadableSpan]) -> dict[str, Any]:
    document: dict[str, Any] = MessageToDict(encode_spans(spans))
    return document


def _ids(document: dict[str, Any]) -> set[tuple[str, str]]:
    """The ``(trace id, span id)`` of every span of a request, read as the watcher reads them."""
    return {
        (span.trace_id, span.span_id)
        for resource in document.get("resourceSpans") or ()
        for scope in resource.get("scopeSpans") or ()
        for span in map(from_otlp_span, scope.get("spans") or ())
    }


def _spooled(folder: Path) -> set[tuple[str, str]]:
    """The span ids in the spool."""
    found: set[tuple[str, str]] = set()
    for line in (folder / "spool.jsonl").read_bytes().splitlines():
        found |= _ids(json.loads(line))
    return found


@pytest.mark.parametrize("mode", ["write", "short", "fsync"])
def test_a_full_disk_is_503_with_retry_after_and_the_retry_is_spooled_and_scored(
    tmp_path: Path, faults: DiskFaults, mode: str
) -> None:
    spans = conversation(2)
    body = protobuf(spans)
    watcher = Watcher([StepBudget(max_steps=1)], tmp_path, idle=60)
    with receiver(watcher) as server:
        port = server.server_address[1]
        faults.mode = mode
        status, headers, answer = post(port, body)
        assert status == 503
        assert int(headers["Retry-After"]) > 0
        assert "the spool cannot be written" in json.loads(answer)["message"]
        assert (tmp_path / "spool.jsonl").read_bytes() == b""  # nothing, not half a line
        assert watcher.queued == 0
        faults.mode = None  # space again: the exporter's retry
        assert post(port, body)[0] == 200
        assert watcher.queued == 3
    assert faults.failed >= 1
    assert watcher.counts["requests_unspooled"] == 1
    assert watcher.counts["spans_duplicate"] == 0  # the retry was new, not a duplicate
    again = Watcher([StepBudget(max_steps=1)], tmp_path, idle=0)  # a restart scores it
    assert again.tick(force=True) == 1
    again.close()
    assert [row["id"] for row in results(tmp_path)] == [trace_id(spans)]


def test_the_sdk_exporter_retries_a_full_disk_until_its_spans_are_spooled(
    tmp_path: Path, faults: DiskFaults
) -> None:
    traces = [conversation(1), conversation(3)]
    watcher = Watcher([StepBudget(max_steps=1)], tmp_path, idle=0.2)
    faults.mode = "short"
    with receiver(watcher, retry_after=1) as server:
        exporter = OTLPSpanExporter(
            endpoint=f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
        )
        outcome: list[SpanExportResult] = []
        sending = threading.Thread(
            target=lambda: outcome.append(exporter.export([s for t in traces for s in t]))
        )
        sending.start()
        wait_for(lambda: watcher.counts["requests_unspooled"] >= 1)
        faults.mode = None  # the disk has room again before the exporter's retry (1 s)
        sending.join(15)
        assert outcome == [SpanExportResult.SUCCESS]
        wait_for(lambda: len(results(tmp_path)) == 2)
    assert sorted(row["id"] for row in results(tmp_path)) == sorted(trace_id(t) for t in traces)


def test_while_the_disk_is_full_conversations_wait_and_are_scored_once_it_has_room(
    tmp_path: Path, faults: DiskFaults
) -> None:
    traces = [conversation(1) for _ in range(3)]
    watcher = Watcher([StepBudget(max_steps=1)], tmp_path, idle=0)
    for spans in traces:
        watcher.accept(_json(spans))
    faults.mode = "short"  # the claims cannot be written: nothing is decided
    with pytest.raises(OSError):
        watcher.tick()
    assert watcher.queued == 6
    assert watcher.counts["conversations_complete"] == 0
    faults.mode = None
    assert watcher.tick() == 3
    faults.mode = "write"  # now the rows cannot be written: kept, written at the next tick
    watcher.accept(_json(traces[0]))  # (a duplicate: nothing to write, accepted)
    faults.mode = None
    fourth = conversation(2)
    watcher.accept(_json(fourth))
    faults.mode = "fsync"
    with pytest.raises(OSError):
        watcher.tick()  # claims fail again
    faults.mode = None
    watcher.tick()
    watcher.close()
    rows = results(tmp_path)
    assert sorted(row["id"] for row in rows) == sorted(trace_id(t) for t in [*traces, fourth])
    for name in ("spool.jsonl", "ledger.jsonl", "results.jsonl"):  # no torn line anywhere
        for line in (tmp_path / name).read_bytes().splitlines():
            json.loads(line)


def test_rows_whose_write_failed_are_written_at_the_next_tick(
    tmp_path: Path, faults: DiskFaults, monkeypatch: pytest.MonkeyPatch
) -> None:
    spans = conversation(1)
    watcher = Watcher([StepBudget(max_steps=1)], tmp_path, idle=0)
    watcher.accept(_json(spans))
    real_write = faults.write

    def rows_fail(fd: int, data: Any) -> int:  # the ledger writes, results.jsonl does not
        if os.readlink(f"/proc/self/fd/{fd}").endswith("results.jsonl"):
            raise OSError(errno.ENOSPC, "full")
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", rows_fail)
    with pytest.raises(OSError):
        watcher.tick()
    assert results(tmp_path) == []
    assert watcher.counts["conversations_scored"] == 0
    monkeypatch.setattr(os, "write", real_write)
    assert watcher.tick() == 0  # nothing new; the row waiting is written
    watcher.close()
    assert [row["id"] for row in results(tmp_path)] == [trace_id(spans)]
    assert watcher.counts["conversations_scored"] == 1


def _poisoned(spans: list[ReadableSpan]) -> dict[str, Any]:
    """``spans``' request, then a second resource whose attribute cannot be read."""
    document = _json(spans)
    document["resourceSpans"].append(
        {
            "resource": {"attributes": [{"key": "n", "value": {"intValue": "many"}}]},
            "scopeSpans": [
                {"spans": _json(conversation(1))["resourceSpans"][0]["scopeSpans"][0]["spans"]}
            ],
        }
    )
    return document


def test_a_request_refused_400_took_nothing_and_its_resend_is_spooled_whole(
    tmp_path: Path,
) -> None:
    spans = conversation(2)
    watcher = Watcher([StepBudget(max_steps=1)], tmp_path, idle=60)
    with receiver(watcher) as server:
        port = server.server_address[1]
        bad = json.dumps(_poisoned(spans)).encode()
        status, _, answer = post(port, bad, "application/json")
        assert status == 400
        assert "unreadable span: ValueError" in json.loads(answer)["message"]
        assert watcher.queued == 0
        assert post(port, json.dumps(_json(spans)).encode(), "application/json")[0] == 200
        assert _spooled(tmp_path) == _ids(_json(spans))  # every span of the resend
    assert watcher.counts["spans_duplicate"] == 0
    again = Watcher([StepBudget(max_steps=1)], tmp_path, idle=0)
    again.tick(force=True)
    again.close()
    assert [row["id"] for row in results(tmp_path)] == [trace_id(spans)]


# -- the promise, over random sequences of requests and failures --------------------------

_TRACES = [conversation(1 + k % 2) for k in range(4)]
_REQUESTS: list[tuple[dict[str, Any], bool]] = []  # (request, refused for a bad span)
for _spans in _TRACES:
    _REQUESTS.append((_json(_spans[:-1]), False))  # the chat spans
    _REQUESTS.append((_json(_spans[-1:]), False))  # the agent span, later
    _REQUESTS.append((_poisoned(_spans[:-1]), True))

_FAULT = st.sampled_from([None, None, "write", "short", "fsync"])
_STEP = st.one_of(
    st.tuples(st.just("send"), st.integers(0, len(_REQUESTS) - 1), _FAULT),
    st.tuples(st.just("tick"), st.just(0), _FAULT),
)


def _state(watcher: Watcher) -> tuple[Any, ...]:
    spans = {k: v for k, v in watcher.counts.items() if k.startswith("spans_")}
    return watcher.queued, spans, (watcher.state / "spool.jsonl").read_bytes()


_CHATS = {
    (trace_id(spans), format(span.context.span_id, "016x"))
    for spans in _TRACES
    for span in spans
    if span.name == "chat" and span.context is not None
}


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(_STEP, min_size=1, max_size=14))
def test_every_200_is_spooled_every_refusal_left_nothing_and_a_restart_scores_each_once(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, steps: list[Any]
) -> None:
    folder = tmp_path_factory.mktemp("state")
    faults = DiskFaults(folder)
    expected: set[str] = set()  # conversations acknowledged (a chat span taken, not late)
    with monkeypatch.context() as patch:
        patch.setattr(os, "write", faults.write)
        patch.setattr(os, "fsync", faults.fsync)
        watcher = Watcher([StepBudget(max_steps=1)], folder, idle=0)
        for kind, which, fault in steps:
            faults.mode = fault
            if kind == "tick":
                with contextlib.suppress(OSError):
                    watcher.tick()
                continue
            request, poisoned = _REQUESTS[which]
            before, decided = _state(watcher), set(watcher._done)
            try:
                watcher.accept(json.loads(json.dumps(request)))
            except (BadRequestError, SpoolUnavailableError) as exc:
                assert poisoned or (fault is not None and isinstance(exc, SpoolUnavailableError))
                assert _state(watcher) == before  # nothing of it taken, nothing written
                continue
            assert not poisoned
            if fault is not None:  # a 200 under a fault: only when nothing was new
                assert _state(watcher)[2] == before[2]
            ids = _ids(request)  # acknowledged: each span in the spool, or of a decided trace
            spooled = _spooled(folder)
            assert all(i in spooled or i[0] in decided for i in ids)
            expected |= {t for t, s in ids if (t, s) in _CHATS and t not in decided}
        faults.mode = None
        watcher.close()
        for name in ("spool.jsonl", "ledger.jsonl"):  # whole lines only, whatever failed
            for line in (folder / name).read_bytes().splitlines():
                json.loads(line)
        again = Watcher([StepBudget(max_steps=1)], folder, idle=0)
        again.tick(force=True)
        again.close()
    scored = [row["id"] for row in results(folder)]
    assert sorted(scored) == sorted(expected)  # each acknowledged conversation scored, once


# -- a real full disk ----------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs (root only; skipped where it cannot be mounted), unmounted after."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(folder: Path) -> Path:
    """Fill the disk holding ``folder`` with one file; returns it."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, bytes(65536))
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    try:  # the last pages, a byte at a time
        while True:
            os.write(fd, b"\0")
    except OSError:
        pass
    os.close(fd)
    return filler


def test_a_really_full_disk_answers_503_and_the_acknowledged_are_scored_after_a_restart(
    small_disk: Path,
) -> None:
    state = small_disk / "state"
    big = "x" * 20_000  # each export is several pages: no room left in a page already held
    traces = [conversation(1, service=big) for _ in range(4)]
    watcher = Watcher([StepBudget(max_steps=1)], state, idle=60)
    acknowledged: list[str] = []
    with receiver(watcher) as server:
        port = server.server_address[1]
        assert post(port, protobuf(traces[0]))[0] == 200
        acknowledged.append(trace_id(traces[0]))
        filler = _fill(small_disk)
        refused = [post(port, protobuf(spans)) for spans in traces[1:3]]
        assert [status for status, _, _ in refused] == [503, 503]
        assert all(int(headers["Retry-After"]) > 0 for _, headers, _ in refused)
        assert "No space left on device" in json.loads(refused[0][2])["message"]
        spool = (state / "spool.jsonl").read_bytes()
        filler.unlink()  # room again: the exporters' retries are spooled
        for spans in traces[1:]:
            assert post(port, protobuf(spans))[0] == 200
            acknowledged.append(trace_id(spans))
    assert watcher.counts["requests_unspooled"] == 2
    assert len(spool.splitlines()) == 1 and spool.endswith(b"\n")  # no half line was left
    again = Watcher([StepBudget(max_steps=1)], state, idle=0)  # the restart scores them all
    again.tick(force=True)
    again.close()
    assert sorted(row["id"] for row in results(state)) == sorted(acknowledged)

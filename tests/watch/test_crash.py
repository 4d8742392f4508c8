"""Nothing accepted is lost: kill -9 mid-stream, restart, each conversation scored once."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from turneval.metrics import StepBudget
from turneval.store import RunStore
from turneval.watch import Watcher

from ._helpers import conversation, post, protobuf, results, trace_id, wait_for


def _start(out: Path, *extra: str) -> tuple[subprocess.Popen[str], int]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    command = [sys.executable, "-m", "turneval.cli", "watch", "--listen", "127.0.0.1:0"]
    command += ["--idle", "0.3", "--out", str(out), "--metric", "step_budget:max_steps=1"]
    command += extra
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
    assert process.stdout is not None
    line = process.stdout.readline()
    assert "receiving OTLP/HTTP on http://127.0.0.1:" in line, line
    return process, int(line.rsplit(":", 1)[1].split("/")[0])


def _close(process: subprocess.Popen[str]) -> None:
    if process.stdout is not None:
        process.stdout.close()


def test_kill_9_mid_stream_then_restart_scores_every_accepted_conversation_once(
    tmp_path: Path,
) -> None:
    traces = [conversation(1 + k % 3) for k in range(12)]
    process, port = _start(tmp_path)
    try:
        for spans in traces[:4]:
            assert post(port, protobuf(spans))[0] == 200
        wait_for(lambda: len(results(tmp_path)) == 4)  # scored before the crash
        for spans in traces[4:8]:  # accepted, not yet complete when the process dies
            assert post(port, protobuf(spans))[0] == 200
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
        _close(process)
    assert len(results(tmp_path)) == 4
    process, port = _start(tmp_path)
    try:
        assert post(port, protobuf(traces[3]))[0] == 200  # a retried export: already scored
        for spans in traces[8:]:
            assert post(port, protobuf(spans))[0] == 200
        wait_for(lambda: len(results(tmp_path)) >= 12)
        time.sleep(0.5)  # anything scored twice would show up now
    finally:
        process.terminate()
        code = process.wait(10)
        _close(process)
    assert code == 0
    ids = [row["id"] for row in results(tmp_path)]
    assert sorted(ids) == sorted(trace_id(spans) for spans in traces)
    assert sorted(row["index"] for row in results(tmp_path)) == list(range(12))
    values = {row["id"]: row["step_budget"] for row in results(tmp_path)}
    assert values == {trace_id(s): 1 / (1 + k % 3) for k, s in enumerate(traces)}


class _Crash(BaseException):
    pass


@pytest.mark.parametrize("with_store", [False, True])
def test_a_conversation_claimed_but_not_written_is_scored_after_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, with_store: bool
) -> None:
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    opened: list[RunStore] = []

    def store() -> Any:
        if not with_store:
            return None
        opened.append(RunStore(tmp_path / "runs.db"))
        return opened[-1]

    first, second = conversation(2), conversation(1)
    watcher = Watcher([StepBudget(max_steps=1)], tmp_path / "state", idle=0.0, store=store())
    watcher.accept(MessageToDict(encode_spans(first)))
    assert watcher.tick() == 1  # written
    watcher.accept(MessageToDict(encode_spans(second)))

    def crash(batch: Any) -> None:
        raise _Crash  # the process dies between the claim and the row

    monkeypatch.setattr(watcher, "_score", crash)
    with pytest.raises(_Crash):
        watcher.tick()
    watcher.close()
    monkeypatch.undo()
    again = Watcher([StepBudget(max_steps=1)], tmp_path / "state", idle=0.0, store=store())
    assert again.queued == 2  # the second trace's spans, from the spool
    spool = (tmp_path / "state" / "spool.jsonl").read_text().splitlines()
    spooled = [json.loads(line) for line in spool]
    spans = [
        span
        for d in spooled
        for r in d["resourceSpans"]
        for sc in r["scopeSpans"]
        for span in sc["spans"]
    ]
    assert len(spans) == 2  # compacted: the first trace, written, is gone from the spool
    assert again.tick() == 1
    again.close()
    for each in opened:
        each.close()
    if with_store:
        with RunStore(tmp_path / "runs.db") as stored:
            run = stored.runs()[0]
            records = list(stored.records(run.id))
            assert len(stored.runs()) == 1  # the restart continued the same run
    else:
        records = results(tmp_path / "state")
    assert [(r["id"], r["step_budget"]) for r in records] == [
        (trace_id(first), 0.5),
        (trace_id(second), 1.0),
    ]
    assert [r["index"] for r in records] == [0, 2]  # the lost claim's index is not reused


def test_the_command_bounds_its_connections_and_their_silence(tmp_path: Path) -> None:
    import socket

    process, port = _start(tmp_path, "--max-connections", "1", "--read-timeout", "0.3")
    try:
        served, waiting = (socket.create_connection(("127.0.0.1", port)) for _ in range(2))
        extra = socket.create_connection(("127.0.0.1", port))  # past the waiting line
        extra.settimeout(10)
        assert extra.recv(4096).startswith(b"HTTP/1.1 503 ")
        for client in (served, waiting):  # each closed after 0.3 s of silence
            client.settimeout(10)
            assert client.recv(4096) == b""
            client.close()
        extra.close()
        assert post(port, protobuf(conversation(1)))[0] == 200
    finally:
        process.terminate()
        process.wait(10)
        _close(process)

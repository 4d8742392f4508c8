"""Worker processes never outlive the CLI: kill -9 ends them at once; SIGTERM (or Ctrl-C)
finishes the chunks in flight, writes them and exits 143 (130), and --resume continues the run."""

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from turneval.cli import EXIT_INTERRUPTED, EXIT_TERMINATED, main

from ._builders import call, conversation

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads child processes from /proc"
)

ROWS, CHUNK = 400, 20
# The CLI with chunks of CHUNK lines, each taking 0.1 s more in its worker: a run of ~2 s.
SLOW_CLI = f"""
import sys, time
import turneval.cli._engines as engines
import turneval.stream._workers as workers
score = workers._score_in_worker
def slow(*args):
    time.sleep(0.1)
    return score(*args)
workers._score_in_worker = slow
engine_of = engines.engine_of
def small_chunks(args, **kwargs):
    return engine_of(args, **kwargs).model_copy(update={{"chunk_size": {CHUNK}}})
engines.engine_of = small_chunks
from turneval.cli import main
sys.exit(main(sys.argv[1:]))
"""


def wait_for(check: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {seconds} s: {what}")
        time.sleep(0.02)


def children(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        found.update(int(child) for child in (task / "children").read_text().split())
    return found


def alive(pid: int) -> bool:
    """Running: not gone and not a zombie (a dead child its new parent has not reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def start(tmp_path: Path) -> tuple[subprocess.Popen[bytes], set[int], Path]:
    data = tmp_path / "data.jsonl"
    line = conversation([call("a")], reference=[call("a")]).model_dump_json(exclude_none=True)
    data.write_text((line + "\n") * ROWS)
    out = tmp_path / "out"
    argv = [sys.executable, "-c", SLOW_CLI, "evaluate", str(data), "--metric", "tool_call_f1"]
    argv += ["--out", str(out), "--workers", "2", "--quiet"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    cli = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    results = out / "results.jsonl"
    wait_for(lambda: results.exists() and results.stat().st_size > 0, 30, "first rows written")
    workers = children(cli.pid)
    assert len(workers) == 2 and all(map(alive, workers))
    return cli, workers, data


def test_kill_9_of_the_cli_ends_its_workers_within_a_second(tmp_path: Path) -> None:
    cli, workers, _ = start(tmp_path)
    cli.kill()  # SIGKILL: no handler, no cleanup in the parent
    cli.communicate(timeout=10)  # reaps it, closes its pipes
    wait_for(lambda: not any(map(alive, workers)), 1.0, f"workers {workers} ended")


@pytest.mark.parametrize(
    ("sent", "code", "by"),
    [
        (signal.SIGTERM, EXIT_TERMINATED, "SIGTERM"),
        (signal.SIGINT, EXIT_INTERRUPTED, "Ctrl-C (SIGINT)"),  # was: a traceback, rows lost
    ],
)
def test_sigterm_or_ctrl_c_finishes_the_chunks_in_flight_writes_them_and_exits(
    tmp_path: Path, sent: signal.Signals, code: int, by: str
) -> None:
    cli, workers, data = start(tmp_path)
    cli.send_signal(sent)
    _, err = cli.communicate(timeout=30)
    assert cli.returncode == code and code in (143, 130)
    assert f"turneval: stopped by {by} after" in err.decode() and "Traceback" not in err.decode()
    wait_for(lambda: not any(map(alive, workers)), 1.0, f"workers {workers} ended")
    out = tmp_path / "out"
    rows = [json.loads(text) for text in (out / "results.jsonl").read_text().splitlines()]
    assert 0 < len(rows) < ROWS and len(rows) % CHUNK == 0  # whole chunks, in order
    assert [row["line"] for row in rows] == list(range(1, len(rows) + 1))
    assert json.loads((out / "summary.json").read_text())["samples"] == len(rows)
    args = ["evaluate", str(data), "--metric", "tool_call_f1", "--out", str(out), "--quiet"]
    assert main([*args, "--resume", "--workers", "1"]) == 0
    rows = [json.loads(text) for text in (out / "results.jsonl").read_text().splitlines()]
    assert [row["line"] for row in rows] == list(range(1, ROWS + 1))
    assert {row["tool_call_f1"] for row in rows} == {1.0}

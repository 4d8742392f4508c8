"""kill -9 in the middle of a judged CLI run, then a re-run with the same cache: the rows the
first run finished cost no judge request, and every line gets exactly one row."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from turneval.cli import main
from turneval.judge import SQLiteCache

from ._builders import call, conversation
from ._openai_stub import OpenAIStub, Reply

VERDICT = json.dumps({"user_goal": "g", "end_state": "e", "reason": "r", "achieved": True})
NAME = "agent_goal_accuracy_without_reference"


def command(data: Path, out: Path, cache: Path, url: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "turneval.cli",
        "evaluate",
        str(data),
        "--metric",
        NAME,
        "--judge-model",
        "stub-model",
        "--judge-base-url",
        url,
        "--cache",
        str(cache),
        "--out",
        str(out),
        "--quiet",
        "--overwrite",  # the re-run replaces the partial results; the cache pays for nothing twice
    ]


def sample_of(request: dict[str, object]) -> int:
    """The sample a judge request is about (its tool call's ``n``)."""
    messages = request["messages"]
    assert isinstance(messages, list)
    text = messages[-1]["content"]
    return int(text.split('lookup({"n": ', 1)[1].split("}", 1)[0])


def test_kill_9_then_rerun_pays_nothing_for_finished_rows(tmp_path: Path) -> None:
    # Chunk one (lines 1-1000): 10 distinct samples, repeated; chunk two: 100 distinct ones.
    keys = [n % 10 for n in range(1000)] + list(range(10, 110))
    samples = {k: conversation([call("lookup", n=k)], reference=[]) for k in set(keys)}
    data = tmp_path / "data.jsonl"
    data.write_text("".join(samples[k].model_dump_json(exclude_none=True) + "\n" for k in keys))
    out, cache = tmp_path / "out", tmp_path / "cache.sqlite"
    stub = OpenAIStub(keep_alive=True)
    try:
        stub.reset(default=Reply(VERDICT))
        env = {**os.environ, "OPENAI_API_KEY": "unused"}
        process = subprocess.Popen(command(data, out, cache, stub.url), env=env)
        results = out / "results.jsonl"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and (
            not results.exists() or results.read_text().count("\n") < 1000
        ):
            time.sleep(0.02)
        stub.default = Reply(VERDICT, delay=0.05)  # chunk two is slow: kill it midway
        while time.monotonic() < deadline and sum(sample_of(r) >= 10 for r in stub.requests) < 30:
            time.sleep(0.01)
        time.sleep(0.1)
        os.kill(process.pid, signal.SIGKILL)
        process.wait()
        finished = [json.loads(row) for row in results.read_text().splitlines()]
        assert len(finished) == 1000  # chunk one written, chunk two lost with the process
        answered = len(SQLiteCache(cache))
        assert 10 < answered < 110  # some of chunk two's answers were stored before the kill

        stub.reset(default=Reply(VERDICT))
        assert main(command(data, out, cache, stub.url)[3:]) == 0  # the re-run, in process
    finally:
        stub.close()
    asked = [sample_of(r) for r in stub.requests]
    assert len(asked) == 110 - answered  # only the unanswered samples were asked again
    assert not set(asked) & {keys[row["line"] - 1] for row in finished}
    rows = [json.loads(row) for row in results.read_text().splitlines()]
    assert [row["line"] for row in rows] == list(range(1, 1101))  # none lost, none doubled
    assert [row["index"] for row in rows] == list(range(1100))
    assert all(row[NAME] == 1.0 for row in rows)

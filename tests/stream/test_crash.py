"""A run killed midway leaves a results.jsonl whose every line is a complete, valid row."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .._builders import call, conversation


def test_killed_run_leaves_valid_partial_results(tmp_path: Path) -> None:
    sample = conversation([call("a", x=1), call("b")], reference=[call("a", x=1), call("b")])
    line = sample.model_dump_json(exclude_none=True) + "\n"
    data = tmp_path / "data.jsonl"
    data.write_text(line * 200_000)
    out = tmp_path / "out"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "turneval.cli",
            "evaluate",
            str(data),
            "--metric",
            "tool_call_f1",
            "--metric",
            "trajectory_recall",
            "--out",
            str(out),
            "--workers",
            "1",
            "--quiet",
        ],
        stdout=subprocess.DEVNULL,
    )
    results = out / "results.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (
        not results.exists() or results.stat().st_size < 400_000  # > 1,000 rows of ~230 bytes
    ):
        time.sleep(0.05)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    text = results.read_text()
    rows = [json.loads(row) for row in text.splitlines()]
    assert 1_000 <= len(rows) < 200_000  # stopped midway
    assert text.endswith("\n")  # no torn line
    assert [row["index"] for row in rows] == list(range(len(rows)))
    assert all(row["tool_call_f1"] == 1.0 for row in rows)

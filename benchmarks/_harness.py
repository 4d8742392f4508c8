"""Shared by the benchmark orchestrators: run one side in a venv, read its JSON."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_RAGAS_PYTHON = os.environ.get("RAGAS_PYTHON", str(HERE / ".ragas-venv" / "bin" / "python"))


def run_side(python: str, script: str, *args: str) -> dict[str, Any]:
    """Run ``script`` (a file beside this one) with ``python`` and parse its JSON output."""
    env = {**os.environ, "RAGAS_DO_NOT_TRACK": "true"}
    out = subprocess.run(
        [python, str(HERE / script), *args], check=True, capture_output=True, text=True, env=env
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def alternate(
    rounds: int, sides: list[tuple[str, str]], *call: Any
) -> list[dict[str, dict[str, Any]]]:
    """Run every side once per round, reversing the order every other round."""
    results = []
    for index in range(rounds):
        order = sides if index % 2 == 0 else list(reversed(sides))
        results.append({lib: call[0](python, lib, *call[1:]) for lib, python in order})
    return results


class Server:
    """One side started in ``--serve`` mode: timed passes on request, one JSON line each.

    Both libraries stay loaded for the whole run, so the orchestrator can alternate them pass by
    pass: measurements compared with each other are taken a fraction of a second apart instead
    of a whole side's run apart (this machine's speed drifts by up to 2x within a minute).
    """

    def __init__(self, python: str, script: str, *args: str) -> None:
        env = {**os.environ, "RAGAS_DO_NOT_TRACK": "true"}
        self.process = subprocess.Popen(
            [python, str(HERE / script), *args, "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.variants: list[str] = self._read()["ready"]

    def _read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"side exited with {self.process.wait()}")
        return dict(json.loads(line))

    def request(self, **fields: Any) -> dict[str, Any]:
        """Send one request and return the side's answer."""
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(fields) + "\n")
        self.process.stdin.flush()
        return self._read()

    def close(self) -> None:
        """End the side (it stops when its stdin closes)."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait()

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

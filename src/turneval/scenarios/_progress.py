"""The progress file of a generation: every answer appended as it comes, read back on a rerun.

A rerun (after a crash, or with more scenarios) asks only the requests the file does not hold.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from turneval.results import SampleResult

__all__ = ["progress_recorder", "read_progress"]


def read_progress(path: Path | None) -> dict[str, Any]:
    """The answers a progress file holds, by request key (a torn last line is skipped)."""
    if path is None or not path.exists():
        return {}
    answers: dict[str, Any] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
            answers[str(entry["key"])] = entry["answer"]
        except (ValueError, KeyError, TypeError):
            continue  # a line cut by a crash: that request is asked again
    return answers


def progress_recorder(path: Path | None, name: str) -> Callable[[SampleResult], None] | None:
    """A run's ``on_row`` that appends each answer of the job ``name`` to ``path`` (None: no file)."""
    if path is None:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)

    def record(row: SampleResult) -> None:
        result = row.results.get(name)
        if result is None or row.sample is None:
            return
        key = (row.sample.metadata or {}).get("ask")
        line = json.dumps({"key": key, "answer": result.details.get("answer")}, ensure_ascii=False)
        with path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")

    return record

"""Rows the store's tests write: six samples, two of them with the wrong tool call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

CALL = {"name": "search", "args": {"q": "x"}}
WRONG = {"name": "delete", "args": {"q": "x"}}


def sample_row(number: int, good: bool) -> dict[str, Any]:
    return {
        "user_input": [
            {"type": "human", "content": f"find x <b>{number}</b>"},
            {"type": "ai", "content": "", "tool_calls": [CALL if good else WRONG]},
        ],
        "reference_tool_calls": [CALL],
        "metadata": {"id": f"s{number}"},
    }


# rows 0..5: tool_call_f1 is 1 where good, 0 where the call is wrong (rows 1 and 4)
GOOD = [True, False, True, True, False, True]
JUDGED = "agent_goal_accuracy_with_reference"


def write_data(path: Path) -> Path:
    path.write_text("".join(json.dumps(sample_row(i, g)) + "\n" for i, g in enumerate(GOOD)))
    return path

"""Convert τ-bench's published trajectories into the labeled example turneval ships.

Source: sierra-research/tau-bench (MIT License, Copyright (c) 2024 Sierra),
``historical_trajectories/gpt-4o-airline.json``: gpt-4o as the airline agent, 50 tasks x 4
trials, each with the environment's 0/1 reward (did the database end in the task's goal
state). This script keeps trials 0 and 1 (100 conversations), drops the agent's system
message (the airline policy, the same in every conversation), converts the OpenAI-format
messages with :func:`turneval.messages.from_openai`, and writes one JSON line per
conversation, gzip-compressed, to ``src/turneval/data/taubench_airline.jsonl.gz``::

    {"sample": {...MultiTurnSample...}, "label": 1, "reason": "tau-bench reward 1.0"}

The reward is the label of ``AgentGoalAccuracyWithoutReference``: 1 when the conversation
achieved what the user wanted.

Usage: python scripts/convert_taubench.py PATH/TO/tau-bench [OUT]
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

from turneval import MultiTurnSample
from turneval.messages import from_openai

SOURCE = "historical_trajectories/gpt-4o-airline.json"
TRIALS = (0, 1)


def convert(repository: Path, out: Path) -> int:
    """Write the labeled example; returns the number of conversations."""
    records = json.loads((repository / SOURCE).read_text(encoding="utf-8"))
    lines = []
    for record in sorted(records, key=lambda r: (r["trial"], r["task_id"])):
        if record["trial"] not in TRIALS:
            continue
        messages = from_openai([m for m in record["traj"] if m["role"] != "system"])
        task, trial = int(record["task_id"]), int(record["trial"])
        sample = MultiTurnSample(
            user_input=messages,
            metadata={"id": f"airline-{task}-{trial}", "task_id": task, "trial": trial},
        )
        reward = float(record["reward"])
        lines.append(
            json.dumps(
                {
                    "sample": sample.model_dump(mode="json", exclude_none=True),
                    "label": int(reward),
                    "reason": f"tau-bench reward {reward:g}",
                },
                ensure_ascii=False,
                sort_keys=True,
            )
        )
    # mtime=0: the same input gives the same bytes
    with gzip.GzipFile(out, "wb", mtime=0, compresslevel=9) as handle:
        handle.write(("\n".join(lines) + "\n").encode("utf-8"))
    return len(lines)


if __name__ == "__main__":
    repository = Path(sys.argv[1])
    out = Path(
        sys.argv[2]
        if len(sys.argv) > 2
        else Path(__file__).parents[1] / "src/turneval/data/taubench_airline.jsonl.gz"
    )
    print(f"wrote {convert(repository, out)} conversations to {out}")

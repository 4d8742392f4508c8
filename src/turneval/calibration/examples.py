"""A labeled example that ships with turneval: τ-bench's airline conversations and rewards.

100 conversations of gpt-4o as τ-bench's airline agent (trials 0 and 1 of its 50 tasks), from
sierra-research/tau-bench's published ``historical_trajectories`` (MIT License, Copyright (c)
2024 Sierra), each labeled with the environment's 0/1 reward: whether the database ended in
the task's goal state. The reward is a label for ``AgentGoalAccuracyWithoutReference``. The
agent's system message (the airline policy) is left out. ``scripts/convert_taubench.py``
made the file from the repository once.
"""

from __future__ import annotations

import gzip
import json
from importlib import resources
from os import PathLike
from pathlib import Path

from turneval.samples import MultiTurnSample

__all__ = ["TAU_BENCH_METRIC", "tau_bench_airline", "write_tau_bench_airline"]

TAU_BENCH_METRIC = "agent_goal_accuracy_without_reference"
"""The metric τ-bench's rewards label."""

_FILE = "taubench_airline.jsonl.gz"


def tau_bench_airline(limit: int | None = None) -> list[tuple[MultiTurnSample, float, str]]:
    """The labeled conversations: ``(sample, reward, reason)``, at most ``limit`` of them.

    Each sample's ``metadata`` has its ``id`` (``airline-<task>-<trial>``), ``task_id`` and
    ``trial``.
    """
    data = resources.files("turneval").joinpath("data").joinpath(_FILE).read_bytes()
    rows = []
    for line in gzip.decompress(data).decode("utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        sample = MultiTurnSample.model_validate(record["sample"])
        rows.append((sample, float(record["label"]), str(record["reason"])))
        if limit is not None and len(rows) >= limit:
            break
    return rows


def write_tau_bench_airline(
    folder: str | PathLike[str], limit: int | None = None
) -> tuple[Path, Path]:
    """Write the example as the files ``turneval optimize --data --labels`` reads.

    Returns:
        ``(data.jsonl, labels.jsonl)`` in ``folder`` (created if missing).
    """
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    data, labels = target / "data.jsonl", target / "labels.jsonl"
    rows = tau_bench_airline(limit)
    data.write_text(
        "".join(sample.model_dump_json(exclude_none=True) + "\n" for sample, _, _ in rows),
        encoding="utf-8",
    )
    labels.write_text(
        "".join(
            json.dumps({"index": i, "metric": TAU_BENCH_METRIC, "label": int(v), "reason": r})
            + "\n"
            for i, (_, v, r) in enumerate(rows)
        ),
        encoding="utf-8",
    )
    return data, labels

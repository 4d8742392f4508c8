"""Scenario JSONL: written so that ``Scenario.from_jsonl``, ``simulate`` and ``EvalTask`` read it.

A scenario's world is an object, not data: :func:`write_scenarios` leaves it out (each
generated scenario names its world in ``metadata["generated"]["world"]``), and :func:`load`
reads the file back with the world attached, checking the name, and gives a near-miss
variant whose tool fails (``metadata["generated"]["fault"]``) a copy of the world with that
fault on every call of that tool.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from os import PathLike
from pathlib import Path
from typing import Any

from turneval.errors import ConfigError
from turneval.simulation import Scenario
from turneval.worlds import Faults, ToolWorld

__all__ = [
    "faulty_world",
    "load",
    "scenario_record",
    "write_scenarios",
]


def scenario_record(scenario: Scenario) -> dict[str, Any]:
    """A scenario as one JSON object (its world left out; unset fields too)."""
    record: dict[str, Any] = scenario.model_dump(mode="json", exclude={"world"}, exclude_none=True)
    return record


def write_scenarios(scenarios: Sequence[Scenario], path: str | PathLike[str]) -> Path:
    """Write scenarios one JSON object a line; returns the path."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    lines = "".join(
        json.dumps(scenario_record(s), ensure_ascii=False, sort_keys=False) + "\n"
        for s in scenarios
    )
    target.write_text(lines, encoding="utf-8")
    return target


def faulty_world(world: ToolWorld, fault: Any, where: str = "scenario") -> ToolWorld:
    """A copy of ``world`` whose tool ``fault["tool"]`` fails on every call (``fault["kind"]``).

    Raises:
        ConfigError: the fault names no tool of the world, or an unknown kind.
    """
    if not isinstance(fault, dict) or fault.get("tool") not in world.tools:
        raise ConfigError(
            f"{where}: its fault {fault!r} names no tool of world {world.name!r} "
            f"(its tools: {sorted(world.tools)})"
        )
    kind = str(fault.get("kind", "error"))
    try:
        faults = Faults(**{f"{kind}_rate": 1.0})
    except Exception as exc:
        raise ConfigError(f"{where}: unknown fault kind {kind!r}") from exc
    copy = world.fresh()
    copy.faults = {str(fault["tool"]): faults}
    return copy


def load(path: str | PathLike[str], *, world: ToolWorld | None = None) -> list[Scenario]:
    """Read a scenario file; with ``world``, every scenario plays on it.

    A generated scenario that names another world (``metadata["generated"]["world"]``) is
    refused, and one with a fault gets a copy of ``world`` whose faulty tool fails on every
    call (the kind of failure its fault says).

    Raises:
        InvalidSampleError: a line is no scenario (naming the line and field).
        ConfigError: a scenario was generated for another world, or its fault names no tool.
    """
    scenarios = Scenario.from_jsonl(path)
    if world is None:
        return scenarios
    attached = []
    for number, scenario in enumerate(scenarios, start=1):
        where = f"{path}: line {number} (scenario {scenario.id})"
        record = (scenario.metadata or {}).get("generated") or {}
        named = record.get("world") if isinstance(record, dict) else None
        if named is not None and named != world.name:
            raise ConfigError(f"{where}: it was generated for world {named!r}, not {world.name!r}")
        fault = record.get("fault") if isinstance(record, dict) else None
        played = world if fault is None else faulty_world(world, fault, where)
        attached.append(
            Scenario.model_validate({**scenario.model_dump(exclude={"world"}), "world": played})
        )
    return attached

"""Generated scenarios checked on their world (reference actions replayed) and named.

A world scenario's reference actions are replayed on a copy of its world; one that fails is
discarded with the reason, one that succeeds records the expected end state.
"""

from __future__ import annotations

import json

import anyio

from turneval.simulation import Scenario
from turneval.worlds import ToolWorld

__all__ = ["named", "replay_on_world"]


async def replay_on_world(
    world: ToolWorld, scenario: Scenario, timeout: float
) -> tuple[Scenario | None, str | None]:
    """The scenario with its expected end state, or the reason its actions fail on ``world``."""
    calls = scenario.reference_tool_calls or []
    try:
        with anyio.fail_after(timeout):
            replay = await world.areplay(calls, scenario.initial_state)
    except TimeoutError:
        return None, f"its reference actions did not finish within {timeout:g}s on the world"
    except Exception as exc:  # a state the world cannot take: this scenario only
        return None, f"its reference actions could not be replayed: {type(exc).__name__}: {exc}"
    for number, entry in enumerate(replay.calls, start=1):
        if "error" in entry:
            args = json.dumps(entry.get("args"), ensure_ascii=False, sort_keys=True)
            return None, (
                f"reference action {number} of {len(replay.calls)}, {entry['tool']}({args}), "
                f"failed on the world: {entry['error']}"
            )
    try:
        state = replay.state
    except Exception as exc:
        return None, f"the end state could not be recorded: {type(exc).__name__}: {exc}"
    metadata = dict(scenario.metadata or {})
    metadata["generated"] = {**metadata.get("generated", {}), "expected_end_state": state}
    return scenario.model_copy(update={"metadata": metadata, "world": world}), None


def named(scenarios: list[Scenario], prefix: str, taken: set[str]) -> list[Scenario]:
    """``scenarios`` with ids ``<prefix>-001``, ... none of them in ``taken`` (which grows)."""
    named = []
    for number, scenario in enumerate(scenarios, start=1):
        base = f"{prefix}-{number:03d}"
        name, again = base, 2
        while name in taken:
            name, again = f"{base}-{again}", again + 1
        taken.add(name)
        named.append(scenario.model_copy(update={"id": name}))
    return named

"""End-state metrics: what the agent changed in its tool world, not which calls it made.

A trial run against a :class:`~turneval.worlds.ToolWorld` records on its sample
``metadata["world"]``: ``initial_state``, ``end_state``, ``reference_state`` (where the
scenario's reference actions lead from the same initial state), ``calls`` and ``faults``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pydantic import Field, field_validator

from turneval.errors import InvalidSampleError
from turneval.metrics.base import Explained, MultiTurnMetric, Outcome
from turneval.samples import MultiTurnSample
from turneval.worlds import (
    ToolWorld,
    WorldStateError,
    compare_states,
    path_matches,
    path_segments,
)

__all__ = ["EndStateMatch", "StateAssertions"]


def _world_record(metric: str, sample: MultiTurnSample, key: str) -> Any:
    record = (sample.metadata or {}).get("world")
    if not isinstance(record, Mapping) or key not in record:
        raise InvalidSampleError(
            f"metric {metric!r} needs the sample's metadata['world'][{key!r}] (recorded when a "
            "scenario with a world is played), which is missing",
            field=f"metadata.world.{key}",
        )
    return record[key]


def state_differences(
    expected: Any, actual: Any, ignore: Sequence[str] = ()
) -> tuple[list[dict[str, Any]], int]:
    """Where two states differ (each difference a dict), and how many ``ignore`` left out.

    :func:`~turneval.worlds.compare_states` compares them: mappings key by key and sets
    element by element (order-free), lists item by item, objects by their own ``__eq__``
    or attribute by attribute. Each difference is ``{"path", "kind", "expected", "actual"}``
    (and a ``note`` where one helps), ``kind`` one of ``changed``, ``missing`` (in the
    reference only) or ``unexpected`` (in the end state only).
    """
    found = [difference.to_dict() for difference in compare_states(expected, actual)]
    return _kept(found, ignore)


def _kept(
    differences: Sequence[Mapping[str, Any]], ignore: Sequence[str]
) -> tuple[list[dict[str, Any]], int]:
    kept = [dict(d) for d in differences if not (ignore and path_matches(str(d["path"]), ignore))]
    return kept, len(differences) - len(kept)


def _recorded(metric: str, record: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The differences the run recorded (the live states compared), checked."""
    found = record["differences"]
    if not isinstance(found, list) or not all(
        isinstance(d, Mapping) and isinstance(d.get("path"), str) and "kind" in d for d in found
    ):
        raise InvalidSampleError(
            f"metric {metric!r} reads metadata['world']['differences'] as a list of "
            "{'path', 'kind', ...} records, got something else",
            field="metadata.world.differences",
        )
    return found


def _brief(difference: Mapping[str, Any]) -> str:
    kind, path = difference["kind"], difference["path"]
    note = f" ({difference['note']})" if difference.get("note") else ""
    if kind == "missing":
        return f"{path}: expected {difference.get('expected')!r}, missing{note}"
    if kind == "unexpected":
        return f"{path}: unexpected {difference.get('actual')!r}{note}"
    return (
        f"{path}: expected {difference.get('expected')!r}, got {difference.get('actual')!r}{note}"
    )


class EndStateMatch(MultiTurnMetric):
    """1.0 when the world's end state equals the reference end state, else 0.0 (τ-bench).

    The reference end state is where the scenario's reference actions lead from the same
    initial state: recorded on the sample by the run (``metadata["world"]["reference_state"]``)
    or, with ``world`` set, computed by replaying the sample's ``reference_tool_calls`` on a
    fresh copy of ``world`` from ``metadata["world"]["initial_state"]``. Any trajectory that
    reaches the same state scores 1.0. ``ignore`` lists field paths left out of the
    comparison (dotted, ``*`` matching one segment, list items by index: ``"orders.*.note"``);
    a rule ignores everything below the path it matches. The differences are listed in the
    reason and in ``details["differences"]``.

    Attributes:
        ignore: Field paths not compared.
        world: A world to replay the reference actions on (default: use the recorded
            reference state).
    """

    name: str = "end_state_match"
    ignore: list[str] = Field(default_factory=list)
    world: ToolWorld | None = None

    @field_validator("ignore")
    @classmethod
    def _check_ignore(cls, rules: list[str]) -> list[str]:
        for rule in rules:
            if not path_segments(rule):
                raise ValueError(f"ignore rules must name a field path, got {rule!r}")
        return rules

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        actual = _world_record(self.name, sample, "end_state")
        record: Mapping[str, Any] = (sample.metadata or {})["world"]
        try:
            if self.world is not None:
                calls = sample.reference_tool_calls
                if calls is None:
                    raise InvalidSampleError(
                        f"metric {self.name!r} replays the sample's reference_tool_calls, "
                        "which are missing",
                        field="reference_tool_calls",
                    )
                replayed = await self.world.areplay(calls, record.get("initial_state"))
                differences, ignored = state_differences(replayed.state, actual, self.ignore)
            elif "differences" in record:  # the run compared the live states
                differences, ignored = _kept(_recorded(self.name, record), self.ignore)
            else:
                expected = _world_record(self.name, sample, "reference_state")
                differences, ignored = state_differences(expected, actual, self.ignore)
        except WorldStateError as exc:
            raise InvalidSampleError(
                f"metric {self.name!r} cannot compare the states: {exc}", field="metadata.world"
            ) from exc
        skipped = f" ({ignored} difference(s) ignored)" if ignored else ""
        if not differences:
            reason = f"the end state matches the reference end state{skipped}: 1.0"
        else:
            shown = "; ".join(_brief(d) for d in differences[:5])
            more = f"; and {len(differences) - 5} more" if len(differences) > 5 else ""
            count = len(differences)
            reason = f"{count} difference(s) from the reference end state{skipped}: {shown}{more}"
        details: dict[str, Any] = {"differences": differences, "ignored_differences": ignored}
        objects = record.get("objects")
        if isinstance(objects, list):  # a world of several objects: a verdict for each
            first = [path_segments(str(d["path"]))[:1] for d in differences]
            details["objects"] = {str(name): [str(name)] not in first for name in objects}
        return Explained(0.0 if differences else 1.0, reason, details)


class StateAssertions(MultiTurnMetric):
    """Share of named predicates that hold on the world's end state, each one reported.

    Each predicate takes the end state (``metadata["world"]["end_state"]``, a JSON value)
    and returns a truthy value when it holds; a predicate that raises counts as failed,
    with its error. ``details["assertions"]`` lists every one (``name``, ``passed``,
    ``error``); with a success threshold of 1.0 (the default in trials) a trial succeeds only
    when all hold.

    Attributes:
        assertions: Predicates by name, e.g.
            ``{"A100 cancelled": lambda s: s["orders"]["A100"]["status"] == "cancelled"}``.
    """

    name: str = "state_assertions"
    assertions: dict[str, Callable[[Any], Any]]

    @field_validator("assertions")
    @classmethod
    def _not_empty(cls, assertions: dict[str, Callable[[Any], Any]]) -> dict[str, Any]:
        if not assertions:
            raise ValueError("give at least one assertion (name -> predicate on the end state)")
        return assertions

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        state = _world_record(self.name, sample, "end_state")
        checks: list[dict[str, Any]] = []
        for label, predicate in self.assertions.items():
            try:
                checks.append({"name": label, "passed": bool(predicate(state)), "error": None})
            except Exception as exc:  # a predicate that cannot be evaluated fails
                checks.append(
                    {"name": label, "passed": False, "error": f"{type(exc).__name__}: {exc}"}
                )
        passed = sum(check["passed"] for check in checks)
        value = passed / len(checks)
        failed = [
            check["name"] + (f" ({check['error']})" if check["error"] else "")
            for check in checks
            if not check["passed"]
        ]
        reason = f"{passed}/{len(checks)} assertions hold = {value:.3f}"
        if failed:
            reason += "; failed: " + ", ".join(failed)
        return Explained(value, reason, {"assertions": checks})

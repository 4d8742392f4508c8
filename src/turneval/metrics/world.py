"""End-state metrics: what the agent changed in its tool world, not which calls it made.

A trial run against a :class:`~turneval.worlds.ToolWorld` records on its sample
``metadata["world"]``: ``initial_state``, ``end_state``, ``reference_state`` (where the
scenario's reference actions lead from the same initial state), ``calls`` and ``faults``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from fnmatch import fnmatchcase
from typing import Any

from pydantic import Field, field_validator

from turneval.errors import InvalidSampleError
from turneval.metrics.base import Explained, MultiTurnMetric, Outcome
from turneval.samples import MultiTurnSample
from turneval.worlds import ToolWorld

__all__ = ["EndStateMatch", "StateAssertions"]

_ABSENT = object()


def _world_record(metric: str, sample: MultiTurnSample, key: str) -> Any:
    record = (sample.metadata or {}).get("world")
    if not isinstance(record, Mapping) or key not in record:
        raise InvalidSampleError(
            f"metric {metric!r} needs the sample's metadata['world'][{key!r}] (recorded when a "
            "scenario with a world is played), which is missing",
            field=f"metadata.world.{key}",
        )
    return record[key]


def _segments(rule: str) -> list[str]:
    return [part for part in rule.replace("[", ".").replace("]", "").split(".") if part]


def _ignored(path: list[str], rules: list[list[str]]) -> bool:
    """A rule ignores a path it matches segment by segment (``*`` globs), and all below it."""
    return any(
        len(rule) <= len(path) and all(fnmatchcase(p, r) for p, r in zip(path, rule, strict=False))
        for rule in rules
    )


def _show(path: list[str]) -> str:
    return ".".join(path) or "(state)"


def state_differences(
    expected: Any, actual: Any, ignore: list[str] | tuple[str, ...] = ()
) -> tuple[list[dict[str, Any]], int]:
    """Where two JSON states differ, field by field, and how many fields the rules ignored.

    Dicts are compared key by key, lists item by item (a length difference shows as missing
    or unexpected items); each difference is ``{"path", "kind", "expected", "actual"}`` with
    ``kind`` one of ``changed``, ``missing`` (in the reference only) or ``unexpected`` (in the
    end state only).
    """
    rules = [_segments(rule) for rule in ignore]
    differences: list[dict[str, Any]] = []
    ignored = 0

    def walk(path: list[str], want: Any, got: Any) -> None:
        nonlocal ignored
        if path and _ignored(path, rules):
            ignored += 1
            return
        if isinstance(want, dict) and isinstance(got, dict):
            for key in sorted(set(want) | set(got), key=str):
                walk([*path, str(key)], want.get(key, _ABSENT), got.get(key, _ABSENT))
            return
        if isinstance(want, list) and isinstance(got, list):
            for index in range(max(len(want), len(got))):
                walk(
                    [*path, str(index)],
                    want[index] if index < len(want) else _ABSENT,
                    got[index] if index < len(got) else _ABSENT,
                )
            return
        if want is _ABSENT:
            differences.append({"path": _show(path), "kind": "unexpected", "actual": got})
        elif got is _ABSENT:
            differences.append({"path": _show(path), "kind": "missing", "expected": want})
        elif want != got or (type(want) is not type(got) and not _numbers(want, got)):
            differences.append(
                {"path": _show(path), "kind": "changed", "expected": want, "actual": got}
            )

    walk([], expected, actual)
    return differences, ignored


def _numbers(a: Any, b: Any) -> bool:
    return all(isinstance(x, int | float) and not isinstance(x, bool) for x in (a, b))


def _brief(difference: Mapping[str, Any]) -> str:
    kind, path = difference["kind"], difference["path"]
    if kind == "changed":
        return f"{path}: expected {difference['expected']!r}, got {difference['actual']!r}"
    if kind == "missing":
        return f"{path}: expected {difference['expected']!r}, missing"
    return f"{path}: unexpected {difference['actual']!r}"


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
            if not _segments(rule):
                raise ValueError(f"ignore rules must name a field path, got {rule!r}")
        return rules

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        actual = _world_record(self.name, sample, "end_state")
        if self.world is not None:
            calls = sample.reference_tool_calls
            if calls is None:
                raise InvalidSampleError(
                    f"metric {self.name!r} replays the sample's reference_tool_calls, which are "
                    "missing",
                    field="reference_tool_calls",
                )
            record = (sample.metadata or {}).get("world") or {}
            replayed = await self.world.areplay(calls, record.get("initial_state"))
            expected = replayed.state
        else:
            expected = _world_record(self.name, sample, "reference_state")
        differences, ignored = state_differences(expected, actual, self.ignore)
        skipped = f" ({ignored} field(s) ignored)" if ignored else ""
        if not differences:
            reason = f"the end state matches the reference end state{skipped}: 1.0"
        else:
            shown = "; ".join(_brief(d) for d in differences[:5])
            more = f"; and {len(differences) - 5} more" if len(differences) > 5 else ""
            count = len(differences)
            reason = f"{count} difference(s) from the reference end state{skipped}: {shown}{more}"
        return Explained(
            0.0 if differences else 1.0,
            reason,
            {"differences": differences, "ignored_fields": ignored},
        )


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

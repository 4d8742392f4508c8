"""Agent behaviour, rule-based: tool permissions, loops, wasted calls and step budgets.

None of these needs a reference. Calls are read as the tool-call metrics read them (every
AIMessage's ``tool_calls``, flattened in order), each with the index of its message in
``user_input``, the number of human turns before it, and the ToolMessage that answered it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from fnmatch import translate
from functools import cached_property
from typing import Any

from pydantic import Field, field_validator

from turneval.errors import InvalidSampleError
from turneval.messages import AIMessage
from turneval.metrics._matching import call_key
from turneval.metrics._tools import CallRecord, call_records
from turneval.metrics.agents import PerAgentMetric
from turneval.metrics.base import Outcome
from turneval.results import ratio
from turneval.samples import MultiTurnSample

__all__ = ["AgentLoopDetection", "StepBudget", "ToolCallEfficiency", "ToolPermission"]


@dataclass(slots=True)
class _Lazy(Outcome):
    """A value now; reason and details built only when asked for."""

    value: float
    build: Callable[[bool], tuple[str, dict[str, Any]]]

    def explain(self, details: bool = True) -> tuple[str, dict[str, Any]]:
        return self.build(details)


def _where(record: CallRecord) -> str:
    return f"{record.call.pretty_repr()} at user_input[{record.message}]"


# -- ToolPermission ---------------------------------------------------------------------------


def _patterns(value: list[str] | None, field: str) -> list[str] | None:
    if value is None:
        return None
    for pattern in value:
        if not isinstance(pattern, str) or not pattern:
            raise ValueError(f"{field} patterns must be non-empty strings, got {pattern!r}")
    return list(value)


def _first_match(patterns: list[str], name: str) -> str | None:
    for pattern in patterns:
        if re.match(translate(pattern), name):
            return pattern
    return None


class _Policy:
    """Allow/deny glob patterns, with a verdict cache per tool name."""

    __slots__ = ("_allowed", "_cache", "_denied", "allowed", "denied")

    def __init__(self, allowed: list[str] | None, denied: list[str] | None) -> None:
        self.allowed, self.denied = allowed, denied or []
        self._allowed = None if allowed is None else _compile(allowed)
        self._denied = _compile(self.denied)
        self._cache: dict[str, bool] = {}

    def authorised(self, name: str) -> bool:
        verdict = self._cache.get(name)
        if verdict is None:
            allowed = self._allowed is None or self._allowed.match(name) is not None
            verdict = allowed and self._denied.match(name) is None
            if len(self._cache) < 4096:
                self._cache[name] = verdict
        return verdict

    def why(self, name: str) -> str:
        denial = _first_match(self.denied, name)
        if denial is not None:
            return f"denied by {denial!r}"
        return f"not in allowed {self.allowed}"


def _compile(patterns: list[str]) -> re.Pattern[str]:
    if not patterns:
        return re.compile(r"(?!)")  # matches nothing
    return re.compile("|".join(translate(pattern) for pattern in patterns))


class ToolPermission(PerAgentMetric):
    """Share of tool calls that are authorised: allowed (if a list is given) and not denied.

    Patterns are shell-style globs on tool names (``"delete_*"``, ``"db.?et"``), matched
    case-sensitively; a denial wins over an allowance. Without ``allowed`` and ``denied`` the
    sample's ``metadata["allowed_tools"]`` / ``metadata["denied_tools"]`` are used. No calls:
    1.0. The reason lists each unauthorised call with its message index.

    Attributes:
        allowed: Patterns of the tools the agent may call; None allows every tool not denied.
        denied: Patterns of the tools the agent must not call.
    """

    name: str = "tool_permission"
    allowed: list[str] | None = None
    denied: list[str] | None = None

    @field_validator("allowed", "denied")
    @classmethod
    def _check_patterns(cls, value: list[str] | None, info: Any) -> list[str] | None:
        return _patterns(value, info.field_name)

    @cached_property
    def _policy(self) -> _Policy | None:
        if self.allowed is None and self.denied is None:
            return None
        return _Policy(self.allowed, self.denied)

    def _sample_policy(self, sample: MultiTurnSample) -> _Policy:
        metadata = sample.metadata or {}
        allowed, denied = metadata.get("allowed_tools"), metadata.get("denied_tools")
        if allowed is None and denied is None:
            raise InvalidSampleError(
                f"metric {self.name!r} needs allowed=/denied= patterns or the sample's "
                "metadata['allowed_tools'] / metadata['denied_tools'], which are missing",
                field="metadata.allowed_tools",
            )
        checked = []
        for key, value in (("allowed_tools", allowed), ("denied_tools", denied)):
            if value is not None and not (
                isinstance(value, list) and all(isinstance(p, str) and p for p in value)
            ):
                raise InvalidSampleError(
                    f"metadata[{key!r}] must be a list of non-empty tool-name patterns, "
                    f"got {value!r}",
                    field=f"metadata.{key}",
                )
            checked.append(value)
        return _Policy(checked[0], checked[1])

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        policy = self._policy or self._sample_policy(sample)
        authorised = policy.authorised
        total = granted = 0
        for message in sample.user_input:
            if type(message) is AIMessage and message.tool_calls:
                for call in message.tool_calls:
                    name = call.name
                    if not name:
                        call_records(self, sample)  # raises, naming the message and call
                    total += 1
                    granted += authorised(name)
        value = granted / total if total else 1.0

        def build(details: bool) -> tuple[str, dict[str, Any]]:
            if not total:
                return "no tool calls: 1.0", {"unauthorised": []} if details else {}
            denied = [r for r in call_records(self, sample) if not authorised(r.call.name)]
            reason = ratio("authorised", granted, total, value)
            if denied:
                reason += "; unauthorised: " + "; ".join(
                    f"{_where(r)} ({policy.why(r.call.name)})" for r in denied
                )
            evidence: dict[str, Any] = {}
            if details:
                evidence = {
                    "unauthorised": [
                        {
                            "message_index": r.message,
                            "call": r.call.pretty_repr(),
                            "why": policy.why(r.call.name),
                        }
                        for r in denied
                    ],
                    "allowed": policy.allowed,
                    "denied": policy.denied,
                }
            return reason, evidence

        return _Lazy(value, build)


# -- Loops and redundant calls ----------------------------------------------------------------


def _turns(records: list[CallRecord]) -> list[list[CallRecord]]:
    """The calls grouped by turn (the stretch between two human messages)."""
    groups: list[list[CallRecord]] = []
    turn = -1
    for record in records:
        if record.turn != turn:
            groups.append([])
            turn = record.turn
        groups[-1].append(record)
    return groups


def _has_repeat(records: list[CallRecord]) -> bool:
    names = [record.call.name for record in records]
    return len(set(names)) < len(names)


def _find_loops(group: list[CallRecord], max_repeats: int) -> list[dict[str, Any]]:
    """The loops of one turn.

    Repeats beyond ``max_repeats``, cycles of >= 2 calls done more than ``max_repeats`` times
    back to back, and calls repeated with the same result.
    """
    keys: list[Hashable] = [call_key(record.call) for record in group]
    loops: list[dict[str, Any]] = []
    positions: dict[Hashable, list[int]] = {}
    for index, key in enumerate(keys):
        positions.setdefault(key, []).append(index)
    for where in positions.values():
        if len(where) > max_repeats:
            first = group[where[0]]
            loops.append(
                {
                    "kind": "repeat",
                    "call": first.call.pretty_repr(),
                    "count": len(where),
                    "message_indices": [group[i].message for i in where],
                    "text": f"{first.call.pretty_repr()} called {len(where)} times in one turn "
                    f"(max_repeats={max_repeats}), at user_input"
                    f"{[group[i].message for i in where]}",
                }
            )
    covered: list[tuple[int, int]] = []
    n = len(keys)
    for period in range(2, n // (max_repeats + 1) + 1):
        run = 0
        for start in range(n - period):
            run = run + 1 if keys[start] == keys[start + period] else 0
            if run == period * max_repeats:
                begin = start - run + 1
                end = begin + period * (max_repeats + 1)
                block = keys[begin : begin + period]
                if len(set(block)) == 1 or any(a <= begin and end <= b for a, b in covered):
                    continue
                covered.append((begin, end))
                names = [record.call.name for record in group[begin : begin + period]]
                text = (
                    f"cycle {' -> '.join(names)} done {max_repeats + 1}+ times in a row from "
                    f"user_input[{group[begin].message}]"
                )
                loops.append(
                    {
                        "kind": "cycle",
                        "calls": [r.call.pretty_repr() for r in group[begin : begin + period]],
                        "message_indices": [r.message for r in group[begin:end]],
                        "text": text,
                    }
                )
    seen: dict[Hashable, CallRecord] = {}
    reported: set[Hashable] = set()  # one finding per call, at its first same-result repeat
    for key, record in zip(keys, group, strict=True):
        earlier = seen.get(key)
        if (
            earlier is not None
            and record.result is not None
            and record.result == earlier.result
            and key not in reported
        ):
            reported.add(key)
            loops.append(
                {
                    "kind": "same_result",
                    "call": record.call.pretty_repr(),
                    "message_indices": [earlier.message, record.message],
                    "text": f"{_where(record)} repeats user_input[{earlier.message}] and got "
                    "the same result",
                }
            )
        seen[key] = record
    return loops


class AgentLoopDetection(PerAgentMetric):
    """1.0 when the agent does not loop within a turn, else 0.0, with the loop in the reason.

    Within each turn (the calls between two human messages) a loop is: an identical call
    (same name, args equal as JSON values) made more than ``max_repeats`` times; a cycle, a
    sequence of two or more calls done more than ``max_repeats`` times back to back; or an
    identical call repeated after the first one got a result, getting the same result again.

    Attributes:
        max_repeats: How often the same call, or the same cycle, may occur in one turn.
    """

    name: str = "agent_loop_detection"
    max_repeats: int = Field(default=2, ge=1)

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        records = call_records(self, sample)
        loops: list[dict[str, Any]] = []
        for group in _turns(records):
            if len(group) > 1 and _has_repeat(group):
                loops += _find_loops(group, self.max_repeats)
        value = 0.0 if loops else 1.0

        def build(details: bool) -> tuple[str, dict[str, Any]]:
            if not loops:
                reason = f"no loop in {len(records)} tool calls: 1.0"
            else:
                reason = f"{len(loops)} loop(s): " + "; ".join(loop["text"] for loop in loops)
                reason += ": 0.0"
            return reason, {"loops": loops, "n_calls": len(records)} if details else {}

        return _Lazy(value, build)


class ToolCallEfficiency(PerAgentMetric):
    """Share of tool calls that are neither redundant nor beyond the call budget.

    A call is redundant when an identical call (same name, args equal as JSON values) came
    earlier in the same turn (no new human message between) and both got the same result (two
    calls without a ToolMessage count as the same result). With ``max_calls``, the calls after
    the first ``max_calls`` are beyond the budget. No calls: 1.0.

    Attributes:
        max_calls: The number of tool calls allowed over the whole conversation; None: no
            budget.
    """

    name: str = "tool_call_efficiency"
    max_calls: int | None = Field(default=None, ge=0)

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        records = call_records(self, sample)
        redundant: list[tuple[CallRecord, CallRecord]] = []
        for group in _turns(records):
            if len(group) > 1 and _has_repeat(group):
                seen: dict[tuple[Hashable, str | None], CallRecord] = {}
                for record in group:
                    key = (call_key(record.call), record.result)
                    earlier = seen.get(key)
                    if earlier is None:
                        seen[key] = record
                    else:
                        redundant.append((record, earlier))
        budget = self.max_calls
        over = records[budget:] if budget is not None else []
        wasted = {id(record) for record, _ in redundant} | {id(record) for record in over}
        total = len(records)
        value = (total - len(wasted)) / total if total else 1.0

        def build(details: bool) -> tuple[str, dict[str, Any]]:
            if not total:
                return "no tool calls: 1.0", {}
            reason = ratio("efficient", total - len(wasted), total, value)
            parts = [
                f"redundant: {_where(r)} repeats user_input[{e.message}] with the same result"
                for r, e in redundant
            ]
            if over:
                parts.append(
                    f"{len(over)} call(s) beyond max_calls={budget}, from user_input"
                    f"[{over[0].message}]"
                )
            if parts:
                reason += "; " + "; ".join(parts)
            evidence: dict[str, Any] = {}
            if details:
                evidence = {
                    "redundant": [
                        {
                            "message_index": r.message,
                            "repeats_message_index": e.message,
                            "call": r.call.pretty_repr(),
                        }
                        for r, e in redundant
                    ],
                    "beyond_budget": [
                        {"message_index": r.message, "call": r.call.pretty_repr()} for r in over
                    ],
                    "n_calls": total,
                }
            return reason, evidence

        return _Lazy(value, build)


class StepBudget(PerAgentMetric):
    """1.0 when the agent took at most ``max_steps`` model steps, else ``max_steps/steps``.

    A step is one AI message (one model response), as ``EvalTask`` counts an agent run's
    steps; a sample may state its own count in ``metadata["steps"]``. Without ``max_steps``
    the sample's ``metadata["max_steps"]`` is the budget.

    Attributes:
        max_steps: The number of model steps allowed.
    """

    name: str = "step_budget"
    max_steps: int | None = Field(default=None, ge=1)

    def _read(self, sample: MultiTurnSample, key: str) -> int | None:
        value = (sample.metadata or {}).get(key)
        if value is not None and (
            type(value) is not int or value < (1 if key == "max_steps" else 0)
        ):
            expected = "a positive integer" if key == "max_steps" else "a non-negative integer"
            raise InvalidSampleError(
                f"metadata[{key!r}] must be {expected}, got {value!r}", field=f"metadata.{key}"
            )
        return value

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        budget = self.max_steps or self._read(sample, "max_steps")
        if budget is None:
            raise InvalidSampleError(
                f"metric {self.name!r} needs max_steps= or the sample's metadata['max_steps'], "
                "which is missing",
                field="metadata.max_steps",
            )
        steps = self._read(sample, "steps")
        source = "metadata['steps']"
        if steps is None:
            steps = sum(1 for message in sample.user_input if type(message) is AIMessage)
            source = "AI messages"
        value = 1.0 if steps <= budget else budget / steps

        def build(details: bool) -> tuple[str, dict[str, Any]]:
            if steps <= budget:
                reason = f"{steps} steps ({source}) within max_steps={budget}: 1.0"
            else:
                reason = f"{steps} steps ({source}) over max_steps={budget}: {ratio('budget', budget, steps, value)}"
            return reason, {"steps": steps, "max_steps": budget} if details else {}

        return _Lazy(value, build)

"""Quality you can see: near-duplicates removed, and what a set of scenarios covers.

:func:`deduplicate` keeps the first of every group of scenarios whose goals are near
duplicates: rapidfuzz's ``token_sort_ratio`` (words sorted, case and punctuation ignored) at or
above a threshold, against the scenarios kept so far and any existing ones. A variant that
keeps its original's goal on purpose (:data:`GOAL_KEEPING`: a harder persona, a persona swap,
a failing tool) is compared by its goal with its persona and fault, so it is no duplicate of
its original or of its sibling variants. :func:`coverage`
counts what a set exercises: tools and tool pairs, persona types, difficulties and sources.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from rapidfuzz import fuzz, process, utils

from turneval.errors import ConfigError
from turneval.report import escape_text
from turneval.scenarios._drafts import DIFFICULTIES, PERSONA_TYPES
from turneval.simulation import Scenario

__all__ = [
    "Coverage",
    "DEFAULT_DEDUP_THRESHOLD",
    "Discarded",
    "GOAL_KEEPING",
    "coverage",
    "dedup_text",
    "deduplicate",
    "goal_similarity",
    "scenario_tools",
]

DEFAULT_DEDUP_THRESHOLD = 0.9
"""Goals this similar (``token_sort_ratio`` / 100) or more are near duplicates."""

_ROWS = 512
"""Goals compared at once (a block of the similarity matrix: rows x the goals before them)."""

GOAL_KEEPING = frozenset({"harder_persona", "persona_swap", "tool_fault"})
"""Variant kinds that keep their original's goal: compared with their persona and fault too."""


@dataclass(frozen=True)
class Discarded:
    """A generated scenario that was left out, and why.

    Attributes:
        scenario: The scenario as generated.
        stage: ``replay`` (its reference actions failed on the world) or ``duplicate`` (a near
            duplicate of a scenario kept or existing).
        reason: The failing call and the world's error, or which scenario it duplicates and
            how similar the goals are.
    """

    scenario: Scenario
    stage: Literal["replay", "duplicate"]
    reason: str


def goal_similarity(first: str, second: str) -> float:
    """How alike two goals are, in [0, 1]: ``token_sort_ratio`` of their processed texts."""
    return float(fuzz.token_sort_ratio(first, second, processor=utils.default_process)) / 100


def dedup_text(scenario: Scenario) -> tuple[tuple[str, str], str]:
    """What near duplicates are judged on: a bucket compared exactly, and a text compared fuzzily.

    For most scenarios the bucket is ``("goal", "")`` and the text the goal. A variant that
    keeps its original's goal on purpose (:data:`GOAL_KEEPING`) is bucketed by its kind and
    fault, and its text is its goal with its persona: it is never a duplicate of its original
    or of a variant of another kind.
    """
    record = _generated(scenario)
    kind = str(record.get("kind"))
    if kind not in GOAL_KEEPING:
        return ("goal", ""), scenario.goal
    fault = record.get("fault") or {}
    bucket = (kind, f"{fault.get('tool')} {fault.get('kind')}" if fault else "")
    return bucket, f"{scenario.goal} | persona: {scenario.persona or ''}"


def deduplicate(
    scenarios: Sequence[Scenario],
    *,
    threshold: float | None = DEFAULT_DEDUP_THRESHOLD,
    existing: Sequence[Scenario] = (),
) -> tuple[list[Scenario], list[Discarded]]:
    """The scenarios without near duplicates (the first of each kept), and those removed.

    A scenario is removed when its goal's :func:`goal_similarity` with a goal kept before it,
    or with an ``existing`` scenario's, reaches ``threshold``; a variant that keeps its
    original's goal is compared only with variants of its kind and fault, on its goal and
    persona (:func:`dedup_text`). None keeps every scenario.

    Raises:
        ConfigError: ``threshold`` is not in (0, 1].
    """
    if threshold is None:
        return list(scenarios), []
    if not 0 < threshold <= 1:
        raise ConfigError(f"the deduplication threshold must be in (0, 1], got {threshold}")
    cutoff = threshold * 100
    items = [*existing, *scenarios]
    texts: list[str] = []
    buckets: dict[tuple[str, str], list[int]] = {}
    for position, scenario in enumerate(items):
        bucket, text = dedup_text(scenario)
        # token_sort_ratio is ratio of the sorted words: sorted once here, not per pair
        texts.append(" ".join(sorted(utils.default_process(text).split())))
        buckets.setdefault(bucket, []).append(position)
    matched: dict[int, tuple[int, float]] = {}  # position -> (the kept one it repeats, score)
    for members in buckets.values():
        kept_here = np.zeros(len(members), dtype=bool)
        for start in range(0, len(members), _ROWS):
            rows = members[start : start + _ROWS]
            scores = process.cdist(
                [texts[i] for i in rows],
                [texts[j] for j in members[: start + len(rows)]],
                scorer=fuzz.ratio,
                score_cutoff=cutoff,
                workers=1,
            )
            for offset, position in enumerate(rows):
                local = start + offset
                row = np.where(kept_here[:local], scores[offset, :local], 0.0)
                best = int(np.argmax(row)) if local else 0
                if position >= len(existing) and local and row[best] >= cutoff > 0:
                    matched[position] = (members[best], float(row[best]))
                else:
                    kept_here[local] = True
    names: dict[int, str] = {}
    kept: list[Scenario] = []
    removed: list[Discarded] = []
    for position, scenario in enumerate(items):
        if position < len(existing):
            names[position] = f"existing scenario {scenario.id or position}"
        elif position in matched:
            other, score = matched[position]
            reason = (
                f"near duplicate of {names[other]} (similarity {score / 100:.2f} >= {threshold:g})"
            )
            removed.append(Discarded(scenario, "duplicate", reason))
        else:
            kept.append(scenario)
            names[position] = f"scenario {scenario.id or len(kept) - 1} ({scenario.goal[:60]!r})"
    return kept, removed


def _generated(scenario: Scenario) -> Mapping[str, Any]:
    record = (scenario.metadata or {}).get("generated")
    return record if isinstance(record, Mapping) else {}


def scenario_tools(scenario: Scenario) -> list[str]:
    """The tools a scenario exercises: its reference calls' tools, else those it declares."""
    if scenario.reference_tool_calls:
        return sorted({call.name for call in scenario.reference_tool_calls})
    declared = _generated(scenario).get("tools") or []
    return sorted({str(name) for name in declared})


@dataclass
class Coverage:
    """What a set of scenarios exercises.

    Attributes:
        scenarios: How many scenarios were counted.
        tools: Scenarios exercising each tool (every known tool listed, 0 when none does).
        tool_pairs: Scenarios exercising each pair of tools together.
        personas: Scenarios per persona type (``unknown`` when a scenario has none).
        difficulty: Scenarios per difficulty (``unknown`` when a scenario has none).
        sources: Scenarios per source (``given`` for scenarios that were not generated).
        known_tools: The tools the source offered (the pairs possible come from them).
    """

    scenarios: int = 0
    tools: dict[str, int] = field(default_factory=dict)
    tool_pairs: dict[tuple[str, str], int] = field(default_factory=dict)
    personas: dict[str, int] = field(default_factory=dict)
    difficulty: dict[str, int] = field(default_factory=dict)
    sources: dict[str, int] = field(default_factory=dict)
    known_tools: list[str] = field(default_factory=list)

    @property
    def pairs_possible(self) -> int:
        """Pairs of the known tools (of the tools seen, when none were given)."""
        count = len(self.known_tools or self.tools)
        return count * (count - 1) // 2

    @property
    def unused_tools(self) -> list[str]:
        """Known tools no scenario exercises."""
        return [name for name, count in self.tools.items() if count == 0]

    def to_dict(self) -> dict[str, Any]:
        """The counts as JSON (pairs as ``"a+b"``)."""
        return {
            "scenarios": self.scenarios,
            "tools": dict(self.tools),
            "tool_pairs": {f"{a}+{b}": count for (a, b), count in self.tool_pairs.items()},
            "pairs_possible": self.pairs_possible,
            "personas": dict(self.personas),
            "difficulty": dict(self.difficulty),
            "sources": dict(self.sources),
        }

    def _sections(self) -> list[tuple[str, list[tuple[str, int]]]]:
        pairs = [(f"{a} + {b}", count) for (a, b), count in self.tool_pairs.items()]
        return [
            ("tool", list(self.tools.items())),
            (f"tool pair ({len(pairs)}/{self.pairs_possible} pairs)", pairs),
            ("persona type", list(self.personas.items())),
            ("difficulty", list(self.difficulty.items())),
            ("source", list(self.sources.items())),
        ]

    def __str__(self) -> str:
        """The coverage table, one section per dimension."""
        lines = [f"coverage of {self.scenarios} scenarios"]
        for title, rows in self._sections():
            lines.append(f"  {title}:")
            if not rows:
                lines.append("    (none)")
            width = max((len(name) for name, _ in rows), default=0)
            lines += [f"    {name:<{width}}  {count}" for name, count in rows]
        if self.unused_tools:
            lines.append(f"  tools no scenario exercises: {', '.join(self.unused_tools)}")
        return "\n".join(lines)

    def html(self) -> str:
        """The coverage tables as HTML (every name escaped)."""
        parts = []
        for title, rows in self._sections():
            cells = "".join(
                f"<tr class='{'gap' if count == 0 else ''}'><td>{escape_text(name)}</td>"
                f"<td>{count}</td></tr>"
                for name, count in rows
            )
            parts.append(
                f"<table><tr><th>{escape_text(title)}</th><th>scenarios</th></tr>"
                f"{cells or '<tr><td colspan=2>(none)</td></tr>'}</table>"
            )
        return "<div class='coverage'>" + "".join(parts) + "</div>"


def _counted(values: Iterable[str], first: Sequence[str] = ()) -> dict[str, int]:
    counts = Counter(values)
    ordered = {name: counts.get(name, 0) for name in first}
    ordered.update(sorted((k, v) for k, v in counts.items() if k not in ordered))
    return ordered


def coverage(scenarios: Sequence[Scenario], *, tools: Sequence[str] = ()) -> Coverage:
    """Count what ``scenarios`` exercise (see :class:`Coverage`).

    Args:
        scenarios: The scenarios.
        tools: Every tool that could be exercised (listed with 0 when none is).
    """
    used = [scenario_tools(scenario) for scenario in scenarios]
    pairs: Counter[tuple[str, str]] = Counter(
        pair for names in used for pair in itertools.combinations(sorted(names), 2)
    )
    records = [_generated(scenario) for scenario in scenarios]
    return Coverage(
        scenarios=len(scenarios),
        tools=_counted((name for names in used for name in names), tools),
        tool_pairs=dict(sorted(pairs.items())),
        personas=_counted(
            (str(r.get("persona_type") or "unknown") for r in records),
            [p for p in PERSONA_TYPES if any(r.get("persona_type") == p for r in records)],
        ),
        difficulty=_counted(
            (str(r.get("difficulty") or "unknown") for r in records),
            [d for d in DIFFICULTIES if any(r.get("difficulty") == d for r in records)],
        ),
        sources=_counted(str(r.get("source") or "given") for r in records),
        known_tools=list(tools),
    )

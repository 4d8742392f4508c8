"""Trajectory metrics with Vertex AI agent-evaluation semantics.

Calls are equal when names are equal and args are equal as JSON values (or, with an
``arg_comparison_metric``, when its args score reaches ``match_threshold``), as in ToolCallF1.
Precision and recall count multisets under a maximum one-to-one matching.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import Field

from turneval.metrics._call_metric import CallMatchingMetric
from turneval.metrics._matching import CallComparison, describe_matching
from turneval.metrics.base import Explained, MultiTurnMetric, Outcome
from turneval.results import ratio
from turneval.samples import MultiTurnSample

__all__ = [
    "TrajectoryAnyOrderMatch",
    "TrajectoryExactMatch",
    "TrajectoryInOrderMatch",
    "TrajectoryPrecision",
    "TrajectoryRecall",
    "TrajectorySingleToolUse",
]


@dataclass(slots=True)
class _TrajectoryOutcome(Outcome):
    value: float
    comparison: CallComparison
    pairs: list[tuple[int, int]]
    summary: str

    def explain(self) -> tuple[str, dict[str, Any]]:
        details = describe_matching(self.comparison, self.pairs)
        details["predicted_trajectory"] = [c.pretty_repr() for c in self.comparison.predicted]
        details["reference_trajectory"] = [c.pretty_repr() for c in self.comparison.reference]
        return self.summary, details


def _sizes(comparison: CallComparison) -> str:
    return f"{len(comparison.predicted)} predicted vs {len(comparison.reference)} reference calls"


class TrajectoryExactMatch(CallMatchingMetric):
    """1 if the prediction has the reference's calls, same length, equal position by position."""

    name: str = "trajectory_exact_match"

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        comparison = await self._compare(sample)
        exact = comparison.exact()
        if exact:
            pairs = [(index, index) for index in range(len(comparison.reference))]
            summary = f"{_sizes(comparison)}, equal position by position: 1"
        else:
            pairs = [
                (index, index)
                for index in range(min(len(comparison.predicted), len(comparison.reference)))
                if comparison.equal(index, index)
            ]
            summary = f"{_sizes(comparison)}, not equal position by position: 0"
        return _TrajectoryOutcome(float(exact), comparison, pairs, summary)


class TrajectoryInOrderMatch(CallMatchingMetric):
    """1 if the reference is a subsequence of the prediction (extra calls allowed, order kept)."""

    name: str = "trajectory_in_order_match"

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        comparison = await self._compare(sample)
        pairs = comparison.in_order()
        if pairs is None:
            summary = f"{_sizes(comparison)}; the reference is not a subsequence: 0"
            return _TrajectoryOutcome(0.0, comparison, [], summary)
        summary = f"{_sizes(comparison)}; all {len(pairs)} reference calls found in order: 1"
        return _TrajectoryOutcome(1.0, comparison, pairs, summary)


class TrajectoryAnyOrderMatch(CallMatchingMetric):
    """1 if every reference call matches a distinct predicted call, in any order."""

    name: str = "trajectory_any_order_match"

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        comparison = await self._compare(sample)
        pairs = comparison.maximum_matching()
        n_ref = len(comparison.reference)
        value = float(len(pairs) == n_ref)
        summary = f"{len(pairs)}/{n_ref} reference calls matched in any order: {value:.0f}"
        return _TrajectoryOutcome(value, comparison, pairs, summary)


class TrajectoryPrecision(CallMatchingMetric):
    """matched/|predicted| under a maximum multiset matching (both empty: 1; none predicted: 0)."""

    name: str = "trajectory_precision"

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        comparison = await self._compare(sample)
        pairs = comparison.maximum_matching()
        n_pred = len(comparison.predicted)
        if not n_pred:
            value = 0.0 if comparison.reference else 1.0
            summary = f"no predicted calls, {len(comparison.reference)} reference: {value:.1f}"
        else:
            value = len(pairs) / n_pred
            summary = ratio("precision", len(pairs), n_pred, value)
        return _TrajectoryOutcome(value, comparison, pairs, summary)


class TrajectoryRecall(CallMatchingMetric):
    """matched/|reference| under a maximum multiset matching (empty reference: 1)."""

    name: str = "trajectory_recall"

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        comparison = await self._compare(sample)
        pairs = comparison.maximum_matching()
        n_ref = len(comparison.reference)
        if not n_ref:
            value = 1.0
            summary = "no reference calls: recall 1.0"
        else:
            value = len(pairs) / n_ref
            summary = ratio("recall", len(pairs), n_ref, value)
        return _TrajectoryOutcome(value, comparison, pairs, summary)


class TrajectorySingleToolUse(MultiTurnMetric):
    """1 if the tool ``tool_name`` appears in the predicted calls; needs no reference.

    Attributes:
        tool_name: The tool to look for (required).
    """

    name: str = "trajectory_single_tool_use"
    tool_name: str = Field(min_length=1)

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        positions = [
            index for index, call in enumerate(sample.tool_calls) if call.name == self.tool_name
        ]
        if positions:
            reason = f"{self.tool_name!r} called {len(positions)} time(s): 1"
        else:
            reason = f"{self.tool_name!r} never called: 0"
        return Explained(float(bool(positions)), reason, {"positions": positions})

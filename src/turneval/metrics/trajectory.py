"""Trajectory metrics with Vertex AI agent-evaluation semantics.

Calls are equal when names are equal and args are equal as JSON values (or, with an
``arg_comparison_metric``, when its args score reaches ``match_threshold``), as in ToolCallF1.
Precision and recall count multisets under a maximum one-to-one matching.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from turneval.messages import ToolCall
from turneval.metrics._call_metric import CallMatchingMetric
from turneval.metrics._float_path import (
    any_order_value,
    exact_calls,
    exact_value,
    in_order_calls,
    in_order_value,
    matched_count,
    precision_value,
    recall_value,
    single_tool_value,
)
from turneval.metrics._matching import CallComparison, Pair, describe_matching
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


Describe = Callable[[int, int, int, float], str]
"""A reason from ``(predicted calls, reference calls, matched pairs, value)``."""


@dataclass(slots=True)
class _TrajectoryOutcome(Outcome):
    """Value now; pairs (when not already known) and the reason only when explained."""

    value: float
    comparison: CallComparison
    describe: Describe
    pairs: list[Pair] | None = None

    def explain(self, details: bool = True) -> tuple[str, dict[str, Any]]:
        pairs = self.pairs if self.pairs is not None else self.comparison.maximum_matching()
        n_pred, n_ref = len(self.comparison.predicted), len(self.comparison.reference)
        reason = self.describe(n_pred, n_ref, len(pairs), self.value)
        if not details:
            return reason, {}
        evidence = describe_matching(self.comparison, pairs)
        evidence["predicted_trajectory"] = [c.pretty_repr() for c in self.comparison.predicted]
        evidence["reference_trajectory"] = [c.pretty_repr() for c in self.comparison.reference]
        return reason, evidence


# The reasons, from counts alone: the detailed path (pairs) and the plain one (counts) share them.


def _sizes(n_pred: int, n_ref: int) -> str:
    return f"{n_pred} predicted vs {n_ref} reference calls"


def _describe_exact(n_pred: int, n_ref: int, matched: int, value: float) -> str:
    verdict = "equal" if value else "not equal"
    return f"{_sizes(n_pred, n_ref)}, {verdict} position by position: {value:.0f}"


def _describe_in_order(n_pred: int, n_ref: int, matched: int, value: float) -> str:
    if not value:
        return f"{_sizes(n_pred, n_ref)}; the reference is not a subsequence: 0"
    return f"{_sizes(n_pred, n_ref)}; all {matched} reference calls found in order: 1"


def _describe_any_order(n_pred: int, n_ref: int, matched: int, value: float) -> str:
    return f"{matched}/{n_ref} reference calls matched in any order: {value:.0f}"


def _describe_precision(n_pred: int, n_ref: int, matched: int, value: float) -> str:
    if not n_pred:
        return f"no predicted calls, {n_ref} reference: {value:.1f}"
    return ratio("precision", matched, n_pred, value)


def _describe_recall(n_pred: int, n_ref: int, matched: int, value: float) -> str:
    if not n_ref:
        return "no reference calls: recall 1.0"
    return ratio("recall", matched, n_ref, value)


class TrajectoryExactMatch(CallMatchingMetric):
    """1 if the prediction has the reference's calls, same length, equal position by position."""

    name: str = "trajectory_exact_match"

    _float_value = exact_value

    def _plain_explained(
        self, predicted: list[ToolCall], reference: list[ToolCall]
    ) -> tuple[float, str]:
        value = exact_calls(predicted, reference)
        return value, _describe_exact(len(predicted), len(reference), 0, value)

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        comparison = self._compare(sample) or await self._scored(sample)
        common = range(min(len(comparison.predicted), len(comparison.reference)))
        if comparison.exact():
            pairs = [(index, index) for index in common]
            return _TrajectoryOutcome(1.0, comparison, _describe_exact, pairs)
        pairs = [(index, index) for index in common if comparison.equal(index, index)]
        return _TrajectoryOutcome(0.0, comparison, _describe_exact, pairs)


class TrajectoryInOrderMatch(CallMatchingMetric):
    """1 if the reference is a subsequence of the prediction (extra calls allowed, order kept)."""

    name: str = "trajectory_in_order_match"

    _float_value = in_order_value

    def _plain_explained(
        self, predicted: list[ToolCall], reference: list[ToolCall]
    ) -> tuple[float, str]:
        value = in_order_calls(predicted, reference)  # found: one pair per reference call
        n_ref = len(reference)
        return value, _describe_in_order(len(predicted), n_ref, n_ref if value else 0, value)

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        comparison = self._compare(sample) or await self._scored(sample)
        pairs = comparison.in_order()
        if pairs is None:
            return _TrajectoryOutcome(0.0, comparison, _describe_in_order, [])
        return _TrajectoryOutcome(1.0, comparison, _describe_in_order, pairs)


class TrajectoryAnyOrderMatch(CallMatchingMetric):
    """1 if every reference call matches a distinct predicted call, in any order."""

    name: str = "trajectory_any_order_match"

    _float_value = any_order_value

    def _plain_explained(
        self, predicted: list[ToolCall], reference: list[ToolCall]
    ) -> tuple[float, str]:
        matched = matched_count(predicted, reference)
        value = float(matched == len(reference))
        return value, _describe_any_order(len(predicted), len(reference), matched, value)

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        comparison = self._compare(sample) or await self._scored(sample)
        value = float(comparison.matched_count() == len(comparison.reference))
        return _TrajectoryOutcome(value, comparison, _describe_any_order)


class TrajectoryPrecision(CallMatchingMetric):
    """matched/|predicted| under a maximum multiset matching (both empty: 1; none predicted: 0)."""

    name: str = "trajectory_precision"

    _float_value = precision_value

    def _plain_explained(
        self, predicted: list[ToolCall], reference: list[ToolCall]
    ) -> tuple[float, str]:
        n_pred, matched = len(predicted), 0
        if not n_pred:
            value = 0.0 if reference else 1.0
        else:
            matched = matched_count(predicted, reference)
            value = matched / n_pred
        return value, _describe_precision(n_pred, len(reference), matched, value)

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        comparison = self._compare(sample) or await self._scored(sample)
        n_pred = len(comparison.predicted)
        if not n_pred:
            value = 0.0 if comparison.reference else 1.0
        else:
            value = comparison.matched_count() / n_pred
        return _TrajectoryOutcome(value, comparison, _describe_precision)


class TrajectoryRecall(CallMatchingMetric):
    """matched/|reference| under a maximum multiset matching (empty reference: 1)."""

    name: str = "trajectory_recall"

    _float_value = recall_value

    def _plain_explained(
        self, predicted: list[ToolCall], reference: list[ToolCall]
    ) -> tuple[float, str]:
        n_ref = len(reference)
        matched = matched_count(predicted, reference) if n_ref else 0
        value = matched / n_ref if n_ref else 1.0
        return value, _describe_recall(len(predicted), n_ref, matched, value)

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        comparison = self._compare(sample) or await self._scored(sample)
        n_ref = len(comparison.reference)
        value = comparison.matched_count() / n_ref if n_ref else 1.0
        return _TrajectoryOutcome(value, comparison, _describe_recall)


class TrajectorySingleToolUse(MultiTurnMetric):
    """1 if the tool ``tool_name`` appears in the predicted calls; needs no reference.

    Attributes:
        tool_name: The tool to look for (required).
    """

    name: str = "trajectory_single_tool_use"
    tool_name: str = Field(min_length=1)

    async def multi_turn_ascore(
        self, sample: MultiTurnSample, callbacks: Any = None, timeout: float | None = None
    ) -> float:
        """Score a conversation; ragas' signature (``callbacks`` is accepted and unused).

        The value is computed in one plain call, with the same result as :meth:`ascore`'s.
        """
        if timeout is None and type(sample) is MultiTurnSample:
            return single_tool_value(sample.user_input, self.tool_name)
        return await self._value(sample, timeout)

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        positions = [
            index for index, call in enumerate(sample.tool_calls) if call.name == self.tool_name
        ]
        if positions:
            reason = f"{self.tool_name!r} called {len(positions)} time(s): 1"
        else:
            reason = f"{self.tool_name!r} never called: 0"
        details = {"positions": positions, "tool_name": self.tool_name}
        return Explained(float(bool(positions)), reason, details)

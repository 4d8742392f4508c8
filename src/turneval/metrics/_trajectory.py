"""Trajectory metrics with Vertex AI agent-evaluation semantics.

Calls are equal when names are equal and args are equal as JSON values (or, with an
``arg_comparison_metric``, when its args score reaches ``match_threshold``), as in ToolCallF1.
Precision and recall count multisets under a maximum one-to-one matching.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

from pydantic import Field

from turneval.messages import Message
from turneval.metrics._call_metric import CallMatchingMetric
from turneval.metrics._float_matching import (
    equal_prefix,
    found_in_order,
    matched_count,
    single_tool_value,
)
from turneval.metrics._formulas import (
    ANY_ORDER,
    EXACT,
    IN_ORDER,
    PRECISION,
    RECALL,
    SINGLE_TOOL,
    CountFormula,
    SingleToolFormula,
)
from turneval.metrics._matching import CallComparison, Pair, describe_matching
from turneval.metrics.agents import PerAgentMetric
from turneval.metrics.base import Explained, Outcome
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
    """Value and count now; pairs (when not already known) and the reason only when explained."""

    value: float
    comparison: CallComparison
    formula: CountFormula
    matched: int
    pairs: list[Pair] | None = None

    def explain(self, details: bool = True) -> tuple[str, dict[str, Any]]:
        n_pred, n_ref = len(self.comparison.predicted), len(self.comparison.reference)
        reason = self.formula.reason(n_pred, n_ref, self.matched, self.value)
        if not details:
            return reason, {}
        pairs = self.pairs if self.pairs is not None else self.comparison.maximum_matching()
        evidence = describe_matching(self.comparison, pairs)
        evidence["predicted_trajectory"] = [c.pretty_repr() for c in self.comparison.predicted]
        evidence["reference_trajectory"] = [c.pretty_repr() for c in self.comparison.reference]
        return reason, evidence


def _outcome(
    formula: CountFormula | None,
    comparison: CallComparison,
    matched: int,
    pairs: list[Pair] | None,
) -> _TrajectoryOutcome:
    """The formula's value of the counts, with what explains it."""
    assert formula is not None  # every trajectory metric has one
    n_pred, n_ref = len(comparison.predicted), len(comparison.reference)
    value = formula.value(n_pred, n_ref, matched)
    return _TrajectoryOutcome(value, comparison, formula, matched, pairs)


class TrajectoryExactMatch(CallMatchingMetric):
    """1 if the prediction has the reference's calls, same length, equal position by position."""

    name: str = "trajectory_exact_match"

    _formula = EXACT
    _plain_count = equal_prefix

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        comparison = self._compare(sample) or await self._scored(sample)
        matched = comparison.equal_prefix()
        common = range(min(len(comparison.predicted), len(comparison.reference)))
        if matched == len(common):
            pairs = [(index, index) for index in common]
        else:
            pairs = [(index, index) for index in common if comparison.equal(index, index)]
        return _outcome(self._formula, comparison, matched, pairs)


class TrajectoryInOrderMatch(CallMatchingMetric):
    """1 if the reference is a subsequence of the prediction (extra calls allowed, order kept)."""

    name: str = "trajectory_in_order_match"

    _formula = IN_ORDER
    _plain_count = found_in_order

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        comparison = self._compare(sample) or await self._scored(sample)
        pairs = comparison.in_order()
        found = (
            pairs if len(pairs) == len(comparison.reference) else []
        )  # evidence: a whole embedding
        return _outcome(self._formula, comparison, len(pairs), found)


class TrajectoryAnyOrderMatch(CallMatchingMetric):
    """1 if every reference call matches a distinct predicted call, in any order."""

    name: str = "trajectory_any_order_match"

    _formula = ANY_ORDER
    _plain_count = matched_count

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        comparison = self._compare(sample) or await self._scored(sample)
        return _outcome(self._formula, comparison, comparison.matched_count(), None)


class TrajectoryPrecision(CallMatchingMetric):
    """matched/|predicted| under a maximum multiset matching (both empty: 1; none predicted: 0)."""

    name: str = "trajectory_precision"

    _formula = PRECISION
    _plain_count = matched_count

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        comparison = self._compare(sample) or await self._scored(sample)
        return _outcome(self._formula, comparison, comparison.matched_count(), None)


class TrajectoryRecall(CallMatchingMetric):
    """matched/|reference| under a maximum multiset matching (empty reference: 1)."""

    name: str = "trajectory_recall"

    _formula = RECALL
    _plain_count = matched_count

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        comparison = self._compare(sample) or await self._scored(sample)
        return _outcome(self._formula, comparison, comparison.matched_count(), None)


class TrajectorySingleToolUse(PerAgentMetric):
    """1 if the tool ``tool_name`` appears in the predicted calls; needs no reference.

    Attributes:
        tool_name: The tool to look for (required).
    """

    name: str = "trajectory_single_tool_use"
    tool_name: str = Field(min_length=1)

    @property
    def subject_tool(self) -> str | None:
        """The tool looked for (:attr:`tool_name`)."""
        return self.tool_name

    _formula: ClassVar[SingleToolFormula] = SINGLE_TOOL
    """The value and reason (:mod:`._formulas`), shared by the float and the detailed path."""

    @cached_property
    def _kernel(self) -> Callable[[Sequence[Message]], float]:
        """The float path, built once from :attr:`_formula` and the tool's name."""
        return single_tool_value(self._formula, self.tool_name)

    async def multi_turn_ascore(
        self, sample: MultiTurnSample, callbacks: Any = None, timeout: float | None = None
    ) -> float:
        """Score a conversation; ragas' signature (``callbacks`` is accepted and unused).

        The value is computed in one plain call, with the same result as :meth:`ascore`'s.
        """
        if timeout is None and type(sample) is MultiTurnSample and not self.by_agent:
            return self._kernel(sample.user_input)
        return await self._value(sample, timeout)

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        positions = [
            index for index, call in enumerate(sample.tool_calls) if call.name == self.tool_name
        ]
        formula = self._formula
        value = float(formula.value(bool(positions)))
        reason = formula.reason(self.tool_name, len(positions), value)
        details = {"positions": positions, "tool_name": self.tool_name}
        return Explained(value, reason, details)

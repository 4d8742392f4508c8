"""Base of the metrics that compare predicted and reference tool calls as a relation."""

from __future__ import annotations

from abc import ABC
from collections.abc import Callable
from functools import cached_property
from typing import Any, ClassVar

from turneval.messages import ToolCall
from turneval.metrics._arg_comparing import ArgComparing
from turneval.metrics._float_core import Kernel
from turneval.metrics._float_matching import Counter, count_kernel
from turneval.metrics._formulas import CountFormula
from turneval.metrics._matching import CallComparison, Pair, json_comparison, scored_comparison
from turneval.metrics._tools import check_rule_tools
from turneval.metrics.agents import PerAgentMetric
from turneval.metrics.base import MultiTurnMetric, missing_field
from turneval.results import MetricResult
from turneval.samples import MultiTurnSample

__all__ = ["CallMatchingMetric", "PlainExplainer", "plain_result"]

PlainExplainer = Callable[[list[ToolCall], list[ToolCall]], "tuple[float, str] | None"]
"""``(predicted calls, reference calls) -> (value, reason)``: ``ascore(details=False)``'s result
without result objects (None: the metric cannot tell from the calls alone)."""


def plain_result(
    metric: MultiTurnMetric, explain: PlainExplainer, sample: MultiTurnSample, plain: bool
) -> MetricResult | None:
    """``ascore(sample, details=False)`` from ``explain``; None where the detailed path decides.

    Only when ``plain`` (the metric's ``_plain``: no rule the explainer cannot follow), for a
    conversation (exactly) with reference calls.
    """
    if not plain or type(sample) is not MultiTurnSample:
        return None
    reference = sample.reference_tool_calls
    if reference is None:
        return None
    explained = explain(sample.tool_calls, reference)
    return None if explained is None else MetricResult(metric.name, explained[0], explained[1])


class CallMatchingMetric(ArgComparing, PerAgentMetric, ABC):
    """A multi-turn metric over the call-equality relation of :mod:`._matching`.

    Attributes:
        arg_comparison_metric: None for JSON-value equality of args; else a string metric,
            any single-turn metric or a callable ``fn(reference, prediction) -> float``
            (sync or async) scoring each argument as ``str(value)``.
        match_threshold: With a comparator or rules, the args score two same-name calls need
            to match.
        arg_rules: Per-argument rules ``{"tool": {"arg": rule}}`` (see
            :mod:`turneval.metrics.arg_rules`); arguments no rule covers keep the default
            (JSON-value equality, or ``arg_comparison_metric`` when set). With rules, the args
            score is the mean rule score over both calls' keys, ignored keys left out.
    """

    @cached_property
    def _plain(self) -> bool:
        """Whether calls compare by JSON-value equality alone (no comparator, no rules).

        And the sample is scored whole (not ``by_agent``): the plain paths score it whole.
        """
        return self._comparator is None and self._rule_book is None and not self.by_agent

    _formula: ClassVar[CountFormula | None] = None
    """The metric's value and reason from counts (:mod:`._formulas`), shared by every path."""

    _plain_count: ClassVar[Counter | None] = None
    """The formula's count under JSON-value equality (a :mod:`._float_matching` function)."""

    @cached_property
    def _kernel(self) -> Kernel | None:
        """The plain function ``multi_turn_ascore`` calls, when the configuration allows one.

        Built once per metric from its formula and count (:func:`._float_matching.count_kernel`).
        """
        formula, count = self._formula, type(self)._plain_count
        if not self._plain or formula is None or count is None:
            return None
        return count_kernel(formula, count)

    def _plain_explained(
        self, predicted: list[ToolCall], reference: list[ToolCall]
    ) -> tuple[float, str] | None:
        """The value and reason under JSON-value equality, from counts (None: not known).

        :meth:`ascore` with ``details=False`` returns them without building the comparison
        records: the formula of the count :attr:`_plain_count` takes, which is the detailed
        path's count.
        """
        formula, count = self._formula, type(self)._plain_count
        if formula is None or count is None:
            return None
        return formula.explain(len(predicted), len(reference), count(predicted, reference))

    def _plain_explainer(self) -> PlainExplainer | None:
        """:meth:`_plain_explained` when ``ascore(details=False)`` is exactly it, else None.

        A streamed row of such metrics is written from these functions alone (no result
        objects); a subclass that overrides ``ascore`` keeps its own.
        """
        if not self._plain or type(self).ascore is not CallMatchingMetric.ascore:
            return None
        return self._plain_explained

    async def ascore(self, sample: MultiTurnSample, *, details: bool = True) -> MetricResult:
        """Score ``sample`` with its reason and (unless ``details=False``) its details.

        Under JSON-value equality, ``details=False`` computes the value on the plain path and
        the reason from counts: the same result as the detailed path's, without its records.

        Raises:
            InvalidSampleError: ``sample`` is not a conversation, or has no
                ``reference_tool_calls``.
        """
        plain = None if details else plain_result(self, self._plain_explained, sample, self._plain)
        return plain if plain is not None else await super().ascore(sample, details=details)

    async def multi_turn_ascore(
        self, sample: MultiTurnSample, callbacks: Any = None, timeout: float | None = None
    ) -> float:
        """Score a conversation; ragas' signature (``callbacks`` is accepted and unused).

        Under JSON-value equality (the default) the value is computed in one plain call, with
        the same result as :meth:`ascore`'s.
        """
        if timeout is None and type(sample) is MultiTurnSample:
            kernel = self._kernel
            if kernel is not None:
                reference = sample.reference_tool_calls
                if reference is not None:
                    return kernel(sample.user_input, reference)
        return await self._value(sample, timeout)

    def _compare(self, sample: MultiTurnSample) -> CallComparison | None:
        """The relation under JSON equality, or None when a comparator must be awaited.

        Metrics write ``self._compare(sample) or await self._scored(sample)``, which keeps the
        default path free of a coroutine per sample.
        """
        reference = sample.reference_tool_calls
        if reference is None:
            raise missing_field(self, "reference_tool_calls")
        if self._comparator is None:
            book = self._rule_book
            if book is None:
                return json_comparison(sample.tool_calls, reference)
            if book.equality_only and self.match_threshold == 1.0:
                # Ignoring arguments and comparing the rest exactly is JSON equality of what is
                # left: the fast keyed path on the calls without their ignored arguments.
                check_rule_tools(self, book, sample)
                return json_comparison(
                    book.without_ignored(sample.tool_calls), book.without_ignored(reference)
                )
        return None

    async def _scored(self, sample: MultiTurnSample) -> CallComparison:
        """The relation under the comparator or the rules (scores may need awaiting)."""
        comparator, book = self._comparator, self._rule_book
        reference = sample.reference_tool_calls
        assert reference is not None
        if book is None:
            assert comparator is not None
            return await scored_comparison(
                sample.tool_calls, reference, comparator, self.match_threshold
            )
        check_rule_tools(self, book, sample)
        predicted = sample.tool_calls
        scores: dict[Pair, float] = {}
        if comparator is None and book.all_sync:  # no coroutine per pair
            score = book.union_score_sync
            for pred_index, pred in enumerate(predicted):
                for ref_index, ref in enumerate(reference):
                    if pred.name == ref.name:
                        scores[pred_index, ref_index] = score(ref.name, ref.args, pred.args)
            return CallComparison(
                predicted, reference, scores=scores, threshold=self.match_threshold
            )
        for pred_index, pred in enumerate(predicted):
            for ref_index, ref in enumerate(reference):
                if pred.name == ref.name:
                    scores[pred_index, ref_index] = await book.union_score(
                        ref.name, ref.args, pred.args, comparator
                    )
        return CallComparison(predicted, reference, scores=scores, threshold=self.match_threshold)

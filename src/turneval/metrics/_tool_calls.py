"""Tool-call metrics: ToolCallAccuracy (ragas-exact) and ToolCallF1 (maximum multiset matching)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from operator import attrgetter
from typing import Any, ClassVar

from pydantic import field_validator

from turneval.messages import ToolCall
from turneval.metrics._call_metric import CallMatchingMetric, PlainExplainer, plain_result
from turneval.metrics._compare import ArgComparator, check_comparator, resolve_comparator
from turneval.metrics._float_accuracy import accuracy_value
from turneval.metrics._float_core import Kernel
from turneval.metrics._float_matching import matched_count
from turneval.metrics._formulas import ACCURACY, F1, AccuracyFormula, CountFormula
from turneval.metrics._matching import CallComparison, describe_matching
from turneval.metrics._text import ExactMatch, StringMetric
from turneval.metrics._tools import check_rule_tools
from turneval.metrics.agents import PerAgentMetric
from turneval.metrics.arg_rules import RuleBook, resolve_rules
from turneval.metrics.base import Outcome, missing_field
from turneval.results import MetricResult
from turneval.samples import MultiTurnSample

__all__ = ["ToolCallAccuracy", "ToolCallF1"]


_by_name = attrgetter("name")
_ABSENT = object()


def _sort_key(call: ToolCall) -> tuple[str, ...]:
    key = [call.name]
    for arg_name in sorted(call.args):
        key.append(arg_name)
        key.append(str(call.args[arg_name]))
    return tuple(key)


@dataclass(slots=True)
class _AccuracyOutcome(Outcome):
    formula: AccuracyFormula
    value: float
    strict_order: bool
    predicted: list[ToolCall]
    reference: list[ToolCall]
    pair_scores: list[float] = field(default_factory=list)
    arg_scores: list[float] = field(default_factory=list)  # flat, in reference-arg order
    pair_arg_scores: list[dict[str, float]] | None = None  # with arg_rules: per pair

    def explain(self, details: bool = True) -> tuple[str, dict[str, Any]]:
        reason = _accuracy_reason(
            self.formula,
            self.strict_order,
            self.predicted,
            self.reference,
            self.pair_scores,
            self.value,
        )
        if not details:
            return reason, {}
        evidence: dict[str, Any] = {
            "strict_order": self.strict_order,
            "predicted_names": [call.name for call in self.predicted],
            "reference_names": [call.name for call in self.reference],
        }
        if self.predicted and self.reference and self.pair_scores:
            scores = iter(self.arg_scores)
            per_pair = self.pair_arg_scores or [
                {key: next(scores) for key in ref.args} for ref in self.reference
            ]
            evidence["pairs"] = [
                {
                    "predicted": pred.pretty_repr(),
                    "reference": ref.pretty_repr(),
                    "args_score": score,
                    "arg_scores": arg_scores,
                }
                for pred, ref, score, arg_scores in zip(
                    self.predicted, self.reference, self.pair_scores, per_pair, strict=True
                )
            ]
        return reason, evidence


def _accuracy_reason(
    formula: AccuracyFormula,
    strict: bool,
    predicted: Sequence[ToolCall],
    reference: Sequence[ToolCall],
    pair_scores: Sequence[float],
    value: float,
) -> str:
    """ToolCallAccuracy's reason (the formula's, of the calls' names; both paths share it).

    ``pair_scores`` holds each aligned pair's args score; empty when the names do not align.
    """
    names_pred = [call.name for call in predicted]
    names_ref = [call.name for call in reference]
    return formula.reason(strict, names_pred, names_ref, pair_scores, value)


class ToolCallAccuracy(PerAgentMetric):
    """Sequence-aligned tool calls with per-argument scoring; the same numbers as ragas 0.4.3.

    With ``strict_order`` the predicted and reference name sequences must be equal, else 0;
    without it both sides are first sorted by ``(name, (arg, str(value)) in arg order)``.
    Aligned calls are paired position by position; the score is the mean pair score, where a
    pair scores the mean over the reference's args of ``arg_comparison_metric(str(ref),
    str(pred))`` (missing arg 0, extra predicted args ignored; no args on either side 1; args
    only on the prediction 0). Both lists empty: 1.0; exactly one empty: 0.0.

    Attributes:
        arg_comparison_metric: How an argument value is scored; ExactMatch by default. Any
            single-turn metric or callable ``fn(reference, prediction) -> float``; may be
            reassigned after construction.
        strict_order: Whether call order matters.
        arg_rules: Per-argument rules ``{"tool": {"arg": rule}}`` (see
            :mod:`turneval.metrics.arg_rules`): a ruled argument is scored by its rule on the
            JSON values, an ignored one is left out (also of the unordered sort key); the
            others keep ``arg_comparison_metric``. None (the default) is ragas' behaviour.
    """

    name: str = "tool_call_accuracy"
    arg_comparison_metric: Any = ExactMatch()
    strict_order: bool = True
    arg_rules: Any = None

    _formula: ClassVar[AccuracyFormula] = ACCURACY
    """The pair score, value and reason (:mod:`._formulas`), shared by every path."""

    @field_validator("arg_rules")
    @classmethod
    def _check_rules(cls, value: Any) -> Any:
        return resolve_rules(value)

    @cached_property
    def _rule_book(self) -> RuleBook | None:
        return None if self.arg_rules is None else RuleBook(self.arg_rules)

    @field_validator("arg_comparison_metric")
    @classmethod
    def _check_comparator(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("arg_comparison_metric cannot be None; use ExactMatch() for equality")
        return check_comparator(value)

    @cached_property
    def _comparator(self) -> ArgComparator:
        # Cleared by Metric.__setattr__ when arg_comparison_metric is reassigned.
        comparator = resolve_comparator(self.arg_comparison_metric)
        assert comparator is not None
        return comparator

    @cached_property
    def _plain(self) -> bool:
        """Whether args compare by string equality (ExactMatch) without rules, whole samples."""
        return self._comparator.exact and self._rule_book is None and not self.by_agent

    @cached_property
    def _kernel(self) -> Kernel | None:
        """The plain function ``multi_turn_ascore`` calls, when the configuration allows one.

        ExactMatch or another of our string metrics (sync, in range by construction), no rules.
        """
        compare = self._comparator
        if self.by_agent or self._rule_book is not None or compare.sync is None:
            return None
        if not compare.trusted:
            return None
        if compare.exact:
            return accuracy_value(self._formula, self.strict_order)
        metric = self.arg_comparison_metric
        identical = metric._identical_scores_one if isinstance(metric, StringMetric) else None
        return accuracy_value(self._formula, self.strict_order, compare.sync, identical)

    async def multi_turn_ascore(
        self, sample: MultiTurnSample, callbacks: Any = None, timeout: float | None = None
    ) -> float:
        """Score a conversation; ragas' signature (``callbacks`` is accepted and unused).

        With ExactMatch (the default) or another string metric and no rules the value is
        computed in one plain call, with the same result as :meth:`ascore`'s.
        """
        if timeout is None and type(sample) is MultiTurnSample:
            kernel = self._kernel
            if kernel is not None:
                reference = sample.reference_tool_calls
                if reference is not None:
                    return kernel(sample.user_input, reference)
        return await self._value(sample, timeout)

    async def ascore(self, sample: MultiTurnSample, *, details: bool = True) -> MetricResult:
        """Score ``sample`` with its reason and (unless ``details=False``) its details.

        With ExactMatch (the default), no rules and ``details=False``, the value and reason
        come from one plain pass (:meth:`_plain_explained`): the same result as the detailed
        path's, without its records.

        Raises:
            InvalidSampleError: ``sample`` is not a conversation, or has no
                ``reference_tool_calls``.
        """
        plain = None if details else plain_result(self, self._plain_explained, sample, self._plain)
        return plain if plain is not None else await super().ascore(sample, details=details)

    def _plain_explained(
        self, predicted: list[ToolCall], reference: list[ToolCall]
    ) -> tuple[float, str]:
        """The value and reason with ExactMatch and no rules (only when ``_plain``)."""
        return _exact_explained(self._formula, predicted, reference, self.strict_order)

    def _plain_explainer(self) -> PlainExplainer | None:
        """:meth:`_plain_explained` when ``ascore(details=False)`` is exactly it, else None."""
        if not self._plain or type(self).ascore is not ToolCallAccuracy.ascore:
            return None
        return self._plain_explained

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        reference: list[ToolCall] | None = sample.reference_tool_calls
        if reference is None:
            raise missing_field(self, "reference_tool_calls")
        predicted = sample.tool_calls
        strict = self.strict_order
        formula = self._formula
        if not predicted or not reference:
            value = formula.value(len(predicted), len(reference), None)
            return _AccuracyOutcome(formula, value, strict, predicted, reference)
        pred_names = [call.name for call in predicted]
        ref_names = [call.name for call in reference]
        if not strict:
            # Sorting by (name, args...) aligns the names iff the sorted name lists are equal,
            # so the (costlier) argument keys are only built for aligned samples; with unique
            # names the name alone decides the order.
            if sorted(pred_names) != sorted(ref_names):
                value = formula.value(len(predicted), len(reference), None)
                return _AccuracyOutcome(formula, value, strict, predicted, reference)
            order: Callable[[ToolCall], Any] = (
                _sort_key if len(set(ref_names)) < len(ref_names) else _by_name
            )
            if order is _sort_key and self._rule_book is not None:
                order = _ruled_sort_key(self._rule_book)
            predicted, reference = sorted(predicted, key=order), sorted(reference, key=order)
        elif pred_names != ref_names:
            value = formula.value(len(predicted), len(reference), None)
            return _AccuracyOutcome(formula, value, strict, predicted, reference)
        compare = self._comparator
        if self._rule_book is not None:
            return await self._ruled(sample, self._rule_book, predicted, reference)
        # The common comparators run inline; others are called (sync) or awaited (async).
        exact, sync = compare.exact, compare.sync if compare.trusted else None
        pair_scores: list[float] = []
        arg_scores: list[float] = []
        total = 0.0
        for pred, ref in zip(predicted, reference, strict=True):
            ref_args, pred_args = ref.args, pred.args
            summed = 0.0
            for key, ref_value in ref_args.items():
                if key in pred_args:
                    ref_text, pred_text = str(ref_value), str(pred_args[key])
                    if exact:
                        score = 1.0 if ref_text == pred_text else 0.0
                    elif sync is not None:
                        score = sync(ref_text, pred_text)
                    else:
                        score = await compare(ref_text, pred_text)
                    summed += score
                else:
                    score = 0.0
                arg_scores.append(score)
            pair = formula.pair(len(ref_args), len(pred_args), summed)
            pair_scores.append(pair)
            total += pair
        value = formula.value(len(predicted), len(reference), total)
        return _AccuracyOutcome(
            formula, value, strict, predicted, reference, pair_scores, arg_scores
        )

    async def _ruled(
        self,
        sample: MultiTurnSample,
        book: RuleBook,
        predicted: list[ToolCall],
        reference: list[ToolCall],
    ) -> _AccuracyOutcome:
        check_rule_tools(self, book, sample)
        pair_scores: list[float] = []
        per_pair: list[dict[str, float]] = []
        for pred, ref in zip(predicted, reference, strict=True):
            pair, scores = await book.reference_scores(
                ref.name, ref.args, pred.args, self._comparator
            )
            pair_scores.append(pair)
            per_pair.append(scores)
        total = 0.0
        for pair in pair_scores:  # summed in order, as ragas does
            total += pair
        value = self._formula.value(len(predicted), len(reference), total)
        outcome = _AccuracyOutcome(
            self._formula, value, self.strict_order, predicted, reference, pair_scores
        )
        outcome.pair_arg_scores = per_pair
        return outcome


def _exact_explained(
    formula: AccuracyFormula, predicted: list[ToolCall], reference: list[ToolCall], strict: bool
) -> tuple[float, str]:
    """ToolCallAccuracy's value and reason with ExactMatch and no rules (``_evaluate``'s)."""
    pair_scores: list[float] = []
    total: float | None = None
    if predicted and reference:
        pair_scores = _plain_pair_scores(formula, predicted, reference, strict)
        if pair_scores:
            total = 0.0
            for pair in pair_scores:  # summed in order, as ``_evaluate`` does
                total += pair
    value = formula.value(len(predicted), len(reference), total)
    return value, _accuracy_reason(formula, strict, predicted, reference, pair_scores, value)


def _plain_pair_scores(
    formula: AccuracyFormula, predicted: list[ToolCall], reference: list[ToolCall], strict: bool
) -> list[float]:
    """Each aligned pair's args score under ExactMatch; empty when the names do not align."""
    if len(predicted) != len(reference):
        return []
    if strict:
        for pred, ref in zip(predicted, reference, strict=True):
            if pred.name != ref.name:
                return []
    else:
        ref_names = [call.name for call in reference]
        if sorted([call.name for call in predicted]) != sorted(ref_names):
            return []
        order = _sort_key if len(set(ref_names)) < len(ref_names) else _by_name
        predicted, reference = sorted(predicted, key=order), sorted(reference, key=order)
    scores: list[float] = []
    pair = formula.pair
    for pred, ref in zip(predicted, reference, strict=True):
        ref_args, pred_args = ref.args, pred.args
        equal = 0
        for key, ref_value in ref_args.items():
            pred_value = pred_args.get(key, _ABSENT)
            if pred_value is not _ABSENT and str(ref_value) == str(pred_value):
                equal += 1
        scores.append(pair(len(ref_args), len(pred_args), equal))
    return scores


def _ruled_sort_key(book: RuleBook) -> Callable[[ToolCall], tuple[str, ...]]:
    """The unordered sort key without the arguments the rules ignore."""

    def key(call: ToolCall) -> tuple[str, ...]:
        ignored = book.ignored(call.name)
        parts = [call.name]
        for arg_name in sorted(call.args):
            if not ignored(arg_name):
                parts.append(arg_name)
                parts.append(str(call.args[arg_name]))
        return tuple(parts)

    return key


@dataclass(slots=True)
class _F1Outcome(Outcome):
    formula: CountFormula
    value: float
    comparison: CallComparison
    matched: int

    def explain(self, details: bool = True) -> tuple[str, dict[str, Any]]:
        n_pred, n_ref = len(self.comparison.predicted), len(self.comparison.reference)
        reason = self.formula.reason(n_pred, n_ref, self.matched, self.value)
        if not details:
            return reason, {}
        evidence = describe_matching(self.comparison, self.comparison.maximum_matching())
        if n_pred or n_ref:
            precision = self.matched / n_pred if n_pred else 0.0
            recall = self.matched / n_ref if n_ref else 0.0
            evidence.update(precision=precision, recall=recall)
        return reason, evidence


class ToolCallF1(CallMatchingMetric):
    """F1 of predicted against reference calls under a maximum one-to-one multiset matching.

    precision = matched/|predicted|, recall = matched/|reference|, F1 = 2PR/(P+R) (0 where
    P+R = 0), not rounded. Both lists empty: 1.0; exactly one empty: 0.0. Duplicates count.
    """

    name: str = "tool_call_f1"

    _formula = F1
    _plain_count = matched_count

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        comparison = self._compare(sample) or await self._scored(sample)
        n_pred, n_ref = len(comparison.predicted), len(comparison.reference)
        matched = comparison.matched_count()
        formula = self._formula
        assert formula is not None
        return _F1Outcome(formula, formula.value(n_pred, n_ref, matched), comparison, matched)

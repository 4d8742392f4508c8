"""Tool-call metrics: ToolCallAccuracy (ragas-exact) and ToolCallF1 (maximum multiset matching)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import PrivateAttr, field_validator, model_validator

from turneval.messages import ToolCall
from turneval.metrics._call_metric import CallMatchingMetric
from turneval.metrics._compare import ArgComparator, check_comparator, resolve_comparator
from turneval.metrics._matching import CallComparison, describe_matching
from turneval.metrics.base import MultiTurnMetric, Outcome, require
from turneval.metrics.text import ExactMatch
from turneval.results import ratio
from turneval.samples import MultiTurnSample

__all__ = ["ToolCallAccuracy", "ToolCallF1"]


def _sort_key(call: ToolCall) -> tuple[str, ...]:
    key = [call.name]
    for arg_name in sorted(call.args):
        key.append(arg_name)
        key.append(str(call.args[arg_name]))
    return tuple(key)


@dataclass(slots=True)
class _AccuracyOutcome(Outcome):
    value: float
    strict_order: bool
    predicted: list[ToolCall]
    reference: list[ToolCall]
    pair_scores: list[float] = field(default_factory=list)
    key_scores: list[dict[str, float]] = field(default_factory=list)

    def explain(self) -> tuple[str, dict[str, Any]]:
        order = "strict order" if self.strict_order else "any order (sorted by name and args)"
        names_pred = [call.name for call in self.predicted]
        names_ref = [call.name for call in self.reference]
        details: dict[str, Any] = {
            "strict_order": self.strict_order,
            "predicted_names": names_pred,
            "reference_names": names_ref,
        }
        if not self.predicted and not self.reference:
            return "no predicted and no reference tool calls: 1.0", details
        if not self.predicted or not self.reference:
            return (
                f"{len(self.predicted)} predicted vs {len(self.reference)} reference tool calls: "
                "one side is empty, 0.0",
                details,
            )
        if not self.pair_scores:
            return (
                f"tool-name sequences differ ({order}): {names_pred} vs {names_ref}: 0.0",
                details,
            )
        details["pairs"] = [
            {
                "predicted": pred.pretty_repr(),
                "reference": ref.pretty_repr(),
                "args_score": score,
                "arg_scores": keys,
            }
            for pred, ref, score, keys in zip(
                self.predicted, self.reference, self.pair_scores, self.key_scores, strict=True
            )
        ]
        terms = " + ".join(f"{score:.3f}" for score in self.pair_scores)
        reason = (
            f"names aligned ({order}); mean args score = ({terms})/{len(self.pair_scores)} "
            f"= {self.value:.3f}"
        )
        return reason, details


class ToolCallAccuracy(MultiTurnMetric):
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
    """

    name: str = "tool_call_accuracy"
    arg_comparison_metric: Any = ExactMatch()
    strict_order: bool = True
    _comparator: ArgComparator = PrivateAttr()

    @field_validator("arg_comparison_metric")
    @classmethod
    def _check_comparator(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("arg_comparison_metric cannot be None; use ExactMatch() for equality")
        return check_comparator(value)

    @model_validator(mode="after")
    def _resolve(self) -> ToolCallAccuracy:
        comparator = resolve_comparator(self.arg_comparison_metric)
        assert comparator is not None
        self._comparator = comparator
        return self

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        reference: list[ToolCall] = require(self, sample, "reference_tool_calls")
        predicted = sample.tool_calls
        strict = self.strict_order
        if not predicted or not reference:
            value = 0.0 if predicted or reference else 1.0
            return _AccuracyOutcome(value, strict, predicted, reference)
        if not strict:
            predicted = sorted(predicted, key=_sort_key)
            reference = sorted(reference, key=_sort_key)
        if len(predicted) != len(reference) or any(
            pred.name != ref.name for pred, ref in zip(predicted, reference, strict=True)
        ):
            return _AccuracyOutcome(0.0, strict, predicted, reference)
        compare = self._comparator
        sync = compare.sync
        pair_scores: list[float] = []
        key_scores: list[dict[str, float]] = []
        total = 0.0
        for pred, ref in zip(predicted, reference, strict=True):
            ref_args, pred_args = ref.args, pred.args
            scores: dict[str, float] = {}
            if not ref_args:
                pair = 0.0 if pred_args else 1.0
            else:
                pair = 0.0
                for key, ref_value in ref_args.items():
                    if key in pred_args:
                        ref_text, pred_text = str(ref_value), str(pred_args[key])
                        if sync is not None:
                            score = compare.checked(sync(ref_text, pred_text), ref_text, pred_text)
                        else:
                            score = await compare(ref_text, pred_text)
                        pair += score
                    else:
                        score = 0.0
                    scores[key] = score
                pair /= len(ref_args)
            pair_scores.append(pair)
            key_scores.append(scores)
            total += pair
        value = total / len(reference)
        return _AccuracyOutcome(value, strict, predicted, reference, pair_scores, key_scores)


@dataclass(slots=True)
class _F1Outcome(Outcome):
    value: float
    comparison: CallComparison
    pairs: list[tuple[int, int]]

    def explain(self) -> tuple[str, dict[str, Any]]:
        n_pred, n_ref = len(self.comparison.predicted), len(self.comparison.reference)
        details = describe_matching(self.comparison, self.pairs)
        if not n_pred and not n_ref:
            return "no predicted and no reference tool calls: F1=1.000", details
        matched = len(self.pairs)
        precision = matched / n_pred if n_pred else 0.0
        recall = matched / n_ref if n_ref else 0.0
        reason = (
            f"{ratio('precision', matched, n_pred, precision)}, "
            f"{ratio('recall', matched, n_ref, recall)}, F1={self.value:.3f}"
        )
        details.update(precision=precision, recall=recall)
        return reason, details


class ToolCallF1(CallMatchingMetric):
    """F1 of predicted against reference calls under a maximum one-to-one multiset matching.

    precision = matched/|predicted|, recall = matched/|reference|, F1 = 2PR/(P+R) (0 where
    P+R = 0), not rounded. Both lists empty: 1.0; exactly one empty: 0.0. Duplicates count.
    """

    name: str = "tool_call_f1"

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        comparison = await self._compare(sample)
        n_pred, n_ref = len(comparison.predicted), len(comparison.reference)
        if not n_pred or not n_ref:
            return _F1Outcome(0.0 if n_pred or n_ref else 1.0, comparison, [])
        pairs = comparison.maximum_matching()
        matched = len(pairs)
        if not matched:
            return _F1Outcome(0.0, comparison, pairs)
        precision, recall = matched / n_pred, matched / n_ref
        return _F1Outcome(2 * precision * recall / (precision + recall), comparison, pairs)

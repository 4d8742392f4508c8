"""The call-matching engine shared by ToolCallF1 and the trajectory metrics.

Two calls are *equal* when their names are equal and either their args are equal as JSON
values (default) or an argument comparator scores them at least ``match_threshold``. On top of
that relation the engine answers the three questions the metrics ask: are the two lists equal
position by position (exact), is the reference a subsequence of the prediction (in order), and
which maximum one-to-one matching pairs them as multisets (any order, precision, recall, F1).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from turneval.messages import ToolCall
from turneval.metrics._compare import ArgComparator

__all__ = ["CallComparison", "call_key", "compare_calls", "json_key"]

Pair = tuple[int, int]

_DICT, _LIST, _BOOL = 0, 1, 2


def json_key(value: Any) -> Hashable:
    """A hashable key equal for equal JSON values.

    Key order is irrelevant, ``1 == 1.0``, ``"1" != 1``, ``true != 1``, nested values compare
    deeply. Numbers keep Python's exact int/float comparison; only booleans need a tag.
    """
    kind = type(value)
    if kind is str or kind is int or kind is float or value is None:
        return value  # type: ignore[no-any-return]
    if kind is bool:
        return (_BOOL, value)
    if kind is dict:
        return (_DICT, tuple(sorted((key, json_key(item)) for key, item in value.items())))
    if kind is list or kind is tuple:
        return (_LIST, tuple(json_key(item) for item in value))
    return value  # type: ignore[no-any-return]  # not JSON: the value itself


def call_key(call: ToolCall) -> Hashable:
    """The key of a call: its name and its args as a JSON value."""
    items: list[tuple[str, Hashable]] = []
    for key, value in call.args.items():
        kind = type(value)
        if kind is str or kind is int or kind is float or value is None:
            items.append((key, cast(Hashable, value)))  # scalars are their own key
        else:
            items.append((key, json_key(value)))
    items.sort()
    return (call.name, tuple(items))


async def args_score(
    compare: ArgComparator, reference: dict[str, Any], prediction: dict[str, Any]
) -> float:
    """Mean comparator score over the union of both calls' keys (one-sided keys score 0).

    Two calls without args score 1.0. Values are compared as ``str(value)``.
    """
    if not reference and not prediction:
        return 1.0
    total = 0.0
    sync = compare.sync
    for key, value in reference.items():
        if key in prediction:
            ref_text, pred_text = str(value), str(prediction[key])
            if sync is not None:
                total += compare.checked(sync(ref_text, pred_text), ref_text, pred_text)
            else:
                total += await compare(ref_text, pred_text)
    extra = sum(1 for key in prediction if key not in reference)
    return total / (len(reference) + extra)


@dataclass(slots=True)
class CallComparison:
    """The equality relation between predicted and reference calls of one sample.

    Attributes:
        predicted: The predicted calls, in order.
        reference: The reference calls, in order.
        pred_keys: JSON keys of the predicted calls (JSON-equality mode), else None.
        ref_keys: JSON keys of the reference calls (JSON-equality mode), else None.
        scores: ``{(pred_index, ref_index): args score}`` for same-name pairs (comparator mode).
        threshold: The score a pair needs to be equal (comparator mode).
    """

    predicted: Sequence[ToolCall]
    reference: Sequence[ToolCall]
    pred_keys: list[Hashable] | None = None
    ref_keys: list[Hashable] | None = None
    scores: dict[Pair, float] | None = None
    threshold: float = 1.0

    def equal(self, pred_index: int, ref_index: int) -> bool:
        """Whether predicted call ``pred_index`` equals reference call ``ref_index``."""
        if self.pred_keys is not None and self.ref_keys is not None:
            return self.pred_keys[pred_index] == self.ref_keys[ref_index]
        assert self.scores is not None
        return self.scores.get((pred_index, ref_index), -1.0) >= self.threshold

    def exact(self) -> bool:
        """Same length and equal position by position."""
        if len(self.predicted) != len(self.reference):
            return False
        if self.pred_keys is not None:
            return self.pred_keys == self.ref_keys
        return all(self.equal(index, index) for index in range(len(self.reference)))

    def in_order(self) -> list[Pair] | None:
        """Pairs embedding the reference as a subsequence of the prediction, or None.

        Greedy earliest matching is optimal for a subsequence test under any pair relation.
        """
        pairs: list[Pair] = []
        start = 0
        n_pred = len(self.predicted)
        for ref_index in range(len(self.reference)):
            for pred_index in range(start, n_pred):
                if self.equal(pred_index, ref_index):
                    pairs.append((pred_index, ref_index))
                    start = pred_index + 1
                    break
            else:
                return None
        return pairs

    def maximum_matching(self) -> list[Pair]:
        """A maximum one-to-one matching, as ``(pred_index, ref_index)`` pairs sorted by pred."""
        if self.pred_keys is not None and self.ref_keys is not None:
            # JSON equality is an equivalence: pairing within each class is maximum.
            waiting: dict[Hashable, list[int]] = {}
            for ref_index in range(len(self.ref_keys) - 1, -1, -1):
                waiting.setdefault(self.ref_keys[ref_index], []).append(ref_index)
            pairs = []
            for pred_index, key in enumerate(self.pred_keys):
                bucket = waiting.get(key)
                if bucket:
                    pairs.append((pred_index, bucket.pop()))
            return pairs
        return _bipartite_matching(self._adjacency(), len(self.reference))

    def _adjacency(self) -> list[list[int]]:
        assert self.scores is not None
        adjacency: list[list[tuple[float, int]]] = [[] for _ in self.predicted]
        for (pred_index, ref_index), score in self.scores.items():
            if score >= self.threshold:
                adjacency[pred_index].append((-score, ref_index))
        # Best-scoring partners first, so the matching shown prefers the closest calls.
        return [[ref_index for _, ref_index in sorted(row)] for row in adjacency]


def _bipartite_matching(adjacency: list[list[int]], n_right: int) -> list[Pair]:
    """Maximum bipartite matching by augmenting paths (Kuhn's algorithm), iterative."""
    match_of_right = [-1] * n_right
    match_of_left = [-1] * len(adjacency)
    for start in range(len(adjacency)):
        parent: dict[int, int] = {}  # right vertex -> the left vertex that reached it
        stack, seen, free = [start], {start}, -1
        while stack and free < 0:
            left = stack.pop()
            for right in adjacency[left]:
                if right in parent:
                    continue
                parent[right] = left
                owner = match_of_right[right]
                if owner < 0:
                    free = right
                    break
                if owner not in seen:
                    seen.add(owner)
                    stack.append(owner)
        right = free  # flip the alternating path from the free right vertex back to ``start``
        while right >= 0:
            left = parent[right]
            previous = match_of_left[left]
            match_of_right[right], match_of_left[left] = left, right
            right = previous
    return [(left, right) for left, right in enumerate(match_of_left) if right >= 0]


async def compare_calls(
    predicted: Sequence[ToolCall],
    reference: Sequence[ToolCall],
    comparator: ArgComparator | None,
    threshold: float,
) -> CallComparison:
    """Build the equality relation: JSON keys, or comparator scores of same-name pairs."""
    if comparator is None:
        return CallComparison(
            predicted,
            reference,
            pred_keys=[call_key(call) for call in predicted],
            ref_keys=[call_key(call) for call in reference],
        )
    scores: dict[Pair, float] = {}
    for pred_index, pred in enumerate(predicted):
        for ref_index, ref in enumerate(reference):
            if pred.name == ref.name:
                scores[pred_index, ref_index] = await args_score(comparator, ref.args, pred.args)
    return CallComparison(predicted, reference, scores=scores, threshold=threshold)


def describe_matching(comparison: CallComparison, pairs: Sequence[Pair]) -> dict[str, Any]:
    """``details`` listing matched pairs and the calls left unmatched on each side."""
    matched_pred = {pred_index for pred_index, _ in pairs}
    matched_ref = {ref_index for _, ref_index in pairs}
    matched = []
    for pred_index, ref_index in pairs:
        entry: dict[str, Any] = {
            "predicted_index": pred_index,
            "reference_index": ref_index,
            "call": comparison.reference[ref_index].pretty_repr(),
        }
        if comparison.scores is not None:
            entry["args_score"] = comparison.scores[pred_index, ref_index]
        matched.append(entry)
    return {
        "matched": matched,
        "unmatched_predicted": [
            {"index": index, "call": call.pretty_repr()}
            for index, call in enumerate(comparison.predicted)
            if index not in matched_pred
        ],
        "unmatched_reference": [
            {"index": index, "call": call.pretty_repr()}
            for index, call in enumerate(comparison.reference)
            if index not in matched_ref
        ],
    }

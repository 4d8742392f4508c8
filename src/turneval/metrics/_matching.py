"""The call-matching engine shared by ToolCallF1 and the trajectory metrics.

Two calls are *equal* when their names are equal and either their args are equal as JSON
values (default) or an argument comparator scores them at least ``match_threshold``. On top of
that relation the engine answers what the metrics ask: are the lists equal position by position
(exact), is the reference a subsequence of the prediction (in order), and how many calls a
maximum one-to-one matching pairs as multisets (any order, precision, recall, F1) — and, for
the detailed results only, which pairs those are.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_core import to_json

from turneval.messages import ToolCall
from turneval.metrics._compare import ArgComparator

__all__ = [
    "CallComparison",
    "Pair",
    "args_score",
    "call_key",
    "describe_matching",
    "json_comparison",
    "json_key",
    "scored_comparison",
]

Pair = tuple[int, int]

_DICT, _LIST, _BOOL = 0, 1, 2
# Values of these types are their own JSON key: Python already has 1 == 1.0 and "1" != 1.
_SCALARS = frozenset((str, int, float, type(None)))


def json_key(value: Any) -> Hashable:
    """A hashable key equal for equal JSON values.

    Key order is irrelevant, ``1 == 1.0``, ``"1" != 1``, ``true != 1``, nested values compare
    deeply. Numbers keep Python's exact int/float comparison; booleans are tagged (Python has
    ``True == 1``) and containers become tagged frozensets/tuples.
    """
    kind = type(value)
    if kind in _SCALARS:
        return value  # type: ignore[no-any-return]
    if kind is dict:
        return (_DICT, _mapping_key(value))
    if kind is list or kind is tuple:
        if _SCALARS.issuperset(map(type, value)):
            return (_LIST, tuple(value))
        return (_LIST, tuple([json_key(item) for item in value]))
    if kind is bool:
        return (_BOOL, value)
    return value  # type: ignore[no-any-return]  # not JSON: the value itself


def _mapping_key(mapping: dict[str, Any]) -> frozenset[tuple[str, Hashable]]:
    # C-level check first: most argument dicts hold only scalars.
    if _SCALARS.issuperset(map(type, mapping.values())):
        return frozenset(mapping.items())
    return frozenset([(key, json_key(value)) for key, value in mapping.items()])


def call_key(call: ToolCall) -> Hashable:
    """The key of a call: its name and its args as a JSON value."""
    return (call.name, _mapping_key(call.args))


async def args_score(
    compare: ArgComparator, reference: dict[str, Any], prediction: dict[str, Any]
) -> float:
    """Mean comparator score over the union of both calls' keys (one-sided keys score 0).

    Two calls without args score 1.0. Values are compared as ``str(value)``.
    """
    if not reference and not prediction:
        return 1.0
    total = 0.0
    for key, value in reference.items():
        if key in prediction:
            total += await compare(str(value), str(prediction[key]))
    extra = sum(1 for key in prediction if key not in reference)
    return total / (len(reference) + extra)


@dataclass(slots=True)
class CallComparison:
    """The equality relation between predicted and reference calls of one sample.

    In JSON-equality mode calls are first keyed by ``(name, JSON text of args)``: equal texts
    imply equal JSON values, so most pairs are settled by one Rust serialisation per call. Only
    calls whose texts differ yet might still be equal (``1`` vs ``1.0``, another key order) get
    their exact canonical key (:func:`call_key`), lazily.

    Attributes:
        predicted: The predicted calls, in order.
        reference: The reference calls, in order.
        pred_texts: Fast keys of the predicted calls (JSON-equality mode), else None.
        ref_texts: Fast keys of the reference calls (JSON-equality mode), else None.
        scores: ``{(pred_index, ref_index): args score}`` for same-name pairs (comparator mode).
        threshold: The score a pair needs to be equal (comparator mode).
    """

    predicted: Sequence[ToolCall]
    reference: Sequence[ToolCall]
    pred_texts: list[Hashable] | None = None
    ref_texts: list[Hashable] | None = None
    scores: dict[Pair, float] | None = None
    threshold: float = 1.0
    _exact_keys: dict[tuple[bool, int], Hashable] | None = None

    def _exact(self, predicted: bool, index: int) -> Hashable:
        if self._exact_keys is None:
            self._exact_keys = {}
        key = self._exact_keys.get((predicted, index))
        if key is None:
            call = self.predicted[index] if predicted else self.reference[index]
            key = self._exact_keys[predicted, index] = call_key(call)
        return key

    def equal(self, pred_index: int, ref_index: int) -> bool:
        """Whether predicted call ``pred_index`` equals reference call ``ref_index``."""
        if self.pred_texts is not None and self.ref_texts is not None:
            if self.pred_texts[pred_index] == self.ref_texts[ref_index]:
                return True
            if self.predicted[pred_index].name != self.reference[ref_index].name:
                return False
            return self._exact(True, pred_index) == self._exact(False, ref_index)
        assert self.scores is not None
        return self.scores.get((pred_index, ref_index), -1.0) >= self.threshold

    def equal_prefix(self) -> int:
        """How many positions from the first on hold equal calls."""
        common = min(len(self.predicted), len(self.reference))
        pred_texts, ref_texts = self.pred_texts, self.ref_texts
        if pred_texts is not None and ref_texts is not None:
            if pred_texts[:common] == ref_texts[:common]:
                return common
        for index in range(common):
            if not self.equal(index, index):
                return index
        return common

    def in_order(self) -> list[Pair]:
        """The greedy earliest embedding of the reference in the prediction, up to a miss.

        It holds a pair per reference call exactly when the reference is a subsequence of the
        prediction: greedy earliest matching is optimal for a subsequence test under any pair
        relation.
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
                break
        return pairs

    def matched_count(self) -> int:
        """Size of a maximum one-to-one matching (what the metrics' values need)."""
        pred_texts, ref_texts = self.pred_texts, self.ref_texts
        if pred_texts is None or ref_texts is None:
            return len(self.maximum_matching())
        if pred_texts == ref_texts:
            return len(pred_texts)
        # Count-only twin of maximum_matching: pair equal texts, then exact keys of the rest.
        waiting: dict[Hashable, int] = {}
        for text in ref_texts:
            waiting[text] = waiting.get(text, 0) + 1
        matched = 0
        left_pred = []
        for index, text in enumerate(pred_texts):
            count = waiting.get(text)
            if count:
                waiting[text] = count - 1
                matched += 1
            else:
                left_pred.append(index)
        if not left_pred or matched == len(ref_texts):
            return matched
        exact_waiting: dict[Hashable, int] = {}
        for index, text in enumerate(ref_texts):
            if waiting[text]:  # one of the copies of this text is still unpaired
                waiting[text] -= 1
                key = self._exact(False, index)
                exact_waiting[key] = exact_waiting.get(key, 0) + 1
        for index in left_pred:
            key = self._exact(True, index)
            count = exact_waiting.get(key)
            if count:
                exact_waiting[key] = count - 1
                matched += 1
        return matched

    def maximum_matching(self) -> list[Pair]:
        """A maximum one-to-one matching, as ``(pred_index, ref_index)`` pairs."""
        if self.pred_texts is None or self.ref_texts is None:
            return _bipartite_matching(self._adjacency(), len(self.reference))
        # JSON equality is an equivalence and equal texts are a finer one: pairing within text
        # classes, then pairing what is left within exact classes, is maximum.
        pairs, left_pred, left_ref = _pair_by_key(
            self.pred_texts, range(len(self.predicted)), self.ref_texts, range(len(self.reference))
        )
        if left_pred and left_ref:
            exact_pred = [self._exact(True, index) for index in left_pred]
            exact_ref = [self._exact(False, index) for index in left_ref]
            more, _, _ = _pair_by_key(exact_pred, left_pred, exact_ref, left_ref)
            pairs += more
        return pairs

    def _adjacency(self) -> list[list[int]]:
        assert self.scores is not None
        adjacency: list[list[tuple[float, int]]] = [[] for _ in self.predicted]
        for (pred_index, ref_index), score in self.scores.items():
            if score >= self.threshold:
                adjacency[pred_index].append((-score, ref_index))
        # Best-scoring partners first, so the matching shown prefers the closest calls.
        return [[ref_index for _, ref_index in sorted(row)] for row in adjacency]


def _pair_by_key(
    pred_keys: Sequence[Hashable],
    pred_indices: Sequence[int],
    ref_keys: Sequence[Hashable],
    ref_indices: Sequence[int],
) -> tuple[list[Pair], list[int], list[int]]:
    """Pair equal keys in order; return the pairs and the unpaired indices of each side."""
    waiting: dict[Hashable, list[int]] = {}
    for position in range(len(ref_keys) - 1, -1, -1):
        waiting.setdefault(ref_keys[position], []).append(ref_indices[position])
    pairs: list[Pair] = []
    left_pred: list[int] = []
    for key, pred_index in zip(pred_keys, pred_indices, strict=True):
        bucket = waiting.get(key)
        if bucket:
            pairs.append((pred_index, bucket.pop()))
        else:
            left_pred.append(pred_index)
    left_ref = sorted(index for bucket in waiting.values() for index in bucket)
    return pairs, left_pred, left_ref


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


def json_comparison(predicted: Sequence[ToolCall], reference: Sequence[ToolCall]) -> CallComparison:
    """The relation under JSON-value equality of args (no comparator)."""
    return CallComparison(
        predicted,
        reference,
        [(call.name, to_json(call.args)) for call in predicted],
        [(call.name, to_json(call.args)) for call in reference],
    )


async def scored_comparison(
    predicted: Sequence[ToolCall],
    reference: Sequence[ToolCall],
    comparator: ArgComparator,
    threshold: float,
) -> CallComparison:
    """The relation under a comparator: same-name pairs whose args score reaches ``threshold``."""
    scores: dict[Pair, float] = {}
    for pred_index, pred in enumerate(predicted):
        for ref_index, ref in enumerate(reference):
            if pred.name == ref.name:
                scores[pred_index, ref_index] = await args_score(comparator, ref.args, pred.args)
    return CallComparison(predicted, reference, scores=scores, threshold=threshold)


def describe_matching(comparison: CallComparison, pairs: Sequence[Pair]) -> dict[str, Any]:
    """``details`` listing matched pairs and the calls left unmatched on each side.

    A matched pair shows the reference ``call``; under a comparator (not exact equality) also
    the ``predicted_call`` it was matched with and their ``args_score``.
    """
    matched_pred = {pred_index for pred_index, _ in pairs}
    matched_ref = {ref_index for _, ref_index in pairs}
    matched = []
    for pred_index, ref_index in sorted(pairs):
        entry: dict[str, Any] = {
            "predicted_index": pred_index,
            "reference_index": ref_index,
            "call": comparison.reference[ref_index].pretty_repr(),
        }
        if comparison.scores is not None:  # a comparator's match: the prediction may differ
            entry["predicted_call"] = comparison.predicted[pred_index].pretty_repr()
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

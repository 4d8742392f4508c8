"""ToolCallAccuracy in any order: ragas' sorted pairs, found in as few steps as parity allows.

ragas sorts both call lists by ``(name, arg, str(value), ...)`` and scores the pairs in that
order; the float must be the same, so the pairs and the order of their sum are ragas'. The
functions here find them cheaply: :func:`sort_key` (ragas' key, nested values ordered by
their ``str()`` only when needed, :class:`Deferred`), :func:`sort_unordered` (the name alone
when names are distinct), :func:`group_sorted` (one tool's calls), :func:`repeated_total`
(repeated names: groups of the same calls need no sort, :func:`all_one_check`). Used by
:mod:`._float_accuracy`'s unordered kernel.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable
from typing import Any

from turneval.messages import ToolCall
from turneval.metrics._float_core import ArgsScore, PairFormula, by_name, dumps, same_text
from turneval.metrics._formulas import PAIR_SIDE

__all__ = [
    "AllOne",
    "Deferred",
    "all_one_check",
    "group_sorted",
    "repeated_total",
    "sort_key",
    "sort_unordered",
]


class Deferred(tuple[Any]):
    """A nested argument value in an unordered sort key, ordered by its ``str()``.

    The key (ragas' ``(name, arg, str(value), ...)``) compares its items left to right, so
    the text of a nested value is only built when everything before it ties, and two nested
    values are told equal by :func:`same_text`, without their texts.
    """

    __slots__ = ()

    @staticmethod
    def _text(other: object) -> str:
        return str(other[0]) if isinstance(other, Deferred) else str(other)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Deferred):
            return same_text(self[0], other[0])
        return str(self[0]) == other

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __lt__(self, other: object) -> bool:
        return str(self[0]) < self._text(other)

    def __le__(self, other: object) -> bool:
        return str(self[0]) <= self._text(other)

    def __gt__(self, other: object) -> bool:
        return str(self[0]) > self._text(other)

    def __ge__(self, other: object) -> bool:
        return str(self[0]) >= self._text(other)

    __hash__ = None  # type: ignore[assignment]


def sort_key(call: ToolCall) -> tuple[Any, ...]:
    """The unordered sort key (ragas'): ``(name, arg, str(value), ...)``, args sorted by name."""
    args = call.args
    key: list[Any] = [call.name]
    for arg_name in sorted(args):
        value = args[arg_name]
        kind = type(value)
        key.append(arg_name)
        if kind is str:
            key.append(value)
        elif kind is dict or kind is list:
            key.append(Deferred((value,)))
        else:
            key.append(str(value))
    return tuple(key)


def group_sorted(calls: list[ToolCall]) -> list[dict[str, Any]]:
    """The args of ``calls`` (one tool's) in the order of ragas' sort key, ties kept in order.

    Every key starts with the same name, so the rest orders them: ``(a1, str(v1), a2,
    str(v2), ...)``, the arg names sorted. When every call's smallest arg name is the same
    ``a``, the keys are equal up to ``str(v)``, the value of ``a``; when those strings all
    differ they alone order the keys, without ties. Otherwise (a tie, another smallest
    name, a call without args) the rest of each key is built and compared whole.
    """
    if len(calls) == 2:  # one comparison of the first values, when they differ
        left, right = calls[0].args, calls[1].args
        if left and right:
            first = min(left)
            if first == min(right):
                value, other = left[first], right[first]
                text = value if type(value) is str else str(value)
                other_text = other if type(other) is str else str(other)
                if text != other_text:
                    return [left, right] if text < other_text else [right, left]
    by_first: dict[str, dict[str, Any]] = {}  # each call's args by its first text
    try:
        first = min(calls[0].args)
        for call in calls:
            each = call.args
            if min(each) != first:
                break
            value = each[first]
            by_first[value if type(value) is str else str(value)] = each
        else:
            if len(by_first) == len(calls):  # the texts all differ
                return [by_first[text] for text in sorted(by_first)]
    except ValueError:  # a call without args
        pass
    args = [call.args for call in calls]
    keys: list[list[str]] = []
    for each in args:
        key: list[str] = []
        for arg_name in sorted(each):
            value = each[arg_name]
            key.append(arg_name)
            key.append(value if type(value) is str else str(value))
        keys.append(key)
    return [args[index] for index in sorted(range(len(args)), key=keys.__getitem__)]


def sort_unordered(
    predicted: list[ToolCall], reference: list[ToolCall], ref_names: list[str], unique: set[str]
) -> tuple[list[ToolCall], list[ToolCall]]:
    """Both lists sorted by ragas' key (their sorted names are known to be equal)."""
    if len(unique) == len(ref_names):  # the name alone decides the order
        return sorted(predicted, key=by_name), sorted(reference, key=by_name)
    # Only calls whose name repeats need the rest of the key: others differ by name.
    repeated = {name for name in unique if ref_names.count(name) > 1}

    def key(call: ToolCall) -> tuple[Any, ...]:
        return sort_key(call) if call.name in repeated else (call.name,)

    return sorted(predicted, key=key), sorted(reference, key=key)


def _same_calls(predicted: list[ToolCall], reference: list[ToolCall]) -> bool:
    """Whether the two lists hold the same calls, as multisets (equal in Python, equal texts).

    Calls are paired greedily by name and args equal in Python (a miss ends it: most lists
    that differ are told apart by one dictionary comparison or a few); then each pair's args
    must have equal JSON texts. Equal in Python with equal JSON texts, every value has the
    same ``str()`` (:func:`same_text`), so ragas' sort keys form the same multiset: the sorted
    lists pair calls of equal keys and every pair scores 1 under exact comparison. False only
    means "not shown": the caller then sorts.
    """
    left = list(reference)
    pairs: list[tuple[dict[str, Any], dict[str, Any]]] = []
    for pred in predicted:
        name, args = pred.name, pred.args
        for position, ref in enumerate(left):
            if ref.name == name and ref.args == args:
                pairs.append((args, ref.args))
                del left[position]
                break
        else:
            return False
    try:
        for pred_args, ref_args in pairs:
            if pred_args is not ref_args and dumps(pred_args) != dumps(ref_args):
                return False
    except (TypeError, ValueError):  # orjson's or pydantic's refusal: let the sort decide
        return False
    return True


AllOne = Callable[[list[ToolCall]], bool]
"""``(calls) -> whether each of the calls, paired with an equal call, scores exactly 1.0``."""


def all_one_check(pair: PairFormula) -> AllOne:
    """Whether calls each paired with an equal call all score exactly 1.0: ``pair`` bound.

    Such a pair counts every reference arg as equal (``args_score`` scores equal strings 1.0),
    so it scores the pair formula of ``(k, k, k)``; when that is exactly 1.0 for every call,
    the pairs' scores do not depend on the order of the calls, and the sort that orders them
    is skipped: the caller adds 1.0 once per call, in order (one by one, as ragas sums: a
    running total plus ``k`` at once may round otherwise). False: a formula that scores
    some of them otherwise (the caller then sorts). Whether ``(k, k, k)`` scores 1.0 is
    asked once per ``k`` below :data:`~turneval.metrics._formulas.PAIR_SIDE` and kept.
    """
    unit: list[bool | None] = [None] * PAIR_SIDE

    def all_one(calls: list[ToolCall]) -> bool:
        for call in calls:
            k = len(call.args)
            if k < PAIR_SIDE:
                one = unit[k]
                if one is None:
                    one = unit[k] = pair(k, k, k) == 1.0
            else:
                one = pair(k, k, k) == 1.0
            if not one:
                return False
        return True

    return all_one


def _by_name_groups(
    predicted: list[ToolCall],
    reference: list[ToolCall],
    names: list[str],
    args_score: ArgsScore,
    all_one: AllOne,
) -> float:
    """The unordered sum of pair scores (ragas' sort), name by name; ``names``: both sorted.

    Sorting by ragas' key puts each name's calls together, names in order, so the sorted
    pairs are those of each name's group sorted alone, in name order: both lists are sorted
    by name (stable), and each run of one name in ``names`` is a group. A name called once is
    its own pair; a group holding the same calls on both sides (:func:`_same_calls`) pairs
    calls of equal keys, each adding 1.0 when ``all_one`` says so; only the other groups are
    sorted by ragas' key (:func:`group_sorted`). The pair scores are summed in the sorted
    order: the same float.
    """
    preds_by_name = sorted(predicted, key=by_name)
    refs_by_name = sorted(reference, key=by_name)
    n = len(names)
    total = 0.0
    start = 0
    while start < n:
        end = bisect_right(names, names[start], start + 1)
        if end - start == 1:
            total += args_score(refs_by_name[start].args, preds_by_name[start].args)
        else:
            preds, refs = preds_by_name[start:end], refs_by_name[start:end]
            if _same_calls(preds, refs) and all_one(refs):
                for _ in refs:  # one by one, as ragas adds them
                    total += 1.0
            else:
                pred_args, ref_args = group_sorted(preds), group_sorted(refs)
                for index in range(end - start):
                    total += args_score(ref_args[index], pred_args[index])
        start = end
    return total


def repeated_total(
    predicted: list[ToolCall],
    reference: list[ToolCall],
    names: list[str] | None,
    args: ArgsScore,
    all_one: AllOne,
    one_name: bool,
) -> float:
    """The summed pair scores of ragas' sorted pairs when a name repeats; same sorted names.

    ``args`` scores equal strings 1.0, so lists (or groups) of the same calls need no sort;
    ``names``: the sorted names, or None (not sorted yet). When every call has one name
    (``one_name``), the lists are the only group of :func:`_by_name_groups`, whose test of
    the same calls has just failed: they are ordered and scored at once.
    """
    if _same_calls(predicted, reference) and all_one(reference):
        return float(len(reference))  # 1.0 added once per call from 0.0: exactly this
    if one_name:
        total = 0.0  # summed in the sorted order, as ragas does
        for ref_args, pred_args in zip(
            group_sorted(reference), group_sorted(predicted), strict=True
        ):
            total += args(ref_args, pred_args)
        return total
    if names is None:
        names = sorted(map(by_name, reference))
    return _by_name_groups(predicted, reference, names, args, all_one)

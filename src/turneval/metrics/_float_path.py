"""The float path of the tool-call and trajectory metrics: one plain function per metric.

Under the default configuration ``multi_turn_ascore`` calls a function built here from the
metric's formula (:func:`count_kernel`, :func:`accuracy_value`, :func:`single_tool_value`)
with the sample's messages and reference calls, and returns what it returns: no
coroutine besides its own, no outcome object, no comparison records. Each gives exactly the
float :meth:`~turneval.metrics.base.Metric.ascore` gives (``tests/metrics/test_reference_impl.py``
checks both paths against slow references written from the definitions).

Three shortcuts carry most of the speed, all exact:

* Call equality (JSON values of args) is first decided on ``(name, JSON text of args)``, as
  :class:`~turneval.metrics._matching.CallComparison` does with ``pydantic_core.to_json``;
  :func:`args_text` gives texts with the same equality classes, faster (orjson when installed).
* The multiset metrics pair short call lists by Python equality checked value by value for
  what Python conflates (``True == 1``), without texts; a NaN sends the sample back to texts.
* ToolCallAccuracy scores an argument by ``str(reference) == str(prediction)`` (ragas);
  :func:`same_text` decides that without building the strings for same-typed values, and for
  nested values by comparing their JSON texts.

The functions here only count (matched calls, the equal prefix, calls found in order, summed
argument scores); every value comes from the metric's formula (:mod:`._formulas`), bound once
when the function is built: a count formula's values are read from its table by sizes
(:meth:`~turneval.metrics._formulas.CountFormula.row`), ToolCallAccuracy's pair scores from
its rows by arg counts (:attr:`~turneval.metrics._formulas.AccuracyFormula.pair_rows`), and
its mean formula is called as a local.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Hashable, Sequence
from operator import attrgetter
from typing import Any

from pydantic_core import to_json

from turneval.messages import AIMessage, Message, ToolCall
from turneval.metrics._formulas import (
    PAIR_SIDE,
    SIDE,
    AccuracyFormula,
    CountFormula,
    PairRow,
    SingleToolFormula,
)
from turneval.metrics._matching import call_key

__all__ = [
    "accuracy_value",
    "args_text",
    "count_kernel",
    "equal_prefix",
    "found_in_order",
    "matched_count",
    "predicted_calls",
    "same_text",
    "single_tool_value",
]

Kernel = Callable[[Sequence[Message], list[ToolCall]], float]
"""``(messages, reference calls) -> value``: a metric's float path."""
Counter = Callable[[list[ToolCall], list[ToolCall]], int]
"""``(predicted calls, reference calls) -> count``: the count a :class:`CountFormula` takes."""
ArgsScore = Callable[[dict[str, Any], dict[str, Any]], float]
"""``(reference args, predicted args) -> the pair's score``."""
PairFormula = Callable[[int, int, float], float]
""":attr:`AccuracyFormula.pair`."""

_dumps: Callable[[Any], bytes]
try:
    from orjson import dumps as _dumps
except ImportError:  # pragma: no cover - exercised only without orjson (the ``fast`` extra)
    _dumps = to_json

_ABSENT = object()
_by_name = attrgetter("name")


def predicted_calls(messages: Sequence[Message]) -> list[ToolCall]:
    """Every AIMessage's tool calls, flattened in order (``MultiTurnSample.tool_calls``)."""
    calls: list[ToolCall] = []
    for message in messages:
        if type(message) is AIMessage:
            found = message.tool_calls
            if found:
                calls += found
    return calls


def args_text(args: dict[str, Any]) -> bytes:
    """A JSON text of ``args``; two texts are equal exactly when their ``to_json`` texts are.

    orjson writes NaN and infinities as ``null``, so a text holding ``null`` is replaced by
    pydantic's (which keeps them apart from ``None``), as is any text orjson refuses (integers
    beyond 64 bits, lone surrogates: pydantic then writes the number or raises its own error,
    as before).
    """
    try:
        text = _dumps(args)
    except TypeError:
        return to_json(args)
    if text.find(b"null") < 0:
        return text
    return to_json(args)


def same_text(reference: Any, prediction: Any) -> bool:
    """``str(reference) == str(prediction)`` for JSON values, mostly without ``str()``.

    Same-typed strings, integers and booleans compare directly; floats directly except for
    zeros (``-0.0``) and NaN; lists and dicts by their JSON texts (equal ``str()`` implies equal
    texts, and equal texts of equal values imply equal ``str()``); anything else by ``str()``.
    """
    kind = type(reference)
    if kind is not type(prediction):
        return str(reference) == str(prediction)
    if kind is str or kind is int or kind is bool:
        return bool(reference == prediction)
    if kind is float:
        if reference == prediction:
            return bool(reference) or str(reference) == str(prediction)
        return bool(reference != reference and prediction != prediction)  # both NaN: "nan"
    if kind is dict or kind is list:
        try:
            if _dumps(reference) != _dumps(prediction):
                return False
        except (TypeError, ValueError):
            return str(reference) == str(prediction)
        return bool(reference == prediction) or str(reference) == str(prediction)
    return str(reference) == str(prediction)


# -- ToolCallAccuracy ------------------------------------------------------------------------------


def _same_strs(ref_args: dict[str, Any], pred_args: dict[str, Any]) -> bool:
    """Whether both args have the same keys, each value with an equal ``str()``.

    Shown by equality in Python and equal JSON texts (same key order): every value then has
    the same ``str()``, as :func:`same_text` argues value by value. False: not shown.
    """
    if ref_args != pred_args:
        return False
    try:
        return bool(_dumps(ref_args) == _dumps(pred_args))
    except (TypeError, ValueError):  # orjson's or pydantic's refusal: not shown
        return False


def _exact_args(
    rows: list[list[PairRow]], row_of: Callable[[int, int], tuple[float, ...]]
) -> ArgsScore:
    """The exact argument score (ragas'): the pair formula of the reference's args equal as ``str``.

    The score is read from ``rows`` by the two sizes and the count of equal args (``row_of``
    for sizes beyond them): :attr:`AccuracyFormula.pair_rows` gives the pair score,
    :attr:`AccuracyFormula.single_rows` the value of a sample of that one pair.
    """

    def score(ref_args: dict[str, Any], pred_args: dict[str, Any]) -> float:
        n_args = len(ref_args)
        try:
            row = rows[n_args][len(pred_args)]
        except IndexError:  # sizes beyond the rows kept
            row = row_of(n_args, len(pred_args))
        if n_args > 2 and _same_strs(ref_args, pred_args):
            return row[n_args]  # worth it for larger args
        equal = 0
        for key, ref_value in ref_args.items():
            pred_value = pred_args.get(key, _ABSENT)
            if ref_value is pred_value:
                equal += 1
            elif pred_value is _ABSENT:
                continue
            else:
                kind = type(ref_value)
                if kind is type(pred_value) and (kind is str or kind is int or kind is bool):
                    if ref_value == pred_value:
                        equal += 1
                elif same_text(ref_value, pred_value):
                    equal += 1
        return row[equal]

    return score


StrictTotal = Callable[[list[ToolCall], list[ToolCall]], "float | None"]
"""``(predicted, reference) -> summed pair scores in order, or None when a name differs``."""


def _exact_strict_total(formula: AccuracyFormula) -> StrictTotal:
    """:func:`_exact_args`' scores of the aligned pairs summed in order, in one loop.

    The strict loop of the exact kernel, with the argument score of :func:`_exact_args`
    written into it (one Python call less per pair); the pair scores come from the same
    rows of the formula.
    """
    rows, row_of = formula.pair_rows, formula.pair_row

    def total(predicted: list[ToolCall], reference: list[ToolCall]) -> float | None:
        summed = 0.0  # summed in order, as ragas does: the float must be the same
        for pred, ref in zip(predicted, reference, strict=False):  # equal lengths
            if pred.name != ref.name:
                return None  # a score computed before is dropped
            ref_args, pred_args = ref.args, pred.args
            n_args = len(ref_args)
            try:
                row = rows[n_args][len(pred_args)]
            except IndexError:  # sizes beyond the rows kept
                row = row_of(n_args, len(pred_args))
            if n_args > 2 and _same_strs(ref_args, pred_args):
                summed += row[n_args]
                continue
            equal = 0
            for key, ref_value in ref_args.items():
                pred_value = pred_args.get(key, _ABSENT)
                if ref_value is pred_value:
                    equal += 1
                elif pred_value is _ABSENT:
                    continue
                else:
                    kind = type(ref_value)
                    if kind is type(pred_value) and (kind is str or kind is int or kind is bool):
                        if ref_value == pred_value:
                            equal += 1
                    elif same_text(ref_value, pred_value):
                        equal += 1
            summed += row[equal]
        return summed

    return total


def _scored_args(pair: PairFormula, compare: Callable[[str, str], float]) -> ArgsScore:
    """The argument score with a trusted sync comparator on ``str`` of both values."""

    def score(ref_args: dict[str, Any], pred_args: dict[str, Any]) -> float:
        total = 0.0
        for key, ref_value in ref_args.items():
            pred_value = pred_args.get(key, _ABSENT)
            if pred_value is not _ABSENT:
                total += compare(str(ref_value), str(pred_value))
        return pair(len(ref_args), len(pred_args), total)

    return score


def _skipping_args(pair: PairFormula, compare: Callable[[str, str], float]) -> ArgsScore:
    """:func:`_scored_args` for a comparator that scores equal strings 1.0.

    Values with equal ``str()`` (:func:`same_text`, mostly without building the strings) add
    1.0 without a call; args equal in Python with equal JSON texts add 1.0 each at once. The
    sum is the same float: the comparator would have returned exactly 1.0 for each.
    """

    def score(ref_args: dict[str, Any], pred_args: dict[str, Any]) -> float:
        n_args = len(ref_args)
        if n_args > 2 and _same_strs(ref_args, pred_args):
            return pair(n_args, n_args, float(n_args))  # n times 1.0
        total = 0.0
        for key, ref_value in ref_args.items():
            pred_value = pred_args.get(key, _ABSENT)
            if pred_value is ref_value:
                total += 1.0
            elif pred_value is not _ABSENT:
                kind = type(ref_value)
                if kind is type(pred_value) and (kind is str or kind is int or kind is bool):
                    if ref_value == pred_value:
                        total += 1.0
                    else:
                        total += compare(str(ref_value), str(pred_value))
                elif same_text(ref_value, pred_value):
                    total += 1.0
                else:
                    total += compare(str(ref_value), str(pred_value))
        return pair(n_args, len(pred_args), total)

    return score


class _Deferred(tuple[Any]):
    """A nested argument value in an unordered sort key, ordered by its ``str()``.

    The key (ragas' ``(name, arg, str(value), ...)``) compares its items left to right, so
    the text of a nested value is only built when everything before it ties, and two nested
    values are told equal by :func:`same_text`, without their texts.
    """

    __slots__ = ()

    @staticmethod
    def _text(other: object) -> str:
        return str(other[0]) if isinstance(other, _Deferred) else str(other)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _Deferred):
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


def _sort_key(call: ToolCall) -> tuple[Any, ...]:
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
            key.append(_Deferred((value,)))
        else:
            key.append(str(value))
    return tuple(key)


def _group_sorted(calls: list[ToolCall]) -> list[dict[str, Any]]:
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


def _unordered(
    predicted: list[ToolCall], reference: list[ToolCall], ref_names: list[str], unique: set[str]
) -> tuple[list[ToolCall], list[ToolCall]]:
    """Both lists sorted by ragas' key (their sorted names are known to be equal)."""
    if len(unique) == len(ref_names):  # the name alone decides the order
        return sorted(predicted, key=_by_name), sorted(reference, key=_by_name)
    # Only calls whose name repeats need the rest of the key: others differ by name.
    repeated = {name for name in unique if ref_names.count(name) > 1}

    def key(call: ToolCall) -> tuple[Any, ...]:
        return _sort_key(call) if call.name in repeated else (call.name,)

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
            if pred_args is not ref_args and _dumps(pred_args) != _dumps(ref_args):
                return False
    except (TypeError, ValueError):  # orjson's or pydantic's refusal: let the sort decide
        return False
    return True


AllOne = Callable[[list[ToolCall]], bool]
"""``(calls) -> whether each of the calls, paired with an equal call, scores exactly 1.0``."""


def _all_one(pair: PairFormula) -> AllOne:
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
    sorted by ragas' key (:func:`_group_sorted`). The pair scores are summed in the sorted
    order: the same float.
    """
    preds_by_name = sorted(predicted, key=_by_name)
    refs_by_name = sorted(reference, key=_by_name)
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
                pred_args, ref_args = _group_sorted(preds), _group_sorted(refs)
                for index in range(end - start):
                    total += args_score(ref_args[index], pred_args[index])
        start = end
    return total


def _repeated_total(
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
            _group_sorted(reference), _group_sorted(predicted), strict=True
        ):
            total += args(ref_args, pred_args)
        return total
    if names is None:
        names = sorted(map(_by_name, reference))
    return _by_name_groups(predicted, reference, names, args, all_one)


def _strict_accuracy(
    formula: AccuracyFormula,
    args_score: ArgsScore,
    fallback: ArgsScore | None,
    identical: Callable[[], bool] | None,
    strict_total: StrictTotal | None,
    single: ArgsScore | None,
) -> Kernel:
    """ToolCallAccuracy's value in strict order (see :func:`_accuracy`)."""
    mean = formula.value

    def value(messages: Sequence[Message], reference: list[ToolCall]) -> float:
        args = args_score
        if fallback is not None and (identical is None or not identical()):
            args = fallback
        predicted: list[ToolCall] = []  # predicted_calls(messages), inlined: one call less
        for message in messages:
            if type(message) is AIMessage:
                found = message.tool_calls
                if found:
                    predicted += found
        n = len(reference)
        if len(predicted) != n or not n:  # lengths differ: so do the names
            return mean(len(predicted), n, None)
        if n == 1:
            pred, ref = predicted[0], reference[0]
            if pred.name != ref.name:
                return mean(1, 1, None)
            if single is None:
                return mean(1, 1, args(ref.args, pred.args))
            return single(ref.args, pred.args)  # the exact score: the value read from rows
        if strict_total is not None:
            return mean(n, n, strict_total(predicted, reference))
        total = 0.0  # summed in order, as ragas does: the float must be the same
        for pred, ref in zip(predicted, reference, strict=True):
            if pred.name != ref.name:
                return mean(n, n, None)  # a score computed before is dropped
            total += args(ref.args, pred.args)
        return mean(n, n, total)

    return value


def _unordered_accuracy(
    formula: AccuracyFormula,
    args_score: ArgsScore,
    fallback: ArgsScore | None,
    identical: Callable[[], bool] | None,
    single: ArgsScore | None,
) -> Kernel:
    """ToolCallAccuracy's value in any order: ragas' sorted pairs (see :func:`_accuracy`)."""
    mean, all_one = formula.value, _all_one(formula.pair)

    def value(messages: Sequence[Message], reference: list[ToolCall]) -> float:
        args = args_score
        if fallback is not None and (identical is None or not identical()):
            args = fallback
        predicted: list[ToolCall] = []  # predicted_calls(messages), inlined: one call less
        for message in messages:
            if type(message) is AIMessage:
                found = message.tool_calls
                if found:
                    predicted += found
        n = len(reference)
        if len(predicted) != n or not n:  # lengths differ: so do the names
            return mean(len(predicted), n, None)
        if n == 1:
            pred, ref = predicted[0], reference[0]
            if pred.name != ref.name:
                return mean(1, 1, None)
            return (
                mean(1, 1, args(ref.args, pred.args))
                if single is None
                else single(ref.args, pred.args)  # the exact score: the value read from rows
            )
        pred_names = list(map(_by_name, predicted))
        ref_names = list(map(_by_name, reference))
        unique = set(ref_names)
        names = None  # the sorted names, when sorted
        if pred_names == ref_names:
            if len(unique) == n:
                # Distinct names in the same order: sorting pairs the same calls; the
                # pairs are scored (no side effects) and summed in the sorted order.
                total = 0.0
                for index in sorted(range(n), key=ref_names.__getitem__):
                    total += args(reference[index].args, predicted[index].args)
                return mean(n, n, total)
        else:
            names = sorted(ref_names)
            if sorted(pred_names) != names:
                return mean(n, n, None)
        if args is not fallback and len(unique) < n:
            return mean(
                n,
                n,
                _repeated_total(predicted, reference, names, args, all_one, len(unique) == 1),
            )
        predicted, reference = _unordered(predicted, reference, ref_names, unique)
        total = 0.0  # summed in order, as ragas does: the float must be the same
        for index in range(n):
            total += args(reference[index].args, predicted[index].args)
        return mean(n, n, total)

    return value


def _accuracy(
    formula: AccuracyFormula,
    args_score: ArgsScore,
    strict: bool,
    fallback: ArgsScore | None = None,
    identical: Callable[[], bool] | None = None,
    strict_total: StrictTotal | None = None,
    single: ArgsScore | None = None,
) -> Kernel:
    """ToolCallAccuracy's value with ``args_score``, which scores equal strings 1.0.

    With a ``fallback``, a sample is scored with it unless ``identical()`` is true (the
    comparator scores equal strings 1.0); with a ``strict_total``, strict order sums the
    pairs with it (the exact score written into the loop); with ``single``, a sample of one
    aligned pair takes its value from it (the exact score read from the value's rows). The formula's functions are
    bound once; the strict and the unordered kernels are built apart (no test of the order
    per sample).
    """
    if strict:
        return _strict_accuracy(formula, args_score, fallback, identical, strict_total, single)
    return _unordered_accuracy(formula, args_score, fallback, identical, single)


def accuracy_value(
    formula: AccuracyFormula,
    strict: bool,
    compare: Callable[[str, str], float] | None = None,
    identical: Callable[[], bool] | None = None,
) -> Kernel:
    """ToolCallAccuracy's value of ``formula``: exact ``str`` equality, or a trusted ``compare``.

    ``identical()`` tells, per sample, whether ``compare(s, s)`` is exactly 1.0 for every
    string (then values with equal ``str()`` are not compared); without it they always are.
    """
    pair = formula.pair
    if compare is None:
        return _accuracy(
            formula,
            _exact_args(formula.pair_rows, formula.pair_row),
            strict,
            strict_total=_exact_strict_total(formula) if strict else None,
            single=_exact_args(formula.single_rows, formula.single_row),
        )
    return _accuracy(
        formula, _skipping_args(pair, compare), strict, _scored_args(pair, compare), identical
    )


# -- the call-matching metrics -------------------------------------------------------------------


def _call_text(call: ToolCall) -> bytes:
    """The JSON text of ``[name, args]``, with :func:`args_text`'s equality classes."""
    pair = (call.name, call.args)
    try:
        text = _dumps(pair)
    except TypeError:
        return to_json(pair)
    return text if text.find(b"null") < 0 else to_json(pair)


def _call_texts(calls: list[ToolCall]) -> list[bytes]:
    """:func:`_call_text` of every call; equal texts mean equal calls."""
    try:
        texts = [_dumps((call.name, call.args)) for call in calls]
    except TypeError:
        return [_call_text(call) for call in calls]
    if b"".join(texts).find(b"null") < 0:  # texts are arrays: no "null" across two of them
        return texts
    return [_call_text(call) for call in calls]


def _equal(pred: ToolCall, ref: ToolCall) -> bool:
    """Call equality: equal names and args equal as JSON values.

    Equal texts (:func:`args_text`) decide at once; otherwise only args equal in Python (which
    JSON equality implies) can still be equal, and their canonical keys decide (``True`` vs
    ``1``, another key order).
    """
    if pred.name != ref.name:
        return False
    pred_args, ref_args = pred.args, ref.args
    try:
        text = _dumps(pred_args)
        same = text == _dumps(ref_args)
    except TypeError:
        same = to_json(pred_args) == to_json(ref_args)
    else:
        if same and text.find(b"null") >= 0:  # NaN and infinities are null to orjson
            same = to_json(pred_args) == to_json(ref_args)
    if same:
        return True
    return bool(pred_args == ref_args) and call_key(pred) == call_key(ref)


def _equal_left(pred: ToolCall, ref: ToolCall) -> bool:
    """:func:`_equal` for two calls whose texts are known to differ."""
    return pred.name == ref.name and bool(pred.args == ref.args) and call_key(pred) == call_key(ref)


_PAIRWISE = 64
"""Up to this many calls a side are paired by scanning lists; more by counting in dicts."""

_BY_EQUALITY = 8
"""Up to this many calls in all (both sides), :func:`_matched` first pairs without texts."""


class _Unsure(Exception):
    """Pairing without texts met a NaN: the text-first pairing must decide the sample."""


def _same_json(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """For two dicts equal in Python: whether they are equal JSON values too.

    Python's equality of JSON values differs from JSON's in two places only: ``True == 1``
    (booleans are no numbers in JSON; ``1 == 1.0`` is the same in both) and NaN, which equals
    no NaN in Python but whose JSON texts are equal. Each value is therefore compared with the
    other's by type (:func:`_same_value`); a string equal to another value is a string too.
    """
    for key, value in a.items():
        if type(value) is not str and not _same_value(value, b[key]):
            return False
    return True


def _same_value(value: Any, other: Any) -> bool:
    """:func:`_same_json`'s test of two values equal in Python.

    A boolean against a non-boolean is unequal, a NaN raises :class:`_Unsure`, containers are
    walked.
    """
    kind = type(value)
    if kind is not type(other):
        return kind is not bool and type(other) is not bool
    if kind is float and value != value:
        raise _Unsure
    if kind is dict:
        return _same_json(value, other)
    if kind is list:
        return all(map(_same_value, value, other))
    return True


def _matched_by_equality(predicted: list[ToolCall], reference: list[ToolCall]) -> int:
    """:func:`_matched` for short lists of calls, mostly without texts.

    Pairs calls whose names and args are equal in Python and whose args are equal JSON values
    (:func:`_same_json`); such pairs are equal calls (their canonical keys are equal). Calls
    equal in Python are then exactly the equal calls, save for JSON texts made equal by NaN;
    so the pairing is maximum unless a NaN is met: while pairing (raises :class:`_Unsure`), or
    in two calls left on both sides with equal texts (checked for same-name calls of as many
    args, and raising :class:`_Unsure` too).
    """
    left = [(call.name, call.args) for call in reference]
    matched = 0
    rest: list[tuple[str, dict[str, Any]]] = []
    for call in predicted:
        name, args = call.name, call.args
        for position, (ref_name, ref_args) in enumerate(left):
            if ref_name == name and ref_args == args and _same_json(args, ref_args):
                del left[position]
                matched += 1
                break
        else:
            rest.append((name, args))
    if rest and left:
        for name, args in rest:
            for ref_name, ref_args in left:
                if (
                    ref_name == name
                    and len(ref_args) == len(args)
                    and args_text(args) == args_text(ref_args)
                ):
                    raise _Unsure
    return matched


def _matched(predicted: list[ToolCall], reference: list[ToolCall]) -> int:
    """Size of a maximum one-to-one matching under call equality.

    Short lists are paired by :func:`_matched_by_equality` unless it meets a NaN. Otherwise
    equal texts are paired first (:func:`_call_texts`); among the calls left (no text in
    common), call equality is equality of canonical keys
    (:func:`~turneval.metrics._matching.call_key`), an equivalence, so pairing greedily is
    maximum; a pair needs equal names and args equal in Python before its keys are built.
    """
    n_pred, n_ref = len(predicted), len(reference)
    if n_pred == 1 and n_ref == 1:
        return int(_equal(predicted[0], reference[0]))
    if not n_pred or not n_ref:
        return 0
    if n_pred + n_ref <= _BY_EQUALITY:
        try:
            return _matched_by_equality(predicted, reference)
        except _Unsure:
            pass
    if n_pred > _PAIRWISE or n_ref > _PAIRWISE:
        return _matched_by_counting(predicted, reference)
    texts = _call_texts(predicted + reference)
    waiting = texts[n_pred:]  # a paired text becomes b"" (texts are never empty)
    if texts[:n_pred] == waiting:
        return n_ref
    matched = 0
    left: list[ToolCall] = []
    for index in range(n_pred):
        text = texts[index]
        if text in waiting:
            waiting[waiting.index(text)] = b""
            matched += 1
        else:
            left.append(predicted[index])
    if not left or matched == n_ref:
        return matched
    left_ref = [reference[index] for index, text in enumerate(waiting) if text]
    for call in left:
        for position, ref in enumerate(left_ref):
            if _equal_left(call, ref):
                del left_ref[position]
                matched += 1
                break
    return matched


def _matched_by_counting(predicted: list[ToolCall], reference: list[ToolCall]) -> int:
    """:func:`_matched` for long lists: texts, then canonical keys, counted in dicts."""
    pred_texts, ref_texts = _call_texts(predicted), _call_texts(reference)
    waiting: dict[bytes, int] = {}
    for text in ref_texts:
        waiting[text] = waiting.get(text, 0) + 1
    matched = 0
    left: list[ToolCall] = []
    for index, text in enumerate(pred_texts):
        count = waiting.get(text)
        if count:
            waiting[text] = count - 1
            matched += 1
        else:
            left.append(predicted[index])
    if not left or matched == len(reference):
        return matched
    names = {call.name for call in left}
    exact: dict[Hashable, int] = {}
    for index, text in enumerate(ref_texts):
        if waiting[text]:  # one of the copies of this text is still unpaired
            waiting[text] -= 1
            call = reference[index]
            if call.name in names:
                key = call_key(call)
                exact[key] = exact.get(key, 0) + 1
    for call in left:
        key = call_key(call)
        count = exact.get(key)
        if count:
            exact[key] = count - 1
            matched += 1
    return matched


def matched_count(predicted: list[ToolCall], reference: list[ToolCall]) -> int:
    """Size of a maximum one-to-one matching of two call lists under call equality.

    The count of the multiset metrics' formulas (F1, any order, precision, recall).
    """
    return _matched(predicted, reference)


def equal_prefix(predicted: list[ToolCall], reference: list[ToolCall]) -> int:
    """How many positions from the first on hold equal calls (TrajectoryExactMatch's count)."""
    common = len(predicted)
    if len(reference) < common:
        common = len(reference)
    for index in range(common):
        if not _equal(predicted[index], reference[index]):
            return index
    return common


def found_in_order(predicted: list[ToolCall], reference: list[ToolCall]) -> int:
    """How many reference calls the greedy earliest embedding finds in order, up to a miss.

    TrajectoryInOrderMatch's count: greedy earliest matching finds the whole reference exactly
    when it is a subsequence of the prediction.
    """
    n_ref = len(reference)
    if n_ref == 1:
        ref = reference[0]
        for pred in predicted:
            if _equal(pred, ref):
                return 1
        return 0
    n_pred = len(predicted)
    if not n_pred or not n_ref:
        return 0
    if n_pred + n_ref > 2 * _PAIRWISE:
        texts = _call_texts(predicted) + _call_texts(reference)
    else:
        texts = _call_texts(predicted + reference)
    start = 0
    for ref_index, ref in enumerate(reference):
        ref_text = texts[n_pred + ref_index]
        for index in range(start, n_pred):
            if texts[index] == ref_text or _equal_left(predicted[index], ref):
                break
        else:
            return ref_index
        start = index + 1
    return n_ref


def count_kernel(formula: CountFormula, count: Counter) -> Kernel:
    """The float path of a metric whose value is ``formula`` of ``count`` and the sizes.

    The values come from :meth:`CountFormula.row`, read per pair of sizes from its table
    (no call of the formula per sample); where the row is one value the sizes decide, and
    ``count`` is not called.
    """
    table, row_of = formula.table, formula.row

    def value(messages: Sequence[Message], reference: list[ToolCall]) -> float:
        predicted: list[ToolCall] = []  # predicted_calls(messages), inlined: one call less
        for message in messages:
            if type(message) is AIMessage:
                found = message.tool_calls
                if found:
                    predicted += found
        n_pred, n_ref = len(predicted), len(reference)
        if n_pred < SIDE and n_ref < SIDE:
            row = table[n_pred * SIDE + n_ref]
            if row is None:
                row = row_of(n_pred, n_ref)
        else:
            row = formula.rows.get((n_pred, n_ref))
            if row is None:
                row = row_of(n_pred, n_ref)
        if type(row) is float:
            return row
        return row[count(predicted, reference)]  # type: ignore[index]

    return value


def single_tool_value(
    formula: SingleToolFormula, tool_name: str
) -> Callable[[Sequence[Message]], float]:
    """TrajectorySingleToolUse's float path: ``formula`` of whether ``tool_name`` was called."""
    absent, present = float(formula.value(False)), float(formula.value(True))

    def value(messages: Sequence[Message]) -> float:
        for message in messages:
            if type(message) is AIMessage:
                calls = message.tool_calls
                if calls:
                    for call in calls:
                        if call.name == tool_name:
                            return present
        return absent

    return value

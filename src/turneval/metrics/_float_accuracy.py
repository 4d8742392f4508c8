"""ToolCallAccuracy's float path: strict order and any order, exact ``str`` or a comparator.

:func:`accuracy_value` builds the kernel from the metric's formula once: the argument score
(exact ``str`` equality read from the formula's rows, :func:`_exact_args`, or a trusted sync
comparator, :func:`_skipping_args` and :func:`_scored_args`), the strict loop (the exact score
written into it, :func:`_exact_strict_total`) or the unordered one, whose pairing is
:mod:`._float_unordered`'s. See :mod:`._float_core` for the shortcuts all kernels share.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from turneval.messages import AIMessage, Message, ToolCall
from turneval.metrics._float_core import (
    ArgsScore,
    Kernel,
    PairFormula,
    by_name,
    dumps,
    same_text,
)
from turneval.metrics._float_unordered import all_one_check, repeated_total, sort_unordered
from turneval.metrics._formulas import AccuracyFormula, PairRow

__all__ = ["accuracy_value"]

_ABSENT = object()


def _same_strs(ref_args: dict[str, Any], pred_args: dict[str, Any]) -> bool:
    """Whether both args have the same keys, each value with an equal ``str()``.

    Shown by equality in Python and equal JSON texts (same key order): every value then has
    the same ``str()``, as :func:`same_text` argues value by value. False: not shown.
    """
    if ref_args != pred_args:
        return False
    try:
        return bool(dumps(ref_args) == dumps(pred_args))
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
    mean, all_one = formula.value, all_one_check(formula.pair)

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
        pred_names = list(map(by_name, predicted))
        ref_names = list(map(by_name, reference))
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
                repeated_total(predicted, reference, names, args, all_one, len(unique) == 1),
            )
        predicted, reference = sort_unordered(predicted, reference, ref_names, unique)
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
    aligned pair takes its value from it (the exact score read from the value's rows). The
    formula's functions are bound once; the strict and the unordered kernels are built apart
    (no test of the order per sample).
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

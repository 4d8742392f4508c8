"""The call-matching metrics' float path: ToolCallF1, precision, recall and the trajectories.

Each counts under call equality (names equal, args equal as JSON values): :func:`matched_count`
(a maximum one-to-one matching: F1, any order, precision, recall), :func:`equal_prefix`
(TrajectoryExactMatch) and :func:`found_in_order` (TrajectoryInOrderMatch); :func:`count_kernel`
turns a count into the metric's value through its formula's table, and
:func:`single_tool_value` is TrajectorySingleToolUse's. See :mod:`._float_core` for the
shortcuts all kernels share.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

from pydantic_core import to_json

from turneval.messages import AIMessage, Message, ToolCall
from turneval.metrics._float_core import Kernel, args_text, dumps
from turneval.metrics._formulas import SIDE, CountFormula, SingleToolFormula
from turneval.metrics._matching import call_key

__all__ = [
    "Counter",
    "count_kernel",
    "equal_prefix",
    "found_in_order",
    "matched_count",
    "single_tool_value",
]

Counter = Callable[[list[ToolCall], list[ToolCall]], int]
"""``(predicted calls, reference calls) -> count``: the count a :class:`CountFormula` takes."""


def _call_text(call: ToolCall) -> bytes:
    """The JSON text of ``[name, args]``, with :func:`args_text`'s equality classes."""
    pair = (call.name, call.args)
    try:
        text = dumps(pair)
    except TypeError:
        return to_json(pair)
    return text if text.find(b"null") < 0 else to_json(pair)


def _call_texts(calls: list[ToolCall]) -> list[bytes]:
    """:func:`_call_text` of every call; equal texts mean equal calls."""
    try:
        texts = [dumps((call.name, call.args)) for call in calls]
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
        text = dumps(pred_args)
        same = text == dumps(ref_args)
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

"""One formula per call-matching metric: its value and its reason from counts.

Each metric's three paths (the float kernel of :mod:`._float_accuracy` or
:mod:`._float_matching`, the plain explainer of ``ascore(details=False)`` and the detailed
path of ``ascore()``) count what they count their own way (texts, Python equality, comparison
records) and then apply the metric's formula (its ``_formula``); none computes a value or a
reason itself. A change of semantics is therefore one edit here
(``tests/metrics/test_formulas.py`` gives metrics other formulas and sees all three paths
follow).

The kernels do not call a formula per sample. A kernel is built from its metric's formula
when the metric is first scored, and reads the values from :meth:`CountFormula.row`: the
formula's values for every count a pair of list sizes allows, tabulated once per pair of
sizes (a dictionary read on the hot path, cheaper than the call). Where the row holds one
value, the sizes decide and the kernel does not count at all (exact match of lists of
different lengths, in-order match of a reference longer than the prediction): derived from
the formula, so a changed formula changes that shortcut too.

Counts, per formula:

* ``n_pred``, ``n_ref``: the predicted and reference calls.
* ``matched``: for the multiset metrics (F1, any order, precision, recall), the size of a
  maximum one-to-one matching; for :data:`EXACT`, how many positions from the first on hold
  equal calls (the equal prefix); for :data:`IN_ORDER`, how many reference calls the greedy
  earliest embedding finds in order before the first it cannot.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol, TypeAlias

from turneval.results import ratio

__all__ = [
    "ACCURACY",
    "ANY_ORDER",
    "EXACT",
    "F1",
    "IN_ORDER",
    "PRECISION",
    "PAIR_SIDE",
    "RECALL",
    "SIDE",
    "SINGLE_TOOL",
    "AccuracyFormula",
    "PairRow",
    "CountFormula",
    "Row",
    "SingleToolFormula",
]

CountValue = Callable[[int, int, int], float]
"""``(n_pred, n_ref, matched) -> value``."""
CountReason = Callable[[int, int, int, float], str]
"""``(n_pred, n_ref, matched, value) -> reason``."""

Row: TypeAlias = "float | tuple[float, ...]"
"""What :meth:`CountFormula.row` returns: one value (the sizes decide) or one per count."""

SIDE = 32
"""Rows of sizes below this (both sides) are kept in :attr:`CountFormula.table`, a flat list
read at ``n_pred * SIDE + n_ref``; larger sizes in :attr:`CountFormula.rows`."""

_ROWS = 4096
"""At most this many larger pairs of sizes are kept per formula; others are computed again."""


class CountFormula:
    """A metric's value and reason from ``(n_pred, n_ref, matched)``.

    Attributes:
        value: The value from the counts (a float).
        reason: The reason from the counts and the value.
        table: :meth:`row`'s rows so far for sizes below :data:`SIDE`, at
            ``n_pred * SIDE + n_ref`` (None: not yet); the kernels read it first.
        rows: :meth:`row`'s rows so far for larger sizes, by ``(n_pred, n_ref)``.
    """

    __slots__ = ("explained", "reason", "rows", "table", "value")

    def __init__(self, value: CountValue, reason: CountReason) -> None:
        self.value = value
        self.reason = reason
        self.table: list[Row | None] = [None] * (SIDE * SIDE)
        self.rows: dict[tuple[int, int], Row] = {}
        self.explained: dict[tuple[int, int, int], tuple[float, str]] = {}

    def explain(self, n_pred: int, n_ref: int, matched: int) -> tuple[float, str]:
        """The value and its reason for these counts.

        Remembered by counts: a streamed run asks for the same few counts on every row.
        """
        key = (n_pred, n_ref, matched)
        found = self.explained.get(key) if type(matched) is int else None
        if found is None:
            value = self.value(n_pred, n_ref, matched)
            found = (value, self.reason(n_pred, n_ref, matched, value))
            if type(matched) is int and len(self.explained) < _ROWS:
                self.explained[key] = found
        return found

    def row(self, n_pred: int, n_ref: int) -> Row:
        """The values for every possible count (``0..min(n_pred, n_ref)``), by count.

        One float instead when they are all the same float (the sizes decide: the count is
        not needed). Remembered in :attr:`table` or :attr:`rows`.
        """
        value = self.value
        row = _row(value(n_pred, n_ref, matched) for matched in range(min(n_pred, n_ref) + 1))
        if n_pred < SIDE and n_ref < SIDE:
            self.table[n_pred * SIDE + n_ref] = row
        elif len(self.rows) < _ROWS:
            self.rows[n_pred, n_ref] = row
        return row


def _row(values: Iterable[float]) -> Row:
    """The values as floats; one float when they are all the same."""
    row = tuple(float(each) for each in values)
    return row[0] if len({repr(each) for each in row}) == 1 else row


# -- ToolCallF1 --------------------------------------------------------------------------------


def _f1_value(n_pred: int, n_ref: int, matched: int) -> float:
    if not n_pred or not n_ref:
        return 0.0 if n_pred or n_ref else 1.0
    if not matched:
        return 0.0
    precision, recall = matched / n_pred, matched / n_ref
    return 2 * precision * recall / (precision + recall)


def _f1_reason(n_pred: int, n_ref: int, matched: int, value: float) -> str:
    if not n_pred and not n_ref:
        return "no predicted and no reference tool calls: F1=1.000"
    precision = matched / n_pred if n_pred else 0.0
    recall = matched / n_ref if n_ref else 0.0
    return (
        f"{ratio('precision', matched, n_pred, precision)}, "
        f"{ratio('recall', matched, n_ref, recall)}, F1={value:.3f}"
    )


F1 = CountFormula(_f1_value, _f1_reason)
"""ToolCallF1: 2PR/(P+R) of the maximum matching (0 where P+R = 0); both empty 1, one empty 0."""


# -- trajectory metrics ------------------------------------------------------------------------


def _sizes(n_pred: int, n_ref: int) -> str:
    return f"{n_pred} predicted vs {n_ref} reference calls"


def _exact_value(n_pred: int, n_ref: int, matched: int) -> float:
    return 1.0 if n_pred == n_ref and matched == n_ref else 0.0


def _exact_reason(n_pred: int, n_ref: int, matched: int, value: float) -> str:
    verdict = "equal" if value else "not equal"
    return f"{_sizes(n_pred, n_ref)}, {verdict} position by position: {value:.0f}"


EXACT = CountFormula(_exact_value, _exact_reason)
"""TrajectoryExactMatch: same length, every position equal (``matched``: the equal prefix)."""


def _in_order_value(n_pred: int, n_ref: int, matched: int) -> float:
    return 1.0 if matched == n_ref else 0.0


def _in_order_reason(n_pred: int, n_ref: int, matched: int, value: float) -> str:
    if not value:
        return f"{_sizes(n_pred, n_ref)}; the reference is not a subsequence: 0"
    return f"{_sizes(n_pred, n_ref)}; all {matched} reference calls found in order: 1"


IN_ORDER = CountFormula(_in_order_value, _in_order_reason)
"""TrajectoryInOrderMatch: every reference call found in order (the reference a subsequence)."""


def _any_order_value(n_pred: int, n_ref: int, matched: int) -> float:
    return 1.0 if matched == n_ref else 0.0


def _any_order_reason(n_pred: int, n_ref: int, matched: int, value: float) -> str:
    return f"{matched}/{n_ref} reference calls matched in any order: {value:.0f}"


ANY_ORDER = CountFormula(_any_order_value, _any_order_reason)
"""TrajectoryAnyOrderMatch: every reference call matched by a distinct predicted one."""


def _precision_value(n_pred: int, n_ref: int, matched: int) -> float:
    if not n_pred:
        return 0.0 if n_ref else 1.0
    return matched / n_pred


def _precision_reason(n_pred: int, n_ref: int, matched: int, value: float) -> str:
    if not n_pred:
        return f"no predicted calls, {n_ref} reference: {value:.1f}"
    return ratio("precision", matched, n_pred, value)


PRECISION = CountFormula(_precision_value, _precision_reason)
"""TrajectoryPrecision: matched/|predicted| (both empty 1, none predicted 0)."""


def _recall_value(n_pred: int, n_ref: int, matched: int) -> float:
    return matched / n_ref if n_ref else 1.0


def _recall_reason(n_pred: int, n_ref: int, matched: int, value: float) -> str:
    if not n_ref:
        return "no reference calls: recall 1.0"
    return ratio("recall", matched, n_ref, value)


RECALL = CountFormula(_recall_value, _recall_reason)
"""TrajectoryRecall: matched/|reference| (empty reference 1)."""


class SingleToolFormula:
    """TrajectorySingleToolUse's value and reason.

    The value is of whether the tool was called (the kernel stops at the first call of it);
    the reason also says how often.

    Attributes:
        value: ``(called at least once) -> value``.
        reason: ``(tool name, calls of the tool, value) -> reason``.
    """

    __slots__ = ("reason", "value")

    def __init__(
        self, value: Callable[[bool], float], reason: Callable[[str, int, float], str]
    ) -> None:
        self.value = value
        self.reason = reason


def _single_value(called: bool) -> float:
    return 1.0 if called else 0.0


def _single_reason(tool_name: str, calls: int, value: float) -> str:
    if calls:
        return f"{tool_name!r} called {calls} time(s): {value:.0f}"
    return f"{tool_name!r} never called: {value:.0f}"


SINGLE_TOOL = SingleToolFormula(_single_value, _single_reason)
"""TrajectorySingleToolUse: 1 if the tool was called at least once."""


# -- ToolCallAccuracy --------------------------------------------------------------------------


class PairRow(Protocol):
    """A row of :attr:`AccuracyFormula.pair_rows`: the pair score by the count of equal args."""

    def __getitem__(self, equal: int, /) -> float: ...


class _RowToBe:
    """A row of :attr:`AccuracyFormula.pair_rows` (or ``single_rows``) not read yet.

    Its first read asks the formula (``fill``: :meth:`AccuracyFormula.pair_row` or
    :meth:`AccuracyFormula.single_row`, which put the row in its place), so later reads find
    the row itself.
    """

    __slots__ = ("fill", "n_pred_args", "n_ref_args")

    def __init__(
        self, fill: Callable[[int, int], tuple[float, ...]], n_ref_args: int, n_pred_args: int
    ) -> None:
        self.fill = fill
        self.n_ref_args = n_ref_args
        self.n_pred_args = n_pred_args

    def __getitem__(self, equal: int, /) -> float:
        return self.fill(self.n_ref_args, self.n_pred_args)[equal]


def _rows_to_be(fill: Callable[[int, int], tuple[float, ...]]) -> list[list[PairRow]]:
    return [
        [_RowToBe(fill, n_ref, n_pred) for n_pred in range(PAIR_SIDE)] for n_ref in range(PAIR_SIDE)
    ]


class AccuracyFormula:
    """ToolCallAccuracy's formulas: a pair's args score, the value and the reason.

    ``total`` is the sum of the aligned pairs' scores in ragas' order (the caller sums, so the
    float is ragas'), or None when the names do not align.

    Attributes:
        pair: ``(reference args, predicted args, summed arg scores) -> the pair's score``.
        value: ``(n_pred, n_ref, total) -> value``.
        reason: ``(strict, predicted names, reference names, pair scores, value) -> reason``.
        pair_rows: :meth:`pair_row`'s rows at ``[n_ref_args][n_pred_args]`` for sizes below
            :data:`PAIR_SIDE`; a row not yet read is asked of the formula on its first read,
            so the kernels read ``pair_rows[n_ref_args][n_pred_args][equal]`` without a test
            (an ``IndexError`` for larger sizes: then they call :meth:`pair_row`).
        single_rows: :meth:`single_row`'s rows, kept and read the same way.
    """

    __slots__ = ("pair", "pair_rows", "reason", "single_rows", "value")

    def __init__(
        self,
        pair: Callable[[int, int, float], float],
        value: Callable[[int, int, float | None], float],
        reason: Callable[[bool, Sequence[str], Sequence[str], Sequence[float], float], str],
    ) -> None:
        self.pair = pair
        self.value = value
        self.reason = reason
        self.pair_rows = _rows_to_be(self.pair_row)
        self.single_rows = _rows_to_be(self.single_row)

    def pair_row(self, n_ref_args: int, n_pred_args: int) -> tuple[float, ...]:
        """:attr:`pair` of every whole count of equal args (``0..n_ref_args``), by count.

        The exact argument score counts equal args; its kernel reads the pair score here
        (kept in :attr:`pair_rows` below :data:`PAIR_SIDE`) instead of calling the formula
        per pair.
        """
        pair = self.pair
        row = tuple(float(pair(n_ref_args, n_pred_args, equal)) for equal in range(n_ref_args + 1))
        if n_ref_args < PAIR_SIDE and n_pred_args < PAIR_SIDE:
            self.pair_rows[n_ref_args][n_pred_args] = row
        return row

    def single_row(self, n_ref_args: int, n_pred_args: int) -> tuple[float, ...]:
        """:attr:`value` of one aligned pair (``(1, 1, pair score)``) by its count of equal args.

        A sample of one call on each side, names equal, under the exact argument score: its
        kernel reads the value here (kept in :attr:`single_rows`) instead of calling the value
        formula per sample.
        """
        value = self.value
        row = tuple(value(1, 1, score) for score in self.pair_row(n_ref_args, n_pred_args))
        if n_ref_args < PAIR_SIDE and n_pred_args < PAIR_SIDE:
            self.single_rows[n_ref_args][n_pred_args] = row
        return row


PAIR_SIDE = 16
"""Pair rows of fewer args than this (both sides) are kept in :attr:`AccuracyFormula.pair_rows`."""


def _accuracy_pair(n_ref_args: int, n_pred_args: int, total: float) -> float:
    if not n_ref_args:
        return 0.0 if n_pred_args else 1.0
    return total / n_ref_args


def _accuracy_value(n_pred: int, n_ref: int, total: float | None) -> float:
    if not n_pred or not n_ref:
        return 0.0 if n_pred or n_ref else 1.0
    if total is None:
        return 0.0
    return total / n_ref


def _accuracy_reason(
    strict: bool,
    predicted: Sequence[str],
    reference: Sequence[str],
    pair_scores: Sequence[float],
    value: float,
) -> str:
    if not predicted and not reference:
        return "no predicted and no reference tool calls: 1.0"
    if not predicted or not reference:
        return (
            f"{len(predicted)} predicted vs {len(reference)} reference tool calls: "
            "one side is empty, 0.0"
        )
    order = "strict order" if strict else "any order (sorted by name and args)"
    if not pair_scores:
        return f"tool-name sequences differ ({order}): {list(predicted)} vs {list(reference)}: 0.0"
    terms = " + ".join(f"{score:.3f}" for score in pair_scores)
    return f"names aligned ({order}); mean args score = ({terms})/{len(pair_scores)} = {value:.3f}"


ACCURACY = AccuracyFormula(_accuracy_pair, _accuracy_value, _accuracy_reason)
"""ToolCallAccuracy (ragas'): the mean pair score of the aligned calls; a pair scores the
share of the reference's args matched (no args on either side 1, args only predicted 0)."""

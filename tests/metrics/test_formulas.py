"""One formula per call-matching metric: replacing it changes every path's value and reason.

Each metric has three ways to a result: the float kernel (``multi_turn_ascore``), the plain
explainer (``ascore(details=False)``) and the detailed path (``ascore()``). Each metric's
formula (its ``_formula``, from :mod:`turneval.metrics._formulas`) is replaced below, in a
subclass, by a recorder that returns a value no real formula gives; every path must return
it, with the recorder's reason, after handing it the same counts (written out here by hand
from the samples).
"""

from __future__ import annotations

from typing import Any

import pytest

from turneval import MultiTurnSample, ToolCall
from turneval.metrics import (
    ToolCallAccuracy,
    ToolCallF1,
    TrajectoryAnyOrderMatch,
    TrajectoryExactMatch,
    TrajectoryInOrderMatch,
    TrajectoryPrecision,
    TrajectoryRecall,
    TrajectorySingleToolUse,
)
from turneval.metrics._call_metric import CallMatchingMetric
from turneval.metrics._formulas import (
    EXACT,
    F1,
    PRECISION,
    AccuracyFormula,
    CountFormula,
    SingleToolFormula,
)
from turneval.metrics.base import MultiTurnMetric


def _replaced(cls: type[MultiTurnMetric], formula: object, **fields: Any) -> MultiTurnMetric:
    """An instance of a subclass of ``cls`` whose formula is ``formula``: the one edit."""
    metric: MultiTurnMetric = type(f"Replaced{cls.__name__}", (cls,), {"_formula": formula})(
        **fields
    )
    return metric


def _sample(predicted: list[ToolCall], reference: list[ToolCall]) -> MultiTurnSample:
    return MultiTurnSample(
        user_input=[
            {"type": "human", "content": "do it"},
            {"type": "ai", "content": "", "tool_calls": predicted[:1]},
            {"type": "ai", "content": "", "tool_calls": predicted[1:]},
        ],
        reference_tool_calls=reference,
    )


def _call(name: str, **args: Any) -> ToolCall:
    return ToolCall(name=name, args=args)


# Predicted a(x=1), b(y=[1, 2]), a(x=2), b(y=[2, 1]); reference a(x=1), a(x=3), b(y=[1, 2]).
# Maximum matching: a(x=1) and b(y=[1, 2]): 2. Equal prefix: position 0 only: 1. In order:
# a(x=1) found at 0, then a(x=3) nowhere: 1.
MIXED = _sample(
    [_call("a", x=1), _call("b", y=[1, 2]), _call("a", x=2), _call("b", y=[2, 1])],
    [_call("a", x=1), _call("a", x=3), _call("b", y=[1, 2])],
)

COUNT_CASES = [
    (ToolCallF1, (4, 3, 2)),
    (TrajectoryExactMatch, (4, 3, 1)),
    (TrajectoryInOrderMatch, (4, 3, 1)),
    (TrajectoryAnyOrderMatch, (4, 3, 2)),
    (TrajectoryPrecision, (4, 3, 2)),
    (TrajectoryRecall, (4, 3, 2)),
]


async def _three_paths(metric: MultiTurnMetric, sample: MultiTurnSample) -> list[Any]:
    kernel = await metric.multi_turn_ascore(sample)
    plain = await metric.ascore(sample, details=False)
    detailed = await metric.ascore(sample)
    return [kernel, plain, detailed]


@pytest.mark.parametrize(("cls", "counts"), COUNT_CASES)
async def test_a_replaced_count_formula_changes_all_three_paths(
    cls: type[MultiTurnMetric], counts: tuple[int, int, int]
) -> None:
    seen: list[tuple[int, int, int]] = []

    def value(n_pred: int, n_ref: int, matched: int) -> float:
        seen.append((n_pred, n_ref, matched))
        return 0.375 + matched / 1024  # no real formula gives this

    def reason(n_pred: int, n_ref: int, matched: int, value: float) -> str:
        return f"replaced: {n_pred}, {n_ref}, {matched} -> {value}"

    metric = _replaced(cls, CountFormula(value, reason))
    kernel, plain, detailed = await _three_paths(metric, MIXED)
    want = 0.375 + counts[2] / 1024
    # The kernel tabulates the formula for the sizes (every count 0..3) and reads its count's
    # value; the plain explainer and the detailed path call it with their count.
    assert seen.count(counts) >= 3
    assert {matched for n_pred, n_ref, matched in seen} == {0, 1, 2, 3}
    assert kernel == plain.value == detailed.value == want
    assert (
        plain.reason
        == detailed.reason
        == f"replaced: {counts[0]}, {counts[1]}, {counts[2]} -> {want}"
    )
    assert plain.details == {}
    assert detailed.details  # the detailed path's records are still there


@pytest.mark.parametrize("strict", [True, False])
@pytest.mark.parametrize(
    ("predicted", "reference", "strict_pairs", "unordered_pairs"),
    [
        # aligned names: a pairs (2 reference args, 2 predicted, 1 equal), b (1, 1, 1)
        (
            [_call("a", x=1, y=2), _call("b", z=[1, 2])],
            [_call("a", x=1, y=3), _call("b", z=[1, 2])],
            [(2, 2, 1), (1, 1, 1)],
            [(2, 2, 1), (1, 1, 1)],
        ),
        # one name twice, the same calls in another order: position by position nothing is
        # equal; sorted (ragas' unordered key), each pair is identical
        (
            [_call("a", x=1), _call("a", x=2)],
            [_call("a", x=2), _call("a", x=1)],
            [(1, 1, 0), (1, 1, 0)],
            [(1, 1, 1), (1, 1, 1)],
        ),
    ],
)
async def test_a_replaced_accuracy_formula_changes_all_three_paths(
    strict: bool,
    predicted: list[ToolCall],
    reference: list[ToolCall],
    strict_pairs: list[tuple[int, int, int]],
    unordered_pairs: list[tuple[int, int, int]],
) -> None:
    seen: list[tuple[int, int, float]] = []

    def pair(n_ref_args: int, n_pred_args: int, total: float) -> float:
        seen.append((n_ref_args, n_pred_args, total))
        return 0.25  # identical args would score 1.0 under the real formula

    def value(n_pred: int, n_ref: int, total: float | None) -> float:
        return -1.0 if total is None else 10 * total

    def reason(strict: bool, pred: Any, ref: Any, scores: Any, value: float) -> str:
        return f"replaced: {list(pred)} {list(ref)} {list(scores)} {value}"

    metric = _replaced(ToolCallAccuracy, AccuracyFormula(pair, value, reason), strict_order=strict)
    kernel, plain, detailed = await _three_paths(metric, _sample(predicted, reference))
    names = [call.name for call in predicted], [call.name for call in reference]
    assert kernel == plain.value == detailed.value == 5.0  # 10 * (0.25 + 0.25)
    assert plain.reason == detailed.reason == f"replaced: {names[0]} {names[1]} [0.25, 0.25] 5.0"
    # The plain explainer and the detailed path scored each pair with the formula; the kernel
    # read its pair scores from the formula's row for the pair's sizes (every count of equal
    # args), or asked it whether identical calls score 1.0 (which the replaced one denies).
    pairs = strict_pairs if strict else unordered_pairs
    for counts in pairs:
        assert seen.count(counts) >= 2 * pairs.count(counts)
    assert {sizes[:2] for sizes in seen} == {sizes[:2] for sizes in pairs}


async def test_a_replaced_accuracy_value_sees_unaligned_names() -> None:
    seen: list[tuple[int, int, float | None]] = []

    def value(n_pred: int, n_ref: int, total: float | None) -> float:
        seen.append((n_pred, n_ref, total))
        return 0.5

    real = ToolCallAccuracy._formula
    formula = AccuracyFormula(real.pair, value, real.reason)
    for strict in (True, False):
        metric = _replaced(ToolCallAccuracy, formula, strict_order=strict)
        kernel, plain, detailed = await _three_paths(metric, MIXED)  # 4 calls against 3
        assert kernel == plain.value == detailed.value == 0.5
    assert seen == [(4, 3, None)] * 6


@pytest.mark.parametrize("strict", [True, False])
async def test_a_replaced_accuracy_value_decides_one_call_samples(strict: bool) -> None:
    """One call a side: the kernel reads the value of its one pair from the value formula."""
    seen: list[tuple[int, int, float | None]] = []

    def value(n_pred: int, n_ref: int, total: float | None) -> float:
        seen.append((n_pred, n_ref, total))
        return -1.0 if total is None else 0.125 + total / 8

    real = ToolCallAccuracy._formula
    metric = _replaced(
        ToolCallAccuracy, AccuracyFormula(real.pair, value, real.reason), strict_order=strict
    )
    # 2 reference args, 1 equal: the real pair score 0.5, the replaced value 0.125 + 0.5 / 8
    sample = _sample([_call("a", x=1, y=0)], [_call("a", x=1, y=2)])
    for _ in range(2):  # the second time from the rows kept
        kernel, plain, detailed = await _three_paths(metric, sample)
        assert kernel == plain.value == detailed.value == 0.1875
    assert (1, 1, 0.5) in seen


async def test_a_replaced_single_tool_formula_changes_both_paths() -> None:
    def value(called: bool) -> float:
        return 0.25 if called else 0.75

    formula = SingleToolFormula(value, lambda tool, calls, value: f"{tool}: {calls}, {value}")
    for tool, calls, want in (("a", 2, 0.25), ("z", 0, 0.75)):  # a is called twice
        metric = _replaced(TrajectorySingleToolUse, formula, tool_name=tool)
        kernel, plain, detailed = await _three_paths(metric, MIXED)
        assert kernel == plain.value == detailed.value == want
        assert plain.reason == detailed.reason == f"{tool}: {calls}, {want}"


@pytest.mark.parametrize(
    ("cls", "predicted", "reference", "count"),
    [
        # lengths differ: the real formula is 0 whatever the equal prefix (here 1)
        (TrajectoryExactMatch, [_call("a", x=1), _call("b")], [_call("a", x=1)], 1),
        # a reference longer than the prediction is never a subsequence (found in order: 1)
        (TrajectoryInOrderMatch, [_call("a", x=1)], [_call("a", x=1), _call("b")], 1),
    ],
)
async def test_what_the_sizes_decide_follows_the_formula(
    cls: type[CallMatchingMetric], predicted: list[ToolCall], reference: list[ToolCall], count: int
) -> None:
    """The kernels skip counting where the sizes decide; that is derived from the formula."""
    sample = _sample(predicted, reference)
    real = cls._formula
    assert isinstance(real, CountFormula)
    results = await _three_paths(_replaced(cls, real), sample)
    assert [r if isinstance(r, float) else r.value for r in results] == [0.0, 0.0, 0.0]
    n_pred, n_ref = len(predicted), len(reference)
    assert real.row(n_pred, n_ref) == 0.0  # one value: the kernel does not count
    by_count = CountFormula(lambda n_pred, n_ref, matched: matched / 8, real.reason)
    kernel, plain, detailed = await _three_paths(_replaced(cls, by_count), sample)
    assert kernel == plain.value == detailed.value == count / 8
    assert by_count.row(n_pred, n_ref) == (0.0, 0.125)


def test_a_row_is_one_value_only_where_every_count_gives_it() -> None:
    assert PRECISION.row(3, 2) == (0.0, 1 / 3, 2 / 3)
    assert EXACT.row(3, 3) == (0.0, 0.0, 0.0, 1.0)
    assert F1.row(0, 4) == 0.0 and F1.row(0, 0) == 1.0


async def test_the_single_tool_kernel_follows_a_renamed_tool() -> None:
    """The kernel binds the tool's name when built; renaming the tool builds it again."""
    metric = TrajectorySingleToolUse(tool_name="a")
    assert await metric.multi_turn_ascore(MIXED) == 1.0
    metric.tool_name = "z"
    assert await metric.multi_turn_ascore(MIXED) == 0.0

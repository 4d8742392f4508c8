"""``ascore(details=False)`` of the tool-call and trajectory metrics: value and reason from counts.

Under their default equality these metrics skip the comparison records when no details are
asked for. The result must be the very MetricResult the detailed path gives (value, reason,
empty details, no usage), and the reason the documented text, written out below by hand from
the reference counts of ``test_reference_impl``, on every generated shape and on edge cases.
"""

from __future__ import annotations

from typing import Any

import pytest

from turneval import MultiTurnSample, ToolCall
from turneval.errors import InvalidSampleError
from turneval.metrics import (
    ToolCallAccuracy,
    ToolCallF1,
    TrajectoryAnyOrderMatch,
    TrajectoryExactMatch,
    TrajectoryInOrderMatch,
    TrajectoryPrecision,
    TrajectoryRecall,
)
from turneval.metrics.base import MultiTurnMetric
from turneval.results import MetricResult

from .test_reference_impl import _rows, calls_equal, matched, reference_in_order

Calls = list[ToolCall]


def _sizes(predicted: Calls, reference: Calls) -> str:
    return f"{len(predicted)} predicted vs {len(reference)} reference calls"


def accuracy_reason(predicted: Calls, reference: Calls, strict: bool) -> str:
    """ToolCallAccuracy's documented reason, from ragas' arithmetic written out."""
    if not predicted and not reference:
        return "no predicted and no reference tool calls: 1.0"
    if not predicted or not reference:
        return (
            f"{len(predicted)} predicted vs {len(reference)} reference tool calls: "
            "one side is empty, 0.0"
        )
    order = "strict order" if strict else "any order (sorted by name and args)"
    pred, ref = predicted, reference
    if not strict:

        def key(call: ToolCall) -> tuple[str, ...]:
            parts = [call.name]
            for name in sorted(call.args):
                parts += [name, str(call.args[name])]
            return tuple(parts)

        pred, ref = sorted(predicted, key=key), sorted(reference, key=key)
    if [c.name for c in pred] != [c.name for c in ref]:
        names_pred, names_ref = [c.name for c in predicted], [c.name for c in reference]
        return f"tool-name sequences differ ({order}): {names_pred} vs {names_ref}: 0.0"
    scores = []
    for p, r in zip(pred, ref, strict=True):
        if not r.args:
            scores.append(0.0 if p.args else 1.0)
            continue
        equal = sum(1 for k, v in r.args.items() if k in p.args and str(p.args[k]) == str(v))
        scores.append(equal / len(r.args))
    value = sum(scores) / len(scores)
    terms = " + ".join(f"{score:.3f}" for score in scores)
    return f"names aligned ({order}); mean args score = ({terms})/{len(scores)} = {value:.3f}"


def f1_reason(predicted: Calls, reference: Calls) -> str:
    if not predicted and not reference:
        return "no predicted and no reference tool calls: F1=1.000"
    count = matched(predicted, reference)
    precision = count / len(predicted) if predicted else 0.0
    recall = count / len(reference) if reference else 0.0
    f1 = 2 * precision * recall / (precision + recall) if count else 0.0
    return (
        f"precision={count}/{len(predicted)}={precision:.3f}, "
        f"recall={count}/{len(reference)}={recall:.3f}, F1={f1:.3f}"
    )


def exact_reason(predicted: Calls, reference: Calls) -> str:
    same = len(predicted) == len(reference) and all(map(calls_equal, predicted, reference))
    verdict = "equal position by position: 1" if same else "not equal position by position: 0"
    return f"{_sizes(predicted, reference)}, {verdict}"


def in_order_reason(predicted: Calls, reference: Calls) -> str:
    if not reference_in_order(predicted, reference):
        return f"{_sizes(predicted, reference)}; the reference is not a subsequence: 0"
    found = f"all {len(reference)} reference calls found in order: 1"
    return f"{_sizes(predicted, reference)}; {found}"


def any_order_reason(predicted: Calls, reference: Calls) -> str:
    count = matched(predicted, reference)
    value = 1 if count == len(reference) else 0
    return f"{count}/{len(reference)} reference calls matched in any order: {value}"


def precision_reason(predicted: Calls, reference: Calls) -> str:
    if not predicted:
        return f"no predicted calls, {len(reference)} reference: {0.0 if reference else 1.0}"
    count = matched(predicted, reference)
    return f"precision={count}/{len(predicted)}={count / len(predicted):.3f}"


def recall_reason(predicted: Calls, reference: Calls) -> str:
    if not reference:
        return "no reference calls: recall 1.0"
    count = matched(predicted, reference)
    return f"recall={count}/{len(reference)}={count / len(reference):.3f}"


CASES: list[tuple[MultiTurnMetric, Any]] = [
    (ToolCallAccuracy(), lambda p, r: accuracy_reason(p, r, strict=True)),
    (ToolCallAccuracy(strict_order=False), lambda p, r: accuracy_reason(p, r, strict=False)),
    (ToolCallF1(), f1_reason),
    (TrajectoryExactMatch(), exact_reason),
    (TrajectoryInOrderMatch(), in_order_reason),
    (TrajectoryAnyOrderMatch(), any_order_reason),
    (TrajectoryPrecision(), precision_reason),
    (TrajectoryRecall(), recall_reason),
]


def _edge_samples() -> list[MultiTurnSample]:
    """Empty sides, duplicates, and values Python conflates (True/1, 1/1.0, key order)."""
    f = [ToolCall(name="f", args={"x": 1})]
    pairs: list[tuple[Calls, Calls]] = [
        ([], []),
        ([], f),
        (f, []),
        ([ToolCall(name="f", args={"x": True})], f),
        ([ToolCall(name="f", args={"x": 1.0})], f),
        (f + f, [ToolCall(name="f", args={"x": 1.0})]),
        (
            [ToolCall(name="f", args={}), ToolCall(name="f", args={"x": 0})],
            [
                ToolCall(name="f", args={"x": False}),
                ToolCall(name="f", args={}),
            ],
        ),
        ([ToolCall(name="g", args={"y": 2, "x": 1})], [ToolCall(name="g", args={"x": 1, "y": 2})]),
        (
            [ToolCall(name="b", args={}), ToolCall(name="a", args={"k": [1]})],
            [
                ToolCall(name="a", args={"k": [1]}),
                ToolCall(name="b", args={"z": None}),
            ],
        ),
    ]
    return [
        MultiTurnSample(
            user_input=[{"type": "ai", "content": "", "tool_calls": predicted}],
            reference_tool_calls=reference,
        )
        for predicted, reference in pairs
    ]


@pytest.mark.parametrize("shape", ["mixed", "short", "typical", "long", "edge"])
async def test_plain_results_equal_the_detailed_path_and_the_documented_reason(
    shape: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if shape == "edge":
        samples = _edge_samples()
    else:
        samples = [MultiTurnSample.model_validate(row) for row in _rows(shape)]
    detailed: dict[tuple[int, int], MetricResult] = {}
    for position, (metric, _) in enumerate(CASES):
        for index, sample in enumerate(samples):  # the detailed path: comparison records
            detailed[position, index] = await metric.ascore(sample)
    for cls in {type(metric) for metric, _ in CASES}:  # details=False must not take that path

        async def refuse(self: Any, sample: Any) -> Any:
            raise AssertionError(f"{type(self).__name__}: the detailed path was taken")

        monkeypatch.setattr(cls, "_evaluate", refuse)
    differences = []
    for position, (metric, reason) in enumerate(CASES):
        for index, sample in enumerate(samples):
            assert sample.reference_tool_calls is not None
            plain = await metric.ascore(sample, details=False)
            full = detailed[position, index]
            want = reason(sample.tool_calls, sample.reference_tool_calls)
            if plain != MetricResult(metric.name, full.value, full.reason) or plain.reason != want:
                differences.append((metric.name, index, plain, full.reason, want))
            assert type(plain.value) is float
    assert differences == []


async def test_other_configurations_keep_the_detailed_path() -> None:
    """A comparator or rules: details=False still explains from the comparison records."""
    sample = MultiTurnSample(
        user_input=[
            {"type": "ai", "content": "", "tool_calls": [ToolCall(name="f", args={"q": "abd"})]}
        ],
        reference_tool_calls=[ToolCall(name="f", args={"q": "abc"})],
    )
    fuzzy = TrajectoryPrecision(arg_comparison_metric="levenshtein", match_threshold=0.5)
    result = await fuzzy.ascore(sample, details=False)
    assert (result.value, result.reason, result.details) == (1.0, "precision=1/1=1.000", {})
    ruled = ToolCallAccuracy(arg_rules={"f": {"q": "ignore"}})
    result = await ruled.ascore(sample, details=False)
    assert result.value == 1.0
    assert result.reason == "names aligned (strict order); mean args score = (1.000)/1 = 1.000"
    bare = MultiTurnSample(user_input=[{"type": "human", "content": "hi"}])
    with pytest.raises(InvalidSampleError, match="reference_tool_calls"):
        await TrajectoryRecall().ascore(bare, details=False)
    with pytest.raises(InvalidSampleError, match="reference_tool_calls"):
        await ToolCallAccuracy().ascore(bare, details=False)

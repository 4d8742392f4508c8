"""The optimised tool-call and trajectory metrics against slow, obviously correct references.

The references below follow the documented definitions line by line (SPEC §3.1, the metrics'
docstrings) with no shortcuts; every metric must give exactly the same float on the samples of
the benchmark generator (the mixed set and the short, typical and long shapes), both on the
float path (``multi_turn_ascore``) and on the detailed one (``ascore``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
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
)
from turneval.metrics.base import MultiTurnMetric

_GENERATE = Path(__file__).resolve().parents[2] / "benchmarks" / "generate.py"


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("turneval_bench_generate", _GENERATE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _rows(shape: str) -> list[dict[str, Any]]:
    generate = _generator()
    if shape == "mixed":
        return list(generate.generate(150, 11))
    return list(generate.generate_shape(shape, 150, 11))


# -- references ----------------------------------------------------------------------------------


def json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values: booleans only equal booleans, 1 == 1.0, key order ignored."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[key], b[key]) for key in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def calls_equal(a: ToolCall, b: ToolCall) -> bool:
    return a.name == b.name and json_equal(a.args, b.args)


def matched(predicted: list[ToolCall], reference: list[ToolCall]) -> int:
    """Size of a maximum one-to-one matching.

    Call equality is an equivalence relation, so pairing each predicted call with the first
    still-free equal reference call is maximum (within a class any pairing is).
    """
    free = list(reference)
    count = 0
    for pred in predicted:
        for position, ref in enumerate(free):
            if calls_equal(pred, ref):
                del free[position]
                count += 1
                break
    return count


def reference_accuracy(predicted: list[ToolCall], reference: list[ToolCall], strict: bool) -> float:
    """ragas 0.4.3's ToolCallAccuracy with exact string comparison of str(value)."""
    if not predicted and not reference:
        return 1.0
    if not predicted or not reference:
        return 0.0
    if not strict:

        def key(call: ToolCall) -> tuple[str, ...]:
            parts = [call.name]
            for name in sorted(call.args):
                parts += [name, str(call.args[name])]
            return tuple(parts)

        predicted, reference = sorted(predicted, key=key), sorted(reference, key=key)
    if [c.name for c in predicted] != [c.name for c in reference]:
        return 0.0
    pair_scores = []
    for pred, ref in zip(predicted, reference, strict=True):
        if not ref.args:
            pair_scores.append(0.0 if pred.args else 1.0)
            continue
        equal = [
            1.0 if name in pred.args and str(pred.args[name]) == str(value) else 0.0
            for name, value in ref.args.items()
        ]
        pair_scores.append(sum(equal) / len(ref.args))
    return sum(pair_scores) / len(pair_scores)


def reference_f1(predicted: list[ToolCall], reference: list[ToolCall]) -> float:
    if not predicted and not reference:
        return 1.0
    if not predicted or not reference:
        return 0.0
    count = matched(predicted, reference)
    if not count:
        return 0.0
    precision, recall = count / len(predicted), count / len(reference)
    return 2 * precision * recall / (precision + recall)


def reference_exact(predicted: list[ToolCall], reference: list[ToolCall]) -> float:
    same = len(predicted) == len(reference) and all(map(calls_equal, predicted, reference))
    return 1.0 if same else 0.0


def reference_in_order(predicted: list[ToolCall], reference: list[ToolCall]) -> float:
    position = 0
    for ref in reference:
        while position < len(predicted) and not calls_equal(predicted[position], ref):
            position += 1
        if position == len(predicted):
            return 0.0
        position += 1
    return 1.0


def reference_any_order(predicted: list[ToolCall], reference: list[ToolCall]) -> float:
    return 1.0 if matched(predicted, reference) == len(reference) else 0.0


def reference_precision(predicted: list[ToolCall], reference: list[ToolCall]) -> float:
    if not predicted:
        return 0.0 if reference else 1.0
    return matched(predicted, reference) / len(predicted)


def reference_recall(predicted: list[ToolCall], reference: list[ToolCall]) -> float:
    return matched(predicted, reference) / len(reference) if reference else 1.0


CASES: list[tuple[MultiTurnMetric, Any]] = [
    (ToolCallAccuracy(), lambda p, r: reference_accuracy(p, r, strict=True)),
    (ToolCallAccuracy(strict_order=False), lambda p, r: reference_accuracy(p, r, strict=False)),
    (ToolCallF1(), reference_f1),
    (TrajectoryExactMatch(), reference_exact),
    (TrajectoryInOrderMatch(), reference_in_order),
    (TrajectoryAnyOrderMatch(), reference_any_order),
    (TrajectoryPrecision(), reference_precision),
    (TrajectoryRecall(), reference_recall),
]


def test_reference_json_equality_by_hand() -> None:
    assert json_equal({"a": 1, "b": [1.0, {"c": None}]}, {"b": [1, {"c": None}], "a": 1.0})
    assert not json_equal({"a": True}, {"a": 1})
    assert not json_equal({"a": "1"}, {"a": 1})
    assert not json_equal({"a": [1, 2]}, {"a": [2, 1]})
    calls = [ToolCall(name="f", args={"x": 1}), ToolCall(name="f", args={"x": 1.0})]
    assert matched(calls, [ToolCall(name="f", args={"x": 1})]) == 1
    assert matched(calls, list(reversed(calls))) == 2


@pytest.mark.parametrize("shape", ["mixed", "short", "typical", "long"])
async def test_metrics_equal_their_reference_on_generated_samples(shape: str) -> None:
    samples = [MultiTurnSample.model_validate(row) for row in _rows(shape)]
    differences = []
    for metric, reference in CASES:
        for index, sample in enumerate(samples):
            assert sample.reference_tool_calls is not None
            expected = reference(sample.tool_calls, sample.reference_tool_calls)
            fast = await metric.multi_turn_ascore(sample)
            detailed = (await metric.ascore(sample, details=False)).value
            if not fast == detailed == expected:
                differences.append((metric.name, index, fast, detailed, expected))
    assert differences == []


async def test_edge_cases_equal_their_reference() -> None:
    """Hand-made pairs the generator rarely produces: types that Python conflates."""
    pairs: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = [
        ([{"x": True}], [{"x": 1}]),
        ([{"x": 1.0}], [{"x": 1}]),
        ([{"x": {"b": 1, "a": [True, None]}}], [{"x": {"a": [True, None], "b": 1.0}}]),
        ([{"x": 1}, {"x": 1}], [{"x": 1.0}]),
        ([{}, {"x": 0}], [{"x": False}, {}]),
        ([{"y": 2, "x": 1}], [{"x": 1, "y": 2}]),
    ]
    for predicted_args, reference_args in pairs:
        predicted = [ToolCall(name="f", args=args) for args in predicted_args]
        reference = [ToolCall(name="f", args=args) for args in reference_args]
        sample = MultiTurnSample(
            user_input=[{"type": "ai", "content": "", "tool_calls": predicted}],
            reference_tool_calls=reference,
        )
        for metric, expected in CASES:
            want = expected(predicted, reference)
            assert await metric.multi_turn_ascore(sample) == want, (metric.name, predicted_args)
            assert (await metric.ascore(sample)).value == want, (metric.name, predicted_args)

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
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_core import to_json
from rapidfuzz import fuzz
from rapidfuzz.distance import Levenshtein

from turneval import AIMessage, MultiTurnSample, ToolCall
from turneval.metrics import (
    NonLLMStringSimilarity,
    ToolCallAccuracy,
    ToolCallF1,
    TrajectoryAnyOrderMatch,
    TrajectoryExactMatch,
    TrajectoryInOrderMatch,
    TrajectoryPrecision,
    TrajectoryRecall,
    TrajectorySingleToolUse,
    _float_accuracy,
    _float_core,
    _float_matching,
    _float_unordered,
)
from turneval.metrics._float_core import args_text, same_text
from turneval.metrics._text import DistanceMeasure
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


def exact_str(reference: str, prediction: str) -> float:
    return 1.0 if reference == prediction else 0.0


def levenshtein(reference: str, prediction: str) -> float:
    """ragas' NonLLMStringSimilarity (Levenshtein): 1 - normalised distance."""
    return 1 - float(Levenshtein.normalized_distance(reference, prediction))


def reference_accuracy(
    predicted: list[ToolCall], reference: list[ToolCall], strict: bool, compare: Any = exact_str
) -> float:
    """ragas 0.4.3's ToolCallAccuracy: ``compare(str(ref), str(pred))`` per reference arg."""
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
    total = 0.0  # summed one by one, as ragas does (sum() of floats may round differently)
    for pred, ref in zip(predicted, reference, strict=True):
        if not ref.args:
            total += 0.0 if pred.args else 1.0
            continue
        score = 0.0
        for name, value in ref.args.items():
            if name in pred.args:
                score += compare(str(value), str(pred.args[name]))
        total += score / len(ref.args)
    return total / len(reference)


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


def reference_single_tool(predicted: list[ToolCall], tool_name: str) -> float:
    return 1.0 if any(call.name == tool_name for call in predicted) else 0.0


CASES: list[tuple[MultiTurnMetric, Any]] = [
    (ToolCallAccuracy(), lambda p, r: reference_accuracy(p, r, strict=True)),
    (ToolCallAccuracy(strict_order=False), lambda p, r: reference_accuracy(p, r, strict=False)),
    (
        ToolCallAccuracy(arg_comparison_metric=NonLLMStringSimilarity()),
        lambda p, r: reference_accuracy(p, r, strict=True, compare=levenshtein),
    ),
    (
        ToolCallAccuracy(arg_comparison_metric=NonLLMStringSimilarity(), strict_order=False),
        lambda p, r: reference_accuracy(p, r, strict=False, compare=levenshtein),
    ),
    (
        TrajectorySingleToolUse(tool_name="set_temperature"),
        lambda p, r: reference_single_tool(p, "set_temperature"),
    ),
    (TrajectorySingleToolUse(tool_name="f"), lambda p, r: reference_single_tool(p, "f")),
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


# The float path's modules. Each reads the JSON writer (orjson's or pydantic's) as a global of
# its own, so the pydantic-only runs below patch it in every one of them.
FLOAT_PATH = (_float_core, _float_unordered, _float_accuracy, _float_matching)


def test_the_writer_is_patched_in_every_module_of_the_float_path() -> None:
    folder = Path(_float_core.__file__).parent
    assert sorted(module.__name__.rpartition(".")[2] for module in FLOAT_PATH) == sorted(
        path.stem for path in folder.glob("_float_*.py")
    )
    assert all(module.dumps is _float_core.dumps for module in FLOAT_PATH)


@pytest.fixture(params=["orjson", "pydantic"])
def json_writer(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The float path with orjson (the ``fast`` extra) and with pydantic's writer alone."""
    if request.param == "pydantic":
        for module in FLOAT_PATH:  # each binds the writer as a global of its own
            monkeypatch.setattr(module, "dumps", to_json)
    return str(request.param)


async def test_edge_cases_equal_their_reference(json_writer: str) -> None:
    """Hand-made pairs the generator rarely produces: types that Python conflates."""
    pairs: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = [
        ([{"x": True}], [{"x": 1}]),
        ([{"x": 1.0}], [{"x": 1}]),
        ([{"x": {"b": 1, "a": [True, None]}}], [{"x": {"a": [True, None], "b": 1.0}}]),
        ([{"x": 1}, {"x": 1}], [{"x": 1.0}]),
        ([{}, {"x": 0}], [{"x": False}, {}]),
        ([{"y": 2, "x": 1}], [{"x": 1, "y": 2}]),
        # the float path's shortcuts: same-typed values, str() across types, JSON texts
        ([{"x": -0.0}], [{"x": 0.0}]),
        ([{"x": 0.0}, {"x": 0}], [{"x": False}, {"x": 0.0}]),
        ([{"x": "1"}], [{"x": 1}]),
        ([{"x": "True", "y": "None"}], [{"x": True, "y": None}]),
        ([{"x": None}], [{"x": None}]),
        ([{"x": "null"}], [{"x": None}]),
        ([{"x": [1, "2"]}], [{"x": "[1, '2']"}]),
        ([{"x": {"a": 1}}], [{"x": "{'a': 1}"}]),
        ([{"x": [1, 2.5, {"b": [None, True]}]}], [{"x": [1.0, 2.5, {"b": [None, 1]}]}]),
        ([{"x": {"é": "ü\u2028", "z": [{}]}}], [{"x": {"z": [{}], "é": "ü\u2028"}}]),
        ([{"x": {"é": "ü\u2028", "z": [{}]}}], [{"x": {"é": "ü\u2028", "z": [{}]}}]),
        ([{"x": 2**70, "y": -(2**64)}], [{"x": 2**70, "y": -(2**64)}]),
        ([{"x": 2**70}], [{"x": float(2**70)}]),
        ([{"x": float("inf")}], [{"x": float("inf")}]),
        ([{"x": float("inf")}], [{"x": None}]),
        ([{"x": float("-inf")}], [{"x": float("inf")}]),
        ([{"x": 1e16}, {"x": 1e-7}], [{"x": 10**16}, {"x": 1e-07}]),
        ([{}, {}, {"x": 1}], [{}, {"x": 1.0}, {}]),
        ([{"x": 1}, {"x": 1}, {"x": 1}], [{"x": 1}, {"x": 1.0}]),
        ([{"x": [{"b": 1, "a": 2}]}, {"x": [{"a": 2, "b": 1}]}], [{"x": [{"a": 2, "b": 1}]}] * 2),
        ([{"x": {"k": [1]}, "y": 1}, {"x": {"k": [0]}, "y": 1}], [{"x": {"k": [0]}, "y": 1}] * 2),
        ([{"x": 2**70}, {"x": 1}, {"x": 2}], [{"x": 1.0}, {"x": 2**70}]),
        # three args or more, equal in Python: whole-dict JSON texts first
        ([{"a": 1, "b": [2], "c": {"d": None}}], [{"a": 1, "b": [2], "c": {"d": None}}]),
        ([{"a": 1, "b": [2], "c": {"d": None}}], [{"a": 1.0, "b": [2], "c": {"d": None}}]),
        ([{"a": 1, "b": [2], "c": {"d": None}}], [{"c": {"d": None}, "b": [2], "a": 1}]),
        ([{"a": 1, "b": [True], "c": {"d": -0.0}}], [{"a": 1, "b": [1], "c": {"d": 0.0}}]),
        ([{"a": 2**70, "b": "x", "c": "y"}], [{"a": 2**70, "b": "x", "c": "y"}]),
        ([{"a": float("nan"), "b": "x", "c": "y"}], [{"a": None, "b": "x", "c": "y"}]),
        ([{"x": float("inf")}, {"y": None}, {"y": 0}], [{"y": None}, {"x": float("inf")}]),
        # repeated names, the same calls in another order: unordered accuracy 1 without keys,
        # unless a pair equal in Python has different texts (then the sort decides)
        ([{"x": 1}, {"x": {"k": [2, None]}}, {"x": 1}], [{"x": {"k": [2, None]}}, {"x": 1}] * 1),
        (
            [{"x": 1}, {"x": {"k": [2, None]}}, {"x": 1}],
            [{"x": {"k": [2, None]}}, {"x": 1}, {"x": 1}],
        ),
        ([{"x": True}, {"x": 1}], [{"x": 1}, {"x": True}]),
        ([{"x": 1}, {"x": 1.0}], [{"x": 1.0}, {"x": 1}]),
        ([{"x": {"a": 1, "b": 2}}, {"x": {"b": 2, "a": 1}}], [{"x": {"b": 2, "a": 1}}] * 2),
        ([{"x": 2**70}, {"x": 2**70}], [{"x": 2**70}, {"x": 2**70}]),
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


async def test_nan_takes_the_same_value_on_both_paths(json_writer: str) -> None:
    """NaN is no JSON value: both paths keep their common rule (equal JSON texts are equal)."""
    nan = float("nan")
    pairs = [({"x": nan}, {"x": nan}), ({"x": nan}, {"x": None}), ({"x": [nan]}, {"x": [None]})]
    for predicted_args, reference_args in pairs:
        sample = MultiTurnSample(
            user_input=[
                {"type": "ai", "content": "", "tool_calls": [{"name": "f", "args": predicted_args}]}
            ],
            reference_tool_calls=[ToolCall(name="f", args=reference_args)],
        )
        for metric, _ in CASES:
            fast = await metric.multi_turn_ascore(sample)
            assert fast == (await metric.ascore(sample)).value, (metric.name, predicted_args)
    # ToolCallAccuracy compares str(): "nan" equals "nan", not "None"
    same = MultiTurnSample(
        user_input=[
            {"type": "ai", "content": "", "tool_calls": [{"name": "f", "args": {"x": nan}}]}
        ],
        reference_tool_calls=[ToolCall(name="f", args={"x": nan})],
    )
    assert await ToolCallAccuracy().multi_turn_ascore(same) == 1.0


async def test_short_lists_paired_without_texts_keep_the_text_rule_for_nan(
    json_writer: str,
) -> None:
    """Short lists are paired by Python equality; where a NaN is met, texts decide as before.

    Equal texts make two NaNs equal, and equal canonical keys make ``1`` and ``1.0`` equal, so
    with one NaN object shared by several calls the relation is no equivalence: pairing by
    keys first would pair the first two calls below and leave one pair out.
    """
    nan, other_nan = float("nan"), float("nan")
    cases: list[tuple[list[dict[str, Any]], list[dict[str, Any]], int]] = [
        # texts pair p0-r1 ("NaN", 1) and p1-r0 ("NaN", 1.0): two pairs
        ([{"x": nan, "v": 1}, {"x": nan, "v": 1.0}], [{"x": nan, "v": 1.0}, {"x": other_nan, "v": 1}], 2),
        # a NaN nested in a list, shared by both sides: equal texts
        ([{"x": [nan]}, {"y": 1}], [{"y": 1}, {"x": [nan]}], 2),
        # NaNs that are other objects, left on both sides: equal texts
        ([{"x": nan}, {"y": 1}], [{"x": other_nan}, {"y": 2}], 1),
        # NaN against None: texts differ ("NaN", null)
        ([{"x": nan}, {"y": 1}], [{"x": None}, {"y": 1}], 1),
        # booleans are no numbers, however deep
        ([{"x": [True]}, {"x": {"a": [1, True]}}], [{"x": [1]}, {"x": {"a": [1, 1]}}], 0),
        ([{"x": [1.0]}, {"x": {"a": [1, {"b": 2}]}}], [{"x": {"a": [1.0, {"b": 2.0}]}}, {"x": [1]}], 2),
    ]  # fmt: skip
    for predicted_args, reference_args, pairs in cases:
        sample = MultiTurnSample(
            user_input=[
                {
                    "type": "ai",
                    "content": "",
                    "tool_calls": [{"name": "f", "args": args} for args in predicted_args],
                }
            ],
            reference_tool_calls=[ToolCall(name="f", args=args) for args in reference_args],
        )
        n_pred, n_ref = len(predicted_args), len(reference_args)
        recall = await TrajectoryRecall().multi_turn_ascore(sample)
        assert recall == pairs / n_ref, (predicted_args, reference_args)
        assert await TrajectoryPrecision().multi_turn_ascore(sample) == pairs / n_pred
        for metric in (ToolCallF1(), TrajectoryAnyOrderMatch(), TrajectoryRecall()):
            fast = await metric.multi_turn_ascore(sample)
            assert fast == (await metric.ascore(sample)).value, (metric.name, predicted_args)


def _many_calls(count: int, offset: int) -> list[ToolCall]:
    """Calls whose args repeat and differ in the ways JSON equality cares about."""
    values: list[Any] = [1, 1.0, True, "1", {"a": 1, "b": 2}, {"b": 2, "a": 1.0}, [1, None]]
    return [
        ToolCall(name=f"t{(index + offset) % 3}", args={"v": values[(index * 5 + offset) % 7]})
        for index in range(count)
    ]


async def test_long_call_lists_take_the_counting_path(json_writer: str) -> None:
    """Over 64 calls a side, matching counts texts and keys in dicts: same values."""
    many = [
        (_many_calls(n_pred, offset), _many_calls(n_ref, 0))
        for n_pred, n_ref, offset in [(70, 66, 0), (66, 70, 1), (90, 3, 2), (3, 90, 4)]
    ]
    many.append(
        ([ToolCall(name="f", args={"v": 1})] * 70, [ToolCall(name="f", args={"v": 1.0})] * 66)
    )
    for predicted, reference in many:
        n_pred, n_ref = len(predicted), len(reference)
        sample = MultiTurnSample(
            user_input=[{"type": "ai", "content": "", "tool_calls": predicted}],
            reference_tool_calls=reference,
        )
        for metric, expected in CASES:
            want = expected(predicted, reference)
            assert await metric.multi_turn_ascore(sample) == want, (metric.name, n_pred, n_ref)
            assert (await metric.ascore(sample)).value == want, (metric.name, n_pred, n_ref)


_VALUES: list[Any] = [
    1, 1.0, True, False, 0, 0.0, -0.0, None, float("nan"), float("inf"), float("-inf"),
    "1", "True", "nan", "null", "", "é", "\u2028", "\ud800", 2**70, -(2**64), 1e16, 10**16,
    [1, 2], [1.0, 2], [True], [None], ["null"], [float("nan")], {"a": 1, "b": 2},
    {"b": 2, "a": 1}, {"a": 1.0, "b": 2}, {"a": [1, {"c": None}]}, {"a": [1, {"c": -0.0}]},
    {"a": [1, {"c": 0.0}]}, {"a": "\ud800"},
]  # fmt: skip


@pytest.mark.parametrize("left", _VALUES, ids=repr)
def test_same_text_is_str_equality(left: Any, json_writer: str) -> None:
    """The shortcut ToolCallAccuracy takes is ``str(a) == str(b)`` on every pair of values."""
    copies = [_copy(value) for value in _VALUES]  # equal values that are other objects
    for right in [*_VALUES, *copies]:
        assert same_text(left, right) == (str(left) == str(right)), (left, right)


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy(item) for item in value]
    if isinstance(value, float):
        return float(repr(value))
    if isinstance(value, str):
        return "".join(list(value))
    return value


def test_args_text_has_the_equality_classes_of_pydantic_json(json_writer: str) -> None:
    """Call texts are equal exactly when pydantic's ``to_json`` texts are (NaN is not null)."""

    def text(make: Any, value: Any) -> Any:
        try:
            return make({"x": value})
        except ValueError as error:  # a lone surrogate: both refuse it
            return type(error)

    values = [value for value in _VALUES + [_copy(v) for v in _VALUES]]
    for left in values:
        for right in values:
            ours = text(args_text, left) == text(args_text, right)
            assert ours == (text(to_json, left) == text(to_json, right)), (left, right)


def test_unordered_sort_key_orders_as_ragas_key() -> None:
    """Nested values in the unordered sort key are compared by their str() only when needed."""

    def ragas_key(call: ToolCall) -> tuple[str, ...]:
        return (call.name, *(part for n in sorted(call.args) for part in (n, str(call.args[n]))))

    values: list[Any] = [{"k": [1]}, {"k": [0]}, "{'k': [0]}", [1], "[1]", 1, "1", True, None, {}]
    calls = [
        ToolCall(name=name, args={"a": first, "b": second})
        for name in ("f", "g")
        for first in values
        for second in values[::3]
    ]
    calls += [ToolCall(name="f", args={"a": value}) for value in values]
    for shift in (0, 7, 19):
        shuffled = calls[shift:] + calls[:shift]
        ours = sorted(shuffled, key=_float_unordered.sort_key)
        assert [id(call) for call in ours] == [id(c) for c in sorted(shuffled, key=ragas_key)]
    deferred = [_float_unordered.Deferred((value,)) for value in values]
    texts = [str(value) for value in values]
    for left, left_text in zip(deferred, texts, strict=True):
        for right, right_text in zip([*deferred, *texts], texts * 2, strict=True):
            assert (left == right) == (left_text == right_text)
            assert (left != right) == (left_text != right_text)
            assert (left < right) == (left_text < right_text)
            assert (left <= right) == (left_text <= right_text)
            assert (left > right) == (left_text > right_text)
            assert (left >= right) == (left_text >= right_text)


# One tool's calls whose ragas keys tie, or differ at the first value, at the smallest arg
# name or later: values whose str() share prefixes or are equal across types ("1" and 1,
# "['a']" and ["a"]), sort differently as values than as texts (9 and 10), or are nested.
_GROUP_VALUES = st.sampled_from(
    ["a", "a b", "a'", "ab", "1", "['a']", 1, 9, 10, True, 1.0, -0.0, 0.0, None]
    + [["a"], ["a", "b"], ["a b"], [1], {"k": 1}, {"k": [1]}]
)
_GROUP_ARGS = st.dictionaries(st.sampled_from(["a", "b", "c"]), _GROUP_VALUES, max_size=3)


def _ragas_key(call: ToolCall) -> tuple[str, ...]:
    return (call.name, *(part for n in sorted(call.args) for part in (n, str(call.args[n]))))


@settings(max_examples=200, deadline=None)
@given(st.lists(_GROUP_ARGS, min_size=2, max_size=6))
def test_a_group_of_one_tool_is_ordered_as_ragas_sorts_it(group: list[dict[str, Any]]) -> None:
    """The first value's str() alone orders a group only when it decides ragas' key; ties kept."""
    calls = [ToolCall(name="t", args=args) for args in group]
    ordered = _float_unordered.group_sorted(calls)
    assert [id(args) for args in ordered] == [id(c.args) for c in sorted(calls, key=_ragas_key)]


@settings(max_examples=120, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("tu"), _GROUP_ARGS, _GROUP_ARGS, st.booleans()),
        min_size=2,
        max_size=6,
    ),
    st.randoms(use_true_random=False),
)
def test_unordered_accuracy_of_repeated_tools_equals_ragas(
    rows: list[tuple[str, dict[str, Any], dict[str, Any], bool]], rng: Any
) -> None:
    """Parallel calls of one tool, reordered, some changed: the value of ragas' sorted pairs."""
    reference = [ToolCall(name=name, args=args) for name, args, _, _ in rows]
    predicted = [
        ToolCall(name=name, args=changed if change else dict(args))
        for name, args, changed, change in rows
    ]
    rng.shuffle(predicted)
    kernel = ToolCallAccuracy(strict_order=False)._kernel
    assert kernel is not None
    messages = [AIMessage(content="", tool_calls=predicted)]
    assert kernel(messages, reference) == reference_accuracy(predicted, reference, strict=False)


async def test_timeout_takes_the_awaited_path_with_the_same_value() -> None:
    sample = MultiTurnSample(
        user_input=[{"type": "ai", "content": "", "tool_calls": [{"name": "f", "args": {"x": 1}}]}],
        reference_tool_calls=[ToolCall(name="f", args={"x": 1.0})],
    )
    for metric, expected in CASES:
        want = expected(sample.tool_calls, sample.reference_tool_calls)
        assert await metric.multi_turn_ascore(sample, timeout=5.0) == want, metric.name


async def test_accuracy_scores_strings_json_writers_refuse(json_writer: str) -> None:
    """A lone surrogate has a str() but no JSON text: accuracy still compares str()."""
    args = {"a": "\ud800", "b": [1], "c": {"d": "\ud800"}}
    sample = MultiTurnSample(
        user_input=[{"type": "ai", "content": "", "tool_calls": [{"name": "f", "args": args}]}],
        reference_tool_calls=[ToolCall(name="f", args=dict(args))],
    )
    for metric in (ToolCallAccuracy(), ToolCallAccuracy(strict_order=False)):
        assert await metric.multi_turn_ascore(sample) == 1.0
        assert (await metric.ascore(sample)).value == 1.0


async def test_comparator_skips_equal_strings_only_when_they_score_one() -> None:
    """Equal str() adds 1.0 without a call only for measures scoring identical strings 1.0.

    token_set_ratio scores two empty strings 0.0; switching the measure of the same comparator
    after a sample was scored must not keep the shortcut.
    """
    similarity = NonLLMStringSimilarity()
    metric = ToolCallAccuracy(arg_comparison_metric=similarity)
    nested = {"a": [1, {"b": None}], "c": "", "d": 2.5, "e": True}
    sample = MultiTurnSample(
        user_input=[
            {
                "type": "ai",
                "content": "",
                "tool_calls": [{"name": "f", "args": {**nested, "c": ""}}, {"name": "g"}],
            }
        ],
        reference_tool_calls=[
            ToolCall(name="f", args={**nested, "a": [1, {"b": None}], "e": 1}),
            ToolCall(name="g"),
        ],
    )
    predicted, reference = sample.tool_calls, sample.reference_tool_calls
    assert reference is not None

    def token_set(left: str, right: str) -> float:
        return float(fuzz.token_set_ratio(left, right, processor=None)) / 100

    assert token_set("", "") == 0.0  # the case the shortcut must not take
    want = reference_accuracy(predicted, reference, strict=True, compare=levenshtein)
    assert want == (3 + levenshtein("1", "True")) / 4 / 2 + 0.5 == 0.875
    assert await metric.multi_turn_ascore(sample) == want
    similarity.distance_measure = DistanceMeasure.TOKEN_SET_RATIO
    want = reference_accuracy(predicted, reference, strict=True, compare=token_set)
    assert want == (2 + token_set("1", "True")) / 4 / 2 + 0.5 == 0.75
    assert await metric.multi_turn_ascore(sample) == want
    assert (await metric.ascore(sample)).value == want


async def test_unordered_accuracy_name_by_name(json_writer: str) -> None:
    """Unordered accuracy sums ragas' sorted pairs name by name; groups of the same calls score 1.

    Mixed names where one name's calls are the same on both sides and another's differ, with
    ``null`` in the texts (None, NaN), JSON writers' refusals (integers beyond 64 bits) and
    values Python finds equal but ``str()`` does not (``1`` and ``1.0``, ``True`` and ``1``).
    """
    nan = float("nan")
    cases: list[tuple[list[tuple[str, dict[str, Any]]], list[tuple[str, dict[str, Any]]]]] = [
        (
            [("f", {"x": 1}), ("g", {"y": 2}), ("f", {"x": 2})],
            [("f", {"x": 2}), ("f", {"x": 1}), ("g", {"y": 3})],
        ),
        (
            [("f", {"x": 1}), ("f", {"x": 3}), ("g", {"y": None}), ("g", {"y": 1})],
            [("g", {"y": 1}), ("f", {"x": 2}), ("g", {"y": None}), ("f", {"x": 1})],
        ),
        (
            [("f", {"x": 2**70}), ("f", {"x": 1}), ("g", {})],
            [("f", {"x": 1}), ("f", {"x": 2**70}), ("g", {})],
        ),
        (
            [("f", {"x": 2**70}), ("f", {"x": 1}), ("g", {"z": "a"})],
            [("f", {"x": 1}), ("f", {"x": 2**70 + 1}), ("g", {"z": "ab"})],
        ),
        (
            [("f", {"x": 1}), ("f", {"x": 1.0}), ("g", {"z": "a"})],
            [("f", {"x": 1.0}), ("f", {"x": 1}), ("g", {"z": "b"})],
        ),
        ([("f", {"x": None}), ("f", {"x": 1})], [("f", {"x": 1}), ("f", {"x": None})]),
        (
            [("f", {"x": True}), ("f", {"x": 1}), ("g", {})],
            [("f", {"x": 1}), ("f", {"x": True}), ("g", {"a": 1})],
        ),
        (
            [("f", {"x": nan}), ("f", {"x": 1}), ("g", {"a": [1, {"b": None}]})],
            [("f", {"x": 1}), ("f", {"x": float("nan")}), ("g", {"a": [1, {"b": None}]})],
        ),
        (
            [("f", {"x": None, "y": 2**70}), ("f", {"x": 1}), ("g", {})],
            [("f", {"x": 1}), ("f", {"x": None, "y": 2**70}), ("g", {"a": None})],
        ),
        (  # orjson writes NaN and None both as null: equal texts, not the same calls
            [("f", {"x": nan}), ("f", {"x": 1}), ("g", {})],
            [("f", {"x": 1}), ("f", {"x": None}), ("g", {})],
        ),
        (
            [("f", {"x": 1}), ("f", {"x": 2**70}), ("g", {})],
            [("f", {"x": 2**70}), ("f", {"x": 1.0}), ("g", {})],
        ),
        (
            [("h", {"k": {"a": 1, "b": 2}}), ("h", {"k": {"b": 2, "a": 1}}), ("f", {})],
            [("h", {"k": {"b": 2, "a": 1}}), ("h", {"k": {"a": 1, "b": 2.0}}), ("f", {})],
        ),
        (  # a group of the same calls after 1/3: ragas adds 1.0 twice, 1/3 + 2.0 rounds up
            [("a", {"x": 1, "y": 0, "z": 0}), ("b", {"k": 2}), ("b", {"k": 1})],
            [("a", {"x": 1, "y": 2, "z": 3}), ("b", {"k": 1}), ("b", {"k": 2})],
        ),
    ]
    similarity = NonLLMStringSimilarity()
    metrics = [
        (ToolCallAccuracy(strict_order=False), exact_str),
        (ToolCallAccuracy(strict_order=False, arg_comparison_metric=similarity), levenshtein),
        (  # equal strings may score below 1: ragas' sort of the whole lists
            ToolCallAccuracy(strict_order=False, arg_comparison_metric="token_set_ratio"),
            lambda left, right: float(fuzz.token_set_ratio(left, right, processor=None)) / 100,
        ),
    ]
    for predicted_calls, reference_calls in cases:
        predicted = [ToolCall(name=name, args=args) for name, args in predicted_calls]
        reference = [ToolCall(name=name, args=args) for name, args in reference_calls]
        sample = MultiTurnSample(
            user_input=[{"type": "ai", "content": "", "tool_calls": predicted}],
            reference_tool_calls=reference,
        )
        for metric, compare in metrics:
            want = reference_accuracy(predicted, reference, strict=False, compare=compare)
            assert await metric.multi_turn_ascore(sample) == want, predicted_calls
            assert (await metric.ascore(sample)).value == want, predicted_calls
    # the first case by hand: f pairs (1, 1) and (2, 2), g scores 0: (1 + 1 + 0) / 3
    first = MultiTurnSample(
        user_input=[
            {
                "type": "ai",
                "content": "",
                "tool_calls": [{"name": n, "args": a} for n, a in cases[0][0]],
            }
        ],
        reference_tool_calls=[ToolCall(name=n, args=a) for n, a in cases[0][1]],
    )
    assert await metrics[0][0].multi_turn_ascore(first) == 2 / 3


SKIPPING = [
    measure
    for measure in DistanceMeasure
    if NonLLMStringSimilarity(distance_measure=measure)._identical_scores_one()
]


@pytest.mark.parametrize("measure", SKIPPING)
def test_measures_said_to_score_identical_strings_one_do(measure: DistanceMeasure) -> None:
    # The float path skips the comparator for equal str() on these: check them on rapidfuzz.
    assert (
        DistanceMeasure.LEVENSHTEIN in SKIPPING and DistanceMeasure.TOKEN_SET_RATIO not in SKIPPING
    )
    similarity = NonLLMStringSimilarity(distance_measure=measure)
    texts = ["", "a", "1", "True", "héllo wörld", "[1, {'b': None}]", "x" * 300]
    assert [similarity.compare(text, text) for text in texts] == [1.0] * len(texts)

"""Per-argument rules (arg_rules=) on the tool-call and trajectory metrics."""

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from turneval import ToolCall
from turneval.errors import ConfigError
from turneval.metrics import (
    NonLLMStringSimilarity,
    ToolCallAccuracy,
    ToolCallF1,
    TrajectoryAnyOrderMatch,
    TrajectoryExactMatch,
    TrajectoryInOrderMatch,
    TrajectoryPrecision,
    TrajectoryRecall,
)
from turneval.metrics.arg_rules import (
    ArgRule,
    casefold,
    exact,
    fuzzy,
    ignore,
    numeric,
    subset,
    superset,
)
from turneval.metrics.base import run_sync

from .._builders import call, conversation
from .test_properties import call_lists


@pytest.mark.parametrize(
    ("rule", "reference", "prediction", "expected"),
    [
        (exact(), 1, 1.0, 1.0),
        (exact(), "1", 1, 0.0),
        (exact(), True, 1, 0.0),
        (exact(), {"a": 1, "b": [1]}, {"b": [1], "a": 1}, 1.0),
        (numeric(), 1, 1.0, 1.0),
        (numeric(), "23", 23, 1.0),
        (numeric(0.5), 23, 23.4, 1.0),
        (numeric(0.5), 23, 23.6, 0.0),
        (numeric(relative=0.1), 100, 109, 1.0),
        (numeric(), True, 1, 0.0),  # booleans are not numbers
        (numeric(), "n/a", "n/a", 1.0),  # not numbers: exact
        (casefold(), "Paris", "PARIS", 1.0),
        (casefold(), ["A", {"k": "B"}], ["a", {"k": "b"}], 1.0),
        (casefold(), "Paris", "Pariss", 0.0),
        (fuzzy(0.6), "New York", "New York City", 1.0),  # Levenshtein 1 - 5/13 = 0.615
        (fuzzy(0.7), "New York", "New York City", 0.0),
        (fuzzy(0.5, "token_set_ratio"), "a b", "b a", 1.0),
        (subset(), ["a", "b"], ["b"], 1.0),
        (subset(), ["a", "b"], ["b", "c"], 0.0),
        (subset(), {"x": 1, "y": 2}, {"y": 2.0}, 1.0),
        (superset(), ["a", "b"], ["b", "c", "a"], 1.0),
        (superset(), {"x": 1, "y": 2}, {"y": 2}, 0.0),
        (superset(), "a", "a", 1.0),  # not containers: exact
    ],
)
def test_builtin_rules(rule: ArgRule, reference: Any, prediction: Any, expected: float) -> None:
    assert run_sync(rule.ascore, reference, prediction) == expected


def sample_for(predicted: list[ToolCall], reference: list[ToolCall], **metadata: Any) -> Any:
    sample = conversation(predicted, reference=reference)
    return sample.model_copy(update={"metadata": metadata or None})


def test_tool_call_accuracy_with_rules_hand_computed() -> None:
    predicted = [call("weather", city="paris", day="mon", request_id="r9", unit="C")]
    reference = [call("weather", city="Paris", day="tue", request_id="r1")]
    sample = sample_for(predicted, reference)
    # Default (ragas): city 0, day 0, request_id 0 -> 0.
    assert ToolCallAccuracy().score(sample).value == 0.0
    rules = {"weather": {"city": casefold, "request_id": "ignore"}}
    result = ToolCallAccuracy(arg_rules=rules).score(sample)
    # city 1 (casefold), day 0 (ExactMatch default), request_id left out -> (1 + 0)/2.
    assert result.value == 0.5
    assert result.details["pairs"][0]["arg_scores"] == {"city": 1.0, "day": 0.0}
    # Unnamed arguments follow the tool's "*" rule; the named any-tool rule beats it.
    day_any = {"weather": {"*": fuzzy(0.0)}, "*": {"request_id": ignore}}
    assert ToolCallAccuracy(arg_rules=day_any).score(sample).value == 1.0


def test_numeric_makes_one_equal_one_point_zero_in_tool_call_accuracy() -> None:
    sample = sample_for([call("set", t=1)], [call("set", t=1.0)])
    assert ToolCallAccuracy().score(sample).value == 0.0  # ragas: "1" != "1.0"
    assert ToolCallAccuracy(arg_rules={"set": {"t": numeric}}).score(sample).value == 1.0


def test_ignored_args_leave_the_unordered_sort_key() -> None:
    # Two calls of one tool differing only in an ignored id: without rules, sorting by id
    # pairs a(1)/b with a(2)/a; with the id ignored, pairs sort by the other argument.
    predicted = [call("f", id="z", v="a"), call("f", id="a", v="b")]
    reference = [call("f", id="b", v="a"), call("f", id="y", v="b")]
    sample = sample_for(predicted, reference)
    rules = {"f": {"id": ignore()}}
    assert ToolCallAccuracy(strict_order=False).score(sample).value == 0.0
    assert ToolCallAccuracy(strict_order=False, arg_rules=rules).score(sample).value == 1.0
    # Only ignored args on both sides: 1; non-ignored args only on the prediction: 0.
    only_ids = sample_for([call("f", id="x")], [call("f", id="y")])
    assert ToolCallAccuracy(arg_rules=rules).score(only_ids).value == 1.0
    extra = sample_for([call("f", id="x", v=1)], [call("f", id="y")])
    assert ToolCallAccuracy(arg_rules=rules).score(extra).value == 0.0


def test_f1_and_trajectories_with_rules() -> None:
    predicted = [
        call("search", q="Paris hotels", request_id="1"),
        call("book", hotel="Ritz", nights=2.0, request_id="2"),
        call("pay", amount=100),
    ]
    reference = [
        call("search", q="paris hotels", request_id="a"),
        call("book", hotel="Ritz", nights=2, request_id="b"),
        call("pay", amount=120),
    ]
    sample = sample_for(predicted, reference)
    rules = {"*": {"request_id": "ignore"}, "search": {"q": "casefold"}}
    # Default: only pay differs... and the request ids and the query case: 0 matches.
    assert ToolCallF1().score(sample).value == 0.0
    # Rules: search and book match, pay does not: P = R = 2/3 -> F1 = 2/3.
    f1 = ToolCallF1(arg_rules=rules).score(sample)
    assert f1.value == pytest.approx(2 / 3)
    assert f1.details["unmatched_predicted"] == [{"index": 2, "call": 'pay({"amount": 100})'}]
    assert TrajectoryExactMatch(arg_rules=rules).score(sample).value == 0.0
    assert TrajectoryPrecision(arg_rules=rules).score(sample).value == pytest.approx(2 / 3)
    assert TrajectoryRecall(arg_rules=rules).score(sample).value == pytest.approx(2 / 3)
    tolerant = {**rules, "pay": {"amount": numeric(25)}}
    for metric in (TrajectoryExactMatch, TrajectoryInOrderMatch, TrajectoryAnyOrderMatch):
        assert metric(arg_rules=tolerant).score(sample).value == 1.0
    # match_threshold with rules: hotel right, nights wrong, id ignored -> 1/2 >= 0.5.
    booking = sample_for(
        [call("book", hotel="Ritz", nights=3, request_id="1")],
        [call("book", hotel="Ritz", nights=2, request_id="2")],
    )
    assert TrajectoryRecall(arg_rules=rules, match_threshold=0.5).score(booking).value == 1.0
    assert TrajectoryRecall(arg_rules=rules, match_threshold=0.6).score(booking).value == 0.0


def test_unruled_args_keep_the_comparator() -> None:
    sample = sample_for([call("f", a="New York City", b="x")], [call("f", a="New York", b="X")])
    metric = ToolCallF1(
        arg_comparison_metric=NonLLMStringSimilarity(),
        match_threshold=0.8,
        arg_rules={"f": {"b": casefold}},
    )
    # a: Levenshtein 0.615, b: casefold 1 -> mean 0.808 >= 0.8.
    assert metric.score(sample).details["matched"][0]["args_score"] == pytest.approx(
        (1 - 5 / 13 + 1) / 2
    )


def test_custom_rules_sync_async_metric_and_dict_form() -> None:
    sample = sample_for([call("f", n=[3, 1, 2])], [call("f", n=[1, 2, 3])])

    async def same_items(reference: Any, prediction: Any) -> bool:
        return sorted(reference) == sorted(prediction)

    assert ToolCallF1(arg_rules={"f": {"n": same_items}}).score(sample).value == 1.0
    assert (
        ToolCallF1(arg_rules={"f": {"n": lambda r, p: set(r) == set(p)}}).score(sample).value == 1.0
    )
    # "[3, 1, 2]" vs "[1, 2, 3]": 3 substitutions over 9 characters.
    levenshtein = {"f": {"n": NonLLMStringSimilarity()}}
    assert ToolCallAccuracy(arg_rules=levenshtein).score(sample).value == pytest.approx(1 - 3 / 9)
    as_dict = {"f": {"n": {"kind": "superset"}}}
    assert ToolCallF1(arg_rules=as_dict).score(sample).value == 1.0
    out_of_range = ToolCallF1(arg_rules={"f": {"n": lambda r, p: 2}})
    with pytest.raises(ConfigError, match=r"returned 2 .*expected a float in \[0, 1\]"):
        out_of_range.score(sample)


def test_bad_rules_are_rejected_at_construction() -> None:
    with pytest.raises(ValidationError, match=r"arg_rules\['f'\]\['x'\]: unknown rule 'fuzy'"):
        ToolCallF1(arg_rules={"f": {"x": "fuzy"}})
    with pytest.raises(ValidationError, match="must be a dict"):
        ToolCallAccuracy(arg_rules={"f": "exact"})
    with pytest.raises(ValidationError, match="must be a dict"):
        TrajectoryRecall(arg_rules=["f"])
    with pytest.raises(ValidationError, match="threshold"):
        ToolCallF1(arg_rules={"f": {"x": {"kind": "fuzzy", "threshold": 2}}})
    with pytest.raises(ValidationError, match="only for custom"):
        ArgRule(kind="exact", compare=len)


def test_rules_naming_tools_the_sample_lacks() -> None:
    sample = sample_for([call("f", x=1)], [call("f", x=1)], tools=["f", {"name": "g"}])
    assert ToolCallF1(arg_rules={"g": {"x": "exact"}}).score(sample).value == 1.0
    with pytest.raises(ConfigError, match=r"tool\(s\) \['serach'\] .*\['f', 'g'\]"):
        ToolCallF1(arg_rules={"serach": {"q": "casefold"}}).score(sample)
    with pytest.raises(ConfigError, match="serach"):
        ToolCallAccuracy(arg_rules={"serach": {"q": "casefold"}}).score(sample)


DEFAULTS: list[type[Any]] = [
    ToolCallAccuracy,
    ToolCallF1,
    TrajectoryExactMatch,
    TrajectoryInOrderMatch,
    TrajectoryAnyOrderMatch,
    TrajectoryPrecision,
    TrajectoryRecall,
]


@settings(max_examples=40, deadline=None)
@given(call_lists, call_lists, st.sampled_from(DEFAULTS))
def test_empty_rules_change_nothing(
    predicted: list[ToolCall], reference: list[ToolCall], metric: Any
) -> None:
    sample = conversation(predicted, reference=reference)
    plain = run_sync(metric().multi_turn_ascore, sample)
    assert run_sync(metric(arg_rules={}).multi_turn_ascore, sample) == pytest.approx(plain)
    exact_everywhere = {"*": {"*": "exact"}}
    if metric is not ToolCallAccuracy:  # ragas' str() comparison is not JSON equality
        assert run_sync(
            metric(arg_rules=exact_everywhere).multi_turn_ascore, sample
        ) == pytest.approx(plain)


def test_a_plain_function_returning_an_awaitable_is_refused() -> None:
    async def inner() -> float:
        return 1.0

    sample = sample_for([call("f", n=1)], [call("f", n=1)])
    metric = ToolCallF1(arg_rules={"f": {"n": lambda r, p: inner()}})
    with pytest.raises(ConfigError, match="returned an awaitable"):
        metric.score(sample)
    assert numeric(0.5).label == "numeric(tolerance=0.5, relative=0)"
    assert fuzzy(0.9).label == "fuzzy(threshold=0.9, measure=levenshtein)"


FAST_RULES = [
    {"a": {"k": "ignore"}, "*": {"m": "exact"}},
    {"a": {"*": "ignore", "k": "exact"}},
    {"*": {"*": "ignore"}},
]


@settings(max_examples=40, deadline=None)
@given(call_lists, call_lists, st.sampled_from(DEFAULTS[1:]), st.sampled_from(FAST_RULES))
def test_the_keyed_fast_path_for_ignore_rules_equals_scoring_each_argument(
    predicted: list[ToolCall], reference: list[ToolCall], metric: Any, fast: Any
) -> None:
    sample = conversation(predicted, reference=reference)
    # fast: equality only, keyed on what is left
    slow = {**fast, "unused_tool": {"q": "casefold"}}  # same meaning, scored argument by argument
    assert run_sync(metric(arg_rules=fast).multi_turn_ascore, sample) == pytest.approx(
        run_sync(metric(arg_rules=slow).multi_turn_ascore, sample)
    )

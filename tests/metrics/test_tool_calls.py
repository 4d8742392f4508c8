from typing import Any

import pytest
from pydantic import ValidationError

from turneval import (
    AIMessage,
    ConfigError,
    HumanMessage,
    InvalidSampleError,
    MultiTurnSample,
    SingleTurnSample,
    ToolCall,
    ToolMessage,
)
from turneval.metrics import (
    DistanceMeasure,
    ExactMatch,
    NonLLMStringSimilarity,
    ToolCallAccuracy,
    ToolCallF1,
)

from .._builders import call, conversation


def weather_sample() -> MultiTurnSample:
    """The ToolCallAccuracy seed example (ragas docs)."""
    return MultiTurnSample(
        user_input=[
            HumanMessage(content="What's the weather like in New York right now?"),
            AIMessage(
                content="The current temperature in New York is 75°F and it's partly cloudy.",
                tool_calls=[ToolCall(name="weather_check", args={"location": "New York"})],
            ),
            HumanMessage(content="Can you translate that to Celsius?"),
            AIMessage(
                content="Let me convert that to Celsius for you.",
                tool_calls=[
                    ToolCall(name="temperature_conversion", args={"temperature_fahrenheit": 75})
                ],
            ),
            ToolMessage(content="75°F is approximately 23.9°C."),
            AIMessage(content="75°F is approximately 23.9°C."),
        ],
        reference_tool_calls=[
            ToolCall(name="weather_check", args={"location": "New York"}),
            ToolCall(name="temperature_conversion", args={"temperature_fahrenheit": 75}),
        ],
    )


def paris_sample(extra: bool) -> MultiTurnSample:
    """The ToolCallF1 seed examples (ragas docs)."""
    second = [ToolCall(name="uv_index_lookup", args={"location": "Paris"})]
    if extra:
        second.append(ToolCall(name="air_quality", args={"location": "Paris"}))
    return MultiTurnSample(
        user_input=[
            HumanMessage(content="What's the weather like in Paris today?"),
            AIMessage(
                content="Let me check that for you.",
                tool_calls=[ToolCall(name="weather_check", args={"location": "Paris"})],
            ),
            HumanMessage(content="And the UV index?"),
            AIMessage(content="Sure, here's the UV index for Paris.", tool_calls=second),
        ],
        reference_tool_calls=[
            ToolCall(name="uv_index_lookup", args={"location": "Paris"}),
            ToolCall(name="weather_check", args={"location": "Paris"}),
        ],
    )


# -- ToolCallAccuracy -----------------------------------------------------------------------


async def test_accuracy_seed_weather_example_is_one() -> None:
    metric = ToolCallAccuracy()
    assert await metric.multi_turn_ascore(weather_sample()) == 1.0
    result = await metric.ascore(weather_sample())
    assert result.value == 1.0 and result.name == "tool_call_accuracy"
    assert (
        result.reason == "names aligned (strict order); mean args score = (1.000 + 1.000)/2 = 1.000"
    )
    assert [pair["args_score"] for pair in result.details["pairs"]] == [1.0, 1.0]


def test_sync_wrappers_outside_a_loop_and_refused_inside() -> None:
    from turneval.errors import SyncInAsyncContextError
    from turneval.metrics.base import run_sync

    metric = ToolCallAccuracy()
    assert metric.multi_turn_score(weather_sample()) == 1.0
    assert metric.score(weather_sample()).value == 1.0

    async def inside() -> float:
        return metric.multi_turn_score(weather_sample())

    with pytest.raises(
        SyncInAsyncContextError, match=r"await ToolCallAccuracy\.multi_turn_ascore\(\.\.\.\)"
    ):
        run_sync(inside)


async def test_accuracy_strict_order_versus_unordered() -> None:
    sample = conversation(
        [call("b", y=2), call("a", x=1)], reference=[call("a", x=1), call("b", y=2)]
    )
    strict = await ToolCallAccuracy().ascore(sample)
    assert strict.value == 0.0 and "tool-name sequences differ (strict order)" in strict.reason
    assert await ToolCallAccuracy(strict_order=False).multi_turn_ascore(sample) == 1.0


async def test_accuracy_argument_scores_by_hand() -> None:
    # Pair 1: 1 of 2 reference args equal -> 0.5; extra predicted arg "unit" ignored.
    # Pair 2: reference without args, prediction with args -> 0.  Mean = (0.5 + 0)/2.
    sample = conversation(
        [call("weather", city="Paris", day="mon", unit="C"), call("clock", tz="UTC")],
        reference=[call("weather", city="Paris", day="tue"), call("clock")],
    )
    result = await ToolCallAccuracy().ascore(sample)
    assert result.value == (0.5 + 0.0) / 2
    assert result.details["pairs"][0]["arg_scores"] == {"city": 1.0, "day": 0.0}
    # Missing reference key scores 0: 1 of 2 keys present and equal.
    missing = conversation([call("f", a=1)], reference=[call("f", a=1, b=2)])
    assert await ToolCallAccuracy().multi_turn_ascore(missing) == 0.5


async def test_accuracy_compares_str_of_values_as_ragas() -> None:
    # str(1) != str(1.0) and str(True) != str(1): ExactMatch on str() values.
    sample = conversation([call("f", a=1, b=True)], reference=[call("f", a=1.0, b=True)])
    assert await ToolCallAccuracy().multi_turn_ascore(sample) == 0.5


async def test_accuracy_levenshtein_args_by_hand() -> None:
    sample = conversation([call("w", city="New York City")], reference=[call("w", city="New York")])
    metric = ToolCallAccuracy()
    metric.arg_comparison_metric = NonLLMStringSimilarity()  # settable after construction
    # Levenshtein distance 5 (" City") over max length 13.
    assert await metric.multi_turn_ascore(sample) == 1 - 5 / 13
    metric.arg_comparison_metric = ExactMatch()
    assert await metric.multi_turn_ascore(sample) == 0.0


@pytest.mark.parametrize(
    ("predicted", "reference", "expected"),
    [([], [], 1.0), ([call("a")], [], 0.0), ([], [call("a")], 0.0)],
)
async def test_accuracy_empty_cases(
    predicted: list[ToolCall], reference: list[ToolCall], expected: float
) -> None:
    assert (
        await ToolCallAccuracy().multi_turn_ascore(conversation(predicted, reference=reference))
        == expected
    )


async def test_accuracy_length_mismatch_is_zero() -> None:
    sample = conversation([call("a"), call("a")], reference=[call("a")])
    assert await ToolCallAccuracy(strict_order=False).multi_turn_ascore(sample) == 0.0


async def test_missing_reference_tool_calls_names_metric_and_field() -> None:
    sample = conversation([call("a")])
    for metric in (ToolCallAccuracy(), ToolCallF1()):
        with pytest.raises(
            InvalidSampleError,
            match=f"metric '{metric.name}' needs the sample field 'reference_tool_calls'",
        ) as info:
            await metric.multi_turn_ascore(sample)
        assert info.value.field == "reference_tool_calls"


async def test_wrong_sample_type_is_rejected() -> None:
    with pytest.raises(InvalidSampleError, match="scores MultiTurnSample, got SingleTurnSample"):
        wrong_type: Any = SingleTurnSample(response="x")  # deliberately not a MultiTurnSample
        await ToolCallAccuracy().ascore(wrong_type)


def test_unknown_option_and_bad_values_fail_at_construction() -> None:
    with pytest.raises(ValidationError, match="strict_odrer"):
        ToolCallAccuracy(strict_odrer=False)  # type: ignore[call-arg]
    with pytest.raises(ValidationError, match="match_threshold"):
        ToolCallF1(match_threshold=1.5)
    with pytest.raises(ValidationError, match="must be a single-turn metric"):
        ToolCallF1(arg_comparison_metric=3)  # names are accepted (see tests/cli/test_judge.py)
    metric = ToolCallAccuracy()
    with pytest.raises(ValidationError, match="cannot be None"):
        metric.arg_comparison_metric = None


async def test_callable_comparators_sync_and_async() -> None:
    sample = conversation([call("f", q="PARIS")], reference=[call("f", q="paris")])
    seen: list[tuple[str, str]] = []

    def case_insensitive(reference: str, prediction: str) -> float:
        seen.append((reference, prediction))
        return float(reference.lower() == prediction.lower())

    async def async_case_insensitive(reference: str, prediction: str) -> float:
        return float(reference.lower() == prediction.lower())

    assert (
        await ToolCallAccuracy(arg_comparison_metric=case_insensitive).multi_turn_ascore(sample)
        == 1.0
    )
    assert seen == [("paris", "PARIS")]  # called as (reference, prediction)
    assert (
        await ToolCallAccuracy(arg_comparison_metric=async_case_insensitive).multi_turn_ascore(
            sample
        )
        == 1.0
    )
    assert (
        await ToolCallF1(arg_comparison_metric=async_case_insensitive).multi_turn_ascore(sample)
        == 1.0
    )


async def test_comparator_out_of_range_is_a_config_error() -> None:
    sample = conversation([call("f", q="a")], reference=[call("f", q="b")])
    metric = ToolCallAccuracy(arg_comparison_metric=lambda reference, prediction: 2.0)
    with pytest.raises(ConfigError, match=r"returned 2\.0 for reference='b', prediction='a'"):
        await metric.multi_turn_ascore(sample)

    def returns_coroutine(reference: str, prediction: str) -> Any:
        async def inner() -> float:
            return 1.0

        return inner()

    with pytest.raises(ConfigError, match="declare it with 'async def'"):
        await ToolCallAccuracy(arg_comparison_metric=returns_coroutine).multi_turn_ascore(sample)


# -- ToolCallF1 ------------------------------------------------------------------------------


async def test_f1_seed_examples() -> None:
    metric = ToolCallF1()
    assert await metric.multi_turn_ascore(paris_sample(extra=False)) == 1.0
    result = await metric.ascore(paris_sample(extra=True))
    precision, recall = 2 / 3, 2 / 2
    assert result.value == 2 * precision * recall / (precision + recall)
    assert result.value == pytest.approx(0.8)
    assert result.reason == "precision=2/3=0.667, recall=2/2=1.000, F1=0.800"
    assert [entry["call"] for entry in result.details["unmatched_predicted"]] == [
        'air_quality({"location": "Paris"})'
    ]
    assert len(result.details["matched"]) == 2


@pytest.mark.parametrize(
    ("predicted", "reference", "expected"),
    [
        ([], [], 1.0),
        ([call("a")], [], 0.0),
        ([], [call("a")], 0.0),
        ([call("a")], [call("b")], 0.0),
    ],
)
async def test_f1_empty_and_disjoint(
    predicted: list[ToolCall], reference: list[ToolCall], expected: float
) -> None:
    assert (
        await ToolCallF1().multi_turn_ascore(conversation(predicted, reference=reference))
        == expected
    )


async def test_f1_duplicates_count() -> None:
    # A repeated call is not collapsed: [a, a] vs [a] -> P = 1/2, R = 1/1.
    sample = conversation([call("a", x=1), call("a", x=1)], reference=[call("a", x=1)])
    assert await ToolCallF1().multi_turn_ascore(sample) == 2 * 0.5 * 1.0 / 1.5
    both = conversation(
        [call("a", x=1), call("a", x=1)], reference=[call("a", x=1), call("a", x=1)]
    )
    assert await ToolCallF1().multi_turn_ascore(both) == 1.0


@pytest.mark.parametrize(
    ("predicted_args", "reference_args", "equal"),
    [
        ({"n": 1}, {"n": 1.0}, True),
        ({"n": "1"}, {"n": 1}, False),
        ({"b": True}, {"b": 1}, False),
        ({"b": False}, {"b": 0}, False),
        ({"d": {"x": 1, "y": [1, {"z": None}]}}, {"d": {"y": [1, {"z": None}], "x": 1}}, True),
        ({"l": [1, 2]}, {"l": [2, 1]}, False),
        ({"v": None}, {}, False),
        ({}, {}, True),
    ],
)
async def test_f1_json_value_equality(
    predicted_args: dict[str, Any], reference_args: dict[str, Any], equal: bool
) -> None:
    sample = conversation(
        [ToolCall(name="f", args=predicted_args)],
        reference=[ToolCall(name="f", args=reference_args)],
    )
    assert await ToolCallF1().multi_turn_ascore(sample) == float(equal)


async def test_f1_parallel_calls_in_one_message_any_order() -> None:
    sample = conversation(
        [call("lookup", city="Paris"), call("lookup", city="Rome"), call("lookup", city="Oslo")],
        reference=[
            call("lookup", city="Oslo"),
            call("lookup", city="Paris"),
            call("lookup", city="Rome"),
        ],
    )
    assert await ToolCallF1().multi_turn_ascore(sample) == 1.0


async def test_f1_comparator_threshold_and_union_of_keys() -> None:
    # Args score = mean over the union {q, extra} of Levenshtein similarity: (1 - 1/5 + 0)/2 = 0.4.
    sample = conversation([call("s", q="paris", extra="x")], reference=[call("s", q="pariz")])
    levenshtein = NonLLMStringSimilarity(distance_measure=DistanceMeasure.LEVENSHTEIN)
    loose = ToolCallF1(arg_comparison_metric=levenshtein, match_threshold=0.4)
    result = await loose.ascore(sample)
    assert result.value == 1.0 and result.details["matched"][0]["args_score"] == (0.8 + 0.0) / 2
    assert result.details["matched"][0]["call"] == 's({"q": "pariz"})'
    assert result.details["matched"][0]["predicted_call"] == 's({"q": "paris", "extra": "x"})'
    assert (
        await ToolCallF1(arg_comparison_metric=levenshtein, match_threshold=0.41).multi_turn_ascore(
            sample
        )
        == 0.0
    )


async def test_f1_matching_is_maximum_not_greedy() -> None:
    # p0 matches r0 and r1, p1 matches only r0: greedy p0->r0 would leave p1 unmatched.
    table = {("r0", "p0"): 1.0, ("r1", "p0"): 1.0, ("r0", "p1"): 1.0}

    def score(reference: str, prediction: str) -> float:
        return table.get((reference, prediction), 0.0)

    sample = conversation(
        [call("t", v="p0"), call("t", v="p1")], reference=[call("t", v="r0"), call("t", v="r1")]
    )
    result = await ToolCallF1(arg_comparison_metric=score).ascore(sample)
    assert result.value == 1.0
    assert sorted(
        (m["predicted_index"], m["reference_index"]) for m in result.details["matched"]
    ) == [(0, 1), (1, 0)]


async def test_single_turn_metric_as_comparator_goes_through_a_sample() -> None:
    from turneval.metrics import CustomMetric

    metric = CustomMetric(
        "starts", lambda instance: float(instance["response"][0] == instance["reference"][0])
    )
    sample = conversation([call("f", q="apple")], reference=[call("f", q="avocado")])
    assert await ToolCallAccuracy(arg_comparison_metric=metric).multi_turn_ascore(sample) == 1.0

from collections.abc import Callable

import pytest
from pydantic import ValidationError

from turneval import EvaluationDataset, InvalidSampleError, MultiTurnSample, ToolCall
from turneval.metrics import (
    Metric,
    NonLLMStringSimilarity,
    TrajectoryAnyOrderMatch,
    TrajectoryExactMatch,
    TrajectoryInOrderMatch,
    TrajectoryPrecision,
    TrajectoryRecall,
    TrajectorySingleToolUse,
)

from .._builders import call, conversation
from ..test_dataset import VERTEX_ROWS

FIVE = (
    TrajectoryExactMatch,
    TrajectoryInOrderMatch,
    TrajectoryAnyOrderMatch,
    TrajectoryPrecision,
    TrajectoryRecall,
)


async def scores(
    predicted: list[ToolCall], reference: list[ToolCall], **options: object
) -> list[float]:
    sample = conversation(predicted, reference=reference)
    return [await cls(**options).multi_turn_ascore(sample) for cls in FIVE]


async def test_vertex_seed_examples() -> None:
    first, second = EvaluationDataset.from_vertex(VERTEX_ROWS)
    assert isinstance(first, MultiTurnSample) and isinstance(second, MultiTurnSample)
    # Example 1: set_device_info(device_2) vs set_device_info(device_3): all five 0.
    assert [await cls().multi_turn_ascore(first) for cls in FIVE] == [0.0] * 5
    # Example 2: user_y vs user_z, same set_temperature: exact/in-order/any-order 0, P = R = 1/2.
    assert [await cls().multi_turn_ascore(second) for cls in FIVE] == [0.0, 0.0, 0.0, 0.5, 0.5]
    precision = await TrajectoryPrecision().ascore(second)
    assert precision.reason == "precision=1/2=0.500"
    assert precision.details["unmatched_predicted"] == [
        {"index": 0, "call": 'get_user_preferences({"user_id": "user_z"})'}
    ]


@pytest.mark.parametrize(
    ("predicted", "reference", "expected"),
    [
        # exact, in-order, any-order, precision, recall
        ([], [], [1.0, 1.0, 1.0, 1.0, 1.0]),
        ([call("a")], [], [0.0, 1.0, 1.0, 0.0, 1.0]),
        ([], [call("a")], [0.0, 0.0, 0.0, 0.0, 0.0]),
        ([call("a"), call("b")], [call("a"), call("b")], [1.0, 1.0, 1.0, 1.0, 1.0]),
        ([call("a"), call("x"), call("b")], [call("a"), call("b")], [0.0, 1.0, 1.0, 2 / 3, 1.0]),
        ([call("b"), call("a")], [call("a"), call("b")], [0.0, 0.0, 1.0, 1.0, 1.0]),
        ([call("a")], [call("a"), call("b")], [0.0, 0.0, 0.0, 1.0, 0.5]),
        # Multisets: [c] against [c, c] -> precision 1, recall 1/2.
        ([call("c")], [call("c"), call("c")], [0.0, 0.0, 0.0, 1.0, 0.5]),
        ([call("c"), call("c")], [call("c")], [0.0, 1.0, 1.0, 0.5, 1.0]),
        # In order needs order: b then a does not embed [a, b] even with extras.
        ([call("b"), call("x"), call("a")], [call("a"), call("b")], [0.0, 0.0, 1.0, 2 / 3, 1.0]),
    ],
)
async def test_table_of_cases(
    predicted: list[ToolCall], reference: list[ToolCall], expected: list[float]
) -> None:
    assert await scores(predicted, reference) == expected


async def test_nested_args_and_parallel_calls() -> None:
    nested = call("set", cfg={"mode": "eco", "zones": [1, 2]})
    same_nested_other_order = ToolCall(name="set", args={"cfg": {"zones": [1, 2], "mode": "eco"}})
    assert await scores([same_nested_other_order, call("get")], [call("get"), nested]) == [
        0.0,
        0.0,
        1.0,
        1.0,
        1.0,
    ]
    # Parallel calls in one AI message count as separate steps in order.
    sample = conversation([call("a"), call("b")], [call("c")], reference=[call("a"), call("c")])
    assert await TrajectoryInOrderMatch().multi_turn_ascore(sample) == 1.0
    assert await TrajectoryExactMatch().multi_turn_ascore(sample) == 0.0


async def test_comparator_and_threshold() -> None:
    predicted, reference = [call("s", q="pariss")], [call("s", q="paris")]
    similarity = NonLLMStringSimilarity()  # 1 - 1/6 = 0.8333
    assert await scores(predicted, reference) == [0.0] * 5
    assert (
        await scores(predicted, reference, arg_comparison_metric=similarity, match_threshold=0.8)
        == [1.0] * 5
    )
    assert (
        await scores(predicted, reference, arg_comparison_metric=similarity, match_threshold=0.9)
        == [0.0] * 5
    )


async def test_in_order_details_show_the_embedding() -> None:
    result = await TrajectoryInOrderMatch().ascore(
        conversation([call("a"), call("x"), call("b")], reference=[call("a"), call("b")])
    )
    assert [(m["predicted_index"], m["reference_index"]) for m in result.details["matched"]] == [
        (0, 0),
        (2, 1),
    ]
    assert (
        result.reason == "3 predicted vs 2 reference calls; all 2 reference calls found in order: 1"
    )


async def test_single_tool_use() -> None:
    metric = TrajectorySingleToolUse(tool_name="b")
    assert await metric.multi_turn_ascore(conversation([call("a"), call("b")], [call("b")])) == 1.0
    result = await metric.ascore(conversation([call("a"), call("b")], [call("b")]))
    assert result.details == {"positions": [1, 2], "tool_name": "b"}
    assert result.reason == "'b' called 2 time(s): 1"
    assert await metric.multi_turn_ascore(conversation([call("a")])) == 0.0  # no reference needed
    assert await metric.multi_turn_ascore(conversation([])) == 0.0  # empty prediction
    with pytest.raises(ValidationError, match="tool_name"):
        TrajectorySingleToolUse()  # type: ignore[call-arg]


@pytest.mark.parametrize("cls", FIVE)
async def test_reference_is_required(cls: Callable[[], Metric]) -> None:
    with pytest.raises(InvalidSampleError, match="reference_tool_calls"):
        await cls().ascore(conversation([call("a")]))

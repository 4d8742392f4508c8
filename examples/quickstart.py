"""Score the seed examples of the turneval contract and print each score with its reason.

Runs offline: every metric here is rule-based. ``make demo`` runs this file.
"""

from __future__ import annotations

import anyio

from turneval import (
    AIMessage,
    EvaluationDataset,
    HumanMessage,
    MultiTurnSample,
    ToolCall,
    ToolMessage,
    aevaluate,
)
from turneval.metrics import (
    Metric,
    NonLLMStringSimilarity,
    ToolCallAccuracy,
    ToolCallF1,
    TrajectoryAnyOrderMatch,
    TrajectoryExactMatch,
    TrajectoryInOrderMatch,
    TrajectoryPrecision,
    TrajectoryRecall,
    TrajectorySingleToolUse,
)

WEATHER = MultiTurnSample(
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


def paris(extra_call: bool) -> MultiTurnSample:
    second = [ToolCall(name="uv_index_lookup", args={"location": "Paris"})]
    if extra_call:
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


VERTEX_ROWS = [
    {
        "predicted_trajectory": [
            {
                "tool_name": "set_device_info",
                "tool_input": {"device_id": "device_3", "updates": {"status": "OFF"}},
            }
        ],
        "reference_trajectory": [
            {
                "tool_name": "set_device_info",
                "tool_input": {"device_id": "device_2", "updates": {"status": "OFF"}},
            }
        ],
    },
    {
        "predicted_trajectory": [
            {"tool_name": "get_user_preferences", "tool_input": {"user_id": "user_z"}},
            {
                "tool_name": "set_temperature",
                "tool_input": {"location": "Living Room", "temperature": 23},
            },
        ],
        "reference_trajectory": [
            {"tool_name": "get_user_preferences", "tool_input": {"user_id": "user_y"}},
            {
                "tool_name": "set_temperature",
                "tool_input": {"location": "Living Room", "temperature": 23},
            },
        ],
    },
]


async def show(title: str, metric: Metric, sample: MultiTurnSample) -> None:
    result = await metric.ascore(sample)
    print(f"  {title:<48} {result.name:<28} {result.value:.3f}  {result.reason}")


async def main() -> None:
    print("ToolCallAccuracy (ragas seed):")
    await show("weather, exact args", ToolCallAccuracy(), WEATHER)
    levenshtein = ToolCallAccuracy(arg_comparison_metric=NonLLMStringSimilarity())
    await show("weather, Levenshtein args", levenshtein, WEATHER)

    print("ToolCallF1 (ragas seed):")
    await show("identical calls in another order", ToolCallF1(), paris(extra_call=False))
    await show("two right calls plus an extra one", ToolCallF1(), paris(extra_call=True))

    print("Trajectories (Vertex AI seed):")
    dataset = EvaluationDataset.from_vertex(VERTEX_ROWS)
    metrics: list[Metric] = [
        TrajectoryExactMatch(),
        TrajectoryInOrderMatch(),
        TrajectoryAnyOrderMatch(),
        TrajectoryPrecision(),
        TrajectoryRecall(),
        TrajectorySingleToolUse(tool_name="set_temperature"),
    ]
    for index, sample in enumerate(dataset):
        assert isinstance(sample, MultiTurnSample)
        for metric in metrics:
            await show(f"example {index + 1}", metric, sample)

    print("Summary over the Vertex examples:")
    result = await aevaluate(dataset, metrics)
    for name, summary in result.summary().items():
        std = "n/a" if summary.std is None else f"{summary.std:.3f}"
        print(f"  {name:<28} mean={summary.mean:.3f} std={std} count={summary.count}")


if __name__ == "__main__":
    anyio.run(main)

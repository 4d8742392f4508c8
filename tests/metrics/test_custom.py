import pytest
from pydantic import ValidationError

from turneval import ConfigError, SingleTurnSample
from turneval.metrics import CustomMetric

from .._builders import call, conversation


def word_count(instance: dict[str, object]) -> dict[str, float]:
    """The Vertex AI seed example."""
    response = instance["response"]
    assert isinstance(response, str)
    return {"word_count": len(response.split(" "))}


async def test_vertex_word_count_on_single_and_multi_turn() -> None:
    metric = CustomMetric(name="word_count", metric_function=word_count)
    assert await metric.single_turn_ascore(SingleTurnSample(response="one two three")) == 3.0
    # Multi-turn: "response" is the last AI text ("done" in the builder).
    assert await metric.multi_turn_ascore(conversation([call("a")])) == 1.0


async def test_instance_has_vertex_trajectories_and_async_functions() -> None:
    seen = {}

    async def inspect_instance(instance: dict[str, object]) -> float:
        seen.update(instance)
        return 0.25

    metric = CustomMetric("probe", inspect_instance)
    result = await metric.ascore(conversation([call("a", x=1)], reference=[call("b")]))
    assert result.value == 0.25 and result.details == {"values": {"probe": 0.25}}
    assert seen["prompt"] == "please help" and seen["response"] == "done"
    assert seen["predicted_trajectory"] == [{"tool_name": "a", "tool_input": {"x": 1}}]
    assert seen["reference_trajectory"] == [{"tool_name": "b", "tool_input": {}}]


async def test_bad_results_are_clear_errors() -> None:
    sample = SingleTurnSample(response="x")
    with pytest.raises(ConfigError, match="do not include the metric's name 'm'"):
        await CustomMetric("m", lambda instance: {"other": 1.0}).ascore(sample)
    with pytest.raises(ConfigError, match="is not a number"):
        await CustomMetric("m", lambda instance: "high").ascore(sample)
    with pytest.raises(ConfigError, match="nan"):
        await CustomMetric("m", lambda instance: float("nan")).ascore(sample)
    with pytest.raises(ValidationError):
        CustomMetric("m", lambda instance: 1.0, typo=True)

"""CustomMetric: any function of the sample's JSON dict (Vertex AI's custom metric)."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

from turneval.errors import ConfigError
from turneval.metrics.base import Explained, Metric, MultiTurnScoring, SingleTurnScoring
from turneval.samples import MultiTurnSample, Sample

__all__ = ["CustomMetric", "sample_instance"]


def sample_instance(sample: Sample) -> dict[str, Any]:
    """The sample's JSON dict, plus Vertex-style keys for multi-turn samples.

    A multi-turn sample's dict also has ``prompt`` (first human turn), ``response`` (last AI
    text), ``predicted_trajectory`` and ``reference_trajectory`` (``{"tool_name",
    "tool_input"}`` items), so functions written for Vertex AI run unchanged.
    """
    instance = sample.model_dump(mode="json")
    if isinstance(sample, MultiTurnSample):
        humans = [m.content for m in sample.user_input if m.type == "human"]
        answers = [m.content for m in sample.user_input if m.type == "ai" and m.content]
        instance["prompt"] = humans[0] if humans else None
        instance["response"] = answers[-1] if answers else None
        instance["predicted_trajectory"] = [
            {"tool_name": call.name, "tool_input": call.args} for call in sample.tool_calls
        ]
        instance["reference_trajectory"] = (
            None
            if sample.reference_tool_calls is None
            else [
                {"tool_name": call.name, "tool_input": call.args}
                for call in sample.reference_tool_calls
            ]
        )
    return instance


class CustomMetric(MultiTurnScoring, SingleTurnScoring, Metric[Sample]):
    """A metric from ``metric_function(instance) -> float | {name: float}``, sync or async.

    ``instance`` is :func:`sample_instance` of the sample. A dict result must hold the
    metric's ``name`` (its score); other entries are kept in ``details["values"]``. Values
    may be any finite number (e.g. a word count): custom metrics are not clipped to [0, 1].

    Attributes:
        name: The metric's name (required).
        metric_function: The scoring function.
    """

    name: str
    metric_function: Callable[[dict[str, Any]], Any]

    def __init__(
        self,
        name: str | None = None,
        metric_function: Callable[[dict[str, Any]], Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Accept ``name`` and ``metric_function`` positionally or by keyword (as Vertex)."""
        super().__init__(**{"name": name, "metric_function": metric_function, **kwargs})

    @property
    def scale(self) -> tuple[float, float]:
        """Unbounded: a custom function may return any finite number."""
        return (-math.inf, math.inf)

    async def _evaluate(self, sample: Sample) -> Explained:
        result = self.metric_function(sample_instance(sample))
        if inspect.isawaitable(result):
            result = await result
        values = result if isinstance(result, dict) else {self.name: result}
        if self.name not in values:
            raise ConfigError(
                f"CustomMetric {self.name!r}: metric_function returned keys {sorted(values)}, "
                f"which do not include the metric's name {self.name!r}"
            )
        numbers: dict[str, float] = {}
        for key, value in values.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(
                    f"CustomMetric {self.name!r}: value {key!r}={value!r} is not a number"
                )
            if not math.isfinite(value):
                raise ConfigError(f"CustomMetric {self.name!r}: value {key!r} is {value!r}")
            numbers[key] = float(value)
        value = numbers[self.name]
        return Explained(value, f"{self.name}={value:g} (custom function)", {"values": numbers})

"""Base of the metrics that compare predicted and reference tool calls as a relation."""

from __future__ import annotations

from abc import ABC
from typing import Any

from pydantic import Field, PrivateAttr, field_validator, model_validator

from turneval.metrics._compare import ArgComparator, check_comparator, resolve_comparator
from turneval.metrics._matching import CallComparison, compare_calls
from turneval.metrics.base import MultiTurnMetric, require
from turneval.samples import MultiTurnSample

__all__ = ["CallMatchingMetric"]


class CallMatchingMetric(MultiTurnMetric, ABC):
    """A multi-turn metric over the call-equality relation of :mod:`._matching`.

    Attributes:
        arg_comparison_metric: None for JSON-value equality of args; else a string metric,
            any single-turn metric or a callable ``fn(reference, prediction) -> float``
            (sync or async) scoring each argument as ``str(value)``.
        match_threshold: With a comparator, the args score two same-name calls need to match.
    """

    arg_comparison_metric: Any = None
    match_threshold: float = Field(default=1.0, ge=0.0, le=1.0)
    _comparator: ArgComparator | None = PrivateAttr(default=None)

    @field_validator("arg_comparison_metric")
    @classmethod
    def _check_comparator(cls, value: Any) -> Any:
        return check_comparator(value)

    @model_validator(mode="after")
    def _resolve(self) -> CallMatchingMetric:
        # Runs at construction and again on assignment (validate_assignment=True).
        self._comparator = resolve_comparator(self.arg_comparison_metric)
        return self

    async def _compare(self, sample: MultiTurnSample) -> CallComparison:
        reference = require(self, sample, "reference_tool_calls")
        return await compare_calls(
            sample.tool_calls, reference, self._comparator, self.match_threshold
        )

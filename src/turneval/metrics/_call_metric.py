"""Base of the metrics that compare predicted and reference tool calls as a relation."""

from __future__ import annotations

from abc import ABC
from functools import cached_property
from typing import Any

from pydantic import Field, field_validator

from turneval.metrics._compare import ArgComparator, check_comparator, resolve_comparator
from turneval.metrics._matching import CallComparison, json_comparison, scored_comparison
from turneval.metrics.base import MultiTurnMetric, missing_field
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

    @field_validator("arg_comparison_metric")
    @classmethod
    def _check_comparator(cls, value: Any) -> Any:
        return check_comparator(value)

    @cached_property
    def _comparator(self) -> ArgComparator | None:
        # Cleared by Metric.__setattr__ when arg_comparison_metric is reassigned.
        return resolve_comparator(self.arg_comparison_metric)

    def _compare(self, sample: MultiTurnSample) -> CallComparison | None:
        """The relation under JSON equality, or None when a comparator must be awaited.

        Metrics write ``self._compare(sample) or await self._scored(sample)``, which keeps the
        default path free of a coroutine per sample.
        """
        reference = sample.reference_tool_calls
        if reference is None:
            raise missing_field(self, "reference_tool_calls")
        if self._comparator is None:
            return json_comparison(sample.tool_calls, reference)
        return None

    async def _scored(self, sample: MultiTurnSample) -> CallComparison:
        """The relation under the comparator (its scores may need awaiting)."""
        comparator = self._comparator
        assert comparator is not None and sample.reference_tool_calls is not None
        return await scored_comparison(
            sample.tool_calls, sample.reference_tool_calls, comparator, self.match_threshold
        )

"""Every metric, and ``BUILTIN_METRICS``, the tuple names are resolved from."""

from turneval.metrics._call_metric import CallMatchingMetric
from turneval.metrics.base import Explained, Metric, MultiTurnMetric, Outcome, SingleTurnMetric
from turneval.metrics.custom import CustomMetric
from turneval.metrics.text import DistanceMeasure, ExactMatch, NonLLMStringSimilarity, StringMetric
from turneval.metrics.tool_calls import ToolCallAccuracy, ToolCallF1
from turneval.metrics.trajectory import (
    TrajectoryAnyOrderMatch,
    TrajectoryExactMatch,
    TrajectoryInOrderMatch,
    TrajectoryPrecision,
    TrajectoryRecall,
    TrajectorySingleToolUse,
)

__all__ = [
    "BUILTIN_METRICS",
    "CallMatchingMetric",
    "CustomMetric",
    "DistanceMeasure",
    "ExactMatch",
    "Explained",
    "Metric",
    "MultiTurnMetric",
    "NonLLMStringSimilarity",
    "Outcome",
    "SingleTurnMetric",
    "StringMetric",
    "ToolCallAccuracy",
    "ToolCallF1",
    "TrajectoryAnyOrderMatch",
    "TrajectoryExactMatch",
    "TrajectoryInOrderMatch",
    "TrajectoryPrecision",
    "TrajectoryRecall",
    "TrajectorySingleToolUse",
]

BUILTIN_METRICS: tuple[type[Metric], ...] = (
    ExactMatch,
    NonLLMStringSimilarity,
    ToolCallAccuracy,
    ToolCallF1,
    TrajectoryAnyOrderMatch,
    TrajectoryExactMatch,
    TrajectoryInOrderMatch,
    TrajectoryPrecision,
    TrajectoryRecall,
)
"""Metrics that can be built from their name with no argument (``evaluate(metrics=["..."])``)."""

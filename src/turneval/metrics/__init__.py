"""Every metric, and ``BUILTIN_METRICS``, the tuple names are resolved from."""

from turneval.metrics._call_metric import CallMatchingMetric
from turneval.metrics._judged import JudgedMetric
from turneval.metrics.base import Explained, Metric, MultiTurnMetric, Outcome, SingleTurnMetric
from turneval.metrics.custom import CustomMetric
from turneval.metrics.goal import AgentGoalAccuracyWithoutReference, AgentGoalAccuracyWithReference
from turneval.metrics.grounding import Groundedness, ToolOutputGroundedness
from turneval.metrics.text import (
    BleuScore,
    DistanceMeasure,
    ExactMatch,
    NonLLMStringSimilarity,
    RougeScore,
    StringMetric,
)
from turneval.metrics.tool_calls import ToolCallAccuracy, ToolCallF1
from turneval.metrics.tool_json import (
    ToolCallValid,
    ToolNameMatch,
    ToolParameterKeyMatch,
    ToolParameterKVMatch,
)
from turneval.metrics.topic import TopicAdherenceScore
from turneval.metrics.trajectory import (
    TrajectoryAnyOrderMatch,
    TrajectoryExactMatch,
    TrajectoryInOrderMatch,
    TrajectoryPrecision,
    TrajectoryRecall,
    TrajectorySingleToolUse,
)

__all__ = [
    "AgentGoalAccuracyWithReference",
    "AgentGoalAccuracyWithoutReference",
    "BUILTIN_METRICS",
    "BleuScore",
    "CallMatchingMetric",
    "CustomMetric",
    "DistanceMeasure",
    "ExactMatch",
    "Explained",
    "Groundedness",
    "JudgedMetric",
    "Metric",
    "MultiTurnMetric",
    "NonLLMStringSimilarity",
    "Outcome",
    "RougeScore",
    "SingleTurnMetric",
    "StringMetric",
    "ToolCallAccuracy",
    "ToolCallF1",
    "ToolCallValid",
    "ToolNameMatch",
    "ToolOutputGroundedness",
    "ToolParameterKVMatch",
    "ToolParameterKeyMatch",
    "TopicAdherenceScore",
    "TrajectoryAnyOrderMatch",
    "TrajectoryExactMatch",
    "TrajectoryInOrderMatch",
    "TrajectoryPrecision",
    "TrajectoryRecall",
    "TrajectorySingleToolUse",
]

BUILTIN_METRICS: tuple[type[Metric], ...] = (
    AgentGoalAccuracyWithReference,
    AgentGoalAccuracyWithoutReference,
    BleuScore,
    ExactMatch,
    Groundedness,
    NonLLMStringSimilarity,
    RougeScore,
    ToolCallAccuracy,
    ToolCallF1,
    ToolCallValid,
    ToolNameMatch,
    ToolParameterKVMatch,
    ToolParameterKeyMatch,
    ToolOutputGroundedness,
    TopicAdherenceScore,
    TrajectoryAnyOrderMatch,
    TrajectoryExactMatch,
    TrajectoryInOrderMatch,
    TrajectoryPrecision,
    TrajectoryRecall,
)
"""Metrics buildable from their name alone (``evaluate(metrics=["..."])``); judged ones use
``evaluate``'s ``llm``."""

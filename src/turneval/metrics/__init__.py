"""Every metric; ``BUILTIN_METRICS``, the tuple names are resolved from, comes from the registry."""

from turneval.metrics._call_metric import CallMatchingMetric
from turneval.metrics._judged import JudgedMetric
from turneval.metrics.agents import HandoffAccuracy, PerAgentMetric
from turneval.metrics.arg_rules import ArgRule
from turneval.metrics.assessments import (
    AssessmentJudge,
    ChunkRelevance,
    ContextSufficiency,
    Correctness,
    DatabricksAggregates,
    GuidelineAdherence,
    OverallAssessment,
    RelevanceToQuery,
)
from turneval.metrics.attribution import FailureAttribution
from turneval.metrics.base import (
    Evaluator,
    Explained,
    Metric,
    MultiTurnMetric,
    MultiTurnScoring,
    Outcome,
    RowEvaluator,
    SingleTurnMetric,
    SingleTurnScoring,
    builtin_metrics,
    registered_metrics,
    resolve_metric_name,
)
from turneval.metrics.behaviour import (
    AgentLoopDetection,
    StepBudget,
    ToolCallEfficiency,
    ToolPermission,
)
from turneval.metrics.conversation import (
    ConversationCompleteness,
    KnowledgeRetention,
    RoleAdherence,
    TrajectoryJudge,
    TurnRelevancy,
    UserFrustration,
)
from turneval.metrics.custom import CustomMetric
from turneval.metrics.goal import AgentGoalAccuracyWithoutReference, AgentGoalAccuracyWithReference
from turneval.metrics.grounding import Groundedness, ToolOutputGroundedness
from turneval.metrics.operations import (
    ConversationCost,
    TokensPerTurn,
    ToolLatency,
    TurnLatency,
)
from turneval.metrics.rubric import (
    Coherence,
    Fluency,
    Fulfillment,
    PairwiseMetric,
    PairwiseQuestionAnsweringQuality,
    PairwiseSummarizationQuality,
    PointwiseMetric,
    QuestionAnsweringCorrectness,
    QuestionAnsweringHelpfulness,
    QuestionAnsweringQuality,
    QuestionAnsweringRelevance,
    Safety,
    SummarizationHelpfulness,
    SummarizationQuality,
    SummarizationVerbosity,
)
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
from turneval.metrics.trace import TraceJudge
from turneval.metrics.trajectory import (
    TrajectoryAnyOrderMatch,
    TrajectoryExactMatch,
    TrajectoryInOrderMatch,
    TrajectoryPrecision,
    TrajectoryRecall,
    TrajectorySingleToolUse,
)
from turneval.metrics.world import EndStateMatch, StateAssertions

__all__ = [
    "AgentGoalAccuracyWithReference",
    "AgentGoalAccuracyWithoutReference",
    "AgentLoopDetection",
    "ArgRule",
    "AssessmentJudge",
    "BUILTIN_METRICS",
    "BleuScore",
    "CallMatchingMetric",
    "ChunkRelevance",
    "Coherence",
    "ContextSufficiency",
    "ConversationCompleteness",
    "ConversationCost",
    "Correctness",
    "CustomMetric",
    "DatabricksAggregates",
    "DistanceMeasure",
    "EndStateMatch",
    "Evaluator",
    "ExactMatch",
    "Explained",
    "FailureAttribution",
    "Fluency",
    "Fulfillment",
    "Groundedness",
    "GuidelineAdherence",
    "HandoffAccuracy",
    "JudgedMetric",
    "KnowledgeRetention",
    "Metric",
    "MultiTurnMetric",
    "MultiTurnScoring",
    "NonLLMStringSimilarity",
    "Outcome",
    "OverallAssessment",
    "PairwiseMetric",
    "PairwiseQuestionAnsweringQuality",
    "PairwiseSummarizationQuality",
    "PerAgentMetric",
    "PointwiseMetric",
    "QuestionAnsweringCorrectness",
    "QuestionAnsweringHelpfulness",
    "QuestionAnsweringQuality",
    "QuestionAnsweringRelevance",
    "RelevanceToQuery",
    "RoleAdherence",
    "RougeScore",
    "RowEvaluator",
    "Safety",
    "SingleTurnMetric",
    "SingleTurnScoring",
    "StateAssertions",
    "StepBudget",
    "StringMetric",
    "SummarizationHelpfulness",
    "SummarizationQuality",
    "SummarizationVerbosity",
    "TokensPerTurn",
    "ToolCallAccuracy",
    "ToolCallEfficiency",
    "ToolCallF1",
    "ToolCallValid",
    "ToolLatency",
    "ToolNameMatch",
    "ToolOutputGroundedness",
    "ToolParameterKVMatch",
    "ToolParameterKeyMatch",
    "ToolPermission",
    "TopicAdherenceScore",
    "TraceJudge",
    "TrajectoryAnyOrderMatch",
    "TrajectoryExactMatch",
    "TrajectoryInOrderMatch",
    "TrajectoryJudge",
    "TrajectoryPrecision",
    "TrajectoryRecall",
    "TrajectorySingleToolUse",
    "TurnLatency",
    "TurnRelevancy",
    "UserFrustration",
    "builtin_metrics",
    "registered_metrics",
    "resolve_metric_name",
]

BUILTIN_METRICS: tuple[type[Evaluator], ...] = tuple(
    cls for cls in builtin_metrics().values() if cls.buildable_by_name()
)
"""Metrics buildable from their name alone (``evaluate(metrics=["..."])``); judged ones use
``evaluate``'s ``llm``."""

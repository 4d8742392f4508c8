"""Every metric; ``BUILTIN_METRICS``, the tuple names are resolved from, comes from the registry.

Names are imported lazily (a module-level ``__getattr__``, as in ``turneval``): ``import
turneval.metrics`` builds no metric class; a name's module is imported when the name is first
used, and the registry (:func:`builtin_metrics`, ``BUILTIN_METRICS``) imports every built-in
metric module before it answers.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    from turneval.metrics.goal import (
        AgentGoalAccuracyWithoutReference,
        AgentGoalAccuracyWithReference,
    )
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

# Public name -> the module that defines it. Add a line here to export a new name.
_LAZY: dict[str, str] = {
    "AgentGoalAccuracyWithReference": "turneval.metrics.goal",
    "AgentGoalAccuracyWithoutReference": "turneval.metrics.goal",
    "AgentLoopDetection": "turneval.metrics.behaviour",
    "ArgRule": "turneval.metrics.arg_rules",
    "AssessmentJudge": "turneval.metrics.assessments",
    "BleuScore": "turneval.metrics.text",
    "CallMatchingMetric": "turneval.metrics._call_metric",
    "ChunkRelevance": "turneval.metrics.assessments",
    "Coherence": "turneval.metrics.rubric",
    "ContextSufficiency": "turneval.metrics.assessments",
    "ConversationCompleteness": "turneval.metrics.conversation",
    "ConversationCost": "turneval.metrics.operations",
    "Correctness": "turneval.metrics.assessments",
    "CustomMetric": "turneval.metrics.custom",
    "DatabricksAggregates": "turneval.metrics.assessments",
    "DistanceMeasure": "turneval.metrics.text",
    "EndStateMatch": "turneval.metrics.world",
    "Evaluator": "turneval.metrics.base",
    "ExactMatch": "turneval.metrics.text",
    "Explained": "turneval.metrics.base",
    "FailureAttribution": "turneval.metrics.attribution",
    "Fluency": "turneval.metrics.rubric",
    "Fulfillment": "turneval.metrics.rubric",
    "Groundedness": "turneval.metrics.grounding",
    "GuidelineAdherence": "turneval.metrics.assessments",
    "HandoffAccuracy": "turneval.metrics.agents",
    "JudgedMetric": "turneval.metrics._judged",
    "KnowledgeRetention": "turneval.metrics.conversation",
    "Metric": "turneval.metrics.base",
    "MultiTurnMetric": "turneval.metrics.base",
    "MultiTurnScoring": "turneval.metrics.base",
    "NonLLMStringSimilarity": "turneval.metrics.text",
    "Outcome": "turneval.metrics.base",
    "OverallAssessment": "turneval.metrics.assessments",
    "PairwiseMetric": "turneval.metrics.rubric",
    "PairwiseQuestionAnsweringQuality": "turneval.metrics.rubric",
    "PairwiseSummarizationQuality": "turneval.metrics.rubric",
    "PerAgentMetric": "turneval.metrics.agents",
    "PointwiseMetric": "turneval.metrics.rubric",
    "QuestionAnsweringCorrectness": "turneval.metrics.rubric",
    "QuestionAnsweringHelpfulness": "turneval.metrics.rubric",
    "QuestionAnsweringQuality": "turneval.metrics.rubric",
    "QuestionAnsweringRelevance": "turneval.metrics.rubric",
    "RelevanceToQuery": "turneval.metrics.assessments",
    "RoleAdherence": "turneval.metrics.conversation",
    "RougeScore": "turneval.metrics.text",
    "RowEvaluator": "turneval.metrics.base",
    "Safety": "turneval.metrics.rubric",
    "SingleTurnMetric": "turneval.metrics.base",
    "SingleTurnScoring": "turneval.metrics.base",
    "StateAssertions": "turneval.metrics.world",
    "StepBudget": "turneval.metrics.behaviour",
    "StringMetric": "turneval.metrics.text",
    "SummarizationHelpfulness": "turneval.metrics.rubric",
    "SummarizationQuality": "turneval.metrics.rubric",
    "SummarizationVerbosity": "turneval.metrics.rubric",
    "TokensPerTurn": "turneval.metrics.operations",
    "ToolCallAccuracy": "turneval.metrics.tool_calls",
    "ToolCallEfficiency": "turneval.metrics.behaviour",
    "ToolCallF1": "turneval.metrics.tool_calls",
    "ToolCallValid": "turneval.metrics.tool_json",
    "ToolLatency": "turneval.metrics.operations",
    "ToolNameMatch": "turneval.metrics.tool_json",
    "ToolOutputGroundedness": "turneval.metrics.grounding",
    "ToolParameterKVMatch": "turneval.metrics.tool_json",
    "ToolParameterKeyMatch": "turneval.metrics.tool_json",
    "ToolPermission": "turneval.metrics.behaviour",
    "TopicAdherenceScore": "turneval.metrics.topic",
    "TraceJudge": "turneval.metrics.trace",
    "TrajectoryAnyOrderMatch": "turneval.metrics.trajectory",
    "TrajectoryExactMatch": "turneval.metrics.trajectory",
    "TrajectoryInOrderMatch": "turneval.metrics.trajectory",
    "TrajectoryJudge": "turneval.metrics.conversation",
    "TrajectoryPrecision": "turneval.metrics.trajectory",
    "TrajectoryRecall": "turneval.metrics.trajectory",
    "TrajectorySingleToolUse": "turneval.metrics.trajectory",
    "TurnLatency": "turneval.metrics.operations",
    "TurnRelevancy": "turneval.metrics.conversation",
    "UserFrustration": "turneval.metrics.conversation",
    "builtin_metrics": "turneval.metrics.base",
    "registered_metrics": "turneval.metrics.base",
    "resolve_metric_name": "turneval.metrics.base",
}

# Every module that defines built-in metrics, in the order they register.
_MODULES: tuple[str, ...] = (
    "turneval.metrics._call_metric",
    "turneval.metrics._judged",
    "turneval.metrics.agents",
    "turneval.metrics.arg_rules",
    "turneval.metrics.assessments",
    "turneval.metrics.attribution",
    "turneval.metrics.base",
    "turneval.metrics.behaviour",
    "turneval.metrics.conversation",
    "turneval.metrics.custom",
    "turneval.metrics.goal",
    "turneval.metrics.grounding",
    "turneval.metrics.operations",
    "turneval.metrics.rubric",
    "turneval.metrics.text",
    "turneval.metrics.tool_calls",
    "turneval.metrics.tool_json",
    "turneval.metrics.topic",
    "turneval.metrics.trace",
    "turneval.metrics.trajectory",
    "turneval.metrics.world",
)

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

BUILTIN_METRICS: tuple[type[Evaluator], ...]
"""Metrics buildable from their name alone (``evaluate(metrics=["..."])``); judged ones use
``evaluate``'s ``llm``."""


def _import_all() -> None:
    """Import every built-in metric module (each metric registers itself when defined)."""
    for module in _MODULES:
        import_module(module)


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use and cache the name here."""
    if name == "BUILTIN_METRICS":
        from turneval.metrics.base import builtin_metrics

        value: Any = tuple(cls for cls in builtin_metrics().values() if cls.buildable_by_name())
    else:
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module 'turneval.metrics' has no attribute {name!r}")
        value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names, lazy ones included."""
    return sorted({*globals(), *_LAZY, "BUILTIN_METRICS"})

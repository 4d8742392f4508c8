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
    from turneval.metrics._behaviour import (
        AgentLoopDetection,
        StepBudget,
        ToolCallEfficiency,
        ToolPermission,
    )
    from turneval.metrics._call_metric import CallMatchingMetric
    from turneval.metrics._conversation import (
        ConversationCompleteness,
        KnowledgeRetention,
        RoleAdherence,
        TrajectoryJudge,
        TurnRelevancy,
        UserFrustration,
    )
    from turneval.metrics._custom import CustomMetric
    from turneval.metrics._goal import (
        AgentGoalAccuracyWithoutReference,
        AgentGoalAccuracyWithReference,
    )
    from turneval.metrics._grounding import Groundedness, ToolOutputGroundedness
    from turneval.metrics._judged import JudgedMetric
    from turneval.metrics._text import (
        BleuScore,
        DistanceMeasure,
        ExactMatch,
        NonLLMStringSimilarity,
        RougeScore,
        StringMetric,
    )
    from turneval.metrics._tool_calls import ToolCallAccuracy, ToolCallF1
    from turneval.metrics._tool_json import (
        ToolCallValid,
        ToolNameMatch,
        ToolParameterKeyMatch,
        ToolParameterKVMatch,
    )
    from turneval.metrics._topic import TopicAdherenceScore
    from turneval.metrics._trace import TraceJudge
    from turneval.metrics._trajectory import (
        TrajectoryAnyOrderMatch,
        TrajectoryExactMatch,
        TrajectoryInOrderMatch,
        TrajectoryPrecision,
        TrajectoryRecall,
        TrajectorySingleToolUse,
    )
    from turneval.metrics._world import EndStateMatch, StateAssertions
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

# Public name -> the module that defines it. Add a line here to export a new name.
_LAZY: dict[str, str] = {
    "AgentGoalAccuracyWithReference": "turneval.metrics._goal",
    "AgentGoalAccuracyWithoutReference": "turneval.metrics._goal",
    "AgentLoopDetection": "turneval.metrics._behaviour",
    "ArgRule": "turneval.metrics.arg_rules",
    "AssessmentJudge": "turneval.metrics.assessments",
    "BleuScore": "turneval.metrics._text",
    "CallMatchingMetric": "turneval.metrics._call_metric",
    "ChunkRelevance": "turneval.metrics.assessments",
    "Coherence": "turneval.metrics.rubric",
    "ContextSufficiency": "turneval.metrics.assessments",
    "ConversationCompleteness": "turneval.metrics._conversation",
    "ConversationCost": "turneval.metrics.operations",
    "Correctness": "turneval.metrics.assessments",
    "CustomMetric": "turneval.metrics._custom",
    "DatabricksAggregates": "turneval.metrics.assessments",
    "DistanceMeasure": "turneval.metrics._text",
    "EndStateMatch": "turneval.metrics._world",
    "Evaluator": "turneval.metrics.base",
    "ExactMatch": "turneval.metrics._text",
    "Explained": "turneval.metrics.base",
    "FailureAttribution": "turneval.metrics.attribution",
    "Fluency": "turneval.metrics.rubric",
    "Fulfillment": "turneval.metrics.rubric",
    "Groundedness": "turneval.metrics._grounding",
    "GuidelineAdherence": "turneval.metrics.assessments",
    "HandoffAccuracy": "turneval.metrics.agents",
    "JudgedMetric": "turneval.metrics._judged",
    "KnowledgeRetention": "turneval.metrics._conversation",
    "Metric": "turneval.metrics.base",
    "MultiTurnMetric": "turneval.metrics.base",
    "MultiTurnScoring": "turneval.metrics.base",
    "NonLLMStringSimilarity": "turneval.metrics._text",
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
    "RoleAdherence": "turneval.metrics._conversation",
    "RougeScore": "turneval.metrics._text",
    "RowEvaluator": "turneval.metrics.base",
    "Safety": "turneval.metrics.rubric",
    "SingleTurnMetric": "turneval.metrics.base",
    "SingleTurnScoring": "turneval.metrics.base",
    "StateAssertions": "turneval.metrics._world",
    "StepBudget": "turneval.metrics._behaviour",
    "StringMetric": "turneval.metrics._text",
    "SummarizationHelpfulness": "turneval.metrics.rubric",
    "SummarizationQuality": "turneval.metrics.rubric",
    "SummarizationVerbosity": "turneval.metrics.rubric",
    "TokensPerTurn": "turneval.metrics.operations",
    "ToolCallAccuracy": "turneval.metrics._tool_calls",
    "ToolCallEfficiency": "turneval.metrics._behaviour",
    "ToolCallF1": "turneval.metrics._tool_calls",
    "ToolCallValid": "turneval.metrics._tool_json",
    "ToolLatency": "turneval.metrics.operations",
    "ToolNameMatch": "turneval.metrics._tool_json",
    "ToolOutputGroundedness": "turneval.metrics._grounding",
    "ToolParameterKVMatch": "turneval.metrics._tool_json",
    "ToolParameterKeyMatch": "turneval.metrics._tool_json",
    "ToolPermission": "turneval.metrics._behaviour",
    "TopicAdherenceScore": "turneval.metrics._topic",
    "TraceJudge": "turneval.metrics._trace",
    "TrajectoryAnyOrderMatch": "turneval.metrics._trajectory",
    "TrajectoryExactMatch": "turneval.metrics._trajectory",
    "TrajectoryInOrderMatch": "turneval.metrics._trajectory",
    "TrajectoryJudge": "turneval.metrics._conversation",
    "TrajectoryPrecision": "turneval.metrics._trajectory",
    "TrajectoryRecall": "turneval.metrics._trajectory",
    "TrajectorySingleToolUse": "turneval.metrics._trajectory",
    "TurnLatency": "turneval.metrics.operations",
    "TurnRelevancy": "turneval.metrics._conversation",
    "UserFrustration": "turneval.metrics._conversation",
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
    "turneval.metrics._behaviour",
    "turneval.metrics._conversation",
    "turneval.metrics._custom",
    "turneval.metrics._goal",
    "turneval.metrics._grounding",
    "turneval.metrics.operations",
    "turneval.metrics.rubric",
    "turneval.metrics._text",
    "turneval.metrics._tool_calls",
    "turneval.metrics._tool_json",
    "turneval.metrics._topic",
    "turneval.metrics._trace",
    "turneval.metrics._trajectory",
    "turneval.metrics._world",
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

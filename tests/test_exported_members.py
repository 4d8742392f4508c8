import importlib

import pytest

MODULES = [
    "turneval",
    "turneval.errors",
    "turneval.messages",
    "turneval.samples",
    "turneval.dataset",
    "turneval.metrics",
    "turneval.metrics.base",
    "turneval.metrics.text",
    "turneval.metrics.tool_calls",
    "turneval.metrics.trajectory",
    "turneval.metrics.custom",
    "turneval.metrics.topic",
    "turneval.metrics.goal",
    "turneval.metrics.tool_json",
    "turneval.metrics.grounding",
    "turneval.metrics.rubric",
    "turneval.metrics.assessments",
    "turneval.metrics.arg_rules",
    "turneval.metrics.behaviour",
    "turneval.metrics.conversation",
    "turneval.estimate",
    "turneval.grounding",
    "turneval.agents",
    "turneval.testing",
    "turneval.judge",
    "turneval.judge.core",
    "turneval.judge.cache",
    "turneval.judge.usage",
    "turneval.llms",
    "turneval.runner",
    "turneval.compare",
    "turneval.report",
    "turneval.stream",
    "turneval.aggregate",
    "turneval.results",
    "turneval.calibration",
    "turneval.pytest_plugin",
    "turneval.integrations.langgraph",
    "turneval.metrics._tool_call_accuracy",
    "turneval.metrics._tool_call_f1",
    "turneval.metrics._string",
    "turneval.metrics._bleu_score",
    "turneval.metrics._rouge_score",
    "turneval.metrics._topic_adherence",
    "turneval.metrics._goal_accuracy",
    "turneval.simulation",
]


@pytest.mark.parametrize("name", MODULES)
def test_all_is_sorted_complete_and_documented(name: str) -> None:
    module = importlib.import_module(name)
    exported = module.__all__
    assert exported == sorted(exported), f"{name}.__all__ is not sorted"
    public = {
        attr
        for attr, value in vars(module).items()
        if not attr.startswith("_")
        and getattr(value, "__module__", None) == name
        and (isinstance(value, type) or callable(value))
    }
    assert public <= set(exported), (
        f"{name} defines public names missing from __all__: {public - set(exported)}"
    )
    for attr in exported:
        value = getattr(module, attr)
        if isinstance(value, type) or callable(value):
            assert value.__doc__, f"{name}.{attr} has no docstring"


def test_metrics_package_exports_every_metric_class() -> None:
    from turneval.metrics import BUILTIN_METRICS, Metric

    metrics = importlib.import_module("turneval.metrics")
    names = {m.model_fields["name"].default for m in BUILTIN_METRICS}
    assert names == {
        "agent_goal_accuracy_with_reference",
        "agent_goal_accuracy_without_reference",
        "agent_loop_detection",
        "bleu",
        "chunk_relevance",
        "coherence",
        "context_sufficiency",
        "conversation_completeness",
        "correctness",
        "exact_match",
        "fluency",
        "fulfillment",
        "groundedness",
        "guideline_adherence",
        "knowledge_retention",
        "non_llm_string_similarity",
        "overall_assessment",
        "pairwise_question_answering_quality",
        "pairwise_summarization_quality",
        "question_answering_correctness",
        "question_answering_helpfulness",
        "question_answering_quality",
        "question_answering_relevance",
        "relevance_to_query",
        "role_adherence",
        "rouge",
        "safety",
        "step_budget",
        "summarization_helpfulness",
        "summarization_quality",
        "summarization_verbosity",
        "tool_call_accuracy",
        "tool_call_efficiency",
        "tool_call_f1",
        "tool_call_valid",
        "tool_name_match",
        "tool_output_groundedness",
        "tool_parameter_key_match",
        "tool_parameter_kv_match",
        "tool_permission",
        "topic_adherence",
        "trajectory_any_order_match",
        "trajectory_exact_match",
        "trajectory_in_order_match",
        "trajectory_judge",
        "trajectory_precision",
        "trajectory_recall",
        "turn_relevancy",
        "user_frustration",
    }
    for attr in metrics.__all__:
        value = getattr(metrics, attr)
        if isinstance(value, type) and issubclass(value, Metric) and "name" in value.model_fields:
            assert value.__name__ in metrics.__all__


def test_ragas_import_paths() -> None:
    from turneval.dataset_schema import EvaluationDataset, MultiTurnSample, SingleTurnSample
    from turneval.messages import AIMessage, HumanMessage, ToolCall, ToolMessage
    from turneval.metrics import ToolCallAccuracy, ToolCallF1

    assert all(
        [
            EvaluationDataset,
            MultiTurnSample,
            SingleTurnSample,
            AIMessage,
            HumanMessage,
            ToolCall,
            ToolMessage,
            ToolCallAccuracy,
            ToolCallF1,
        ]
    )

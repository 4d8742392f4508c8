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
    "turneval.agent_driver",
    "turneval.agents",
    "turneval.testing",
    "turneval.judge",
    "turneval.judge.core",
    "turneval.judge.cache",
    "turneval.judge.usage",
    "turneval.llms",
    "turneval.runner",
    "turneval.compare",
    "turneval.stats",
    "turneval.report",
    "turneval.stream",
    "turneval.aggregate",
    "turneval.results",
    "turneval.results_codec",
    "turneval.provenance",
    "turneval.calibration",
    "turneval.calibration.alignment",
    "turneval.calibration.labels",
    "turneval.calibration.pairing",
    "turneval.calibration.report",
    "turneval.calibration.scales",
    "turneval.calibration.statistics",
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
    "turneval.sequential",
    "turneval.watch",
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
        and attr.isidentifier()  # pydantic files ``Metric[MultiTurnSample]`` in the module too
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


def test_metrics_package_exports_every_registered_metric_class() -> None:
    from turneval.metrics import BUILTIN_METRICS, Metric, builtin_metrics

    metrics = importlib.import_module("turneval.metrics")
    registry = builtin_metrics()
    assert len(registry) >= 50  # 49 buildable by name + trajectory_single_tool_use
    for name, cls in registry.items():
        assert cls.model_fields["name"].default == name
        assert cls.__name__ in metrics.__all__, f"{cls.__name__} ({name}) is not exported"
        assert getattr(metrics, cls.__name__) is cls
        assert cls.__doc__, f"{cls.__name__} has no docstring"
    assert set(BUILTIN_METRICS) == {cls for cls in registry.values() if cls.buildable_by_name()}
    assert set(registry) - {cls.model_fields["name"].default for cls in BUILTIN_METRICS} == {
        "trajectory_single_tool_use",  # needs an option (its tool)
        "state_assertions",  # needs its predicates
    }
    # every concrete metric class the package exports is registered (none is missed)
    for attr in metrics.__all__:
        value = getattr(metrics, attr)
        if isinstance(value, type) and issubclass(value, Metric):
            default = value.model_fields["name"].default
            if isinstance(default, str) and not value.__abstractmethods__:
                assert registry[default] is value


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

from abc import abstractmethod

from turneval.metrics import (
    ExactMatch,
    Explained,
    Metric,
    MultiTurnMetric,
    Outcome,
    builtin_metrics,
    registered_metrics,
)
from turneval.samples import MultiTurnSample


class _TurnCount(MultiTurnMetric):
    """Number of messages."""

    name: str = "test_registry_turn_count"

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        return Explained(float(len(sample.user_input)))


class _LoudExactMatch(ExactMatch):
    """Inherits the built-in's name: must not take its registry slot."""


class _Abstract(MultiTurnMetric):
    """Still abstract: not registered."""

    name: str = "test_registry_abstract"

    @abstractmethod
    def extra(self) -> None: ...


class _Unnamed(MultiTurnMetric):
    """No default name: not registered."""

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        return Explained(0.0)


def test_a_class_registers_itself_when_defined() -> None:
    registry = registered_metrics()
    assert registry["test_registry_turn_count"] is _TurnCount
    assert registry["exact_match"] is ExactMatch  # first claim keeps the name
    assert "test_registry_abstract" not in registry
    assert _Unnamed not in registry.values()
    assert list(registry) == sorted(registry)


def test_builtin_metrics_are_turnevals_own() -> None:
    builtins = builtin_metrics()
    assert "test_registry_turn_count" not in builtins
    assert builtins["exact_match"] is ExactMatch
    assert all(cls.__module__.startswith("turneval.") for cls in builtins.values())


def test_buildable_by_name_means_no_required_field() -> None:
    assert _TurnCount.buildable_by_name()
    assert not builtin_metrics()["trajectory_single_tool_use"].buildable_by_name()
    assert not _Unnamed.buildable_by_name()
    assert issubclass(_TurnCount, Metric)

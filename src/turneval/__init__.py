"""turneval: evaluate multi-turn LLM conversations and tool-using agents.

Names are imported lazily (a module-level ``__getattr__``): ``import turneval`` loads no LLM
framework; LangChain is imported when a judge or an agent is first used.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from turneval._moved import install as _install_moved

_install_moved()  # the old paths of modules that moved still import, with a warning

if TYPE_CHECKING:
    from turneval.agents import EvalTask
    from turneval.aggregate import MetricSummary
    from turneval.dataset import EvaluationDataset
    from turneval.errors import (
        ConfigError,
        EvaluationAbortedError,
        InvalidSampleError,
        JudgeCallError,
        JudgeOutputError,
        TurnevalError,
    )
    from turneval.messages import (
        AIMessage,
        Handoff,
        HumanMessage,
        SystemMessage,
        ToolCall,
        ToolMessage,
    )
    from turneval.ratelimit import RateLimit
    from turneval.results import (
        EvaluationResult,
        MetricFailure,
        MetricResult,
        Prices,
        SampleResult,
    )
    from turneval.runner import aevaluate, evaluate
    from turneval.samples import AgentSpec, MultiTurnSample, SingleTurnSample

# Public name -> the module that defines it. Add a line here to export a new name.
_LAZY: dict[str, str] = {
    "AIMessage": "turneval.messages",
    "AgentSpec": "turneval.samples",
    "ConfigError": "turneval.errors",
    "EvalTask": "turneval.agents",
    "EvaluationAbortedError": "turneval.errors",
    "EvaluationDataset": "turneval.dataset",
    "EvaluationResult": "turneval.results",
    "Handoff": "turneval.messages",
    "HumanMessage": "turneval.messages",
    "InvalidSampleError": "turneval.errors",
    "JudgeCallError": "turneval.errors",
    "JudgeOutputError": "turneval.errors",
    "MetricFailure": "turneval.results",
    "MetricResult": "turneval.results",
    "MetricSummary": "turneval.aggregate",
    "MultiTurnSample": "turneval.samples",
    "Prices": "turneval.results",
    "RateLimit": "turneval.ratelimit",
    "SampleResult": "turneval.results",
    "SingleTurnSample": "turneval.samples",
    "SystemMessage": "turneval.messages",
    "ToolCall": "turneval.messages",
    "ToolMessage": "turneval.messages",
    "TurnevalError": "turneval.errors",
    "aevaluate": "turneval.runner",
    "evaluate": "turneval.runner",
}

__all__ = [
    "AIMessage",
    "AgentSpec",
    "ConfigError",
    "EvalTask",
    "EvaluationAbortedError",
    "EvaluationDataset",
    "EvaluationResult",
    "Handoff",
    "HumanMessage",
    "InvalidSampleError",
    "JudgeCallError",
    "JudgeOutputError",
    "MetricFailure",
    "MetricResult",
    "MetricSummary",
    "MultiTurnSample",
    "Prices",
    "RateLimit",
    "SampleResult",
    "SingleTurnSample",
    "SystemMessage",
    "ToolCall",
    "ToolMessage",
    "TurnevalError",
    "__version__",
    "aevaluate",
    "evaluate",
]

__version__: str
"""The version of turneval (``turneval._version.VERSION``, which pyproject.toml reads)."""


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use and cache the name here.

    ``__version__`` is turneval's version (``turneval._version.VERSION``, which pyproject.toml
    reads).
    """
    if name == "__version__":
        from turneval._version import VERSION

        globals()[name] = VERSION
        return VERSION
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'turneval' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names, lazy ones included."""
    return sorted({*globals(), *_LAZY, "__version__"})

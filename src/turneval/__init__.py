"""turneval: evaluate multi-turn LLM conversations and tool-using agents."""

from turneval.aggregate import MetricSummary
from turneval.dataset import EvaluationDataset
from turneval.errors import (
    ConfigError,
    InvalidSampleError,
    JudgeCallError,
    JudgeOutputError,
    TurnevalError,
)
from turneval.messages import AIMessage, HumanMessage, SystemMessage, ToolCall, ToolMessage
from turneval.results import MetricResult
from turneval.runner import EvaluationResult, MetricFailure, SampleResult, aevaluate, evaluate
from turneval.samples import MultiTurnSample, SingleTurnSample

__all__ = [
    "AIMessage",
    "ConfigError",
    "EvaluationDataset",
    "EvaluationResult",
    "HumanMessage",
    "InvalidSampleError",
    "JudgeCallError",
    "JudgeOutputError",
    "MetricFailure",
    "MetricResult",
    "MetricSummary",
    "MultiTurnSample",
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

__version__ = "0.1.0"

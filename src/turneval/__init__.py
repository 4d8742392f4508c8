"""turneval: evaluate multi-turn LLM conversations and tool-using agents."""

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
from turneval.messages import AIMessage, HumanMessage, SystemMessage, ToolCall, ToolMessage
from turneval.results import EvaluationResult, MetricFailure, MetricResult, Prices, SampleResult
from turneval.runner import aevaluate, evaluate
from turneval.samples import MultiTurnSample, SingleTurnSample

__all__ = [
    "AIMessage",
    "ConfigError",
    "EvalTask",
    "EvaluationAbortedError",
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
    "Prices",
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

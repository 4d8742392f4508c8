"""The judge layer: LLM verdicts with structured output, retries, a shared limit and a cache."""

from turneval.judge.cache import SQLiteCache
from turneval.judge.core import (
    Judge,
    JudgeReply,
    JudgeRun,
    LangchainLLMWrapper,
    current_run,
    judge_run,
    resolve_llm,
)
from turneval.judge.schema import (
    StrictVerdict,
    enum_field,
    list_field,
    rubric_score_model,
    strict_schema_problems,
)
from turneval.judge.template import JudgeExample, JudgeRequest, escape, tagged
from turneval.judge.usage import Usage

__all__ = [
    "Judge",
    "JudgeExample",
    "JudgeReply",
    "JudgeRequest",
    "JudgeRun",
    "LangchainLLMWrapper",
    "SQLiteCache",
    "StrictVerdict",
    "Usage",
    "current_run",
    "enum_field",
    "escape",
    "judge_run",
    "list_field",
    "resolve_llm",
    "rubric_score_model",
    "strict_schema_problems",
    "tagged",
]

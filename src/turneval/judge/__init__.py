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
from turneval.judge.usage import Usage

__all__ = [
    "Judge",
    "JudgeReply",
    "JudgeRun",
    "LangchainLLMWrapper",
    "SQLiteCache",
    "Usage",
    "current_run",
    "judge_run",
    "resolve_llm",
]

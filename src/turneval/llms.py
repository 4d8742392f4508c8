"""ragas-compatible import path for the judge's model wrapper and cache."""

from turneval.judge import LangchainLLMWrapper, SQLiteCache, Usage

__all__ = ["LangchainLLMWrapper", "SQLiteCache", "Usage"]

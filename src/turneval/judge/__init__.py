"""The judge layer: LLM verdicts with structured output, retries, a shared limit and a cache.

The LangChain-backed names are imported on first use, so ``Usage`` and ``SQLiteCache`` do not
load LangChain.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from turneval.judge._cache import CacheWarning, SQLiteCache
from turneval.judge._config import JudgeConfig
from turneval.judge._schema import (
    StrictVerdict,
    enum_field,
    list_field,
    per_item_problems,
    per_item_schema,
    rubric_score_model,
    strict_schema_problems,
)
from turneval.judge._template import (
    SYSTEM_PROMPT,
    JudgeExample,
    JudgeRequest,
    RequestContext,
    TranscriptView,
    conversation_lines,
    conversation_text,
    escape,
    numbered_text,
    render_conversation,
    showing,
    tagged,
)
from turneval.usage import Usage

if TYPE_CHECKING:
    from turneval.judge._core import (
        Judge,
        JudgeReply,
        JudgeRun,
        LangchainLLMWrapper,
        current_run,
        judge_run,
        resolve_llm,
    )

# Public name -> the module that defines it, imported on first use.
_LAZY: dict[str, str] = {
    "Judge": "turneval.judge._core",
    "JudgeReply": "turneval.judge._core",
    "JudgeRun": "turneval.judge._core",
    "LangchainLLMWrapper": "turneval.judge._core",
    "current_run": "turneval.judge._core",
    "judge_run": "turneval.judge._core",
    "resolve_llm": "turneval.judge._core",
}

__all__ = [
    "CacheWarning",
    "Judge",
    "JudgeConfig",
    "JudgeExample",
    "JudgeReply",
    "JudgeRequest",
    "JudgeRun",
    "LangchainLLMWrapper",
    "RequestContext",
    "SQLiteCache",
    "SYSTEM_PROMPT",
    "StrictVerdict",
    "TranscriptView",
    "Usage",
    "conversation_lines",
    "conversation_text",
    "current_run",
    "enum_field",
    "escape",
    "judge_run",
    "list_field",
    "numbered_text",
    "per_item_problems",
    "per_item_schema",
    "render_conversation",
    "resolve_llm",
    "rubric_score_model",
    "showing",
    "strict_schema_problems",
    "tagged",
]


def __getattr__(name: str) -> Any:
    """Import a LangChain-backed name's module on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'turneval.judge' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value

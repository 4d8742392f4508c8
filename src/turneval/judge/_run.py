"""What judges share during a run (the default model, limiter, cache, usage), and the model.

:class:`JudgeRun` is made current by :func:`judge_run` (``evaluate`` does); :func:`resolve_llm`
turns what a user passes as ``llm`` into the chat model a judge asks.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from turneval.errors import ConfigError
from turneval.judge._cache import SQLiteCache
from turneval.ratelimit import RateLimiter
from turneval.usage import Usage

if TYPE_CHECKING:  # LangChain is imported when a judge is used, not with turneval
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import BaseMessage

    from turneval.judge._core import Judge

__all__ = [
    "DEFERRED_REQUESTS",
    "JudgeRun",
    "LangchainLLMWrapper",
    "current_run",
    "judge_run",
    "resolve_llm",
]


class LangchainLLMWrapper:
    """ragas-compatible wrapper: ``LangchainLLMWrapper(ChatOpenAI(...))``.

    turneval metrics take the LangChain chat model itself too; the wrapper only carries it.
    """

    def __init__(self, langchain_llm: BaseChatModel) -> None:
        """Wrap ``langchain_llm``."""
        from langchain_core.language_models import BaseChatModel

        if not isinstance(langchain_llm, BaseChatModel):
            raise ConfigError(
                f"LangchainLLMWrapper needs a LangChain BaseChatModel, got "
                f"{type(langchain_llm).__name__}"
            )
        self.langchain_llm = langchain_llm

    def __repr__(self) -> str:
        """Show the wrapped model."""
        return f"LangchainLLMWrapper({self.langchain_llm!r})"


def resolve_llm(llm: Any) -> BaseChatModel:
    """The chat model behind ``llm`` (a BaseChatModel or a LangchainLLMWrapper)."""
    from langchain_core.language_models import BaseChatModel

    if isinstance(llm, LangchainLLMWrapper):
        return llm.langchain_llm
    if isinstance(llm, BaseChatModel):
        return llm
    raise ConfigError(
        "llm must be a LangChain chat model (e.g. ChatOpenAI(model=...)) or a "
        f"LangchainLLMWrapper, got {type(llm).__name__}"
    )


@dataclass
class JudgeRun:
    """What judges share during one run: the default model, limiter, cache and usage.

    With a ``rate_limiter``, requests wait for it (quota and adaptive window) instead of the
    fixed ``max_concurrency`` limiter.
    """

    llm: Any = None
    max_concurrency: int = 8
    cache: SQLiteCache | None = None
    usage: Usage = field(default_factory=Usage)
    _limiter: anyio.CapacityLimiter | None = None
    rate_limiter: RateLimiter | None = None
    shared: dict[str, Any] = field(default_factory=dict)
    """Answers shared by the run's metrics while it lasts (a conversation's running summary,
    asked once however many metrics and windows read it), by cache key."""

    @property
    def limiter(self) -> anyio.CapacityLimiter:
        """The limiter all judge requests of the run wait for (created in the run's loop)."""
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.max_concurrency)
        return self._limiter


DEFERRED_REQUESTS: contextvars.ContextVar[
    Callable[[Judge, str, list[BaseMessage], Any], None] | None
] = contextvars.ContextVar("turneval_batch_defer", default=None)
"""Set by the batch engine while it looks for requests no metric stated up front: a request
the cache does not answer is handed to it (with its cache key and messages) instead of sent."""

_RUN: contextvars.ContextVar[JudgeRun | None] = contextvars.ContextVar(
    "turneval_judge_run", default=None
)


def current_run() -> JudgeRun | None:
    """The judge run in effect, if any."""
    return _RUN.get()


@contextmanager
def judge_run(run: JudgeRun) -> Iterator[JudgeRun]:
    """Make ``run`` the shared judge context for the code inside (``evaluate`` does this)."""
    token = _RUN.set(run)
    try:
        yield run
    finally:
        _RUN.reset(token)

"""Exceptions raised by turneval.

The hierarchy::

    TurnevalError
    ├── ConfigError (also ValueError)          a metric or run was configured wrongly
    ├── InvalidSampleError (also ValueError)   a sample lacks or misuses a field
    ├── JudgeError                             an LLM judge could not give a verdict
    │   ├── JudgeCallError                     the call failed after its retries
    │   ├── JudgeOutputError                   the output could not be parsed/validated
    │   └── ContextBudgetError                 a request cannot fit the judge's context
    ├── AgentRunError                          an agent under evaluation failed
    ├── EvaluationAbortedError                 fail_on_error stopped a run (partial result kept)
    └── SyncInAsyncContextError (also RuntimeError)
                                               a sync wrapper was called inside an event loop

Programmer errors (bad configuration) raise before a run starts. Inside a run, a failure is
recorded on its row with its type and message, and the run goes on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a leaf module: the result type is only named, never imported at run time
    from turneval.results import EvaluationResult

__all__ = [
    "AgentRunError",
    "ConfigError",
    "ContextBudgetError",
    "EvaluationAbortedError",
    "InvalidSampleError",
    "JudgeCallError",
    "JudgeError",
    "JudgeOutputError",
    "SyncInAsyncContextError",
    "TurnevalError",
]


class TurnevalError(Exception):
    """Root of every exception turneval raises on purpose."""


class ConfigError(TurnevalError, ValueError):
    """A metric, judge or run was configured with an invalid value."""


class InvalidSampleError(TurnevalError, ValueError):
    """A sample cannot be scored: a field is missing, malformed or of the wrong kind.

    Attributes:
        sample_id: Index or identifier of the offending sample or row, when known.
        field: Name of the offending field, when known.
    """

    def __init__(
        self,
        message: str,
        *,
        sample_id: int | str | None = None,
        field: str | None = None,
    ) -> None:
        """Build the error; ``message`` should already say what was expected."""
        super().__init__(message)
        self.sample_id = sample_id
        self.field = field


class JudgeError(TurnevalError):
    """An LLM judge could not produce a verdict."""


class JudgeCallError(JudgeError):
    """The judge model call failed, after any retries of transient errors."""


class JudgeOutputError(JudgeError):
    """The judge answered, but its output could not be parsed or validated.

    Attributes:
        raw_output: The model's last raw output, kept for inspection.
    """

    def __init__(self, message: str, *, raw_output: str | None = None) -> None:
        """Build the error, keeping the model's raw output."""
        super().__init__(message)
        self.raw_output = raw_output


class ContextBudgetError(JudgeError):
    """A judge request cannot fit the judge model's context window: it is never sent.

    Raised before any request of the row is paid when no context policy can make the row fit
    (e.g. one judged turn alone is longer than the window), and by the judge itself as the
    last guard before sending.

    Attributes:
        context_tokens: The judge's context window, in tokens.
        needed_tokens: Tokens the smallest request would need (prompt and answer).
    """

    def __init__(self, message: str, *, context_tokens: int, needed_tokens: int) -> None:
        """Build the error; ``message`` names the limit and what did not fit."""
        super().__init__(message)
        self.context_tokens = context_tokens
        self.needed_tokens = needed_tokens


class AgentRunError(TurnevalError):
    """The agent under evaluation raised, timed out or returned something unusable."""


class EvaluationAbortedError(TurnevalError):
    """``fail_on_error`` stopped a run early.

    Attributes:
        result: The rows scored before the run stopped.
    """

    def __init__(self, message: str, *, result: EvaluationResult | None = None) -> None:
        """Build the error, keeping the partial result."""
        super().__init__(message)
        self.result = result


class SyncInAsyncContextError(TurnevalError, RuntimeError):
    """A synchronous wrapper was called from inside a running event loop; await the async form."""

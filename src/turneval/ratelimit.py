"""Provider quotas and adaptive concurrency for judge requests.

A run is bound by the model provider's quota (requests and tokens per minute), not by CPU.
:class:`RateLimit` states the quota; a :class:`RateLimiter` enforces it for one run:

* a :class:`Budget` paces request starts to the per-minute request and token quotas
  (:class:`LocalBudget` in-process; a distributed run passes one shared by every worker). The
  token cost of a request is estimated from its prompt before it is sent and corrected with the
  tokens the provider reports after;
* an AIMD window bounds the requests in flight: it grows by about one request per window of
  successes (additive increase) and halves on a 429 or an overloaded answer (multiplicative
  decrease, at most once per round of requests), never above ``max_in_flight``, never below 1.

``Retry-After`` is still honoured by the judge's own retry (outside the window).
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import anyio
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from turneval._provider_errors import classify
from turneval.errors import ConfigError

__all__ = [
    "Budget",
    "CHARS_PER_TOKEN",
    "LocalBudget",
    "OVERLOAD_STATUSES",
    "RateLimit",
    "RateLimiter",
    "Slot",
    "estimate_tokens",
]

OVERLOAD_STATUSES = frozenset({429, 503, 529})
"""HTTP statuses read as "the provider pushes back": the window shrinks on them."""

_RATE_SPAN = 10.0  # seconds over which the recent rate is measured


class RateLimit(BaseModel):
    """A provider quota and the in-flight cap of one run.

    Args:
        requests_per_minute: Requests the provider allows a minute (None: no request quota).
        tokens_per_minute: Tokens (prompt and completion) the provider allows a minute
            (None: no token quota).
        max_in_flight: Most judge requests in flight at once.
        adaptive: Adapt the in-flight window to the provider's answers (AIMD); False keeps it
            at ``max_in_flight``.

    Raises:
        ConfigError: a quota or ``max_in_flight`` that is not a positive number.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    requests_per_minute: float | None = None
    tokens_per_minute: float | None = None
    max_in_flight: int = 8
    adaptive: bool = True

    def __init__(
        self,
        requests_per_minute: float | None = None,
        tokens_per_minute: float | None = None,
        max_in_flight: int = 8,
        adaptive: bool = True,
    ) -> None:
        """Check the quota (positional arguments allowed, in the order above)."""
        try:
            super().__init__(
                requests_per_minute=requests_per_minute,
                tokens_per_minute=tokens_per_minute,
                max_in_flight=max_in_flight,
                adaptive=adaptive,
            )
        except ValidationError as error:
            detail = "; ".join(
                f"{'.'.join(str(p) for p in item['loc'])}: {item['msg']}"
                for item in error.errors(include_url=False)
            )
            raise ConfigError(f"invalid RateLimit: {detail}") from None

    @field_validator("requests_per_minute", "tokens_per_minute")
    @classmethod
    def _positive_quota(cls, value: float | None) -> float | None:
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise ValueError(f"must be a positive number per minute (or None), got {value}")
        return value

    @field_validator("max_in_flight")
    @classmethod
    def _positive_cap(cls, value: int) -> int:
        if value < 1:
            raise ValueError(f"must be at least 1, got {value}")
        return value

    def __str__(self) -> str:
        """The quota as the CLI prints it."""
        parts = [
            f"{self.requests_per_minute:g} requests/min" if self.requests_per_minute else "",
            f"{self.tokens_per_minute:g} tokens/min" if self.tokens_per_minute else "",
            f"at most {self.max_in_flight} in flight" + (" (adaptive)" if self.adaptive else ""),
        ]
        return ", ".join(part for part in parts if part)


@runtime_checkable
class Budget(Protocol):
    """Per-minute request and token budget shared by the requests of a run (or of many)."""

    async def acquire(self, tokens: int) -> None:
        """Wait until one request estimated at ``tokens`` fits the budget, then take it."""
        ...  # pragma: no cover - protocol

    async def settle(self, estimated: int, actual: int) -> None:
        """Correct the token budget: a request taken at ``estimated`` tokens used ``actual``."""
        ...  # pragma: no cover - protocol


class LocalBudget:
    """The in-process :class:`Budget`: request starts paced evenly to the quota.

    With ``R`` requests a minute, starts are at least ``60/R`` seconds apart; with ``T`` tokens
    a minute, a request of ``n`` tokens holds the token budget for ``60·n/T`` seconds after it
    starts (a token bucket without burst). So over any span of ``s`` seconds at most
    ``R·s/60 + 1`` requests start and at most ``T·s/60`` tokens plus one request's are taken:
    the quota is never exceeded in any window, short ones included (providers often enforce a
    per-minute quota over seconds). :meth:`settle` moves the token budget by the difference
    between the estimate and the reported usage.

    Starts are paced ``headroom`` (1%) slower than the quota: a request reaches the provider a
    little after it starts, by a delay that varies, and without headroom that jitter alone puts
    one request too many into some windows as the provider counts them.

    The budget holds no event-loop object: one budget may serve several runs one after another
    (chunks of a file) and requests of several threads' loops.

    Args:
        rate_limit: The quota.
        headroom: Share by which starts are paced slower than the quota (0 paces exactly).
        clock: Monotonic seconds (tests pass a fake clock).
        sleep: Async sleep (tests pass one that advances the fake clock).
    """

    def __init__(
        self,
        rate_limit: RateLimit,
        *,
        headroom: float = 0.01,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] | None = None,
    ) -> None:
        """Start with the whole budget available."""
        self.rate_limit = rate_limit
        self._clock = clock
        self._sleep = sleep or anyio.sleep
        rpm, tpm = rate_limit.requests_per_minute, rate_limit.tokens_per_minute
        if not 0.0 <= headroom < 1.0:
            raise ConfigError(f"LocalBudget: headroom must be in [0, 1), got {headroom!r}")
        slower = 1.0 + headroom
        self._request_gap = 60.0 / rpm * slower if rpm else 0.0
        self._token_seconds = 60.0 / tpm * slower if tpm else 0.0
        self._next_request = -math.inf
        self._next_token = -math.inf

    @property
    def request_gap(self) -> float:
        """Seconds between two request starts (0 without a request quota)."""
        return self._request_gap

    def reserve(self, tokens: int, *, lead: float = 0.0) -> float:
        """Take the next start that fits both quotas; returns the seconds until it (>= 0).

        The synchronous half of :meth:`acquire`, for a budget held by one process (or Ray
        actor) that many workers ask: it never waits, the caller sleeps. ``lead``: the
        earliest start is that many seconds from now (the time the answer takes to reach a
        remote caller, so that its start is still ahead of it when it arrives).
        """
        now = self._clock()
        start = max(now + lead, self._next_request, self._next_token)
        self._next_request = start + self._request_gap
        self._next_token = start + max(tokens, 0) * self._token_seconds
        return start - now

    def correct(self, estimated: int, actual: int) -> None:
        """Give back (or take more of) the token budget by ``actual - estimated`` tokens."""
        self._next_token += (actual - estimated) * self._token_seconds

    async def acquire(self, tokens: int) -> None:
        """Reserve the next start that fits both quotas and sleep until then."""
        wait = self.reserve(tokens)
        if wait > 0:
            await self._sleep(wait)  # type: ignore[misc]

    async def settle(self, estimated: int, actual: int) -> None:
        """Give back (or take more of) the token budget by ``actual - estimated`` tokens."""
        self.correct(estimated, actual)


@dataclass
class Slot:
    """One request's hold on the limiter; set ``tokens`` to the provider's reported usage."""

    estimated: int
    epoch: int
    tokens: int | None = None


class RateLimiter:
    """What a run's judge requests wait for: an AIMD in-flight window and a :class:`Budget`.

    Use :meth:`slot` around each request. The window starts at ``max_in_flight``; with
    ``adaptive``, a success adds ``1/window`` (one request per window of successes) and a 429,
    503 or 529 answer halves it, once per round: answers to requests sent before the last
    decrease do not shrink it again. Waiting requests are served first come, first served.

    The limiter holds no event-loop object between requests: one limiter may serve several
    runs one after another (the CLI uses one for all chunks of a file).

    Args:
        rate_limit: The quota and the in-flight cap.
        budget: The per-minute budget (default: a :class:`LocalBudget` when the quota has a
            request or token limit; a distributed run passes one shared by its workers).
    """

    def __init__(self, rate_limit: RateLimit, *, budget: Budget | None = None) -> None:
        """Prepare the window at ``max_in_flight``."""
        if not isinstance(rate_limit, RateLimit):
            raise ConfigError(f"rate_limit must be a RateLimit, got {type(rate_limit).__name__}")
        quota = rate_limit.requests_per_minute or rate_limit.tokens_per_minute
        self.rate_limit = rate_limit
        self.budget: Budget | None = (
            budget if budget is not None else (LocalBudget(rate_limit) if quota else None)
        )
        self._window = float(rate_limit.max_in_flight)
        self._held = 0  # slots held (waiting for the budget or in flight)
        self._in_flight = 0  # requests sent and not yet answered
        self._waiters: deque[anyio.Event] = deque()
        self._epoch = 0
        self._starts: deque[float] = deque()
        self.started = 0
        """Requests sent so far."""
        self.throttled = 0
        """Answers read as overload (429, 503, 529) so far."""
        self.lowest_window = rate_limit.max_in_flight
        """The smallest window so far."""

    @classmethod
    def coerce(cls, rate_limit: RateLimit | RateLimiter | None) -> RateLimiter | None:
        """A limiter for ``rate_limit`` (a given limiter is shared as is)."""
        if rate_limit is None or isinstance(rate_limit, RateLimiter):
            return rate_limit
        if not isinstance(rate_limit, RateLimit):
            raise ConfigError(
                "rate_limit must be a RateLimit(requests_per_minute=..., tokens_per_minute=..., "
                f"max_in_flight=...) or a RateLimiter, got {type(rate_limit).__name__}"
            )
        return cls(rate_limit)

    @property
    def window(self) -> int:
        """Requests allowed in flight now."""
        return max(1, min(self.rate_limit.max_in_flight, math.floor(self._window)))

    @property
    def in_flight(self) -> int:
        """Requests sent and not yet answered."""
        return self._in_flight

    @property
    def rate(self) -> float:
        """Requests started a minute, measured over the last 10 seconds."""
        self._forget(time.monotonic())
        return len(self._starts) * 60.0 / _RATE_SPAN

    def describe(self) -> str:
        """In flight, window and recent rate, for a progress line."""
        return f"in flight {self.in_flight}/{self.window}, {self.rate:.0f} req/min"

    def _forget(self, now: float) -> None:
        while self._starts and self._starts[0] < now - _RATE_SPAN:
            self._starts.popleft()

    def _wake(self) -> None:
        while self._waiters and self._held < self.window:
            self._held += 1  # the slot passes to the first waiter
            self._waiters.popleft().set()

    async def _take_slot(self) -> None:
        if self._held < self.window and not self._waiters:
            self._held += 1
            return
        granted = anyio.Event()
        self._waiters.append(granted)
        try:
            await granted.wait()
        except BaseException:
            if granted.is_set():  # granted just as we were cancelled: pass it on
                self._held -= 1
                self._wake()
            else:
                self._waiters.remove(granted)
            raise

    @asynccontextmanager
    async def slot(self, tokens: int) -> AsyncIterator[Slot]:
        """Hold a place in the window and the budget for one request estimated at ``tokens``.

        Inside, send the request (and set ``slot.tokens`` to the reported usage, if any). On
        leaving, the window adapts to the outcome and the budget is settled.
        """
        await self._take_slot()
        try:
            if self.budget is not None:
                await self.budget.acquire(tokens)
        except BaseException:
            self._held -= 1
            self._wake()
            raise
        ticket = Slot(tokens, self._epoch)
        now = time.monotonic()
        self._forget(now)
        self._starts.append(now)
        self.started += 1
        self._in_flight += 1
        error: BaseException | None = None
        try:
            yield ticket
        except BaseException as exc:
            error = exc
            raise
        finally:
            self._in_flight -= 1
            self._held -= 1
            self._adapt(ticket, error)
            self._wake()
            if self.budget is not None and ticket.tokens and ticket.tokens != tokens:
                with anyio.CancelScope(shield=True):
                    await self.budget.settle(tokens, ticket.tokens)

    def _adapt(self, ticket: Slot, error: BaseException | None) -> None:
        if error is not None and _is_overload(error):
            self.throttled += 1
            if self.rate_limit.adaptive and ticket.epoch == self._epoch:
                self._window = max(1.0, self._window / 2)
                self._epoch += 1
                self.lowest_window = min(self.lowest_window, self.window)
        elif error is None and self.rate_limit.adaptive:
            cap = float(self.rate_limit.max_in_flight)
            self._window = min(cap, self._window + 1.0 / self.window)


def _is_overload(error: BaseException) -> bool:
    return classify(error).status in OVERLOAD_STATUSES


CHARS_PER_TOKEN = 4.0
"""Prompt characters per token assumed by every token estimate (the dry run's and the limiter's:
English text with common tokenizers)."""


def estimate_tokens(texts: Iterable[str]) -> int:
    """Tokens of a prompt made of ``texts``, as the dry-run estimate counts them."""
    return round(sum(len(text) for text in texts) / CHARS_PER_TOKEN)

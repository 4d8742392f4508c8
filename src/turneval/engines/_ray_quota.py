"""One provider quota for a whole Ray cluster: a Ray actor holds it, every worker asks it.

The quota actor holds the :class:`~turneval.ratelimit.LocalBudget`; each worker's
:class:`~turneval.ratelimit.RateLimiter` takes its request starts from it through
:class:`ActorBudget` (the actor computes the wait, the worker sleeps it), so the sum over
workers stays within the quota while each worker keeps its own adaptive in-flight window.
"""

from __future__ import annotations

import time
from typing import Any

import anyio

from turneval.ratelimit import LocalBudget, RateLimit

__all__ = ["ActorBudget", "Quota"]

_LATE_RETRIES = 4  # starts a worker may miss in a row before it sends anyway
_MIN_LATENESS = 0.005  # seconds late that never count as missing a start
_MIN_LEAD, _MAX_LEAD = 0.005, 1.0  # how far ahead a worker asks for its starts (seconds)

_CLUSTER_HEADROOM = 0.03
"""How much slower than the quota a cluster's starts are paced (one process: 1%). A request
leaves a worker up to half a gap after its start and crosses processes (or machines) to the
provider with a delay that varies more than within one process: measured on one 2-core
machine, 1% let 102 requests into a 10-second window of a 100-request quota; 3% none."""


class Quota:
    """The provider's quota, held once for the whole cluster (a Ray actor's state)."""

    def __init__(self, rate_limit: RateLimit) -> None:
        """Hold ``rate_limit`` with the cluster's headroom."""
        self.budget = LocalBudget(rate_limit, headroom=_CLUSTER_HEADROOM)

    def reserve(self, tokens: int, lead: float = 0.0) -> tuple[float, float]:
        """The start (wall clock) and the gap between starts; the start is ``lead`` s ahead."""
        return time.time() + self.budget.reserve(tokens, lead=lead), self.budget.request_gap

    def correct(self, estimated: int, actual: int) -> None:
        """Correct the budget with the provider's reported usage."""
        self.budget.correct(estimated, actual)


class ActorBudget:
    """A :class:`~turneval.ratelimit.Budget` held by a Ray actor that every worker asks.

    Args:
        handle: The quota actor (``reserve(tokens, lead) -> (wall-clock start, gap)`` and
            ``correct(estimated, actual)``).
    """

    def __init__(self, handle: Any) -> None:
        """Ask ``handle`` for request starts."""
        self.handle = handle
        self.lead = _MIN_LEAD
        self.missed = 0  # starts this worker woke up too late for
        self._round_trip = 0.0

    async def acquire(self, tokens: int) -> None:
        """Take the next start from the actor, then wait for it here.

        The actor answers with a wall-clock time, not a delay, so that the time its answer
        takes to arrive does not shift the start (the clocks of a cluster's nodes are assumed
        synchronised, as NTP keeps them), and the worker asks for starts far enough ahead
        (twice its recent round trip to the actor) that the answer arrives before the start. A
        worker that wakes up more than half a request gap past its start (its process was
        busy) takes a new start instead of sending late, so that late requests never bunch up
        with the ones on time (a window of the quota's length then holds at most its share,
        within the cluster budget's 3% headroom); the missed start is lost.
        """
        for _ in range(_LATE_RETRIES):
            asked = time.time()
            start_at, gap = await self.handle.reserve.remote(tokens, self.lead)
            now = time.time()
            # Ask for starts at least twice the recent round trip ahead, so that an answer
            # that travels slowly still arrives before its start.
            took = now - asked
            self._round_trip = (
                took if self._round_trip == 0 else 0.8 * self._round_trip + 0.2 * took
            )
            self.lead = min(max(2 * self._round_trip, _MIN_LEAD), _MAX_LEAD)
            if start_at > now:
                await anyio.sleep(start_at - now)
            if time.time() - start_at <= max(gap / 2, _MIN_LATENESS):
                return
            self.missed += 1

    async def settle(self, estimated: int, actual: int) -> None:
        """Correct the shared token budget with the provider's reported usage."""
        await self.handle.correct.remote(estimated, actual)

"""ragas' entry points (``multi_turn_ascore``, ``single_turn_ascore`` and their sync forms).

Mixed into a :class:`~turneval.metrics.base.Metric` for the samples it scores; re-exported by
:mod:`turneval.metrics.base`, whose class definition checks the mixins against the metric's
sample types (:data:`FAMILIES`).
"""

from __future__ import annotations

from typing import Any, Protocol

from typing_extensions import TypeVar

from turneval._sync import run_sync
from turneval.samples import MultiTurnSample, SingleTurnSample

__all__ = ["FAMILIES", "MultiTurnScoring", "SingleTurnScoring"]

_SampleContra = TypeVar("_SampleContra", contravariant=True)


class _Scores(Protocol[_SampleContra]):
    """What ragas' entry points need of the metric they are mixed into (its core)."""

    async def _value(self, sample: _SampleContra, timeout: float | None) -> float: ...


class _MultiTurnScorer(Protocol):
    async def multi_turn_ascore(
        self, sample: MultiTurnSample, callbacks: Any = ..., timeout: float | None = ...
    ) -> float: ...


class _SingleTurnScorer(Protocol):
    async def single_turn_ascore(
        self, sample: SingleTurnSample, callbacks: Any = ..., timeout: float | None = ...
    ) -> float: ...


class MultiTurnScoring:
    """ragas' multi-turn entry points, for a :class:`Metric` whose samples include conversations.

    Mix it into a ``Metric[MultiTurnSample]`` or ``Metric[Sample]`` (type checkers reject a
    call on any other metric; defining such a class raises ``TypeError``).
    """

    __slots__ = ()

    async def multi_turn_ascore(
        self: _Scores[MultiTurnSample],
        sample: MultiTurnSample,
        callbacks: Any = None,
        timeout: float | None = None,
    ) -> float:
        """Score a conversation; ragas' signature (``callbacks`` is accepted and unused).

        Args:
            sample: The conversation.
            callbacks: Accepted for ragas compatibility; unused.
            timeout: Seconds allowed for the score (``TimeoutError`` past it); None: no limit.

        Returns:
            The value alone (:meth:`Metric.ascore` gives the reason and details too).
        """
        return await self._value(sample, timeout)

    def multi_turn_score(
        self: _MultiTurnScorer,
        sample: MultiTurnSample,
        callbacks: Any = None,
        timeout: float | None = None,
    ) -> float:
        """Sync form of :meth:`multi_turn_ascore`."""
        return run_sync(self.multi_turn_ascore, sample, callbacks, timeout)


class SingleTurnScoring:
    """ragas' single-turn entry points, for a :class:`Metric` whose samples include pairs.

    Mix it into a ``Metric[SingleTurnSample]`` or ``Metric[Sample]`` (type checkers reject a
    call on any other metric; defining such a class raises ``TypeError``).
    """

    __slots__ = ()

    async def single_turn_ascore(
        self: _Scores[SingleTurnSample],
        sample: SingleTurnSample,
        callbacks: Any = None,
        timeout: float | None = None,
    ) -> float:
        """Score a single-turn sample; ragas' signature (``callbacks`` is accepted and unused).

        Args:
            sample: The prompt and response (and reference, contexts, ... as the metric needs).
            callbacks: Accepted for ragas compatibility; unused.
            timeout: Seconds allowed for the score (``TimeoutError`` past it); None: no limit.

        Returns:
            The value alone (:meth:`Metric.ascore` gives the reason and details too).
        """
        return await self._value(sample, timeout)

    def single_turn_score(
        self: _SingleTurnScorer,
        sample: SingleTurnSample,
        callbacks: Any = None,
        timeout: float | None = None,
    ) -> float:
        """Sync form of :meth:`single_turn_ascore`."""
        return run_sync(self.single_turn_ascore, sample, callbacks, timeout)


FAMILIES = (
    (MultiTurnScoring, MultiTurnSample, "multi_turn_ascore"),
    (SingleTurnScoring, SingleTurnSample, "single_turn_ascore"),
)

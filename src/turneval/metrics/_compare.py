"""Argument comparators: a string metric, any single-turn metric, or a plain callable."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from turneval.errors import ConfigError
from turneval.metrics._text import ExactMatch, StringMetric
from turneval.metrics.base import Metric, SingleTurnScoring
from turneval.samples import SingleTurnSample

__all__ = ["ArgComparator", "check_comparator", "comparator_names", "resolve_comparator"]

SyncCompare = Callable[[str, str], float]
AsyncCompare = Callable[[str, str], Awaitable[float]]


@dataclass(frozen=True, slots=True)
class ArgComparator:
    """A resolved comparator: exactly one of ``sync``/``async_`` is set.

    Hot loops call ``sync`` directly when it is set and await ``async_`` otherwise; both take
    ``(reference, prediction)`` strings. Scores of user comparators are checked to be floats in
    [0, 1]; ``trusted`` ones (our string metrics) are in range by construction. ``exact`` marks
    plain string equality, which hot loops may inline.
    """

    label: str
    sync: SyncCompare | None = None
    async_: AsyncCompare | None = None
    trusted: bool = False
    exact: bool = False

    def checked(self, value: Any, reference: str, prediction: str) -> float:
        """Return ``value`` as a float, or raise :class:`ConfigError` if it is not in [0, 1]."""
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = float("nan")
        if not 0.0 <= number <= 1.0:
            raise ConfigError(
                f"arg_comparison_metric {self.label} returned {value!r} for "
                f"reference={reference!r}, prediction={prediction!r}; expected a float in [0, 1]"
            )
        return number

    async def __call__(self, reference: str, prediction: str) -> float:
        """Score ``prediction`` against ``reference``."""
        if self.sync is not None:
            if self.trusted:
                return self.sync(reference, prediction)
            return self.checked(self.sync(reference, prediction), reference, prediction)
        assert self.async_ is not None
        return self.checked(await self.async_(reference, prediction), reference, prediction)


def _is_async_callable(function: Any) -> bool:
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(
        getattr(function, "__call__", None)  # noqa: B004 - callable objects with async __call__
    )


def comparator_names() -> dict[str, Any]:
    """Comparators by name, for ``arg_comparison_metric="levenshtein"`` and the CLI.

    ``exact`` (or ``exact_match``), every :class:`DistanceMeasure` value (``levenshtein``,
    ``jaro_winkler``, ...; a :class:`NonLLMStringSimilarity` with that measure), ``bleu`` and
    ``rouge``.
    """
    from turneval.metrics._text import (
        BleuScore,
        DistanceMeasure,
        ExactMatch,
        NonLLMStringSimilarity,
        RougeScore,
    )

    names: dict[str, Any] = {"exact": ExactMatch, "exact_match": ExactMatch}
    for measure in DistanceMeasure:
        names[measure.value] = partial(NonLLMStringSimilarity, distance_measure=measure)
    names.update(bleu=BleuScore, rouge=RougeScore)
    return names


def check_comparator(value: Any) -> Any:
    """Validate a user's ``arg_comparison_metric`` (pydantic field validator body).

    A name (see :func:`comparator_names`) becomes that comparator.
    """
    if isinstance(value, str):
        known = comparator_names()
        if value.lower() not in known:
            raise ValueError(
                f"unknown arg_comparison_metric {value!r}; known names: {', '.join(known)}"
            )
        return known[value.lower()]()
    if value is None or isinstance(value, SingleTurnScoring) or callable(value):
        return value
    raise ValueError(
        "arg_comparison_metric must be a single-turn metric (e.g. ExactMatch(), "
        "NonLLMStringSimilarity()) or a callable fn(reference, prediction) -> float, "
        f"got {type(value).__name__}"
    )


def resolve_comparator(value: Any) -> ArgComparator | None:
    """Turn a validated ``arg_comparison_metric`` into an :class:`ArgComparator`."""
    if value is None:
        return None
    if isinstance(value, StringMetric):
        exact = type(value) is ExactMatch
        return ArgComparator(type(value).__name__, sync=value.compare, trusted=True, exact=exact)
    if isinstance(value, SingleTurnScoring) and isinstance(value, Metric):
        metric = value  # a metric that scores single-turn samples (maybe others too)

        async def via_sample(reference: str, prediction: str) -> float:
            return await metric.single_turn_ascore(
                SingleTurnSample(response=prediction, reference=reference)
            )

        return ArgComparator(type(metric).__name__, async_=via_sample)
    label = getattr(value, "__qualname__", type(value).__name__)
    if _is_async_callable(value):
        return ArgComparator(label, async_=value)
    return ArgComparator(label, sync=_sync_or_raise(value, label))


def _sync_or_raise(function: Callable[..., Any], label: str) -> SyncCompare:
    def call(reference: str, prediction: str) -> float:
        result = function(reference, prediction)
        if inspect.isawaitable(result):
            close = getattr(result, "close", None)
            if close is not None:
                close()
            raise ConfigError(
                f"arg_comparison_metric {label} returned an awaitable from a plain function; "
                "declare it with 'async def' so it can be awaited"
            )
        return result  # type: ignore[no-any-return]

    return call

"""Two judges on the same labeled units: each one's agreement, and their paired difference.

The difference ``after - before`` of an agreement statistic (kappa, quadratic-weighted kappa,
accuracy) gets a percentile bootstrap 95% interval from resampling the *units* (the same
resample for both judges: the comparison is paired, so the units' own difficulty cancels).
Every resample's kappas are scikit-learn's formula, computed for all resamples at once
(:func:`~turneval.calibration._statistics.resampled_kappas`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from turneval.calibration._report import Interval
from turneval.calibration._statistics import resampled_kappas
from turneval.calibration._units import Statistic

__all__ = ["PairedDifference", "agreement_value", "paired_difference"]

_CHUNK = 1_000_000  # resampled units drawn at once: bounds the bootstrap's memory


def _values(statistic: Statistic, human: np.ndarray, judge: np.ndarray, classes: int) -> np.ndarray:
    """The statistic of every resample (rows of ``human`` and ``judge``); NaN if undefined."""
    if statistic == "accuracy":
        shares: np.ndarray = np.mean(human == judge, axis=1).astype(float)
        return shares
    weights = "quadratic" if statistic == "weighted kappa" else None
    return resampled_kappas(human, judge, classes, weights)


def agreement_value(
    statistic: Statistic, human: Sequence[int], judge: Sequence[int], classes: int
) -> float | None:
    """The statistic of judge against human over class positions (None where undefined)."""
    if not human:
        return None
    value = float(
        _values(statistic, np.array([human], dtype=np.int64), np.array([judge]), classes)[0]
    )
    return None if np.isnan(value) else value


@dataclass(frozen=True, slots=True)
class PairedDifference:
    """``after - before`` of one statistic on the same units, with its bootstrap interval.

    Attributes:
        statistic: The statistic (``kappa``, ``weighted kappa`` or ``accuracy``).
        before: Its value for the first judge.
        after: Its value for the second judge.
        difference: ``after - before`` (None when either is undefined).
        interval: Percentile bootstrap 95% interval of the difference (None: too few units).
        n: Units both judges gave a verdict on.
    """

    statistic: Statistic
    before: float | None
    after: float | None
    difference: float | None
    interval: Interval | None
    n: int

    @property
    def improved(self) -> bool:
        """True only when the difference is positive and its interval excludes 0."""
        return (
            self.difference is not None
            and self.difference > 0
            and self.interval is not None
            and self.interval[0] > 0
        )

    @property
    def worsened(self) -> bool:
        """True when the difference is negative and its interval excludes 0."""
        return (
            self.difference is not None
            and self.difference < 0
            and self.interval is not None
            and self.interval[1] < 0
        )


def paired_difference(
    statistic: Statistic,
    human: Sequence[int],
    before: Sequence[int],
    after: Sequence[int],
    classes: int,
    *,
    seed: int = 0,
    resamples: int = 1000,
) -> PairedDifference:
    """The paired difference ``after - before`` of ``statistic`` against ``human``.

    Args:
        statistic: ``"kappa"``, ``"weighted kappa"`` or ``"accuracy"``.
        human: Each unit's label, as its class position (0 .. classes - 1).
        before: The first judge's verdict on each unit (class positions).
        after: The second judge's verdict on the same units.
        classes: The number of classes.
        seed: Seed of the bootstrap.
        resamples: Bootstrap resamples (resamples where the difference is undefined, e.g. a
            single class drawn, are left out).
    """
    h = np.asarray(human, dtype=np.int64)
    b = np.asarray(before, dtype=np.int64)
    a = np.asarray(after, dtype=np.int64)
    first = agreement_value(statistic, list(h), list(b), classes)
    second = agreement_value(statistic, list(h), list(a), classes)
    difference = None if first is None or second is None else second - first
    interval: Interval | None = None
    if len(h) >= 2 and resamples >= 1:
        rng = np.random.default_rng(seed)
        chunk = max(1, _CHUNK // len(h))
        parts = []
        for start in range(0, resamples, chunk):
            picks = rng.integers(0, len(h), size=(min(chunk, resamples - start), len(h)))
            parts.append(
                _values(statistic, h[picks], a[picks], classes)
                - _values(statistic, h[picks], b[picks], classes)
            )
        values = np.concatenate(parts)
        values = values[np.isfinite(values)]
        if len(values):
            low, high = np.percentile(values, [2.5, 97.5])
            interval = (float(low), float(high))
    return PairedDifference(statistic, first, second, difference, interval, len(h))

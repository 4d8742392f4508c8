"""Pure statistics over plain numbers: intervals, a paired test, Holm's correction.

What the summariser and a comparison compute from a run's values, with no run in sight:
:func:`bootstrap_ci` (the summary's interval of a mean), :func:`binomial_interval` (a pass
rate's exact interval), :func:`paired_permutation_test` (``turneval compare``'s test) and
:func:`holm` (the correction over gated metrics). It sits low in the layers, beside
:mod:`turneval.aggregate`, which uses it: numpy is imported when a figure is computed, SciPy
only by :func:`binomial_interval` (``pip install 'turneval[stats]'``; without it the interval
is unknown).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

__all__ = ["binomial_interval", "bootstrap_ci", "holm", "paired_permutation_test"]

_DISTINCT_LIMIT = 20_000  # above this many distinct values, resample indices instead of counts


def bootstrap_ci(
    values: Sequence[float] | np.ndarray,
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float] | None:
    """Percentile bootstrap confidence interval of the mean; None with fewer than two values.

    Resampling n values with replacement is drawing how many times each *distinct* value is
    taken: a multinomial over the distinct values. Scores usually take few distinct values, so
    this costs O(resamples x distinct) instead of O(resamples x n) and handles millions of rows;
    with many distinct values it resamples indices in blocks. Seeded: the same values give the
    same interval.
    """
    import numpy as np

    array = np.asarray(values, dtype=float)
    n = array.size
    if n < 2:
        return None
    rng = np.random.default_rng(seed)
    distinct, counts = np.unique(array, return_counts=True)
    if distinct.size == 1:
        return float(distinct[0]), float(distinct[0])
    if distinct.size <= _DISTINCT_LIMIT:
        draws = rng.multinomial(n, counts / n, size=resamples)
        means = draws @ distinct / n
    else:
        means = np.empty(resamples)
        block = max(1, 2_000_000 // n)
        for start in range(0, resamples, block):
            stop = min(resamples, start + block)
            picks = rng.integers(0, n, size=(stop - start, n))
            means[start:stop] = array[picks].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def paired_permutation_test(
    differences: Sequence[float] | np.ndarray, *, resamples: int = 10_000, seed: int = 0
) -> float:
    """Two-sided p-value that paired differences have mean 0 (sign flips).

    Under the null each difference is as likely positive as negative; the p-value is the share
    of sign-flipped means at least as far from 0 as the observed one. When the non-zero
    differences have no more sign patterns than ``resamples`` (up to 13 for 10,000), every
    pattern is counted: the exact p-value. Otherwise ``resamples`` random patterns (seeded),
    with the +1 correction.
    """
    import numpy as np

    diffs = np.asarray(differences, dtype=float)
    diffs = diffs[diffs != 0]
    if diffs.size == 0:
        return 1.0
    observed = abs(diffs.mean())
    if 2**diffs.size <= resamples:  # small: every one of the 2^n patterns, exactly
        patterns = np.arange(2**diffs.size)[:, None] >> np.arange(diffs.size) & 1
        means = (1.0 - 2.0 * patterns) @ diffs / diffs.size
        return float(np.mean(np.abs(means) >= observed - 1e-12))
    rng = np.random.default_rng(seed)
    extreme = 0
    block = max(1, 2_000_000 // diffs.size)
    for start in range(0, resamples, block):
        size = min(block, resamples - start)
        signs = rng.choice(np.array([-1.0, 1.0]), size=(size, diffs.size))
        extreme += int((np.abs(signs @ diffs / diffs.size) >= observed - 1e-12).sum())
    return (extreme + 1) / (resamples + 1)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of ``p_values``, in their order (family-wise error control).

    The i-th smallest of m p-values is multiplied by ``m - i`` (i from 0), then each adjusted
    value is raised to the largest before it in that order and capped at 1: a hypothesis is
    rejected at family-wise level ``alpha`` when its adjusted p-value is below ``alpha``. The
    same figures as statsmodels' ``multipletests(p, method="holm")[1]`` (the tests check it),
    without needing statsmodels.

    Raises:
        ValueError: a p-value is not a number in [0, 1].
    """
    bad = [p for p in p_values if not 0 <= p <= 1]  # NaN fails too
    if bad:
        raise ValueError(f"p-values lie in [0, 1], got {bad[0]!r}")
    count = len(p_values)
    adjusted = [0.0] * count
    running = 0.0
    for rank, index in enumerate(sorted(range(count), key=lambda i: p_values[i])):
        running = max(running, min(1.0, (count - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


def binomial_interval(
    successes: int, trials: int, *, confidence: float = 0.95
) -> tuple[float | None, float | None]:
    """The exact (Clopper-Pearson) interval of a success rate: ``successes`` of ``trials``.

    SciPy's ``binomtest(...).proportion_ci(method="exact")`` at ``confidence``;
    ``(None, None)`` without SciPy (the ``stats`` extra).
    """
    try:
        from scipy.stats import binomtest
    except ImportError:  # the interval needs the stats extra; the flaky mark does not
        return None, None
    interval = binomtest(successes, trials).proportion_ci(
        confidence_level=confidence, method="exact"
    )
    return float(interval.low), float(interval.high)

"""The power of a paired two-sided test: rows needed, power reached, drop detectable.

The model behind every figure of :mod:`turneval.stats` (its docstring draws it): statsmodels'
``TTestPower`` at effect size ``drop / sd``, checked and completed with SciPy where the solver
fails. Both are imported only when a figure is computed (``pip install 'turneval[stats]'``).
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

from turneval.errors import ConfigError

__all__ = [
    "MAX_ROWS",
    "achieved_power",
    "check_levels",
    "detectable_drop",
    "fmt",
    "rise_notes",
    "samples_needed",
    "sd_of",
]


def _power_model() -> Any:
    try:
        import statsmodels.tools.sm_exceptions  # noqa: F401  # sets warning filters on import
        from statsmodels.stats.power import TTestPower
    except ImportError as exc:
        raise ConfigError(
            "power and sample sizes need statsmodels: pip install 'turneval[stats]'"
        ) from exc
    return TTestPower()


def check_levels(mde: float | None, alpha: float, power: float) -> None:
    if mde is not None and not (math.isfinite(mde) and mde > 0):
        raise ConfigError(f"mde must be a drop above 0, got {mde}")
    if not 0 < alpha < 1:
        raise ConfigError(f"alpha must be between 0 and 1, got {alpha}")
    if not 0 < power < 1:
        raise ConfigError(f"power must be between 0 and 1, got {power}")
    if power <= alpha:
        raise ConfigError(
            f"power {power:g} must be above alpha {alpha:g}: a test at level alpha already "
            "rejects with probability alpha when nothing changed, so no size or drop is needed "
            "for that power"
        )


_TOLERANCE = 1e-5
"""How far from the wanted power statsmodels' answer may be (its own solver's precision is
about 1e-6) before it is solved again."""

MAX_ROWS = 10**15
"""The most rows (or scenarios) a plan counts up to; a drop that needs more is refused."""


def _figure(value: Any) -> float | None:
    """A solver's answer as a float, None for NaN, infinity or anything but one number.

    statsmodels answers a float, a 0-d or a one-element array, depending on the row count.
    """
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return None
    if array.size != 1:
        return None
    number = float(array.reshape(-1)[0])
    return number if math.isfinite(number) else None


def _solve(**arguments: Any) -> float | None:
    """The answer of statsmodels' ``TTestPower.solve_power`` (two-sided), None without one."""
    model = _power_model()  # imported first: statsmodels' import sets warning filters
    with warnings.catch_warnings():  # ConvergenceWarning: the answer is checked anyway
        warnings.simplefilter("ignore")
        try:
            answer = model.solve_power(alternative="two-sided", **arguments)
        except (ArithmeticError, RuntimeError, ValueError):  # "f(a) and f(b) must have ..."
            return None
    return _figure(answer)


def _test_power(effect: float, n: float, alpha: float) -> float:
    """The two-sided paired t-test's power at effect size ``effect`` over ``n`` pairs.

    statsmodels' ``TTestPower.power``. It gives NaN where SciPy's noncentral t CDF fails far
    in the lower tail (from a few standard deviations of effect); the same two regions are
    then read as upper tails, ``P(T' > t) + P(T' < -t) = nct.sf(t, nc) + nct.sf(t, -nc)``
    (``-T'`` is noncentral t with ``-nc``), which SciPy computes there.

    Raises:
        ConfigError: no figure (SciPy gives NaN too).
    """
    model = _power_model()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = _figure(
            model.power(effect_size=effect, nobs=n, alpha=alpha, alternative="two-sided")
        )
        if value is None:
            from scipy import stats as sps

            df, nc = n - 1, effect * math.sqrt(n)
            critical = sps.t.isf(alpha / 2, df)
            value = _figure(sps.nct.sf(critical, df, nc) + sps.nct.sf(critical, df, -nc))
    if value is None and effect * math.sqrt(n) > 1e6:
        # SciPy's noncentral t is NaN past a noncentrality of about 1e9; the power grows with
        # the effect, so where it is already 1 at a noncentrality of 1e6 it is 1 beyond
        smaller = _test_power(1e6 / math.sqrt(n), n, alpha)
        value = 1.0 if smaller >= 1.0 - 1e-12 else None
    if value is None:
        raise ConfigError(
            f"no power figure for an effect size of {effect:.4g} over {n:g} pairs at alpha "
            f"{alpha:g} (statsmodels and SciPy give NaN)"
        )
    return min(1.0, max(0.0, value))


def samples_needed(sd: float, mde: float, *, alpha: float, power: float) -> int | None:
    """Pairs a two-sided paired test needs to find a drop of ``mde`` with ``power``.

    ``sd`` is the standard deviation of the paired differences; None when it is 0 (no spread
    to plan from). At least 2 (the fewest a t-test can use). statsmodels'
    ``TTestPower.solve_power``, checked: the answer is the smallest whole number of pairs whose
    power reaches ``power``; where the solver fails (it does not converge for large effects,
    or answers a one-element array) that number is found by bisection over
    ``TTestPower.power``.

    Raises:
        ConfigError: the drop needs more than :data:`MAX_ROWS` pairs, or no power figure.
    """
    check_levels(mde, alpha, power)
    if not sd > 0:
        return None
    effect = mde / sd

    def reaches(n: int) -> bool:
        return _test_power(effect, n, alpha) >= power

    guess = _solve(effect_size=effect, alpha=alpha, power=power)
    if guess is not None and guess < MAX_ROWS:
        n = max(2, math.ceil(guess - 1e-9))
        if _test_power(effect, n, alpha) >= power - _TOLERANCE and (
            n == 2 or _test_power(effect, n - 1, alpha) < power + _TOLERANCE
        ):
            return n
    if reaches(2):
        return 2
    low, high = 2, 4
    while not reaches(high):
        if high > MAX_ROWS:
            raise ConfigError(
                f"a drop of {mde:g} against a spread of {sd:.4g} (effect size {effect:.3g}) "
                f"needs more than {MAX_ROWS:.0e} rows: plan a larger drop"
            )
        low, high = high, high * 2
    while high - low > 1:  # low does not reach the power, high does
        middle = (low + high) // 2
        low, high = (low, middle) if reaches(middle) else (middle, high)
    return high


def achieved_power(sd: float, mde: float, n: int, *, alpha: float) -> float | None:
    """The power of a two-sided paired test over ``n`` pairs against a drop of ``mde``.

    None when ``sd`` is 0 or ``n`` is under 2.

    Raises:
        ConfigError: no power figure (statsmodels and SciPy give NaN).
    """
    if not sd > 0 or n < 2:
        return None
    return _test_power(mde / sd, n, alpha)


def detectable_drop(sd: float, n: int, *, alpha: float, power: float) -> float | None:
    """The smallest drop a two-sided paired test over ``n`` pairs finds with ``power``.

    None when ``sd`` is 0 or ``n`` is under 2. statsmodels' ``TTestPower.solve_power``,
    checked against ``TTestPower.power``; where the solver fails (a one-element array, no
    convergence, a wrong root for 2 or 3 pairs) the effect size is found with SciPy's
    ``brentq``.

    Raises:
        ConfigError: ``power`` is not above ``alpha``, or no power figure.
    """
    check_levels(None, alpha, power)
    if not sd > 0 or n < 2:
        return None
    effect = _solve(effect_size=None, nobs=n, alpha=alpha, power=power)
    if effect is None or effect <= 0 or abs(_test_power(effect, n, alpha) - power) > _TOLERANCE:
        effect = _effect_for(n, alpha, power)
    return effect * sd


def _effect_for(n: int, alpha: float, power: float) -> float:
    """The effect size at which the test over ``n`` pairs has ``power`` (``brentq``)."""
    from scipy.optimize import brentq

    def short(effect: float) -> float:
        return _test_power(effect, n, alpha) - power

    high = 1.0
    while short(high) < 0:  # power grows with the effect size, to 1
        high *= 4
        if high > 1e12:
            raise ConfigError(f"no drop reaches power {power:g} at alpha {alpha:g} over {n} pairs")
    return float(brentq(short, 0.0, high, xtol=1e-12, rtol=1e-10))


def sd_of(values: np.ndarray) -> float:
    """The sample standard deviation (ddof=1) of ``values``; 0 under two values."""
    return float(values.std(ddof=1)) if values.size >= 2 else 0.0


def fmt(value: float | None, spec: str = ".4f") -> str:
    """A figure as the tables print it (``n/a`` for None)."""
    return "n/a" if value is None else format(value, spec)


def rise_notes(metrics: Any, mde: float) -> list[str]:
    """Notes for the metrics where lower is better: their figures are for a rise."""
    return [
        f"note: {m.name}: lower is better: its figures are for a rise of {mde:g} (the "
        "two-sided test's power is the same either way)"
        for m in metrics
        if not m.higher_is_better
    ]

"""The power of a paired test: rows needed, power reached, smallest drop, at every size."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from statsmodels.stats.power import TTestPower

from turneval.stats import achieved_power, detectable_drop, samples_needed

from ._helpers import (
    DRAWS,
    reference_power,
    statsmodels_answer,
    t_test_rejections,
)


def test_achieved_power_matches_a_seeded_simulation_of_the_t_test() -> None:
    sd, mde, n = 0.3, 0.1, 40
    rng = np.random.default_rng(7)
    diffs = rng.normal(-mde, sd, size=(DRAWS, n))
    power = achieved_power(sd, mde, n, alpha=0.05)
    assert power is not None and abs(t_test_rejections(diffs, 0.05) - power) < 0.015


def test_the_permutation_test_has_the_power_the_report_states() -> None:
    """compare decides by sign flips: its power at the planned size is the t-test's (+-0.03)."""
    sd, mde = 0.4, 0.15
    n = samples_needed(sd, mde, alpha=0.05, power=0.8)
    assert n is not None
    rng = np.random.default_rng(3)
    diffs = rng.normal(-mde, sd, size=(DRAWS, n))
    signs = rng.choice([-1.0, 1.0], size=(1000, n))
    rejected = 0
    for chunk in np.array_split(diffs, 5):  # the same 1,000 sign patterns for every draw
        flipped = np.abs(signs @ chunk.T / n)  # (patterns, draws)
        p = (np.sum(flipped >= np.abs(chunk.mean(axis=1)) - 1e-12, axis=0) + 1) / 1001
        rejected += int(np.sum(p < 0.05))
    assert abs(rejected / DRAWS - 0.8) < 0.03


def test_pass_hat_k_plan_reaches_its_power_on_binary_outcomes() -> None:
    """Scenarios x trials for pass^k: a 10,000-draw simulation of the all-k-pass indicators."""
    k, p_base, p_cand = 3, 0.8, 0.7  # per-trial success; pass^3 drops 0.512 -> 0.343
    hat_base, hat_cand = p_base**k, p_cand**k
    mde = hat_base - hat_cand
    sd = math.sqrt(hat_base * (1 - hat_base) + hat_cand * (1 - hat_cand))
    n = samples_needed(sd, mde, alpha=0.05, power=0.8)
    assert n is not None
    rng = np.random.default_rng(11)
    base = (rng.random((DRAWS, n, k)) < p_base).all(axis=2)
    cand = (rng.random((DRAWS, n, k)) < p_cand).all(axis=2)
    assert abs(t_test_rejections(cand.astype(float) - base, 0.05) - 0.8) < 0.025


# -- the solvers at every row count (issue 43, item 8): the reference is in _helpers


def test_a_dense_sweep_of_row_counts_matches_statsmodels() -> None:
    """Every row count from 2 to 130 (73, 87, 92, 109, 117 and 120 get one-element arrays)."""
    sd = 0.37
    for n in range(2, 131):
        drop = detectable_drop(sd, n, alpha=0.05, power=0.8)
        assert drop is not None and math.isfinite(drop)
        expected = statsmodels_answer(effect_size=None, nobs=n, alpha=0.05, power=0.8)
        assert expected is not None  # at this level statsmodels converges, in one shape or other
        # for 73 rows it answers the negative root (the two-sided power is even in the effect)
        assert drop == pytest.approx(abs(expected) * sd, rel=1e-6), n
        assert reference_power(drop / sd, n, 0.05) == pytest.approx(0.8, abs=1e-5), n


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(2, 10_000),
    sd=st.floats(1e-3, 4 * math.sqrt(2)),  # differences on a [0, 1] metric up to a 1-5 rubric
    mde=st.floats(1e-3, 4.0),
    alpha=st.floats(1e-4, 0.2),
    power=st.floats(0.05, 0.99),
)
def test_the_solvers_answer_at_every_row_count_and_spread(
    n: int, sd: float, mde: float, alpha: float, power: float
) -> None:
    """Sample sizes, power and smallest drops are numbers that meet their definitions."""
    assume(power > alpha + 1e-3)
    effect = mde / sd
    needed = samples_needed(sd, mde, alpha=alpha, power=power)
    assert isinstance(needed, int) and needed >= 2
    # the smallest whole number of pairs whose power reaches the one wanted
    assert reference_power(effect, needed, alpha) >= power - 1e-6
    assert needed == 2 or reference_power(effect, needed - 1, alpha) < power + 1e-6
    solved = statsmodels_answer(effect_size=effect, alpha=alpha, power=power)
    if solved is not None and reference_power(effect, max(2, math.ceil(solved)), alpha) >= power:
        assert needed <= max(2, math.ceil(solved - 1e-9))  # statsmodels' answer where it has one
    now = achieved_power(sd, mde, n, alpha=alpha)
    assert now is not None and now == pytest.approx(reference_power(effect, n, alpha), abs=1e-9)
    drop = detectable_drop(sd, n, alpha=alpha, power=power)
    assert drop is not None and math.isfinite(drop) and drop > 0
    assert reference_power(drop / sd, n, alpha) == pytest.approx(power, abs=1e-5)


@pytest.mark.parametrize(
    "shape",
    [
        lambda x: x,  # a float
        lambda x: np.float64(x),  # a NumPy scalar
        lambda x: np.array(x),  # a 0-d array
        lambda x: np.array([x]),  # a one-element array
        lambda x: np.array([[x]]),  # nested
        lambda x: np.nan,  # no convergence
        lambda x: np.array([x, x]),  # not one answer: solved again
    ],
)
def test_any_shape_of_solver_answer_gives_the_same_figures(
    shape: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = TTestPower.solve_power
    expected = (
        samples_needed(0.3, 0.05, alpha=0.05, power=0.8),
        detectable_drop(0.3, 120, alpha=0.05, power=0.8),
    )

    def shaped(self: TTestPower, **arguments: Any) -> Any:
        return shape(np.asarray(original(self, **arguments)).reshape(-1)[0])

    monkeypatch.setattr(TTestPower, "solve_power", shaped)
    needed = samples_needed(0.3, 0.05, alpha=0.05, power=0.8)
    drop = detectable_drop(0.3, 120, alpha=0.05, power=0.8)
    assert needed == expected[0]
    assert drop == pytest.approx(expected[1], rel=1e-6)

    def failing(self: TTestPower, **arguments: Any) -> Any:
        raise ValueError("f(a) and f(b) must have different signs")

    monkeypatch.setattr(TTestPower, "solve_power", failing)
    assert samples_needed(0.3, 0.05, alpha=0.05, power=0.8) == expected[0]
    assert detectable_drop(0.3, 120, alpha=0.05, power=0.8) == pytest.approx(expected[1], rel=1e-6)

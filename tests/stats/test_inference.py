"""The pure statistics: bootstrap and exact binomial intervals, the paired test, Holm.

Each checked against a reference (a textbook resample, SciPy, statsmodels) or by hand; and
the names that moved here from ``turneval.aggregate`` still import from there, with a warning.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from turneval.stats import binomial_interval, bootstrap_ci, holm, paired_permutation_test

from ._helpers import statsmodels_holm


def test_bootstrap_ci_edges_and_determinism() -> None:
    assert bootstrap_ci([0.5]) is None
    assert bootstrap_ci([1.0, 1.0, 1.0]) == (1.0, 1.0)
    values = [0, 1, 1, 0, 1, 1, 1, 0, 1, 1]
    assert bootstrap_ci(values, seed=3) == bootstrap_ci(values, seed=3)
    interval = bootstrap_ci(values)
    assert interval is not None
    low, high = interval
    assert low <= np.mean(values) <= high


def test_counts_bootstrap_agrees_with_index_resampling() -> None:
    rng = np.random.default_rng(5)
    values = rng.choice([0.0, 0.25, 0.5, 1.0], size=400)
    interval = bootstrap_ci(values, resamples=4000)
    assert interval is not None
    low, high = interval
    # Independent check: the textbook index bootstrap.
    means = values[rng.integers(0, values.size, size=(4000, values.size))].mean(axis=1)
    ref_low, ref_high = np.percentile(means, [2.5, 97.5])
    assert low == pytest.approx(ref_low, abs=0.01) and high == pytest.approx(ref_high, abs=0.01)


def test_many_distinct_values_use_index_resampling() -> None:
    values = np.random.default_rng(2).random(30_000)
    interval = bootstrap_ci(values, resamples=200)
    assert interval is not None
    low, high = interval
    half_width = 1.96 * values.std(ddof=1) / np.sqrt(values.size)
    assert low == pytest.approx(values.mean() - half_width, abs=0.002)
    assert high == pytest.approx(values.mean() + half_width, abs=0.002)


def test_paired_permutation_test() -> None:
    assert paired_permutation_test([0.0, 0.0]) == 1.0
    # 12 differences all +0.5: only the all-plus flip is as extreme (and its mirror): p ~ 2/2^12.
    assert paired_permutation_test([0.5] * 12, resamples=20_000) < 0.002
    noise = np.random.default_rng(0).normal(0, 1, 200)
    assert paired_permutation_test(noise - noise.mean()) > 0.5


def test_small_samples_get_the_exact_permutation_p_value() -> None:
    from scipy.stats import permutation_test

    # Two differences of +0.5: of the 4 sign patterns, 2 (all plus, all minus) are as extreme.
    assert paired_permutation_test([0.5, 0.5]) == 0.5  # was 0.4882 from random flips
    assert paired_permutation_test([1.0] * 5) == 2 / 32
    # The same as scipy's exact paired permutation test (it enumerates when it can).
    rng = np.random.default_rng(3)
    for n in (3, 7, 11):
        before, after = rng.random(n), rng.random(n)
        theirs = permutation_test(
            (after, before),
            lambda x, y: np.mean(x - y),
            permutation_type="samples",
            n_resamples=100_000,
        ).pvalue
        assert paired_permutation_test(after - before) == pytest.approx(theirs)


# -- the exact binomial interval ---------------------------------------------------------------


@pytest.mark.parametrize(("successes", "trials"), [(3, 4), (1, 10), (7, 7), (0, 5), (12, 40)])
def test_binomial_interval_is_clopper_pearson_from_the_beta_quantiles(
    successes: int, trials: int
) -> None:
    # Clopper-Pearson: [Beta(a/2; x, n - x + 1), Beta(1 - a/2; x + 1, n - x)], 0 and 1 at the ends
    low, high = binomial_interval(successes, trials, confidence=0.9)
    expected_low = 0.0 if successes == 0 else sps.beta.ppf(0.05, successes, trials - successes + 1)
    expected_high = (
        1.0 if successes == trials else sps.beta.ppf(0.95, successes + 1, trials - successes)
    )
    assert low == pytest.approx(expected_low) and high == pytest.approx(expected_high)
    assert binomial_interval(3, 4) == binomial_interval(3, 4, confidence=0.95)


def test_binomial_interval_without_scipy_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "scipy.stats", None)  # as if the stats extra were missing
    assert binomial_interval(3, 4) == (None, None)


# -- Holm's correction -------------------------------------------------------------------------


p_values = st.lists(
    st.one_of(
        st.floats(0, 1),
        st.sampled_from([0.0, 0.01, 0.025, 0.05, 0.5, 1.0]),  # ties and the edges
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(p_values)
def test_holm_is_statsmodels_multipletests_holm(p: list[float]) -> None:
    assert holm(p) == pytest.approx(statsmodels_holm(p), abs=1e-12)


def test_holm_by_hand_and_its_bad_input() -> None:
    # sorted 0.01, 0.02, 0.04, 0.3 times 4, 3, 2, 1: 0.04, 0.06, 0.08, 0.3 (already rising)
    assert holm([0.3, 0.01, 0.04, 0.02]) == pytest.approx([0.3, 0.04, 0.08, 0.06])
    assert holm([0.035, 1.0, 1.0, 1.0]) == pytest.approx([0.14, 1.0, 1.0, 1.0])  # the issue's
    assert holm([]) == []
    for bad in (float("nan"), -0.1, 1.5):
        with pytest.raises(ValueError, match="p-values lie in"):
            holm([0.1, bad])


# -- where they live -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["bootstrap_ci", "holm", "paired_permutation_test"])
def test_the_old_aggregate_paths_still_work_with_a_deprecation_warning(name: str) -> None:
    import turneval.aggregate
    import turneval.stats

    with pytest.warns(
        DeprecationWarning, match=f"turneval.aggregate.{name} moved to turneval.stats"
    ):
        old = getattr(turneval.aggregate, name)
    assert old is getattr(turneval.stats, name)
    assert name not in turneval.aggregate.__all__ and name in turneval.stats.__all__
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        turneval.aggregate.nope  # noqa: B018


def test_the_summariser_loads_the_pure_statistics_and_not_the_comparison() -> None:
    """``import turneval.aggregate`` loads ``stats.inference`` only; power and plan on first use."""
    code = (
        "import sys, turneval.aggregate\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('turneval.'))\n"
        "assert 'turneval.stats._inference' in loaded, loaded\n"
        "assert not {'turneval.compare', 'turneval.stats._plan', 'numpy'} & set(sys.modules)\n"
        "from turneval.stats import plan, gate_report, MAX_ROWS\n"
        "assert plan.__module__ == 'turneval.stats._plan' and MAX_ROWS == 10**15\n"
        "assert 'turneval.compare' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)

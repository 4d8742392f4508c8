import numpy as np
import pytest

from turneval.aggregate import bootstrap_ci, paired_permutation_test, summarize


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


def test_summarize() -> None:
    summary = summarize("m", [1.0, 0.0, 1.0, 1.0], failed=2)
    assert (summary.mean, summary.count, summary.failed) == (0.75, 4, 2)
    assert summary.std == pytest.approx(np.std([1, 0, 1, 1], ddof=1))
    assert summary.ci_low is not None and summary.ci_high is not None
    assert summary.ci_low <= 0.75 <= summary.ci_high
    empty = summarize("m", [], failed=3)
    assert empty.mean is None and empty.ci_low is None and empty["failed"] == 3
    with pytest.raises(KeyError):
        empty["nope"]

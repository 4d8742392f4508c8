"""The paired difference and the split, checked against scikit-learn and by their promises."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.metrics import accuracy_score, cohen_kappa_score

from turneval.calibration import paired_difference, stratified_split
from turneval.calibration._paired import agreement_value

units = st.integers(min_value=2, max_value=40).flatmap(
    lambda n: st.tuples(
        st.lists(st.integers(0, 2), min_size=n, max_size=n),
        st.lists(st.integers(0, 2), min_size=n, max_size=n),
        st.lists(st.integers(0, 2), min_size=n, max_size=n),
    )
)


def sklearn_value(statistic: str, human: list[int], judge: list[int]) -> float:
    if statistic == "accuracy":
        return float(accuracy_score(human, judge))
    weights = "quadratic" if statistic == "weighted kappa" else None
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return float(cohen_kappa_score(human, judge, labels=[0, 1, 2], weights=weights))


@settings(max_examples=40, deadline=None)
@given(data=units, statistic=st.sampled_from(["kappa", "weighted kappa", "accuracy"]))
def test_the_paired_difference_is_scikit_learns_on_every_resample(
    data: tuple[list[int], list[int], list[int]], statistic: str
) -> None:
    human, before, after = data
    resamples = 60
    result = paired_difference(
        statistic,  # type: ignore[arg-type]
        human,
        before,
        after,
        3,
        seed=7,
        resamples=resamples,
    )
    first, second = sklearn_value(statistic, human, before), sklearn_value(statistic, human, after)
    for ours, theirs in ((result.before, first), (result.after, second)):
        if np.isnan(theirs):
            assert ours is None
        else:
            assert ours == pytest.approx(theirs, abs=1e-9)
    # the same resamples drawn by hand, each scored by scikit-learn
    rng = np.random.default_rng(7)
    picks = rng.integers(0, len(human), size=(resamples, len(human)))
    h, b, a = np.array(human), np.array(before), np.array(after)
    differences = [
        sklearn_value(statistic, list(h[p]), list(a[p]))
        - sklearn_value(statistic, list(h[p]), list(b[p]))
        for p in picks
    ]
    finite = [d for d in differences if np.isfinite(d)]
    if not finite:
        assert result.interval is None
    else:
        low, high = np.percentile(finite, [2.5, 97.5])
        assert result.interval == pytest.approx((low, high), abs=1e-9)
    assert result.improved == (
        result.difference is not None and result.difference > 0 and low > 0 if finite else False
    )


def test_agreement_value_of_no_units_is_undefined() -> None:
    assert agreement_value("kappa", [], [], 2) is None
    assert agreement_value("kappa", [1, 1], [1, 1], 2) is None  # one class: undefined


@settings(max_examples=60, deadline=None)
@given(
    strata=st.lists(st.sampled_from("abc"), min_size=2, max_size=60),
    share=st.floats(min_value=0.05, max_value=0.95),
    seed=st.integers(0, 10),
)
def test_the_split_is_stratified_seeded_and_disjoint(
    strata: list[str], share: float, seed: int
) -> None:
    optimisation, validation = stratified_split(strata, share, seed)
    assert sorted(optimisation + validation) == list(range(len(strata)))
    assert optimisation and validation
    assert len(validation) == min(max(1, round(len(strata) * share)), len(strata) - 1)
    held = Counter(strata[i] for i in validation)
    for stratum, count in Counter(strata).items():  # each label's share within one row
        assert abs(held[stratum] - count * len(validation) / len(strata)) < 1
    assert stratified_split(strata, share, seed) == (optimisation, validation)


@pytest.mark.parametrize(
    ("name", "statistic", "label"),
    [
        ("agent_goal_accuracy_without_reference", "kappa", 1.0),  # yes/no
        ("fluency", "weighted kappa", 4.0),  # a 1-5 rubric: ordinal
        ("pairwise_summarization_quality", "accuracy", 0.5),  # BASELINE / TIE / CANDIDATE
    ],
)
def test_the_statistic_follows_the_metrics_scale(name: str, statistic: str, label: float) -> None:
    from turneval.calibration._units import LabeledRow, Task
    from turneval.metrics import builtin_metrics
    from turneval.samples import SingleTurnSample

    metric = builtin_metrics()[name].model_validate({})
    rows = [LabeledRow(SingleTurnSample(response="x"), label), LabeledRow(SingleTurnSample(), 1.0)]
    task = Task.of(metric, rows)
    assert task.statistic == statistic
    assert task.closeness(label, label) == 1.0
    if statistic == "weighted kappa":  # the kappa's quadratic weights: 1 - (d / 4)^2
        assert task.closeness(4.0, 2.0) == pytest.approx(1 - (2 / 4) ** 2)
    else:
        assert task.closeness(1.0, 0.0) == 0.0
    assert task.closeness(label, None) == 0.0


def test_a_label_off_the_scale_is_refused_naming_the_row() -> None:
    from turneval.calibration._units import LabeledRow, Task
    from turneval.errors import ConfigError
    from turneval.metrics import builtin_metrics
    from turneval.samples import SingleTurnSample

    metric = builtin_metrics()["fluency"].model_validate({})
    rows = [LabeledRow(SingleTurnSample(), 7.0, ref="12")]
    with pytest.raises(ConfigError, match="labeled row 12: label 7 is outside the scale"):
        Task.of(metric, rows)

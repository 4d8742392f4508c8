import numpy as np
import pytest
from scipy import stats as sps

from turneval.aggregate import summarize
from turneval.results import EvaluationResult

from .stats._helpers import trials_run


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


# -- flaky scenarios ---------------------------------------------------------------------------


def test_flaky_scenarios_have_a_pass_rate_and_an_exact_interval() -> None:
    grid = {"steady": [True, True, True, True], "flaky": [True, False, True, True], "down": [False]}
    result = trials_run(grid)
    [flaky] = result.flaky_scenarios("m")
    assert (flaky.scenario_id, flaky.passed, flaky.trials, flaky.pass_rate) == ("flaky", 3, 4, 0.75)
    # Clopper-Pearson from the beta quantiles
    assert flaky.ci_low == pytest.approx(sps.beta.ppf(0.025, 3, 2))
    assert flaky.ci_high == pytest.approx(sps.beta.ppf(0.975, 4, 1))
    assert str(flaky).startswith("flaky: 3/4 passed (0.750, 95% CI [0.194, 0.994]")
    extra = result.summary()["m"].extra or {}
    assert extra["flaky_scenarios"] == 1.0
    page = result_html(result)
    assert "1 flaky (mixed outcomes)" in page and "m: 3/4 passed (0.750, 95% CI" in page


def result_html(result: EvaluationResult) -> str:
    from turneval.report import render_html

    return render_html(result, title="t")

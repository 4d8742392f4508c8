"""Power and sample sizes for gates, checked against statsmodels, SciPy and seeded simulations."""

from __future__ import annotations

import json
import math
import re
import shlex
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats as sps
from statsmodels.stats.power import TTestPower

from turneval import ConfigError, MetricResult, SampleResult
from turneval.cli import main
from turneval.compare import compare
from turneval.results import EvaluationResult, Trial
from turneval.stats import achieved_power, detectable_drop, gate_report, plan, samples_needed

DRAWS = 10_000


def run(columns: dict[str, list[float]], ids: list[str] | None = None) -> EvaluationResult:
    names = list(columns)
    rows = []
    for index in range(len(columns[names[0]])):
        row = SampleResult(index, None, stored_id=None if ids is None else ids[index])
        for name in names:
            row.results[name] = MetricResult(name, columns[name][index], "r")
        rows.append(row)
    return EvaluationResult(rows, names)


def trials_run(grid: dict[str, list[bool]]) -> EvaluationResult:
    """A simulated run read back from a file: per scenario, each trial's success (m = 1 or 0)."""
    rows: list[SampleResult] = []
    for scenario, outcomes in grid.items():
        for trial, ok in enumerate(outcomes):
            row = SampleResult(
                len(rows),
                None,
                trial=Trial(scenario, trial, "user_done"),
            )
            row.results["m"] = MetricResult("m", float(ok), "r")
            rows.append(row)
    return EvaluationResult(rows, ["m"])


def t_test_rejections(diffs: np.ndarray, alpha: float) -> float:
    """Share of rows of ``diffs`` (draws x pairs) whose two-sided paired t-test rejects."""
    n = diffs.shape[1]
    t = diffs.mean(axis=1) / (diffs.std(axis=1, ddof=1) / math.sqrt(n))
    return float(np.mean(2 * sps.t.sf(np.abs(t), n - 1) < alpha))


def test_plan_without_baseline_uses_the_runs_spread_times_sqrt2() -> None:
    values = [1.0, 0.0, 1.0, 1.0, 0.5, 0.0, 1.0, 1.0, 0.25, 1.0]
    result = plan(run({"m": values}), mde=0.1, alpha=0.05, power=0.8).metrics["m"]
    sd = float(np.std(values, ddof=1)) * math.sqrt(2)
    effect = 0.1 / sd
    reference = TTestPower()
    assert result.sd == pytest.approx(sd)
    assert result.samples_needed == math.ceil(
        reference.solve_power(effect_size=effect, alpha=0.05, power=0.8)
    )
    assert result.achieved_power == pytest.approx(
        reference.power(effect_size=effect, nobs=10, alpha=0.05)
    )
    assert result.min_detectable_drop == pytest.approx(
        sd * reference.solve_power(nobs=10, alpha=0.05, power=0.8)
    )
    assert result.correlation is None and result.trials is None


def test_a_baseline_uses_the_paired_rows_correlation() -> None:
    rng = np.random.default_rng(1)
    base = rng.uniform(0, 1, 60)
    cand = np.clip(base + rng.normal(0, 0.1, 60), 0, 1)  # strongly correlated rows
    alone = plan(run({"m": list(cand)}), mde=0.05).metrics["m"]
    paired = plan(run({"m": list(cand)}), mde=0.05, baseline=run({"m": list(base)})).metrics["m"]
    assert paired.correlation == pytest.approx(sps.pearsonr(base, cand).statistic)
    assert paired.sd == pytest.approx(float(np.std(cand - base, ddof=1)))
    assert paired.samples_needed is not None and alone.samples_needed is not None
    assert paired.samples_needed < alone.samples_needed / 5  # correlation buys rows


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


def test_plan_of_a_trials_grid_counts_scenarios_times_trials() -> None:
    grid = {
        "a": [True, True, True],
        "b": [True, False, True],
        "c": [False, False, False],
        "d": [True, True, True],
    }
    trials = plan(trials_run(grid), mde=0.2).metrics["m"].trials
    assert trials is not None
    indicators = [1.0, 0.0, 0.0, 1.0]  # pass^3 of each scenario: all three trials passed
    sd = float(np.std(indicators, ddof=1)) * math.sqrt(2)
    needed = math.ceil(TTestPower().solve_power(effect_size=0.2 / sd, alpha=0.05, power=0.8))
    assert (trials.k, trials.scenarios, trials.pass_hat_k) == (3, 4, 0.5)
    assert trials.scenarios_needed == needed and trials.conversations_needed == 3 * needed
    # with a baseline, scenarios pair by id: the spread of the per-scenario differences
    before = {"a": [True] * 3, "b": [True] * 3, "c": [True, True, False], "d": [True] * 3}
    paired = plan(trials_run(grid), mde=0.2, baseline=trials_run(before)).metrics["m"].trials
    assert paired is not None
    assert paired.sd == pytest.approx(float(np.std([0.0, -1.0, 0.0, 0.0], ddof=1)))


def test_plan_refuses_bad_levels_and_unknown_metrics() -> None:
    result = run({"m": [1.0, 0.0]})
    with pytest.raises(ConfigError, match="mde"):
        plan(result, mde=0)
    with pytest.raises(ConfigError, match="power"):
        plan(result, mde=0.1, power=1.5)
    with pytest.raises(ConfigError, match=r"no metric named 'x' in the run; its metrics: \['m'\]"):
        plan(result, mde=0.1, metric="x")


def test_gate_report_applies_holm_and_powers_at_alpha_over_m() -> None:
    rng = np.random.default_rng(5)
    base = {name: list(rng.uniform(0, 1, 30)) for name in ("a", "b", "c")}
    cand = {
        name: list(np.clip(np.asarray(values) - drop + rng.normal(0, 0.2, 30), 0, 1))
        for (name, values), drop in zip(base.items(), (0.3, 0.05, 0.0), strict=True)
    }
    comparison = compare(run(base), run(cand))
    report = gate_report(comparison, mde=0.1, alpha=0.05)
    p = {name: comparison.metrics[name].p_value for name in "abc"}
    # Holm by hand: the i-th smallest of m p-values times (m - i), running maximum, capped at 1
    ordered = sorted(p, key=lambda name: p[name] or 0.0)
    running = 0.0
    for i, name in enumerate(ordered):
        running = max(running, min(1.0, (3 - i) * (p[name] or 0.0)))
        assert report.metrics[name].p_holm == pytest.approx(running)
    assert report.correction == "holm" and report.level == pytest.approx(0.05 / 3)
    a = report.metrics["a"]
    diffs = np.asarray(cand["a"]) - np.asarray(base["a"])
    assert a.power == pytest.approx(
        TTestPower().power(effect_size=0.1 / float(np.std(diffs, ddof=1)), nobs=30, alpha=0.05 / 3)
    )
    assert a.ci_low is not None and a.ci_high is not None and a.difference is not None
    assert a.ci_low < a.difference < a.ci_high
    text = str(report)
    assert "Holm's correction over 3 metrics" in text and "alpha/3" in text


def test_one_gated_metric_is_not_corrected() -> None:
    comparison = compare(run({"a": [1.0, 0.0, 1.0, 0.5]}), run({"a": [0.0, 0.0, 1.0, 0.5]}))
    report = gate_report(comparison, ["a"], mde=0.1)
    assert report.correction == "none" and report.level == 0.05
    assert report.metrics["a"].p_holm == comparison.metrics["a"].p_value


def write_runs(tmp_path: Path, base: list[float], cand: list[float]) -> tuple[str, str]:
    paths = (tmp_path / "base.jsonl", tmp_path / "cand.jsonl")
    run({"m": base}).to_jsonl(paths[0])
    run({"m": cand}).to_jsonl(paths[1])
    return str(paths[0]), str(paths[1])


def test_min_power_refuses_an_underpowered_comparison_with_exit_4(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, cand = write_runs(
        tmp_path, [1.0, 0.0, 1.0, 0.0, 1.0, 1.0], [1.0, 0.0, 1.0, 0.0, 1.0, 1.0]
    )
    assert main(["compare", base, cand, "--fail-on-regression", "0.05"]) == 0
    out = capsys.readouterr().out
    assert "power: paired permutation test" in out and "one metric, no correction" in out
    assert main(["compare", base, cand, "--fail-on-regression", "0.05", "--min-power", "0.8"]) == 4
    assert "under-powered comparison" in capsys.readouterr().err
    # a failed bar wins over the power refusal
    worse = write_runs(tmp_path, [1.0] * 6, [0.0] * 6)
    assert main(["compare", *worse, "--fail-on-regression", "0.05", "--min-power", "0.8"]) == 1
    # the help and the CLI how-to name the code the command exits with
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    assert "exit 4 when a gated metric's power" in " ".join(capsys.readouterr().out.split())
    how_to = (Path(__file__).parents[1] / "docs" / "how-to" / "cli.md").read_text("utf-8")
    assert "under-powered comparison with exit 4" in " ".join(how_to.split())


def test_min_power_passes_a_comparison_with_enough_rows(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    base = list(rng.uniform(0, 1, 400))
    cand = list(np.clip(np.asarray(base) + rng.normal(0, 0.05, 400), 0, 1))
    paths = write_runs(tmp_path, base, cand)
    assert main(["compare", *paths, "--fail-on-regression", "0.05", "--min-power", "0.8"]) == 0


def test_plan_command_prints_the_rows_needed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    values = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    path = tmp_path / "r.jsonl"
    run({"m": values}).to_jsonl(path)
    assert main(["plan", str(path), "--mde", "0.1"]) == 0
    sd = float(np.std(values, ddof=1)) * math.sqrt(2)
    needed = math.ceil(TTestPower().solve_power(effect_size=0.1 / sd, alpha=0.05, power=0.8))
    assert f"| m | 6 | 0.6667 | {sd:.4f} | n/a | {needed} |" in capsys.readouterr().out
    assert main(["plan", str(tmp_path / "nope.jsonl"), "--mde", "0.1"]) == 2
    assert main(["plan", str(path), "--mde", "0.1", "--metric", "x"]) == 2


PAGE = Path(__file__).resolve().parents[1] / "docs" / "how-to" / "gate-with-power.md"


def test_the_how_to_prints_what_its_commands_print(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every command of the worked example runs; every line shown under it is in its output."""
    monkeypatch.chdir(tmp_path)
    page = PAGE.read_text(encoding="utf-8")
    printed, codes = "", []
    for block in re.findall(r"```bash\n(.*?)```", page, re.DOTALL):
        for command in block.replace("\\\n", " ").splitlines():
            codes.append(main(shlex.split(command)[1:]))
            captured = capsys.readouterr()
            printed += captured.out + captured.err
    assert codes == [0, 0, 0, 4]  # demo, demo, plan, the under-powered compare
    shown = [
        line
        for block in re.findall(r"```text\n(.*?)```", page, re.DOTALL)
        for line in block.splitlines()
    ]
    assert len(shown) >= 10
    for line in shown:
        assert line in printed


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


def test_compare_lists_regressions_on_flaky_scenarios_apart() -> None:
    base = trials_run({"steady": [True, True], "wobbly": [True, True]})
    cand = trials_run({"steady": [False, True], "wobbly": [True, False]})
    for run_ in (base, cand):  # every trial its own id: rows pair by id
        for row in run_.rows:
            row.stored_id = f"{row.trial.scenario_id}-{row.trial.index}" if row.trial else None
    m = compare(base, cand).metrics["m"]
    # both scenarios lost a trial; both are flaky in the candidate, so both flips are apart
    assert m.regressions == [] and m.flaky_regressions == [0, 3]
    assert set(m.flaky) == {"steady", "wobbly"}
    steady = compare(base, base).metrics["m"]
    assert steady.flaky_regressions == [] and steady.flaky == {}
    cand_one = trials_run({"steady": [False, False], "wobbly": [True, False]})
    for row in cand_one.rows:
        row.stored_id = f"{row.trial.scenario_id}-{row.trial.index}" if row.trial else None
    mixed = compare(base, cand_one)
    assert mixed.metrics["m"].regressions == [0, 1]  # steady failed twice: a real regression
    assert mixed.metrics["m"].flaky_regressions == [3]
    assert "1 regression on flaky scenarios" in str(mixed) and ": row 3;" in str(mixed)
    assert "wobbly: 1/2 passed" in str(mixed)


def test_min_power_without_rows_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A lone summary.json has means only: its power is unknown, so --min-power refuses it."""
    for name in ("a", "b"):
        folder = tmp_path / name
        folder.mkdir()
        summary = {"metrics": {"m": {"mean": 0.5}}}
        (folder / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    paths = [str(tmp_path / name / "summary.json") for name in ("a", "b")]
    assert main(["compare", *paths, "--fail-on-regression", "0.05"]) == 0
    assert main(["compare", *paths, "--fail-on-regression", "0.05", "--min-power", "0.8"]) == 4
    assert "no paired rows" in capsys.readouterr().err


def test_a_drop_wider_than_the_scale_is_not_detectable() -> None:
    def run(name: str, values: list[float], trials: int = 1) -> EvaluationResult:
        rows = []
        for index, value in enumerate(values):
            row = SampleResult(index, None)
            if trials > 1:
                row.trial = Trial(str(index // trials), index % trials)
            row.results[name] = MetricResult(name, value)
            rows.append(row)
        return EvaluationResult(rows, [name])

    # 3 rows of a [0, 1] metric: the drop the test would find (sd 0.816 x effect) is over 1
    small = plan(run("m", [0.0, 1.0, 0.0]), mde=0.1)
    drop = small.metrics["m"].min_detectable_drop
    sd = np.std([0.0, 1.0, 0.0], ddof=1) * math.sqrt(2)
    effect = TTestPower().solve_power(nobs=3, alpha=0.05, power=0.8, alternative="two-sided")
    assert drop is not None and drop == pytest.approx(effect * sd) and drop > 1
    assert f"| not detectable with these rows ({drop:.4f} > the scale's 1) |" in str(small)
    # the same spread on a 1-5 rubric (span 4) is a drop it can show
    rubric = plan(run("fluency", [1.0, 2.0, 1.0]), mde=0.1)
    assert f"| {rubric.metrics['fluency'].min_detectable_drop:.4f} |" in str(rubric)
    # pass^4 over 3 scenarios (one fails a trial): a probability, at most 1
    trials = plan(run("m", [1.0] * 4 + [0.0] + [1.0] * 7, trials=4), mde=0.1)
    pass_k = trials.metrics["m"].trials
    assert pass_k is not None and pass_k.min_detectable_drop is not None
    assert pass_k.min_detectable_drop > 1
    assert (
        f"min. detectable drop not detectable with these scenarios "
        f"({pass_k.min_detectable_drop:.4f} > the scale's 1)" in str(trials)
    )


# -- the solvers at every row count (issue 43, item 8) -----------------------------------------
#
# statsmodels' solve_power answers a float for most row counts, a one-element array for others
# (73, 87, 92, 109, 117, 120, ... rows at alpha 0.05 and power 0.8), NaN with a
# ConvergenceWarning for large effects, a negative root (73 rows), a wrong root (a bracket's
# end) or a ValueError at the edges; and its power() is NaN where SciPy's noncentral t CDF fails deep in the lower tail.
# The reference below is the paired t-test's power written from its definition with SciPy:
# P(T' > t) + P(T' < -t), T' noncentral t with n - 1 degrees of freedom and noncentrality
# d * sqrt(n), t the two-sided critical value; P(T' < -t) = P(-T' > t) is the upper tail of
# the noncentral t with -d * sqrt(n).


def reference_power(effect: float, n: float, alpha: float) -> float:
    critical = sps.t.isf(alpha / 2, n - 1)
    nc = effect * math.sqrt(n)
    return float(sps.nct.sf(critical, n - 1, nc) + sps.nct.sf(critical, n - 1, -nc))


def statsmodels_answer(**arguments: float | None) -> float | None:
    """solve_power's answer as a float where it gives one (a scalar or a one-element array)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            answer = np.asarray(TTestPower().solve_power(alternative="two-sided", **arguments))
        except ValueError:
            return None
    return float(answer.reshape(-1)[0]) if answer.size == 1 and np.isfinite(answer).all() else None


def test_plan_of_120_rows_gives_every_figure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """120 rows: statsmodels answers the smallest drop as a one-element array (a TypeError)."""
    rng = np.random.default_rng(120)
    values = list(rng.uniform(0, 1, 120))
    raw = np.asarray(TTestPower().solve_power(nobs=120, alpha=0.05, power=0.8))
    assert raw.shape == (1,)  # the shape that broke float(); if statsmodels changes, still fine
    result = plan(run({"m": values}), mde=0.05).metrics["m"]
    sd = float(np.std(values, ddof=1)) * math.sqrt(2)
    assert result.min_detectable_drop == pytest.approx(float(raw[0]) * sd, rel=1e-6)
    assert result.achieved_power == pytest.approx(reference_power(0.05 / sd, 120, 0.05))
    path = tmp_path / "r.jsonl"
    run({"m": values}).to_jsonl(path)
    capsys.readouterr()
    assert main(["plan", str(path), "--mde", "0.05"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and f"| {float(raw[0]) * sd:.4f} |" in out


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


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(2, 10_000),
    low=st.sampled_from([0.0, 1.0]),
    spread=st.floats(0.0, 1.0),
    paired=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_plan_answers_for_any_run_size_and_spread(
    n: int, low: float, spread: float, paired: bool, seed: int
) -> None:
    """A [0, 1] metric or a 1-5 rubric, any spread, 2 to 10,000 rows: a plan, never a crash."""
    width = 1.0 if low == 0 else 4.0
    rng = np.random.default_rng(seed)
    values = low + width * np.clip(0.5 + spread * rng.normal(0, 0.5, n), 0, 1)
    base = low + width * np.clip(0.5 + spread * rng.normal(0, 0.5, n), 0, 1)
    result = plan(
        run({"m": list(values)}),
        mde=0.05 * width,
        baseline=run({"m": list(base)}) if paired else None,
    ).metrics["m"]
    assert result.rows == n
    if result.sd > 0:
        assert result.samples_needed is not None and result.samples_needed >= 2
        assert result.achieved_power is not None and 0 < result.achieved_power <= 1
        drop = result.min_detectable_drop
        assert drop is not None and math.isfinite(drop) and drop > 0
    else:
        assert result.samples_needed is result.achieved_power is result.min_detectable_drop is None


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


def test_impossible_plans_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "r.jsonl"
    run({"m": [1.0, 0.0, 1.0, 1.0, 0.0, 1.0]}).to_jsonl(path)
    base, cand = write_runs(tmp_path, [1.0, 0.0, 1.0, 0.5], [1.0, 0.0, 0.5, 0.5])
    capsys.readouterr()
    for command, message in (
        # a power at or under alpha: the test has it with no drop at all
        (["plan", str(path), "--mde", "0.1", "--power", "0.01"], "power 0.01 must be above"),
        (["compare", base, cand, "--power", "0.05"], "power 0.05 must be above alpha 0.05"),
        # a drop no run could be large enough to find
        (["plan", str(path), "--mde", "1e-9"], "m: a drop of 1e-09 against a spread of"),
    ):
        assert main(command) == 2, command
        err = capsys.readouterr().err
        assert err.startswith("turneval: error: ") and err.count("\n") == 1, err
        assert message in err and "Traceback" not in err and "Error:" not in err, err

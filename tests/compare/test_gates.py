"""Regression gates: Holm's correction over the gated metrics, and runs paired by id (issue 43).

A gate fails when a mean falls by more than its MAX_DROP and the fall is significant once the
p-values of every gated metric are corrected with Holm's method; rows pair by sample id (or
scenario and trial), so a run whose trials stopped early compares with a full one.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turneval import ConfigError, MetricFailure, MetricResult, SampleResult
from turneval.cli import main
from turneval.compare import compare, regression_gates
from turneval.results import EvaluationResult
from turneval.stats import paired_permutation_test

from ..stats._helpers import statsmodels_holm


def run(columns: dict[str, list[float | None]], ids: list[str] | None = None) -> EvaluationResult:
    """A run read back from a file: one row per position, an id per row when given."""
    names = list(columns)
    rows = []
    for index in range(len(columns[names[0]])):
        row = SampleResult(index, None, stored_id=None if ids is None else ids[index])
        for name in names:
            value = columns[name][index]
            if value is None:
                row.failures[name] = MetricFailure(name, index, "JudgeCallError", "boom")
            else:
                row.results[name] = MetricResult(name, value, "r")
        rows.append(row)
    return EvaluationResult(rows, names)


# -- gates with Holm ---------------------------------------------------------------------------

# Six rows that each fall by 1: of the 2^6 sign patterns only all-minus and all-plus are as
# extreme, so the exact permutation p is 2/64 = 0.03125; three metrics that do not move have
# p 1. Holm over the four: 4 x 0.03125 = 0.125, not below 0.05.
FELL: dict[str, list[float | None]] = {
    "a": [1.0] * 6,
    "b": [1.0, 0.0] * 3,
    "c": [0.5] * 6,
    "d": [0.0, 1.0] * 3,
}
AFTER: dict[str, list[float | None]] = {**FELL, "a": [0.0] * 6}


def test_a_drop_significant_alone_passes_among_four_gated_metrics() -> None:
    comparison = compare(run(dict(FELL)), run(dict(AFTER)))
    assert comparison.metrics["a"].p_value == pytest.approx(2 / 64)
    four = regression_gates(comparison, dict.fromkeys("abcd", 0.02))
    a = four.checks["a"]
    assert (a.dropped, a.p_value, a.p_holm, a.significant) == (True, 2 / 64, 0.125, False)
    assert not four.failed and four.correction == "holm" and four.tested == list("abcd")
    alone = regression_gates(comparison, {"a": 0.02})
    assert alone.failed and alone.correction == "none" and alone.checks["a"].p_holm == 2 / 64
    assert alone.messages() == [
        "a mean fell 1.0000 -> 0.0000 (-1.0000, more than 0.02; p 0.0312 < alpha 0.05); "
        "regressed rows: row 0, row 1, row 2, row 3, row 4, row 5"
    ]
    text = str(four)
    assert (
        "gates: a gate fails when its mean falls by more than MAX_DROP and the drop is "
        "significant: paired permutation test (sign flips), two-sided, alpha 0.05, Holm's "
        "correction over the 4 gated metrics with a p-value (a, b, c, d)"
    ) in text
    assert "| a | 0.02 | -1.0000 | 0.0312 | 0.1250 | pass (drop not significant) |" in text
    assert "Holm's p 0.1250 over 4 gated metrics, not below alpha 0.05" in text
    document = json.loads(json.dumps(four.to_dict()))
    assert document["correction"] == "holm" and document["tested"] == list("abcd")
    assert document["metrics"]["a"]["p_value"] == 2 / 64
    assert document["metrics"]["a"]["p_holm"] == 0.125
    assert document["metrics"]["a"]["failed"] is False and document["failed"] is False


def write(tmp_path: Path, name: str, columns: dict[str, list[float | None]]) -> str:
    path = tmp_path / f"{name}.jsonl"
    run(columns).to_jsonl(path)
    return str(path)


def gate_all(*paths: str) -> list[str]:
    return ["compare", *paths, *[f for m in "abcd" for f in ("--fail-on-regression", f"{m}=0.02")]]


def test_the_cli_corrects_with_holm_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's case: a raw p under 0.05 among four gated metrics does not fail the run."""
    base, cand = write(tmp_path, "base", dict(FELL)), write(tmp_path, "cand", dict(AFTER))
    assert main(gate_all(base, cand)) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert "Holm's correction over the 4 gated metrics with a p-value (a, b, c, d)" in out
    assert "| a | 0.02 | -1.0000 | 0.0312 | 0.1250 | pass (drop not significant) |" in out
    assert main(["compare", base, cand, "--fail-on-regression", "a=0.02"]) == 1
    assert "p 0.0312 < alpha 0.05" in capsys.readouterr().err


def test_compare_gates_with_holm_without_statsmodels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base, cand = write(tmp_path, "base", dict(FELL)), write(tmp_path, "cand", dict(AFTER))
    for name in [name for name in sys.modules if name.split(".")[0] == "statsmodels"]:
        monkeypatch.setitem(sys.modules, name, None)  # import statsmodels... fails
    monkeypatch.setitem(sys.modules, "statsmodels", None)
    with pytest.raises(ImportError):
        import statsmodels.stats.multitest  # noqa: F401
    assert main(gate_all(base, cand)) == 0
    out = capsys.readouterr().out
    assert "Holm's correction over the 4 gated metrics" in out and "| 0.1250 |" in out
    assert "power: not computed" in out
    assert main(["compare", base, cand, "--fail-on-regression", "a=0.02"]) == 1


def metric_runs(
    drops: list[float], noise: list[float], rows: int, seed: int
) -> tuple[EvaluationResult, EvaluationResult]:
    rng = np.random.default_rng(seed)
    before: dict[str, list[float | None]] = {}
    after: dict[str, list[float | None]] = {}
    for index, (drop, spread) in enumerate(zip(drops, noise, strict=True)):
        values = rng.uniform(0, 1, rows)
        before[f"m{index}"] = list(values)
        after[f"m{index}"] = list(values - drop + spread * rng.normal(0, 1, rows))
    return run(before), run(after)


@settings(max_examples=60, deadline=None)
@given(
    drops=st.lists(st.sampled_from([0.0, 0.05, 0.2, 0.5]), min_size=1, max_size=5),
    rows=st.integers(2, 40),
    max_drop=st.sampled_from([0.0, 0.02, 0.1]),
    alpha=st.sampled_from([0.01, 0.05, 0.1]),
    seed=st.integers(0, 1000),
)
def test_a_gate_fails_exactly_on_a_holm_significant_drop_beyond_its_bar(
    drops: list[float], rows: int, max_drop: float, alpha: float, seed: int
) -> None:
    baseline, candidate = metric_runs(drops, [0.2] * len(drops), rows, seed)
    comparison = compare(baseline, candidate)
    names = list(comparison.metrics)
    gates = regression_gates(comparison, dict.fromkeys(names, max_drop), alpha=alpha)
    # the reference: each metric's own permutation test, statsmodels' Holm over all of them
    raw = [
        paired_permutation_test(
            np.asarray(candidate.scores(name)) - np.asarray(baseline.scores(name))
        )
        for name in names
    ]
    adjusted = statsmodels_holm(raw)
    for name, p, p_holm in zip(names, raw, adjusted, strict=True):
        check = gates.checks[name]
        difference = float(np.mean(candidate.scores(name)) - np.mean(baseline.scores(name)))
        assert check.p_value == pytest.approx(p) and check.p_holm == pytest.approx(p_holm)
        assert check.failed == (difference < -max_drop and p_holm < alpha)
    assert gates.correction == ("holm" if len(names) > 1 else "none")
    assert gates.failed == any(check.failed for check in gates.checks.values())


def test_gates_refuse_unknown_metrics_and_bad_bars() -> None:
    comparison = compare(run({"a": [1.0, 0.0]}), run({"a": [1.0, 0.0]}))
    with pytest.raises(ConfigError, match=r"not in both runs: \['x'\]"):
        regression_gates(comparison, {"x": 0.1})
    with pytest.raises(ConfigError, match="MAX_DROP must be a number >= 0"):
        regression_gates(comparison, {"a": -0.1})
    with pytest.raises(ConfigError, match="alpha must be between 0 and 1"):
        regression_gates(comparison, {"a": 0.1}, alpha=1.0)


# -- runs paired by id: rows only one run has --------------------------------------------------


def stop_early_runs(tmp_path: Path) -> tuple[Path, Path]:
    """The simulation how-to's two scenarios, 5 trials each: a full run and a stopped one."""
    from turneval import AIMessage, EvalTask
    from turneval.metrics import CustomMetric
    from turneval.simulation import Scenario, ScriptedUser

    def agent(messages: list[object]) -> list[AIMessage]:  # never manages a refund
        refund = any("refund" in str(getattr(m, "content", "")) for m in messages)
        return [AIMessage(content="sorry, I cannot" if refund else "done")]

    def solved(instance: dict[str, object]) -> float:
        return 0.0 if "sorry" in str(instance["response"]) else 1.0

    task = EvalTask(
        [
            Scenario(id="cancel", goal="cancel", first_message="cancel my order"),
            Scenario(id="refund", goal="refund", first_message="refund my order"),
        ],
        [CustomMetric(name="solved", metric_function=solved)],
        show_progress=False,
    )
    user = ScriptedUser(["thanks"])
    full = task.evaluate(runnable=agent, user=user, trials=5)
    stopped = task.evaluate(runnable=agent, user=user, trials=5, stop_early=True)
    assert len(full) == 10 and len(stopped) == 6  # refund stopped after its first failure
    paths = tmp_path / "full.jsonl", tmp_path / "stopped.jsonl"
    full.to_jsonl(paths[0])
    stopped.to_jsonl(paths[1])
    return paths


def test_a_run_that_stopped_early_compares_and_plans_against_a_full_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    full, stopped = stop_early_runs(tmp_path)
    baseline, candidate = (EvaluationResult.from_jsonl(path) for path in (full, stopped))
    comparison = compare(baseline, candidate)
    m = comparison.metrics["solved"]
    # cancel's five trials and refund's first pair: 5 x 1.0 and one 0.0 on both sides
    assert (m.pairs, m.baseline_mean, m.candidate_mean, m.p_value) == (6, 5 / 6, 5 / 6, 1.0)
    assert comparison.paired_by == "id" and comparison.stopped_early == ["candidate"]
    refund = [f"refund#{trial}" for trial in range(1, 5)]
    assert comparison.rows_only_baseline == comparison.rows_not_run == refund
    assert comparison.rows_only_candidate == [] and comparison.rows_missing == []
    text = str(comparison)
    assert (
        "note: 4 baseline rows left out: trials the candidate did not run, their scenario "
        "settled early (stop_early): refund#1, refund#2, refund#3, refund#4"
    ) in text
    assert comparison.to_dict()["rows_not_run"] == refund
    # the other way round: the full run's extra trials are the candidate's
    backwards = compare(candidate, baseline)
    assert backwards.rows_only_candidate == backwards.rows_not_run == refund
    assert "4 candidate rows left out: trials the baseline did not run" in str(backwards)
    capsys.readouterr()
    assert main(["compare", str(full), str(stopped), "--fail-on-regression", "0"]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "| solved | 0 | +0.0000 | 1.0000 | 1.0000 | pass |" in out
    assert main(["plan", str(stopped), "--baseline", str(full), "--mde", "0.1"]) == 0
    out = capsys.readouterr().out
    assert "| solved | 6 | 0.8333 |" in out  # the six paired rows
    assert "pass^5 of solved: 0.5000 over 2 scenarios" in out  # refund settled at 0
    assert "note: 4 baseline rows with no row in the run" in out and "refund#4" in out


def test_rows_only_one_run_has_are_counted_listed_and_left_out() -> None:
    baseline = run({"m": [1.0, 1.0, 0.0, 1.0, 0.5]}, ids=["a", "b", "c", "d", "e"])
    candidate = run({"m": [0.0, 1.0, 0.0, 1.0]}, ids=["c", "a", "x", "d"])
    comparison = compare(baseline, candidate)
    m = comparison.metrics["m"]
    # a, c and d pair: baseline 1, 0, 1 against candidate 1, 0, 1
    assert (m.pairs, m.baseline_mean, m.candidate_mean) == (3, 2 / 3, 2 / 3)
    assert comparison.rows_only_baseline == comparison.rows_missing == ["b", "e"]
    assert comparison.rows_only_candidate == ["x"] and comparison.rows_not_run == []
    text = str(comparison)
    assert "note: 2 baseline rows with no row in the candidate, left out: b, e" in text
    assert "note: 1 candidate row with no row in the baseline, left out: x" in text
    # rows the candidate lacks (no early stop explains them: a run cut short?) fail a gate
    gates = regression_gates(comparison, {"m": 0.1})
    assert gates.failed and not gates.checks["m"].failed
    assert gates.messages() == [
        "the candidate has no row for 2 baseline rows (a run cut short?), left out of the "
        "gates: b, e"
    ]
    assert not regression_gates(comparison, {}).failed  # no gate, nothing to fail
    with pytest.raises(ConfigError, match="share no sample"):
        compare(baseline, run({"m": [1.0]}, ids=["z"]))


@settings(max_examples=80, deadline=None)
@given(
    base_ids=st.lists(st.sampled_from("abcdefghij"), min_size=1, max_size=10, unique=True),
    cand_ids=st.lists(st.sampled_from("abcdefghij"), min_size=1, max_size=10, unique=True),
    seed=st.integers(0, 1000),
)
def test_rows_pair_by_id_whatever_the_order_and_overlap(
    base_ids: list[str], cand_ids: list[str], seed: int
) -> None:
    """Compare over two runs' shared ids equals compare over those rows alone, in order."""
    rng = np.random.default_rng(seed)
    score = {
        key: float(value) for key, value in zip("abcdefghij", rng.uniform(0, 1, 10), strict=True)
    }
    shift = {
        key: float(value) for key, value in zip("abcdefghij", rng.normal(0, 0.3, 10), strict=True)
    }
    baseline = run({"m": [score[i] for i in base_ids]}, ids=base_ids)
    candidate = run({"m": [score[i] + shift[i] for i in cand_ids]}, ids=cand_ids)
    shared = [i for i in base_ids if i in cand_ids]
    if not shared:
        with pytest.raises(ConfigError, match="share no sample"):
            compare(baseline, candidate)
        return
    comparison = compare(baseline, candidate)
    m = comparison.metrics["m"]
    alone = compare(
        run({"m": [score[i] for i in shared]}, ids=shared),
        run({"m": [score[i] + shift[i] for i in shared]}, ids=shared),
    ).metrics["m"]
    assert m.pairs == alone.pairs == len(shared)
    assert m.baseline_mean == pytest.approx(alone.baseline_mean)
    assert m.difference == pytest.approx(alone.difference)
    assert m.p_value == pytest.approx(alone.p_value)
    assert comparison.rows_only_baseline == [i for i in base_ids if i not in cand_ids]
    assert comparison.rows_only_candidate == [i for i in cand_ids if i not in base_ids]
    # row indices stay the baseline's
    assert all(base_ids[index] in shared for index in m.worse)

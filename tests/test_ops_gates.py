"""Gates on operational metrics: a rise is the regression, and its power is the t-test's."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from statsmodels.stats.power import TTestPower

from turneval import MetricResult, SampleResult
from turneval.cli import main
from turneval.compare import compare, metric_directions, regression_gates
from turneval.metrics import TurnLatency
from turneval.results import EvaluationResult
from turneval.stats import gate_report, plan


def run(columns: dict[str, list[float]]) -> EvaluationResult:
    """A run read back from a file (no metric objects): one row per position, ids r0, r1..."""
    names = list(columns)
    rows = []
    for index in range(len(columns[names[0]])):
        row = SampleResult(index, None, stored_id=f"r{index}")
        for name in names:
            row.results[name] = MetricResult(name, columns[name][index], "r")
        rows.append(row)
    return EvaluationResult(rows, names)


RNG = np.random.default_rng(49)
BEFORE = list(RNG.uniform(0.8, 1.6, 30))
SLOWER = [value + 0.4 + noise for value, noise in zip(BEFORE, RNG.normal(0, 0.1, 30), strict=True)]
FASTER = [value - 0.4 for value in BEFORE]


def test_a_rise_of_turn_latency_fails_its_gate_and_a_fall_passes() -> None:
    slower = compare(run({"turn_latency": BEFORE}), run({"turn_latency": SLOWER}))
    m = slower.metrics["turn_latency"]
    assert m.higher_is_better is False
    assert m.difference == pytest.approx(float(np.mean(SLOWER) - np.mean(BEFORE)))
    assert m.worse == [i for i in range(30) if SLOWER[i] > BEFORE[i]]
    assert m.regressions == [] and m.improvements == []  # no pass threshold of its own
    gates = regression_gates(slower, {"turn_latency": 0.2})
    assert gates.failed
    (message,) = gates.messages()
    assert message.startswith(
        f"turn_latency mean rose {np.mean(BEFORE):.4f} -> {np.mean(SLOWER):.4f} "
        f"({m.difference:+.4f}, more than 0.2; p "
    )
    assert "rises, for turn_latency: lower is better" in gates.rule()
    assert not regression_gates(slower, {"turn_latency": 0.5}).failed  # within its bar
    faster = compare(run({"turn_latency": BEFORE}), run({"turn_latency": FASTER}))
    assert not regression_gates(faster, {"turn_latency": 0.0}).failed  # faster is no regression
    # the same numbers under a score's name: the fall is the regression, the rise is not
    as_score = compare(run({"m": BEFORE}), run({"m": FASTER}))
    assert regression_gates(as_score, {"m": 0.2}).failed
    assert not regression_gates(compare(run({"m": BEFORE}), run({"m": SLOWER})), {"m": 0.2}).failed


def test_rows_pass_at_or_below_a_latency_threshold() -> None:
    before, after = [1.0, 2.0, 3.0, 1.5], [2.5, 2.0, 1.0, 1.5]
    comparison = compare(
        run({"turn_latency": before}),
        run({"turn_latency": after}),
        pass_thresholds={"turn_latency": 2.0},
    )
    m = comparison.metrics["turn_latency"]
    # passes at <= 2: row 0 passed (1.0) and fails (2.5); row 2 failed (3.0) and passes (1.0)
    assert m.regressions == [0] and m.improvements == [2] and m.worse == [0]
    assert comparison.to_dict()["metrics"]["turn_latency"]["higher_is_better"] is False
    assert "note: turn_latency: lower is better, so a rise is its regression" in str(comparison)


def test_a_metric_object_declares_its_direction_under_any_name() -> None:
    metric = TurnLatency(name="wait")
    first, second = run({"wait": BEFORE}), run({"wait": SLOWER})
    first.metrics, second.metrics = [metric], [metric]
    assert metric_directions(["wait"], first, second) == {"wait": False}
    assert metric_directions(["wait"]) == {"wait": True}  # unknown by name: a score
    assert regression_gates(compare(first, second), {"wait": 0.2}).failed


def test_the_power_of_a_latency_gate_is_statsmodels_t_test_power() -> None:
    comparison = compare(run({"turn_latency": BEFORE}), run({"turn_latency": SLOWER}))
    report = gate_report(comparison, ["turn_latency"], mde=0.05, alpha=0.05)
    gate = report.metrics["turn_latency"]
    sd = float(np.std(np.asarray(SLOWER) - np.asarray(BEFORE), ddof=1))
    assert gate.sd == pytest.approx(sd)
    assert gate.power == pytest.approx(
        TTestPower().power(effect_size=0.05 / sd, nobs=30, alpha=0.05)
    )
    assert gate.higher_is_better is False
    assert "turn_latency: lower is better: its figures are for a rise of 0.05" in str(report)


def test_plan_sizes_a_run_to_see_a_rise_in_latency() -> None:
    found = plan(run({"turn_latency": BEFORE}), mde=0.1)
    m = found.metrics["turn_latency"]
    sd = float(np.std(BEFORE, ddof=1)) * math.sqrt(2)
    assert m.sd == pytest.approx(sd)
    expected = math.ceil(TTestPower().solve_power(effect_size=0.1 / sd, alpha=0.05, power=0.8))
    assert m.samples_needed == expected and m.higher_is_better is False
    assert "its figures are for a rise of 0.1" in str(found)


def test_the_cli_gate_on_a_rise(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, cand = tmp_path / "base.jsonl", tmp_path / "cand.jsonl"
    run({"turn_latency": BEFORE}).to_jsonl(base)
    run({"turn_latency": SLOWER}).to_jsonl(cand)
    args = ["compare", str(base), str(cand), "--fail-on-regression", "turn_latency=0.2"]
    assert main(args) == 1
    assert "FAIL: turn_latency mean rose" in capsys.readouterr().err
    assert main(["compare", str(cand), str(base), "--fail-on-regression", "turn_latency=0.2"]) == 0


# -- summary, report and the CLI's floor ----------------------------------------------------------


def latency_samples(tmp_path: Path) -> Path:
    import json

    path = tmp_path / "data.jsonl"
    lines = []
    for number, seconds in enumerate((0.3, 0.6, 0.9)):
        lines.append(
            json.dumps(
                {
                    "user_input": [
                        {"type": "human", "content": "q"},
                        {"type": "ai", "content": "a"},
                    ],
                    "metadata": {"id": f"s{number}", "turn_timings": [{"latency_s": seconds}]},
                }
            )
        )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_summary_and_report_of_a_latency_run(tmp_path: Path) -> None:
    from turneval import EvaluationDataset, evaluate

    data = EvaluationDataset.from_jsonl(latency_samples(tmp_path))
    result = evaluate(data, [TurnLatency()])
    summary = result.summary()["turn_latency"]
    assert summary.mean == pytest.approx(0.6)
    # rows 0.3, 0.6, 0.9: p50 0.6, p95 at h = 1.9: 0.6 + 0.9 * 0.3 = 0.87
    assert summary.extra == pytest.approx(
        {
            "rows_p50": 0.6,
            "rows_p95": 0.87,
            "rows_max": 0.9,
            "turns_p50": 0.6,
            "turns_p95": 0.87,
            "turns_max": 0.9,
        }
    )
    result.to_html(tmp_path / "report.html")
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "<td class='num neutral'>0.300</td>" in html  # no verdict colour: 0.3 s is no score
    assert "class='num bad'" not in html


def test_fail_under_refuses_a_metric_where_lower_is_better(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = latency_samples(tmp_path)
    code = main(
        [
            "evaluate",
            str(data),
            "--metric",
            "turn_latency",
            "--fail-under",
            "turn_latency=2",
            "--out",
            str(tmp_path / "out"),
        ]
    )
    assert code == 2
    assert (
        "lower is better for turn_latency, so a floor does not gate it" in capsys.readouterr().err
    )

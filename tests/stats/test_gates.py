"""The statistics behind a comparison's gates: Holm, power at alpha over m, --min-power."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import numpy as np
import pytest
from statsmodels.stats.power import TTestPower

from turneval.cli import main
from turneval.compare import compare
from turneval.stats import gate_report

from ._helpers import (
    run,
    write_runs,
)


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
    how_to = (Path(__file__).parents[2] / "docs" / "how-to" / "cli.md").read_text("utf-8")
    assert "under-powered comparison with exit 4" in " ".join(how_to.split())


def test_min_power_passes_a_comparison_with_enough_rows(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    base = list(rng.uniform(0, 1, 400))
    cand = list(np.clip(np.asarray(base) + rng.normal(0, 0.05, 400), 0, 1))
    paths = write_runs(tmp_path, base, cand)
    assert main(["compare", *paths, "--fail-on-regression", "0.05", "--min-power", "0.8"]) == 0


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


PAGE = Path(__file__).resolve().parents[2] / "docs" / "how-to" / "gate-with-power.md"


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

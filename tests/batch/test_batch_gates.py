"""``turneval batch collect`` gates a run as ``evaluate`` does: the same exit codes and flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from turneval import EvaluationDataset
from turneval.batch import BatchRun
from turneval.cli import main

from .._batch_stub import BatchStub, Failing
from .test_batch_cli import flags
from .test_openai_batch import samples

ROWS = 16


def failing() -> Failing:
    """Every attempt of the first four requests the batches answer errors."""
    return Failing(4, every_attempt=True)


def evaluate_argv(stub: BatchStub, data: Path, out: Path, *extra: str) -> list[str]:
    argv = ["evaluate", str(data), "--metric", "fluency", "--quiet", "--engine", "batch"]
    argv += ["--out", str(out), "--poll-interval", "0", "--batch-attempts", "1"]
    return [*argv, *flags(stub), *extra]


def interrupted(
    stub: BatchStub, data: Path, out: Path, monkeypatch: pytest.MonkeyPatch, *extra: str
) -> None:
    """``evaluate --engine batch`` stopped by Ctrl-C, then followed until every batch ended."""

    def stopped(self: BatchRun, **kwargs: object) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(BatchRun, "wait", stopped)
        assert main(evaluate_argv(stub, data, out, *extra)) == 130
    for _ in range(3):  # validating -> in progress -> finalizing -> completed
        assert main(["batch", "status", str(out)]) == 0


def failed_rows(out: Path) -> int:
    return int(json.loads((out / "summary.json").read_text())["failed_rows"])


def test_batch_collect_exits_3_past_max_failed_as_evaluate_does(
    stub: BatchStub,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stub.inject = failing()
    data = tmp_path / "data.jsonl"
    EvaluationDataset(samples(ROWS)).to_jsonl(data)
    # The whole run through evaluate: exit 3, some rows failed.
    assert main(evaluate_argv(stub, data, tmp_path / "whole")) == 3
    failed = failed_rows(tmp_path / "whole")
    assert 0 < failed < ROWS
    refusal = f"FAIL: {failed} of {ROWS} rows failed; --max-failed allows 0"
    assert refusal in capsys.readouterr().err
    # The same run interrupted, then collected by 'turneval batch collect': the same code.
    out = tmp_path / "collected"
    interrupted(stub, data, out, monkeypatch)
    capsys.readouterr()
    assert main(["batch", "collect", str(out), "--quiet"]) == 3
    assert failed_rows(out) == failed
    err = capsys.readouterr().err
    assert refusal in err and "batch request failed: HTTP 500: injected server error" in err
    # --max-failed as evaluate reads it: a count, a fraction, a percentage.
    assert main(["batch", "collect", str(out), "--quiet", "--max-failed", str(failed)]) == 0
    assert main(["batch", "collect", str(out), "--quiet", "--max-failed", str(failed - 1)]) == 3
    assert main(["batch", "collect", str(out), "--quiet", "--max-failed", "100%"]) == 0
    assert main(["batch", "collect", str(out), "--quiet", "--max-failed", "0.0"]) == 3
    capsys.readouterr()
    assert main(["batch", "collect", str(out), "--max-failed", "lots"]) == 2
    assert "--max-failed 'lots'" in capsys.readouterr().err


def test_batch_collect_applies_fail_under_and_the_gates_evaluate_was_given(
    stub: BatchStub,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stub.inject = failing()
    data = tmp_path / "data.jsonl"
    EvaluationDataset(samples(ROWS)).to_jsonl(data)
    out = tmp_path / "out"
    # evaluate allowed every failed row and set a bar; Ctrl-C; collect takes both from it
    interrupted(stub, data, out, monkeypatch, "--max-failed", "100%", "--fail-under", "fluency=5")
    capsys.readouterr()
    assert main(["batch", "collect", str(out), "--quiet"]) == 1  # fluency's mean is below 5
    mean = json.loads((out / "summary.json").read_text())["metrics"]["fluency"]["mean"]
    assert 1 <= mean < 5
    assert f"FAIL: fluency mean {mean:.4f} < 5.0" in capsys.readouterr().err
    # flags given to collect win over those remembered
    argv = ["batch", "collect", str(out), "--quiet"]
    assert main([*argv, "--fail-under", "fluency=1"]) == 0
    assert main([*argv, "--max-failed", "0", "--fail-under", "fluency=1"]) == 3
    assert main([*argv, "--max-failed", "0"]) == 3  # 3 wins over 1, as in evaluate
    capsys.readouterr()
    assert main([*argv, "--fail-under", "fluency=9"]) == 2  # off the scale: usage, no work
    assert "fluency scores lie in [1, 5]" in capsys.readouterr().err

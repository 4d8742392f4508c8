"""``turneval evaluate --engine batch`` and ``turneval batch status|collect|cancel``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from turneval import EvaluationDataset
from turneval.batch import BatchRun
from turneval.cli import main
from turneval.usage import Usage

from .._batch_stub import BatchStub
from .test_openai_batch import samples


def flags(stub: BatchStub) -> list[str]:
    return ["--judge-model", "gpt-4o-mini", "--judge-base-url", stub.url]


def test_evaluate_with_the_batch_engine_writes_a_live_runs_outputs(
    stub: BatchStub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data.jsonl"
    EvaluationDataset(samples(12)).to_jsonl(data)
    out = tmp_path / "out"
    argv = ["evaluate", str(data), "--metric", "fluency", "--metric", "exact_match", "--quiet"]
    argv += ["--engine", "batch", "--out", str(out), "--poll-interval", "0"]
    assert main([*argv, *flags(stub), "--price-input", "2", "--price-output", "8"]) == 0
    printed = capsys.readouterr().out
    assert stub.sync_requests == 0 and len(stub.submitted) == 12
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 12 and all(row["fluency"] is not None for row in rows)
    assert (out / "summary.json").exists() and (out / "report.html").exists()
    # 12 answers of 100 + 20 tokens: live 12 * (100 * 2 + 20 * 8) / 1e6, half through batches
    assert "judge cost through batches: 0.0022 (live it would have been 0.0043)" in printed
    assert "12/12 answered" in printed and "1 round(s)" in printed


def test_a_batch_run_folder_remembers_the_judge_flags_and_collects_into_files(
    stub: BatchStub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from langchain_openai import ChatOpenAI

    from turneval.errors import ConfigError

    data = tmp_path / "data.jsonl"
    EvaluationDataset(samples(3)).to_jsonl(data)
    out = tmp_path / "out"
    argv = ["evaluate", str(data), "--metric", "fluency", "--quiet", "--engine", "batch"]
    assert main([*argv, "--out", str(out), "--poll-interval", "0", *flags(stub)]) == 0
    capsys.readouterr()
    assert BatchRun.remembered(out) == {  # what 'turneval batch' rebuilds the judge from
        "judge_model": "gpt-4o-mini",
        "judge_base_url": stub.url,
        "judge_api_key_env": None,
        # and what 'turneval batch collect' gates and prices by default (never a key)
        "max_failed": "0",
        "fail_under": [],
        "price_input": None,
        "price_output": None,
        "name": None,  # the run's --name, which collect names the stored run by
        "store": None,
    }
    with pytest.raises(ConfigError, match=f"{tmp_path} holds no batch run"):
        BatchRun.remembered(tmp_path)
    (out / "summary.json").unlink()
    run = BatchRun.open(out, llm=ChatOpenAI(model="gpt-4o-mini", base_url=stub.url, api_key="x"))
    result = run.collect_files(show_progress=False)  # from the stored answers: no new request
    assert result.total_rows == 3 and result.failed_rows == 0
    assert json.loads((out / "summary.json").read_text())["metrics"]["fluency"]["count"] == 3
    assert len(stub.submitted) == 3 and stub.sync_requests == 0


def test_ctrl_c_leaves_the_batches_running_and_batch_collect_comes_back(
    stub: BatchStub,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = tmp_path / "data.jsonl"
    EvaluationDataset(samples(6)).to_jsonl(data)
    out = tmp_path / "out"

    def interrupted(self: BatchRun, **kwargs: object) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(BatchRun, "wait", interrupted)
        argv = ["evaluate", str(data), "--metric", "fluency", "--engine", "batch"]
        assert main([*argv, "--out", str(out), *flags(stub)]) == 130
    assert f"turneval batch collect {out}" in capsys.readouterr().err
    assert main(["batch", "collect", str(out)]) == 2  # still running: says so
    assert "still running" in capsys.readouterr().err
    for _ in range(3):  # validating -> in progress -> finalizing -> completed
        assert main(["batch", "status", str(out)]) == 0
    assert "6/6 answered" in capsys.readouterr().out
    assert main(["batch", "collect", str(out), "--quiet"]) == 0
    assert len((out / "results.jsonl").read_text().splitlines()) == 6
    assert stub.sync_requests == 0 and len(stub.submitted) == 6


def test_batch_cancel(stub: BatchStub, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data.jsonl"
    EvaluationDataset(samples(4)).to_jsonl(data)
    out = tmp_path / "out"
    stub.hold = True

    def interrupted(self: BatchRun, **kwargs: object) -> None:
        raise KeyboardInterrupt

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(BatchRun, "wait", interrupted)
        argv = ["evaluate", str(data), "--metric", "fluency", "--engine", "batch"]
        assert main([*argv, "--out", str(out), *flags(stub)]) == 130
    assert main(["batch", "cancel", str(out)]) == 0
    assert main(["batch", "status", str(out)]) == 0
    assert "0/4 answered, 4 failed" in capsys.readouterr().out


def test_dry_run_prints_the_live_and_the_batch_price(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from turneval.estimate import estimate
    from turneval.results import Prices
    from turneval.runner import resolve_metrics

    data = tmp_path / "data.jsonl"
    EvaluationDataset(samples(5)).to_jsonl(data)
    argv = ["evaluate", str(data), "--metric", "fluency", "--dry-run", "--price-input", "3"]
    assert main(argv) == 0
    tokens = estimate(samples(5), resolve_metrics(["fluency"])).total_prompt_tokens
    live, batch = tokens * 3 / 1e6, tokens * 3 / 1e6 / 2
    assert f"live: {live:.4f}   through a batch API (--engine batch): {batch:.4f}" in (
        capsys.readouterr().out
    )
    assert Prices(3, 0, batch_discount=0.4).batch_cost(Usage(input_tokens=10**6)) == pytest.approx(
        1.8
    )


def test_the_batch_module_and_cli_load_no_provider_sdk() -> None:
    import subprocess
    import sys

    code = (
        "import sys, turneval.batch\nfrom turneval.cli import build_parser\nbuild_parser()\n"
        "print(sorted({m.split('.')[0] for m in sys.modules}))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout
    for sdk in ("openai", "anthropic", "langchain_core", "langchain_anthropic"):
        assert f"'{sdk}'" not in loaded

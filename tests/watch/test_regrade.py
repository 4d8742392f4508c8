"""turneval regrade: a stored run's judged metric re-scored by another judge, and compared."""

import hashlib
from pathlib import Path
from typing import Any

import pytest

from tests._openai_stub import Reply
from turneval import AIMessage, HumanMessage, MultiTurnSample, evaluate
from turneval.cli import main
from turneval.metrics import AgentGoalAccuracyWithoutReference, StepBudget
from turneval.store import RunStore


def _judge(url: str) -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model="old-judge", base_url=url, api_key="k")


# 6 of the 10 rows, each way of saying it: a row count, a share of the rows (ceil(0.55 x 10)),
# and the row count of earlier versions (deprecated, named on stderr)
@pytest.mark.parametrize(
    ("chosen_by", "deprecated"),
    [(["--limit", "6"], False), (["--sample", "0.55"], False), (["--sample", "6"], True)],
)
def test_regrade_reports_flips_agreement_and_cost_on_hash_chosen_rows(
    tmp_path: Path,
    openai_stub: Any,
    capsys: pytest.CaptureFixture[str],
    chosen_by: list[str],
    deprecated: bool,
) -> None:
    samples = [
        MultiTurnSample(
            user_input=[HumanMessage(content=f"book table {k}"), AIMessage(content=f"done {k}")],
            metadata={"id": f"conv-{k}"},
        )
        for k in range(10)
    ]
    store = RunStore(tmp_path / "runs.db")
    openai_stub.reset(default=Reply(from_schema=True), schema_seed=1)
    old = evaluate(
        samples,
        [AgentGoalAccuracyWithoutReference(), StepBudget(max_steps=1)],
        llm=_judge(openai_stub.url),
        store=store,
        show_progress=False,
    )
    assert old.store_run is not None
    openai_stub.reset(default=Reply(from_schema=True), schema_seed=2)  # another judge
    command = ["regrade", old.store_run[:8], "--judge-model", "new-judge"]
    command += ["--judge-base-url", openai_stub.url, "--store", str(tmp_path / "runs.db")]
    command += [*chosen_by, "--price-input", "1.0", "--price-output", "2.0"]
    assert main(command) == 0
    out, err = capsys.readouterr()
    warned = "regrade --sample 6 as a row count is deprecated: use --limit 6" in err
    assert warned == deprecated
    # the 6 rows whose index hashes lowest (the documented rule)
    chosen = sorted(sorted(range(10), key=lambda i: hashlib.sha256(str(i).encode()).digest())[:6])
    runs = {run.name: run for run in store.runs()}
    new_run = runs[f"regrade {old.store_run[:12]} with new-judge"]
    assert new_run.judge_model == "new-judge"
    before = {r["index"]: r for r in store.records(old.store_run)}
    after = {r["index"]: r for r in store.records(new_run.id)}
    assert sorted(after) == chosen
    name = "agent_goal_accuracy_without_reference"
    flipped = [i for i in chosen if before[i][name] != after[i][name]]
    assert 0 < len(flipped) < 6, flipped  # the two judges agree on some rows, not all
    assert f"{name}: {len(flipped)} of 6 rows changed" in out
    for index in flipped:
        line = f"row {index} (conv-{index}): {before[index][name]:g} -> {after[index][name]:g}"
        assert line in out
    same = sum(before[i][name] == after[i][name] for i in chosen)
    assert f"agreement {same / 6:.3f}" in out
    assert "step_budget" not in out  # not judged: not regraded
    calls = len(openai_stub.requests)  # each request: 100 prompt and 20 completion tokens
    assert calls == 6
    cost = (calls * 100 * 1.0 + calls * 20 * 2.0) / 1e6
    assert f"new judge: 6 calls, 600 input and 120 output tokens, cost {cost:.4f}" in out


@pytest.mark.parametrize(
    ("flags", "problem"),
    [
        (["--sample", "0"], "argument --sample: must be a share in (0, 1], got 0"),
        (["--sample", "2.5"], "--sample must be a share of the rows in (0, 1]"),
        (["--sample", "0.5", "--limit", "3"], "give --sample SHARE or --limit N, not both"),
    ],
)
def test_regrade_names_a_sample_that_is_no_share_nor_row_count(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], problem: str
) -> None:
    command = ["regrade", "abc", "--judge-model", "m", "--store", str(tmp_path / "runs.db")]
    try:
        code = main([*command, *flags])
    except SystemExit as exc:  # refused by the parser: --sample's type is a share
        code = int(str(exc.code))
    assert code == 2
    assert problem in capsys.readouterr().err


def test_regrade_refuses_a_run_without_judged_metrics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = RunStore(tmp_path / "runs.db")
    sample = MultiTurnSample(user_input=[HumanMessage(content="hi"), AIMessage(content="hey")])
    run = evaluate([sample], [StepBudget(max_steps=1)], store=store, show_progress=False)
    assert run.store_run is not None
    command = ["regrade", run.store_run, "--judge-model", "m", "--judge-base-url", "http://x"]
    assert main([*command, "--store", str(tmp_path / "runs.db")]) == 2
    assert "has no judged metric to regrade" in capsys.readouterr().err

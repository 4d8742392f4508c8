"""What a batch run spent, where it is recorded, and the run store it goes to."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from turneval import EvaluationDataset, SingleTurnSample, evaluate
from turneval.batch import BatchRun, submit
from turneval.cli import main
from turneval.llms import SQLiteCache
from turneval.results import Prices
from turneval.store import RunStore
from turneval.usage import Usage

from .._batch_stub import BatchStub, Failing
from .test_batch_cli import flags
from .test_openai_batch import judge, samples


def rows() -> list[SingleTurnSample]:
    """Ten rows: six distinct, two repeating the first two, two without a reference."""
    distinct = [
        SingleTurnSample(user_input=f"question {i}", response=f"answer {i}", reference=f"ref {i}")
        for i in range(6)
    ]
    bare = [SingleTurnSample(user_input=f"question {i}", response=f"answer {i}") for i in (6, 7)]
    return [*distinct, distinct[0], distinct[1], *bare]


# By hand: fluency states a request for each of the 10 rows, correctness for the 8 with a
# reference (it refuses the other 2, which fail). 18 stated, as --dry-run counts them; the
# repeated rows make 2 + 2 identical requests, so 14 distinct; the cache already holds the
# fluency answers of rows 2 and 3, so 12 are sent in batches.
STATED, IDENTICAL, CACHED, SENT, REFUSED = 18, 4, 2, 12, 2


def test_a_batch_run_records_its_usage_and_cost_and_explains_the_dry_runs_count(
    stub: BatchStub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data.jsonl"
    EvaluationDataset(rows()).to_jsonl(data)
    cache = tmp_path / "cache.sqlite"
    answered = rows()[2:4]
    evaluate(answered, ["fluency"], llm=judge(stub), cache=SQLiteCache(cache))
    metrics = ["--metric", "fluency", "--metric", "correctness"]
    assert main(["evaluate", str(data), *metrics, "--dry-run", *flags(stub)]) == 0
    total = re.search(r"^total  (\d+)", capsys.readouterr().out, re.MULTILINE)
    assert total is not None and int(total.group(1)) == STATED
    stub.sync_requests = 0
    stub.inject = Failing(4)  # some requests need a second attempt
    out = tmp_path / "out"
    argv = ["evaluate", str(data), *metrics, "--quiet", "--engine", "batch", "--out", str(out)]
    argv += ["--poll-interval", "0", "--cache", str(cache), "--max-failed", str(REFUSED)]
    assert main([*argv, *flags(stub), "--price-input", "2", "--price-output", "8"]) == 0
    printed = capsys.readouterr().out
    lines = len(stub.submitted)  # every line the batches received
    again = lines - SENT
    assert stub.sync_requests == 0 and again == 4  # the 4 failed first attempts, sent again
    assert len({c[:56] for c in stub.submitted}) == SENT
    # Each answer costs the stub's 100 + 20 tokens; an error costs none.
    spent = Usage(input_tokens=SENT * 100, output_tokens=SENT * 20, calls=lines)
    assert (
        f"judge requests: {STATED} stated up front (what --dry-run counts); {IDENTICAL} "
        f"identical to another one (asked once); {CACHED} answered by the cache; {SENT} sent "
        f"in batches as {lines} lines ({again} follow-ups and repairs); {REFUSED} cell(s) with "
        "no request: the metric refused the row, which fails with its reason"
    ) in printed
    # The summary's judge usage is what the batches spent; the cells read without a request of
    # this run (the cache's 2 answers, the 4 identical requests) are its cached calls.
    summary = json.loads((out / "summary.json").read_text())
    usage = Usage.from_dict(summary["usage"])
    assert usage == Usage(spent.input_tokens, spent.output_tokens, lines, CACHED + IDENTICAL)
    assert f"judge: {lines} requests, 6 cached, 1,200 input + 240 output tokens" in printed
    per_metric = [Usage.from_dict(summary["metrics"][name]["usage"]) for name in summary["metrics"]]
    assert sum(per_metric, Usage()) == usage  # each request charged to the metric that asked it
    # The run.json manifest: what the batches did, spent and cost (live: 1200 * 2 + 240 * 8
    # per million tokens; through batches half of it).
    manifest = json.loads((out / "run.json").read_text())["batch"]
    assert manifest["requests"] == {
        "stated": STATED,
        "identical": IDENTICAL,
        "found_later": 0,
        "distinct": STATED - IDENTICAL,
        "cached": CACHED,
        "sent": SENT,
        "lines_sent": lines,
        "answered": STATED - IDENTICAL,
        "failed": 0,
        "refused_cells": REFUSED,
    }
    assert Usage.from_dict(manifest["usage"]) == spent
    assert manifest["cost"] == pytest.approx({"live": 0.00432, "batch": 0.00216})
    assert manifest["prices"] == {
        "input_per_million": 2.0,
        "output_per_million": 8.0,
        "batch_discount": 0.5,
    }
    assert manifest["input"]["path"] == str(data.resolve()) and manifest["rounds"] == 2
    assert "judge cost through batches: 0.0022 (live it would have been 0.0043)" in printed


def test_collect_in_memory_counts_what_the_batches_spent(stub: BatchStub, tmp_path: Path) -> None:
    data = samples(6)
    run = submit([*data, data[0]], ["fluency"], llm=judge(stub), out=tmp_path / "run")
    status = run.wait(progress=False, poll_interval=0)
    assert (status.stated, status.identical, status.sent, status.cached) == (7, 1, 6, 0)
    assert status.usage == Usage(600, 120, calls=6)
    result = run.collect()
    assert result.usage == Usage(600, 120, calls=6, cached_calls=1)  # the repeated row
    # live: 600 * 2 + 120 * 8 per million tokens; through batches half of it
    assert run.cost(Prices(2, 8)) == pytest.approx((0.00108, 0.00216))


def test_batch_runs_go_to_the_run_store_as_evaluate_store_does(
    stub: BatchStub,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = tmp_path / "data.jsonl"
    EvaluationDataset(samples(5)).to_jsonl(data)
    argv = ["evaluate", str(data), "--metric", "fluency", "--quiet", "--engine", "batch"]
    argv += ["--poll-interval", "0", *flags(stub)]
    # --store: the rows and the summary go to the store
    named = tmp_path / "named.db"
    assert main([*argv, "--out", str(tmp_path / "a"), "--store", str(named)]) == 0
    (run,) = RunStore(named).runs()
    assert run.status == "finished" and run.rows == 5
    assert (
        run.dataset_digest
        == json.loads((tmp_path / "a" / "run.json").read_text())["batch"]["input"]["sha256"]
    )
    assert run.summary is not None and run.summary["usage"]["calls"] == 5
    records = list(RunStore(named).records(run.id))
    assert [record["fluency"] for record in records] == [
        json.loads(line)["fluency"]
        for line in (tmp_path / "a" / "results.jsonl").read_text().splitlines()
    ]
    # TURNEVAL_STORE, for a run interrupted by Ctrl-C, then collected by 'turneval batch'
    environment = tmp_path / "environment.db"
    monkeypatch.setenv("TURNEVAL_STORE", str(environment))

    def stopped(self: BatchRun, **kwargs: object) -> None:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(BatchRun, "wait", stopped)
        assert main([*argv, "--out", str(tmp_path / "b")]) == 130
    monkeypatch.delenv("TURNEVAL_STORE")  # the folder remembers the store it was given
    for _ in range(3):
        assert main(["batch", "status", str(tmp_path / "b")]) == 0
    assert main(["batch", "collect", str(tmp_path / "b"), "--quiet"]) == 0
    (stored,) = RunStore(environment).runs()
    assert stored.rows == 5 and stored.status == "finished"
    # --store given to collect wins
    chosen = tmp_path / "chosen.db"
    assert main(["batch", "collect", str(tmp_path / "b"), "--quiet", "--store", str(chosen)]) == 0
    assert [r.rows for r in RunStore(chosen).runs()] == [5]
    assert len(RunStore(environment).runs()) == 1
    capsys.readouterr()

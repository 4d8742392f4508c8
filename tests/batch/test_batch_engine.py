"""The batch engine through evaluate_jsonl: the same files as a live run, reopened, not resent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from turneval import EvaluationDataset
from turneval.engines import Batch, Local
from turneval.errors import ConfigError
from turneval.stream import JsonlSource, evaluate_jsonl

from .._batch_stub import BatchStub
from .test_openai_batch import METRICS, judge, samples


def rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def values(out: Path) -> list[tuple[Any, ...]]:
    return [(row["index"], row["fluency"], row["exact_match"]) for row in rows(out)]


def test_the_batch_engine_writes_the_files_a_live_run_writes(
    stub: BatchStub, tmp_path: Path
) -> None:
    data = tmp_path / "data.jsonl"
    EvaluationDataset(samples(9)).to_jsonl(data)
    engine = Batch(poll_interval=0, max_attempts=2)
    out = tmp_path / "batch"
    result = evaluate_jsonl(data, METRICS, out, engine=engine, llm=judge(stub), show_progress=False)
    assert stub.sync_requests == 0 and len(stub.submitted) == 9  # every judge request batched
    assert result.total_rows == 9 and result.failed_rows == 0
    assert (out / "summary.json").exists() and (out / "report.html").exists()
    live = evaluate_jsonl(data, METRICS, tmp_path / "live", llm=judge(stub), engine=Local())
    assert stub.sync_requests == 9  # the same seeded answers, asked one by one
    assert values(out) == values(tmp_path / "live")
    assert live.summaries["fluency"].mean == result.summaries["fluency"].mean
    # the same call again reopens the run: nothing is sent twice
    again = evaluate_jsonl(data, METRICS, out, engine=engine, llm=judge(stub), show_progress=False)
    assert len(stub.submitted) == 9 and stub.sync_requests == 9
    assert again.total_rows == 9 and values(out) == values(tmp_path / "live")


def test_the_batch_engine_refuses_what_a_batch_run_cannot_do(
    stub: BatchStub, tmp_path: Path
) -> None:
    data = tmp_path / "data.jsonl"
    EvaluationDataset(samples(2)).to_jsonl(data)
    engine, llm = Batch(poll_interval=0), judge(stub)
    with pytest.raises(ConfigError, match=r"the batch engine needs a judge: pass llm="):
        evaluate_jsonl(data, ["exact_match"], tmp_path / "o", engine=engine)
    with pytest.raises(ConfigError, match="the batch engine does not take timeout, details"):
        evaluate_jsonl(
            data, METRICS, tmp_path / "o", engine=engine, llm=llm, timeout=5, details=False
        )
    with pytest.raises(ConfigError, match="reads a JSONL file of samples"):
        evaluate_jsonl(
            JsonlSource(data, lenient_json=True), METRICS, tmp_path / "o", engine=engine, llm=llm
        )
    with pytest.raises(ConfigError, match="does not take report_rows"):
        evaluate_jsonl(data, METRICS, tmp_path / "o", engine=engine, llm=llm, report_rows=3)
    with pytest.raises(
        ConfigError, match="max_attempts: Input should be greater than or equal to 1"
    ):
        Batch(max_attempts=0)
    with pytest.raises(ConfigError, match="fallback: Input should be 'fail' or 'sync'"):
        Batch(fallback="retry")
    assert stub.submitted == []  # nothing was sent for a refused run


def test_the_batch_engine_pins_the_dataset_version_a_live_run_pins(
    stub: BatchStub, tmp_path: Path
) -> None:
    from turneval._files import file_digest
    from turneval.store import RunStore

    data = tmp_path / "data.jsonl"
    EvaluationDataset(samples(4)).to_jsonl(data)
    store = str(tmp_path / "runs.db")
    with RunStore(store) as kept:
        kept.add_dataset(data, name="support")
    expected = {"digest": file_digest(data), "name": "support", "version": 1}
    for engine in (Batch(poll_interval=0), Local()):
        out = tmp_path / engine.name
        evaluate_jsonl(
            data, METRICS, out, engine=engine, llm=judge(stub), store=store, show_progress=False
        )
        assert json.loads((out / "run.json").read_text())["dataset"]["version"] == expected
    with RunStore(store) as kept:
        runs = kept.runs()
        assert len(runs) == 2
        assert {kept.dataset_of(run.dataset_digest) for run in runs} == {kept.dataset("support@1")}

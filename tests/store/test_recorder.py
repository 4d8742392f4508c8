"""A run's rows written as they finish: batches, the writer thread, a stopped and resumed run."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from turneval import MultiTurnSample, evaluate
from turneval.engines import Local
from turneval.results import SampleResult
from turneval.store import RunStore
from turneval.stream import evaluate_jsonl
from turneval.stream._sink import JsonlSink

from ._helpers import GOOD, sample_row, write_data

pytest.importorskip("sqlalchemy")


def test_rows_reach_the_store_as_they_finish(store_url: str) -> None:
    samples = [MultiTurnSample.model_validate(sample_row(i, g)) for i, g in enumerate(GOOD)]
    writer, reader = RunStore(store_url, batch_rows=2), RunStore(store_url)
    seen: list[tuple[str, int]] = []

    def look(row: SampleResult) -> None:  # another connection, while the run goes on
        (run,) = reader.runs()
        seen.append((run.status, run.rows))

    result = evaluate(samples, ["tool_call_f1"], store=writer, on_row=look, max_concurrency=1)
    # the row just finished is written before on_row sees it, in whole batches of 2 (or sooner)
    for done, (status, stored) in enumerate(seen, start=1):
        assert status == "running"
        assert done - done % 2 <= stored <= done
    (run,) = reader.runs()
    assert result.store_run == run.id
    assert (run.status, run.rows, run.metric_names) == ("finished", 6, ["tool_call_f1"])
    assert run.summary is not None
    assert run.summary["metrics"]["tool_call_f1"]["mean"] == pytest.approx(4 / 6)
    assert run.summary["failed_rows"] == 0
    # the rows are the results.jsonl rows, with the sample beside them
    assert list(reader.records(run.id)) == json.loads(json.dumps(result.records(details=True)))
    # pages: keyset by index, failed rows only, text in the sample
    page = reader.rows_page(run.id, limit=4)
    assert [row.index for row in page] == [0, 1, 2, 3]
    assert [row.index for row in reader.rows_page(run.id, after=page[-1].index)] == [4, 5]
    assert reader.rows_page(run.id, failed=True) == []  # a wrong call is a 0, not a failure
    found = reader.rows_page(run.id, search="<b>4</b>")
    assert [(row.index, row.sample_id, row.record["tool_call_f1"]) for row in found] == [
        (4, "s4", 0.0)
    ]
    stored = reader.samples(run.id, [4])[4]
    assert stored["user_input"][0]["content"] == "find x <b>4</b>"
    assert stored["metadata"] == {"id": "s4"}
    writer.close()
    reader.close()


def test_a_streamed_run_stores_its_rows_from_a_writer_thread_and_raises_its_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from turneval.store import RunRecorder

    data, out, url = write_data(tmp_path / "data.jsonl"), tmp_path / "out", tmp_path / "s.db"
    threads: list[str] = []
    insert = RunRecorder._insert

    def noted(recorder: RunRecorder, pending: list[Any]) -> None:
        threads.append(threading.current_thread().name)
        insert(recorder, pending)

    monkeypatch.setattr(RunRecorder, "_insert", noted)
    done = evaluate_jsonl(
        data, ["tool_call_f1"], out, engine=Local(workers=1, chunk_size=2), store=url
    )
    assert done.store_run is not None
    store = RunStore(url)
    assert set(threads) == {"turneval-store-writer"} and len(threads) == 3  # 6 rows, 2 a chunk
    assert (
        list(store.record_lines(done.store_run)) == (out / "results.jsonl").read_text().splitlines()
    )
    assert store.run(done.store_run).status == "finished"

    def broken(recorder: RunRecorder, pending: list[Any]) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(RunRecorder, "_insert", broken)
    with pytest.raises(OSError, match="disk gone"):  # raised in the caller, not lost in a thread
        evaluate_jsonl(
            data,
            ["tool_call_f1"],
            tmp_path / "out2",
            engine=Local(workers=1, chunk_size=2),
            store=url,
        )
    assert [run.status for run in store.runs()].count("failed") == 1


def test_a_streamed_run_stores_its_rows_as_written_without_reading_them_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from turneval.store import _engine, _rows

    rows = [
        sample_row(0, True),
        sample_row(1, False),
        sample_row(2, True) | {"reference_tool_calls": None},
    ]
    rows.append({key: value for key, value in sample_row(3, True).items() if key != "metadata"})
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(row) + "\n" for row in rows))

    def no_reading(text: Any) -> Any:
        raise AssertionError("a streamed row is read back from its text")

    for module in (_engine, _rows):  # the store's JSON reader, where it is defined and used
        monkeypatch.setattr(module, "loads", no_reading)
    url, out = str(tmp_path / "s.db"), tmp_path / "out"
    done = evaluate_jsonl(
        data, ["tool_call_f1"], out, engine=Local(workers=1, chunk_size=2), store=url
    )
    monkeypatch.undo()
    assert done.store_run is not None
    with RunStore(url) as store:
        page = store.rows_page(done.store_run)
        # index, line, id and failed as the file's rows have them (row 2 has no reference calls)
        assert [(row.index, row.line, row.sample_id, row.failed) for row in page] == [
            (0, 1, "s0", False),
            (1, 2, "s1", False),
            (2, 3, "s2", True),
            (3, 4, None, False),
        ]
        assert [row.index for row in store.rows_page(done.store_run, failed=True)] == [2]
        lines = (out / "results.jsonl").read_text().splitlines()
        assert list(store.record_lines(done.store_run)) == lines
        with store.engine.connect() as connection:  # a new file: 16 KiB pages, partial indexes
            assert connection.exec_driver_sql("PRAGMA page_size").scalar() == 16384
            indexes: dict[str, str] = dict(
                connection.exec_driver_sql(
                    "SELECT name, sql FROM sqlite_master WHERE tbl_name = 'rows' AND sql IS NOT NULL"
                ).all()
            )
    assert indexes["ix_rows_failed"].endswith("WHERE failed IS 1")
    assert indexes["ix_rows_run_sample"].endswith("WHERE sample_id IS NOT NULL")


def test_a_stopped_run_is_interrupted_and_resume_continues_it(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data, out = write_data(tmp_path / "data.jsonl"), tmp_path / "out"
    absorb, calls = JsonlSink.absorb, []

    def stop_at_second_chunk(sink: JsonlSink, chunk: Any) -> None:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        absorb(sink, chunk)

    monkeypatch.setattr(JsonlSink, "absorb", stop_at_second_chunk)
    with pytest.raises(KeyboardInterrupt):
        evaluate_jsonl(
            data, ["tool_call_f1"], out, engine=Local(workers=1, chunk_size=2), store=store_url
        )
    store = RunStore(store_url)
    (run,) = store.runs()
    assert (run.status, run.rows, run.error) == ("interrupted", 2, "KeyboardInterrupt: ")
    # stopped after the file got row 1 but before the store did: resume puts it back
    from sqlalchemy import delete

    from turneval.store._schema import rows

    with store.engine.begin() as connection:
        connection.execute(delete(rows).where(rows.c.run_id == run.id, rows.c.idx == 1))
    monkeypatch.setattr(JsonlSink, "absorb", absorb)
    stop = threading.Event()
    stop.set()  # SIGTERM before the next chunk (as the CLI sets it): the run stops again
    engine = Local(workers=1, chunk_size=2)
    options: dict[str, Any] = {"engine": engine, "store": store_url, "resume": True}
    assert evaluate_jsonl(data, ["tool_call_f1"], out, stop=stop, **options).stopped
    assert store.run(run.id).status == "interrupted"
    finished = evaluate_jsonl(data, ["tool_call_f1"], out, **options)
    (again,) = store.runs()
    assert finished.store_run == run.id
    assert (again.id, again.status, again.rows) == (run.id, "finished", 6)
    lines = (out / "results.jsonl").read_text().splitlines()
    assert list(store.record_lines(run.id)) == lines
    assert again.summary == json.loads((out / "summary.json").read_text())
    assert again.dataset_path == str(data.resolve()) and again.dataset_digest is not None
    assert again.metrics == json.loads((out / "run.json").read_text())["metrics"]
    # the stored samples are the input lines
    assert store.samples(run.id, [5])[5] == sample_row(5, True)
    store.close()

"""The run store: the same tests on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turneval import EvalTask, MultiTurnSample, evaluate
from turneval.cli import main
from turneval.demo import DOMAINS
from turneval.engines import Local
from turneval.errors import ConfigError
from turneval.metrics import ToolCallF1
from turneval.results import SampleResult
from turneval.simulation import ScriptedUser, simulate
from turneval.store import RunStore
from turneval.stream import evaluate_jsonl
from turneval.stream.sink import JsonlSink

pytest.importorskip("sqlalchemy")

CALL = {"name": "search", "args": {"q": "x"}}
WRONG = {"name": "delete", "args": {"q": "x"}}


def _row(number: int, good: bool) -> dict[str, Any]:
    return {
        "user_input": [
            {"type": "human", "content": f"find x <b>{number}</b>"},
            {"type": "ai", "content": "", "tool_calls": [CALL if good else WRONG]},
        ],
        "reference_tool_calls": [CALL],
        "metadata": {"id": f"s{number}"},
    }


# rows 0..5: tool_call_f1 is 1 where good, 0 where the call is wrong (rows 1 and 4)
GOOD = [True, False, True, True, False, True]
JUDGED = "agent_goal_accuracy_with_reference"


def _write_data(path: Path) -> Path:
    path.write_text("".join(json.dumps(_row(i, g)) + "\n" for i, g in enumerate(GOOD)))
    return path


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        (tmp_path / "store").mkdir()
        return str(tmp_path / "store" / "runs.db")
    server = request.getfixturevalue("postgres_server")
    return str(server.database())


def test_rows_reach_the_store_as_they_finish(store_url: str) -> None:
    samples = [MultiTurnSample.model_validate(_row(i, g)) for i, g in enumerate(GOOD)]
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

    data, out, url = _write_data(tmp_path / "data.jsonl"), tmp_path / "out", tmp_path / "s.db"
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

    rows = [_row(0, True), _row(1, False), _row(2, True) | {"reference_tool_calls": None}]
    rows.append({key: value for key, value in _row(3, True).items() if key != "metadata"})
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
    data, out = _write_data(tmp_path / "data.jsonl"), tmp_path / "out"
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
    assert store.samples(run.id, [5])[5] == _row(5, True)
    store.close()


WRITER = textwrap.dedent(
    """
    import sys
    from turneval.store import RunStore

    store = RunStore(sys.argv[1], batch_rows=1)  # one transaction a row: the most contention
    recorder = store.start_run(name=sys.argv[2])
    for index in range(150):
        recorder.add_record(f'{{"index": {index}}}', {"index": index})
    recorder.finish({"samples": 150})
    """
)


def test_two_processes_writing_one_sqlite_store_lose_no_row(tmp_path: Path) -> None:
    url = str(tmp_path / "shared.db")  # created by whichever process comes first
    env = {"PYTHONPATH": str(Path(__file__).parents[1] / "src")}
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, url, name], env=env, stderr=subprocess.PIPE, text=True
        )
        for name in ("a", "b")
    ]
    for writer in writers:
        _, errors = writer.communicate(timeout=120)
        assert writer.returncode == 0, errors
    with RunStore(url) as store:
        runs = {run.name: run for run in store.runs()}
        assert sorted(runs) == ["a", "b"]
        for run in runs.values():
            assert (run.status, run.rows) == ("finished", 150)
            assert [r["index"] for r in store.records(run.id, batch=40)] == list(range(150))


def test_cli_run_import_and_export_give_back_the_files(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    data, out = _write_data(tmp_path / "data.jsonl"), tmp_path / "run"
    monkeypatch.setenv("TURNEVAL_STORE", store_url)  # evaluate keeps its run there
    assert main(["evaluate", str(data), "--metric", "tool_call_f1", "--out", str(out)]) == 0
    assert main(["store", "import", str(out), "--name", "imported"]) == 0
    assert "(6 rows)" in capsys.readouterr().out
    with RunStore(store_url) as store:
        runs = {run.name: run for run in store.runs()}
    assert sorted(runs) == ["data.jsonl", "imported"]
    for name, run in runs.items():
        target = tmp_path / f"export-{name}"
        assert main(["store", "export", run.id[:8], "--out", str(target)]) == 0
        for file in ("results.jsonl", "summary.json"):
            assert (target / file).read_bytes() == (out / file).read_bytes(), (name, file)
        # run.json: the run's manifest as stored (compare checks it), not a run to resume
        exported = json.loads((target / "run.json").read_text())
        assert exported["metrics"] == json.loads((out / "run.json").read_text())["metrics"]
        assert "lines_read" not in exported["dataset"]
    capsys.readouterr()
    assert main(["store", "list", "--store", store_url]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert len(listed) == 2 and all("6 rows" in line for line in listed)
    assert listed[-1].startswith(runs["data.jsonl"].id[:12])  # newest first
    # compare reads an exported folder as it reads the run's own
    assert main(["compare", str(out), str(tmp_path / "export-imported")]) == 0
    assert main(["store", "delete", runs["imported"].id[:9]]) == 0
    with RunStore(store_url) as store:
        assert [run.name for run in store.runs()] == ["data.jsonl"]


def test_labels_export_and_calibrate_from_the_store(
    store_url: str, tmp_path: Path, capsys: Any
) -> None:
    data, out = _write_data(tmp_path / "data.jsonl"), tmp_path / "run"
    # calibrate checks judged metrics: rows scored 0/1 under a binary judge's name
    judged = ToolCallF1(name=JUDGED)
    evaluate_jsonl(data, [judged], out, store=store_url)
    store = RunStore(store_url)
    (run,) = store.runs()
    # a person disagrees with the metric on row 2 (and changes their mind on row 0)
    store.add_label(metric=JUDGED, label="no", run_id=run.id, row_index=0)
    for index, good in enumerate(GOOD):
        label = "no" if index == 2 else ("yes" if good else "no")
        store.add_label(
            metric=JUDGED, label=label, run_id=run.id, row_index=index, note=f"n{index}"
        )
    store.add_label(metric=JUDGED, label=1, sample_id="s9")  # no row of this run
    store.add_label(metric="other", label=1, run_id=run.id, row_index=3)  # not in its results
    store.close()
    labels = tmp_path / "labels.jsonl"
    args = ["--store", store_url, "--run", run.id[:10]]
    assert main(["labels", "export", *args, "--metric", JUDGED, "--output", str(labels)]) == 0
    written = [json.loads(line) for line in labels.read_text().splitlines()]
    assert written[1] == {"index": 1, "metric": JUDGED, "label": "no", "reason": "n1"}
    assert [item["index"] for item in written] == [0, 1, 2, 3, 4, 5]
    assert [item["label"] for item in written] == ["yes", "no", "no", "yes", "no", "yes"]
    capsys.readouterr()
    assert main(["calibrate", str(out), str(labels), "--html", str(tmp_path / "a.html")]) == 0
    from_file = capsys.readouterr().out.splitlines()[:-1]  # without the "wrote ..." line
    html = str(tmp_path / "b.html")
    assert main(["calibrate", *args, "--html", html]) == 0
    from_store = capsys.readouterr().out.splitlines()[:-1]
    assert from_store == from_file
    assert any("5/6" in line or "0.833" in line for line in from_store)  # 5 of 6 agree


def test_simulate_and_eval_task_keep_their_runs(store_url: str) -> None:
    def echo(messages: list[Any]) -> list[Any]:
        return [*messages, {"type": "ai", "content": "ok"}]

    scenarios = [{"id": "a", "goal": "g"}, {"id": "b", "goal": "h"}]
    dataset = simulate(echo, scenarios, user=ScriptedUser(["hi"]), trials=2, store=store_url)
    with RunStore(store_url) as store:
        (run,) = store.runs()
        assert (run.name, run.status, run.rows, run.metrics) == ("simulate", "finished", 4, [])
        stored = store.samples(run.id, range(4))
    assert [stored[i] for i in range(4)] == [
        json.loads(sample.model_dump_json(exclude_none=True)) for sample in dataset.samples
    ]
    # EvalTask: the conversations scored (no reference calls: every row fails, and is kept)
    result = EvalTask(dataset, ["tool_call_f1"]).evaluate(store=store_url)
    with RunStore(store_url) as store:
        task = store.runs()[0]
        assert (task.name, task.status, task.rows) == ("EvalTask", "finished", 4)
        assert task.summary is not None and task.summary["failed_rows"] == 4
        assert [row.index for row in store.rows_page(task.id, failed=True)] == [0, 1, 2, 3]
        assert store.rows_page(task.id, failed=False) == []
        assert list(store.records(task.id)) == json.loads(json.dumps(result.records(details=True)))


def test_bad_stores_and_runs_are_one_line_errors(
    tmp_path: Path, capsys: Any, postgres_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = str(tmp_path / "runs.db")
    RunStore(url).close()
    from sqlalchemy import create_engine, text

    engine = create_engine(f"sqlite:///{url}")
    with engine.begin() as connection:  # as a newer turneval would leave it
        connection.execute(text("UPDATE alembic_version SET version_num = 'f00d'"))
    engine.dispose()
    with pytest.raises(ConfigError, match="schema revision f00d, made by a newer turneval"):
        RunStore(url)
    assert main(["store", "list", "--store", url]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "newer turneval" in error
    (tmp_path / "junk.db").write_text("not a database " * 100)
    with pytest.raises(ConfigError, match="cannot open the run store .*junk.db: file is not a"):
        RunStore(tmp_path / "junk.db")
    with pytest.raises(ConfigError, match="'mysql://...': expected a file in an existing folder"):
        RunStore("mysql://user:secret@host/db")
    closed = postgres_server.url("nowhere").replace(str(postgres_server.port), "1")
    with pytest.raises(ConfigError, match=r"cannot open the run store postgresql://.*:1/nowhere"):
        RunStore(closed.replace("turneval@", "turneval:secret@"))
    with monkeypatch.context() as patch:  # without the store extra's packages
        patch.setitem(sys.modules, "psycopg", None)
        with pytest.raises(ConfigError, match=r"needs psycopg 3: pip install 'turneval\[store\]'"):
            RunStore(postgres_server.url())
        patch.setitem(sys.modules, "alembic", None)
        with pytest.raises(ConfigError, match="needs Alembic"):
            RunStore(tmp_path / "other.db")
    good = str(tmp_path / "good.db")
    assert main(["store", "export", "abc123", "--out", str(tmp_path / "x"), "--store", good]) == 2
    assert "run 'abc123' is not in the run store" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="not in the run store"):
        RunStore(good).run("not-hex")


def test_an_older_store_upgrades_itself_and_keeps_its_runs(store_url: str) -> None:
    from alembic import command
    from alembic.autogenerate import compare_metadata
    from alembic.config import Config
    from alembic.runtime.migration import MigrationContext
    from sqlalchemy import create_engine, inspect, text

    from turneval.store._engine import MIGRATIONS
    from turneval.store._schema import metadata

    raw = store_url if "://" in store_url else f"sqlite:///{store_url}"
    engine = create_engine(raw.replace("postgresql://", "postgresql+psycopg://"))
    if "://" not in store_url:
        Path(store_url).parent.mkdir(exist_ok=True)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:  # the store as the first release left it
        config.attributes["connection"] = connection
        command.upgrade(config, "0001")
        connection.execute(
            text(
                "INSERT INTO runs (id, name, created, turneval_version, metrics, status) "
                "VALUES ('ab12', 'old', CURRENT_TIMESTAMP, '0.0.9', '[]', 'finished')"
            )
        )
        connection.execute(
            text(
                "INSERT INTO rows (run_id, idx, failed, record) "
                "VALUES ('ab12', 0, false, '{\"index\": 0}'), ('ab12', 1, false, '{\"index\": 1}')"
            )
        )
    assert "ix_rows_run_failed" not in {i["name"] for i in inspect(engine).get_indexes("rows")}
    with RunStore(store_url) as store:
        assert store.schema_revision() == "0008"
        assert [(run.id, run.name, run.turneval_version, run.rows) for run in store.runs()] == [
            ("ab12", "old", "0.0.9", 2)
        ]
        with engine.connect() as connection:  # revision 0006 counted the ended run's rows
            assert connection.execute(text("SELECT row_count FROM runs")).scalar() == 2
        assert "ix_labels_run_metric_row" in {
            i["name"] for i in inspect(engine).get_indexes("labels")
        }
        store.delete_run("ab")
        assert store.runs() == []
    assert "ix_rows_failed" in {i["name"] for i in inspect(engine).get_indexes("rows")}
    with engine.connect() as connection:  # the migrations build exactly the tables declared
        assert compare_metadata(MigrationContext.configure(connection), metadata) == []
    engine.dispose()


def test_demo_keeps_its_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    url = str(tmp_path / "demo.db")
    assert main(["demo", "--out", str(tmp_path / "out"), "--store", url]) == 0
    printed = capsys.readouterr().out
    assert f"turneval store list --store {url}" in printed
    assert f"turneval view --store {url}" in printed
    with RunStore(url) as store:
        runs = store.runs()
        assert sorted(run.name for run in runs) == sorted(
            [*(f"demo: {d.name}" for d in DOMAINS), "demo: team"]
        )
        for run in runs:
            folder = tmp_path / "out" / run.name.removeprefix("demo: ")
            lines = (folder / "results.jsonl").read_text().splitlines()
            assert [json.loads(line) for line in lines] == list(store.records(run.id))


def test_a_run_fail_on_error_stops_is_failed_with_its_reason(tmp_path: Path) -> None:
    from turneval.errors import EvaluationAbortedError

    broken = MultiTurnSample.model_validate(_row(0, True) | {"reference_tool_calls": None})
    url = str(tmp_path / "runs.db")
    with pytest.raises(EvaluationAbortedError):
        evaluate([broken], ["tool_call_f1"], store=url, fail_on_error=True)
    with RunStore(url) as store:
        (run,) = store.runs()
        assert (run.status, run.rows) == ("failed", 1)
        assert run.error is not None and run.error.startswith("fail_on_error=True: 1 of 1 rows")
        assert run.summary is not None and run.summary["failed_rows"] == 1


# -- item 20: a mistyped store is an error, never a new folder ---------------------------------

_MISSING = "no-such-folder"
_NAMES = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="/\x00"),
    min_size=1,
    max_size=12,
)
_SCHEMES = st.from_regex(r"[A-Za-z][A-Za-z0-9+.-]{1,9}", fullmatch=True)
_KNOWN = {"sqlite", "postgresql", "postgres", "postgresql+psycopg"}


@st.composite
def _malformed_stores(draw: st.DrawFn, root: str) -> tuple[str, str]:
    """``(store spec, what its error must name)``: a spec no store may be made from."""
    name = draw(_NAMES)
    kind = draw(st.integers(0, 7))
    if kind == 0:  # a relative path under a folder that does not exist
        spec = f"{_MISSING}/{name}/runs.db"
    elif kind == 1:  # an absolute one
        spec = f"{root}/{_MISSING}/{name}.db"
    elif kind == 2:  # a URL without its "//": sqlite:/runs.db, postgresql:host/db
        spec = f"{draw(_SCHEMES)}:{draw(st.sampled_from(['', '/']))}{name}"
    elif kind == 3:  # sqlite:/// in a folder that does not exist
        spec = f"sqlite:///{root}/{_MISSING}/{name}/runs.db"
    elif kind == 4:  # sqlite:// with a host and no file
        spec = f"sqlite://{name}"
    elif kind == 5:  # another database's URL (only its scheme is named: it may hold a password)
        scheme = draw(_SCHEMES.filter(lambda s: s.lower() not in _KNOWN))
        return f"{scheme}://user:secret@{name}/db", f"{scheme}://..."
    elif kind == 6:  # an existing folder
        spec = draw(st.sampled_from([root, ".", f"sqlite:///{root}"]))
    else:
        spec = ""
    return spec, spec


def _tree(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*")}


@pytest.mark.parametrize("name", ["runs?x.db", "runs#x.db", "a b%20.db"])
def test_a_store_path_is_a_path_not_a_url(tmp_path: Path, name: str) -> None:
    # Found by the property test below: 'no-such-folder/?/runs.db' was read as a URL whose
    # query began at '?', so its missing folder went unnoticed.
    with pytest.raises(ConfigError, match="does not exist"):
        RunStore(tmp_path / "no-such-folder" / "?" / name)
    with RunStore(tmp_path / name) as store:
        assert store.url == str(tmp_path / name)
    assert (tmp_path / name).is_file()


def test_a_malformed_store_is_one_line_naming_it_and_makes_no_folder(tmp_path: Path) -> None:
    import contextlib
    import io
    import os

    from turneval._hidden import shown

    root = tmp_path / "work"
    root.mkdir()
    before = _tree(tmp_path)
    here = os.getcwd()
    os.chdir(root)  # relative specs land here, if anywhere
    try:

        @settings(max_examples=80, deadline=None)
        @given(_malformed_stores(str(root)))
        def check(case: tuple[str, str]) -> None:
            spec, named = case
            with pytest.raises(ConfigError) as raised:
                RunStore(spec)
            message = str(raised.value)
            assert "\n" not in message and "\r" not in message, message
            assert repr(shown(named)) in message, message
            assert "expected a file in an existing folder, or a URL like sqlite:///PATH" in message
            if spec:  # (--store "" is no --store: the default store)
                err = io.StringIO()
                with contextlib.redirect_stderr(err):
                    assert main(["store", "list", "--store", spec]) == 2
                assert err.getvalue().count("\n") == 1, err.getvalue()
            assert _tree(tmp_path) == before  # no folder (nor file) made

        check()
    finally:
        os.chdir(here)


def test_the_default_store_makes_its_folder_and_an_existing_folder_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TURNEVAL_STORE", raising=False)
    with RunStore() as store:
        assert Path(store.url).resolve() == tmp_path / ".turneval" / "runs.db"
    assert main(["store", "list"]) == 0
    (tmp_path / "team").mkdir()
    with RunStore(tmp_path / "team" / "runs.db") as store:  # a new file in an existing folder
        assert store.runs() == []
    with RunStore(f"sqlite:///{tmp_path / 'team' / 'other.db'}") as store:
        assert store.runs() == []
    # the two reproductions: nothing made, the CLI says what is wrong
    capsys.readouterr()
    missing = tmp_path / "nonexistent" / "dir"
    assert main(["store", "list", "--store", str(missing / "runs.db")]) == 2
    error = capsys.readouterr().err
    assert error == (
        f"turneval: error: run store '{missing / 'runs.db'}': its folder '{missing}' "
        "does not exist: expected a file in an existing folder, or a URL like sqlite:///PATH "
        "or postgresql://...\n"
    )
    assert not (tmp_path / "nonexistent").exists()
    assert main(["store", "list", "--store", "sqlite:/runs.db"]) == 2
    assert "looks like a URL without its '//'" in capsys.readouterr().err
    assert not (tmp_path / "sqlite:").exists()


_HIDDEN_OR_BREAK = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
_CONTROLS = st.lists(
    st.sampled_from(["a", " ", "\x1b", "[31m", "\r", "\n", "\x07", "\u202e", "\x00", "é", "\x9b"]),
    min_size=1,
    max_size=12,
).map("".join)


@settings(max_examples=25, deadline=None)
@given(name=_CONTROLS, metric=_CONTROLS)
def test_store_list_and_import_show_control_characters_escaped(name: str, metric: str) -> None:
    import contextlib
    import io
    import tempfile

    from turneval._hidden import shown

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        run = root / ("run" + name.replace("\x00", ""))  # the folder's name is printed too
        run.mkdir()
        record = {"index": 0, metric: 1.0, f"{metric}_reason": "ok", f"{metric}_error": None}
        (run / "results.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
        url = str(root / "runs.db")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert main(["store", "import", str(run), "--name", name, "--store", url]) == 0
            assert main(["store", "list", "--store", url]) == 0
        printed = out.getvalue()
        lines = printed.splitlines()
        assert len(lines) == 2 and printed.endswith("\n")  # one line each, however named
        assert _HIDDEN_OR_BREAK.search(printed.replace("\n", "")) is None, repr(printed)
        one_line = shown(name).replace("\r", "<U+000D>").replace("\n", "<U+000A>")
        assert (
            one_line in lines[1]
            and shown(metric).replace("\n", "<U+000A>").replace("\r", "<U+000D>") in lines[1]
        )


def test_calibrate_names_the_row_and_value_of_a_stored_label_off_the_scale(
    tmp_path: Path, capsys: Any
) -> None:
    data, out = _write_data(tmp_path / "data.jsonl"), tmp_path / "run"
    url = str(tmp_path / "runs.db")
    evaluate_jsonl(data, [ToolCallF1(name=JUDGED)], out, store=url)  # JUDGED: a yes/no judge
    with RunStore(url) as store:
        (run,) = store.runs()
    args = ["calibrate", run.id[:8], "--store", url, "--html", str(tmp_path / "c.html")]
    # no labels yet: said so, with how to add some
    assert main(args) == 2
    assert capsys.readouterr().err == (
        f"turneval: error: run {run.id[:12]} has no labels in the store {url}: label its rows "
        "in turneval view (the run's 'label rows' page) or with RunStore.add_label, or "
        "calibrate a labels file (turneval calibrate RUN LABELS)\n"
    )
    assert main([*args, "--metric", JUDGED]) == 2
    assert f"has no labels of {JUDGED!r} in the store" in capsys.readouterr().err
    with RunStore(url) as store:  # the fifth label given is the value 7, on row 4
        for index in (0, 1, 2, 3):
            store.add_label(metric=JUDGED, label=1, run_id=run.id, row_index=index)
        store.add_label(metric=JUDGED, label=7, run_id=run.id, row_index=4)
    assert main(args) == 2
    error = capsys.readouterr().err
    assert error == (
        f"turneval: error: the stored label of run {run.id[:12]} row 4 for {JUDGED!r}: label 7 "
        f"is outside the scale of {JUDGED!r} (a yes/no judge: 0 or no, 1 or yes)\n"
    )
    assert "stored label 5" not in error

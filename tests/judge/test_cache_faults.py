"""A judge cache that cannot be written (or read) costs a warning, never a paid answer."""

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from turneval.engines import Local
from turneval.judge import CacheWarning, SQLiteCache
from turneval.stream import evaluate_jsonl

from .._builders import call, conversation
from .._fakes import ScriptedChatModel

METRIC = "agent_goal_accuracy_without_reference"
VERDICT = json.dumps({"user_goal": "g", "end_state": "e", "reason": "r", "achieved": True})


def data_file(tmp_path: Path, rows: int) -> Path:
    path = tmp_path / "data.jsonl"
    lines = [
        conversation([call("a", n=n)], reference=[call("a")]).model_dump_json(exclude_none=True)
        for n in range(rows)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def read_only_connections(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every cache connection refuses writes, as on a read-only file (SQLite's own error)."""
    connect = sqlite3.connect

    def read_only(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        connection: sqlite3.Connection = connect(*args, **kwargs)
        connection.execute("PRAGMA query_only=ON")
        return connection

    monkeypatch.setattr("turneval.judge._cache.sqlite3.connect", read_only)


def test_a_read_only_cache_is_found_before_the_run_and_no_row_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "cache.sqlite"
    SQLiteCache(path).set("stored", {"raw": "x"})  # a cache with an answer in it
    read_only_connections(monkeypatch)
    with pytest.warns(CacheWarning) as caught:
        cache = SQLiteCache(path)  # before any request is paid
    assert len(caught) == 1
    message = str(caught[0].message)
    assert message.startswith(f"judge cache {path} cannot be written (attempt to write a readonly")
    assert "answers already in it are read, new ones are not stored" in message
    assert not cache.writable and cache.get("stored") == {"raw": "x"}  # still read
    model = ScriptedChatModel(responses=[VERDICT])
    result = evaluate_jsonl(
        data_file(tmp_path, 40),
        [METRIC],
        tmp_path / "out",
        llm=model,
        cache=cache,
        engine=Local(workers=1),
    )
    assert model.calls == 40 and result.usage.calls == 40  # every paid answer used
    assert result.failed_rows == 0 and result.summaries[METRIC].mean == 1.0
    assert len(cache) == 1  # nothing new stored


def test_a_cache_that_fails_during_the_run_warns_once_and_the_run_goes_on(
    tmp_path: Path,
) -> None:
    path = tmp_path / "cache.sqlite"
    cache = SQLiteCache(path)
    cache._connection.execute("PRAGMA query_only=ON")  # writes fail from now on (as disk full)
    model = ScriptedChatModel(responses=[VERDICT])
    with pytest.warns(CacheWarning) as caught:
        result = evaluate_jsonl(
            data_file(tmp_path, 6),
            [METRIC],
            tmp_path / "out",
            llm=model,
            cache=cache,
            engine=Local(workers=1),
        )
    assert [str(w.message).split(" (")[0] for w in caught] == [
        f"judge cache {path} cannot be written"
    ]
    assert model.calls == 6 and result.failed_rows == 0 and result.summaries[METRIC].count == 6
    assert len(cache) == 0
    cache._connection.close()  # reads fail too: no answer is lost, every request is sent
    with pytest.warns(CacheWarning, match=r"cannot be read .*does without it"):
        assert cache.get("anything") is None
    assert not cache.readable


def test_the_cli_prints_the_warning_on_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from turneval.cli import main

    path = tmp_path / "cache.sqlite"
    SQLiteCache(path).close()
    read_only_connections(monkeypatch)
    data = data_file(tmp_path, 1)
    args = ["evaluate", str(data), "--metric", "tool_call_f1", "--out", str(tmp_path / "out")]
    assert main([*args, "--quiet", "--cache", str(path)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert err[0].startswith(f"turneval: warning: judge cache {path} cannot be written (")


def test_the_cli_refuses_a_cache_that_cannot_be_created_on_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from turneval.cli import main

    blocker = tmp_path / "file"
    blocker.write_text("")  # a file where the cache's folder should be
    data = data_file(tmp_path, 1)
    args = ["evaluate", str(data), "--metric", "tool_call_f1", "--out", str(tmp_path / "out")]
    assert main([*args, "--quiet", "--cache", str(blocker / "c.sqlite")]) == 2  # before the run
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and f"judge cache {blocker / 'c.sqlite'} does not exist" in err[0]
    assert f"its folder {blocker} cannot be made" in err[0]
    assert not (tmp_path / "out").exists()

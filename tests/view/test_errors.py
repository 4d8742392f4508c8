"""Runs the viewer once answered with a bare 500, and a store it cannot read.

A row whose input line was not JSON (its stored sample is the line as read), rows whose
values are not numbers, a SQLite store locked by another process, and any other failure:
each is a page that says what happened, with the right status.
"""

from __future__ import annotations

import html
import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("sqlalchemy")
pytest.importorskip("starlette")

from starlette.testclient import TestClient

from turneval.metrics import ToolCallF1
from turneval.store import RunStore
from turneval.stream import evaluate_jsonl
from turneval.view import create_app

JUDGED = "agent_goal_accuracy_with_reference"  # a yes/no judge: labels 0 or 1
GOOD = {
    "user_input": [
        {"type": "human", "content": "find x"},
        {"type": "ai", "content": "", "tool_calls": [{"name": "a", "args": {}}]},
    ],
    "reference_tool_calls": [{"name": "a", "args": {}}],
}
BROKEN = "not json { <b>bold</b>"


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf-token" content="([^"]+)"', page)
    assert found is not None
    return found.group(1)


def test_a_row_whose_input_line_was_not_json_opens_and_is_labeled(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text(json.dumps(GOOD) + "\n" + BROKEN + "\n")
    url = str(tmp_path / "runs.db")
    done = evaluate_jsonl(data, [ToolCallF1(name=JUDGED)], tmp_path / "out", store=url)
    assert done.store_run is not None
    with RunStore(url) as store:
        assert store.samples(done.store_run, [1]) == {1: BROKEN + "\n"}  # the line as read
        client = TestClient(create_app(store))
        row = client.get(f"/runs/{done.store_run}/rows/1")
        assert row.status_code == 200
        assert "input line 2 was not a JSON sample; as it was read:" in row.text
        assert "not json { &lt;b&gt;bold&lt;/b&gt;" in row.text
        assert "InvalidSampleError: line 2: not valid JSON" in row.text  # the row's error
        label = client.get(f"/runs/{done.store_run}/label?metric={JUDGED}&pos=1")
        assert label.status_code == 200 and "data-index='1'" in label.text
        body = {"run": done.store_run, "index": 1, "metric": JUDGED, "label": 0}
        saved = client.post("/api/labels", json=body, headers={"X-CSRF-Token": _csrf(label.text)})
        assert saved.status_code == 200
        assert store.labels(run_id=done.store_run)[-1].label == 0


def _odd_run(store: RunStore, values: list[Any], name: str = "odd") -> str:
    """A run of metric ``judge`` whose stored values are as given (numbers or not)."""
    recorder = store.start_run(
        name=name, configs=[{"name": "judge", "class": None, "config": None}]
    )
    recorder.names = ["judge"]
    for index, value in enumerate(values):
        record = {
            "index": index,
            "id": f"s{index}",
            "judge": value,
            "judge_reason": "r",
            "judge_error": None,
        }
        recorder.add_record(json.dumps(record), record, json.dumps(GOOD))
    recorder.finish({"metrics": {"judge": {"mean": 0.5, "count": len(values), "failed": 0}}})
    return recorder.run_id


def test_rows_whose_values_are_not_numbers_leave_every_page_of_the_run_working(
    tmp_path: Path,
) -> None:
    with RunStore(tmp_path / "runs.db") as store:
        odd = _odd_run(store, [1.0, "high", 0.0, {"x": 1}, [0.5], 0.5])
        plain = _odd_run(store, [1.0, 1.0, 1.0, 1.0, 1.0, 0.0], name="plain")
        client = TestClient(create_app(store))
        pages = {
            f"/runs/{odd}": "3 rows of judge hold a value that is not a number: left out",
            f"/runs/{odd}/rows": "<td class=''>high</td>",
            f"/runs/{odd}/rows/1": "judge</b> = <span class=''>high</span>",
            f"/runs/{odd}/rows/3": "{&quot;x&quot;: 1}",
            f"/runs/{odd}/rows?sort=value": "sorted by value: 3 rows have a value",
            f"/runs/{odd}/rows?below=0.7": "data-index='2'",
            f"/runs/{odd}/label?metric=judge&pos=1": "data-index='1'",
            f"/compare?a={plain}&b={odd}": "3 rows of judge hold a value that is not a number",
        }
        for path, said in pages.items():
            page = client.get(path)
            assert page.status_code == 200, (path, page.text[:400])
            assert said in page.text, (path, said)
        # compare: the three numeric pairs compared; row 2 (1 -> 0) regressed, 5 improved
        flips = re.findall(
            r"<tr class='flip \w+'><td>([^<]+)</td><td>judge</td><td>(s\d)",
            client.get(f"/compare?a={plain}&b={odd}").text,
        )
        assert flips == [("regression", "s2"), ("improvement", "s5")]


def test_a_locked_store_is_a_503_page_that_says_so(tmp_path: Path) -> None:
    url = tmp_path / "runs.db"
    with RunStore(url) as store:
        run = _odd_run(store, [1.0])
    with RunStore(url, busy_timeout=0.2) as store:
        client = TestClient(create_app(store))
        token = _csrf(client.get("/").text)
        store.close()  # the viewer's pooled connections end: its next ones must wait
        holder = sqlite3.connect(url, isolation_level=None)
        try:  # another process's exclusive lock: even readers wait (WAL or not)
            holder.execute("PRAGMA locking_mode = EXCLUSIVE")
            holder.execute("BEGIN EXCLUSIVE")
            holder.execute("UPDATE runs SET name = name")
            for path in ("/", f"/runs/{run}", f"/runs/{run}/rows/0"):
                page = client.get(path)
                assert page.status_code == 503, (path, page.text[:300])
                assert page.headers["retry-after"] == "5"
                assert "<title>Run store unavailable · turneval view</title>" in page.text
                assert (
                    f"the run store {store.url} cannot be read now: database is locked" in page.text
                )
                assert "another process holds its write lock" in page.text
            body = {"run": run, "index": 0, "metric": "judge", "label": 1}
            saved = client.post("/api/labels", json=body, headers={"X-CSRF-Token": token})
            assert saved.status_code == 503 and saved.text.startswith("the run store")
            assert saved.headers["content-type"].startswith("text/plain")
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert client.get(f"/runs/{run}").status_code == 200  # the lock gone, pages are back


def test_any_other_failure_is_a_500_page_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    with RunStore(tmp_path / "runs.db") as store:
        run = _odd_run(store, [1.0])
        client = TestClient(create_app(store))

        def broken(*args: Any, **kwargs: Any) -> Any:
            raise RuntimeError("the disk said <no>")

        monkeypatch.setattr(store, "samples", broken)
        page = client.get(f"/runs/{run}/rows/0")
        assert page.status_code == 500
        assert "the disk said &lt;no&gt;" in page.text  # escaped, as every text
        assert (
            "this page failed: RuntimeError: the disk said <no>. The store is unchanged; "
            "the viewer's log has the traceback." in html.unescape(page.text)
        )
        assert "Traceback" in caplog.text and "GET /runs/" in caplog.text
        assert client.get("/runs/abc/rows/0").status_code == 404  # an unknown run stays a 404

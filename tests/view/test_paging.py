"""Every viewer page is bounded, whatever the size of the runs behind it.

Lists are paged (runs, rows, the rows two runs changed) and each page holds at most its size;
a comparison, a run's histograms and a sort read the store's narrow columns, never whole runs;
a labeling keystroke reads one label; a huge message is cut, with a link to all of it. The
speed and memory figures are in benchmarks/ (``run_view_paging_bench.py``), not here.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("sqlalchemy")
pytest.importorskip("starlette")

from starlette.testclient import TestClient

from turneval.store import RunStore
from turneval.view import create_app
from turneval.view._render import PAGE_TEXT, TEXT, TURNS

HUGE = 20_000_000  # the attack's message: 20 MB made a 40 MB page


def _run(
    store: RunStore,
    values: Sequence[float | None],
    *,
    name: str = "run",
    sample: dict[str, Any] | None = None,
) -> str:
    recorder = store.start_run(name=name, configs=[{"name": "judge", "class": None}])
    recorder.names = ["judge"]
    for index, value in enumerate(values):
        record = {
            "index": index,
            "id": f"s{index}",
            "judge": value,
            "judge_reason": f"r{index}",
            "judge_error": None if value is not None else "TimeoutError: slow",
        }
        text = json.dumps(sample or {"user_input": [{"type": "human", "content": f"q{index}"}]})
        recorder.add_record(json.dumps(record), record, text)
    recorder.finish({"metrics": {"judge": {"mean": 0.5, "count": len(values), "failed": 0}}})
    return recorder.run_id


def _indexes(page: str) -> list[int]:
    return [int(i) for i in re.findall(r"<tr class='row' data-index='(\d+)'", page)]


def _walk(client: TestClient, path: str) -> list[str]:
    """Every page of a paged list, following its ``next page`` links."""
    pages = []
    while path:
        page = client.get(path)
        assert page.status_code == 200, path
        pages.append(page.text)
        found = re.search(r"id='next' href='([^']+)'", page.text)
        path = found.group(1).replace("&amp;", "&") if found else ""
        assert len(pages) < 100
    return pages


def test_runs_rows_and_sorted_rows_come_a_bounded_page_at_a_time(tmp_path: Path) -> None:
    with RunStore(tmp_path / "runs.db") as store:
        for number in range(56):
            store.start_run(name=f"empty {number}").finish(None)
        values = [((i * 37) % 11) / 10 for i in range(137)]
        run = _run(store, values)
        client = TestClient(create_app(store))
        runs = _walk(client, "/")
        counts = [len(re.findall(r"<tr class='run'", page)) for page in runs]
        assert counts == [50, 7]  # 57 runs, 50 a page
        listed = [rid for page in runs for rid in re.findall(r"data-run='(\w+)'", page)]
        assert len(set(listed)) == 57 and listed[0] == run  # newest first, each once
        assert "1-50 of 57 runs" in runs[0]
        assert len(_walk(client, "/?q=empty+1")) == 1  # filters apply before paging
        for path in (f"/runs/{run}/rows", f"/runs/{run}/rows?sort=-value"):
            pages = [_indexes(page) for page in _walk(client, path)]
            assert [len(p) for p in pages] == [50, 50, 37], path
            assert sorted(i for p in pages for i in p) == list(range(137)), path
        descending = [
            i for page in _walk(client, f"/runs/{run}/rows?sort=-value") for i in _indexes(page)
        ]
        assert descending == sorted(range(137), key=lambda i: (-values[i], i))


def test_the_rows_two_runs_changed_come_a_hundred_at_a_time(tmp_path: Path) -> None:
    with RunStore(tmp_path / "runs.db") as store:
        base = _run(store, [1.0] * 230 + [0.0] * 20, name="base")
        cand = _run(store, [0.0] * 230 + [1.0] * 20, name="cand")
        client = TestClient(create_app(store))
        pages = _walk(client, f"/compare?a={base}&b={cand}")
        flips = [
            re.findall(r"<tr class='flip \w+'><td>([^<]+)</td><td>judge</td><td>s(\d+)", page)
            for page in pages
        ]
        assert [len(p) for p in flips] == [100, 100, 50]
        seen = [(kind, int(i)) for page in flips for kind, i in page]
        assert seen == [("regression", i) for i in range(230)] + [
            ("improvement", i) for i in range(230, 250)
        ]
        assert "(1-100 of 250)" in pages[0] and "(201-250 of 250)" in pages[2]


def test_pages_read_narrow_columns_never_whole_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with RunStore(tmp_path / "runs.db") as store:
        base = _run(store, [1.0, 0.0, 1.0, 0.5])
        cand = _run(store, [0.0, 0.0, 1.0, 1.0])
        store.add_label(metric="judge", label=1, run_id=cand, row_index=1)

        def whole(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("a page read a whole run (or all its labels)")

        for method in ("records", "record_lines", "result", "labels", "label_records"):
            monkeypatch.setattr(store, method, whole)
        client = TestClient(create_app(store))
        for path in (
            f"/compare?a={base}&b={cand}",
            f"/runs/{cand}",
            f"/runs/{cand}/rows?sort=value",
            f"/runs/{cand}/rows/1",
            f"/runs/{cand}/label?metric=judge&pos=1",
            f"/runs/{cand}/label?metric=judge&mode=disagree",
        ):
            page = client.get(path)
            assert page.status_code == 200, (path, page.text[:300])
        assert "labeled <b>1</b>" in client.get(f"/runs/{cand}/label?metric=judge&pos=1").text


def test_a_20_mb_message_is_cut_with_a_link_to_all_of_it(tmp_path: Path) -> None:
    message = "".join(f"{i % 10}" for i in range(1000)) * (HUGE // 1000)
    sample = {
        "user_input": [
            {"type": "human", "content": "Tell me everything."},
            {"type": "ai", "content": message},
        ]
    }
    with RunStore(tmp_path / "runs.db") as store:
        run = _run(store, [1.0], sample=sample)
        client = TestClient(create_app(store))
        for path in (f"/runs/{run}/rows/0", f"/runs/{run}/label?metric=judge"):
            page = client.get(path)
            assert page.status_code == 200
            assert len(page.content) < 100_000, (path, len(page.content))  # was 40 MB
            assert message[:TEXT] in page.text and message[: TEXT + 1] not in page.text
            assert f"… show all {HUGE:,} characters" in page.text
        found = re.search(r"<a class='full' href='([^']+)'", page.text)
        assert found is not None
        whole = client.get(found.group(1).replace("&amp;", "&"))
        assert whole.status_code == 200 and whole.text == message
        assert whole.headers["content-type"] == "text/plain; charset=utf-8"
        assert whole.headers["x-content-type-options"] == "nosniff"
        assert "sandbox" in whole.headers["content-security-policy"]
        assert client.get(f'/runs/{run}/rows/0/text?at=["sample", 9]').status_code == 404
        assert client.get(f"/runs/{run}/rows/0/text?at=nope").status_code == 400


def _human_turns(page: str) -> list[int]:
    return [int(n) for n in re.findall(r"<div class='msg human' id='turn-(\d+)'>", page)]


def test_a_page_shows_so_much_text_in_all_and_so_many_turns(tmp_path: Path) -> None:
    turns = [{"type": "human", "content": f"turn {i} " + "y" * 3000} for i in range(450)]
    sample = {"user_input": turns, "reference": "the reference"}
    with RunStore(tmp_path / "runs.db") as store:
        run = _run(store, [1.0], sample=sample)
        client = TestClient(create_app(store))
        first = client.get(f"/runs/{run}/rows/0").text
        # each turn is anchored by its number in the conversation (turn-N)
        assert _human_turns(first) == list(range(TURNS))
        assert "turn 199 " in first and "turn 200 " not in first
        assert "id='more-turns'" in first and "the reference" not in first
        # 200 turns of 3,000 characters: past the page's budget, each text is cut to 300
        # characters and its link (a turn's markup, its link: well under 1,000 bytes)
        assert len(first) < PAGE_TEXT + TURNS * 1000
        assert "… show all 3,009 characters" in first
        last = client.get(f"/runs/{run}/rows/0?turns=400").text
        assert _human_turns(last) == list(range(400, 450)) and "turn 449 " in last
        assert "the reference" in last and "← earlier turns" in last


def test_the_disagreements_queue_is_kept_while_it_is_walked(tmp_path: Path) -> None:
    with RunStore(tmp_path / "runs.db") as store:
        run = _run(store, [1.0, 1.0, 0.0, 1.0])
        store.add_label(metric="judge", label=0, run_id=run, row_index=3)  # disagrees
        client = TestClient(create_app(store))

        def at(position: int) -> str:
            page = client.get(f"/runs/{run}/label?metric=judge&mode=disagree&pos={position}")
            found = re.search(r"data-index='(\d+)'", page.text)
            assert found is not None
            return found.group(1)

        assert [at(p) for p in range(4)] == ["3", "0", "1", "2"]
        store.add_label(metric="judge", label=0, run_id=run, row_index=1)  # now disagrees too
        assert [at(p) for p in range(4)] == ["3", "0", "1", "2"]  # the walk is not reordered
        client = TestClient(create_app(store))  # a queue opened anew puts it with row 3
        assert [at(p) for p in range(4)] == ["1", "3", "0", "2"]

"""``turneval view``: its pages, filters, labels, compare and safety, through Starlette's client."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("sqlalchemy")
pytest.importorskip("starlette")

from starlette.testclient import TestClient

from turneval.cli import main
from turneval.compare import compare
from turneval.errors import ConfigError
from turneval.store import RunStore
from turneval.view import create_app, serve
from turneval.view._queries import SCAN as _SCAN

HOSTILE = "<script>alert('x')</script> evil\u202etxt.exe\x00 <img src=x onerror=alert(1)>"
CITED = "refunds are paid within 30 days"
TRACEBACK = 'Traceback (most recent call last):\n  File "judge.py", line 3\nTimeoutError: slow'


def _sample(number: int, text: str = "") -> str:
    return json.dumps(
        {
            "user_input": [
                {"type": "human", "content": text or f"question {number}"},
                {
                    "type": "ai",
                    "content": "",
                    "tool_calls": [{"name": "lookup", "args": {"q": f"<q{number}>"}}],
                },
                {"type": "tool", "content": f"result {number}", "tool_call_id": "c1"},
                {"type": "ai", "content": f"Yes: {CITED}, said row {number}."},
            ],
            "metadata": {"id": f"s{number}"},
        }
    )


def _record(number: int, value: float | None, **extra: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "index": number,
        "id": f"s{number}",
        "judge": value,
        "judge_reason": None if value is None else f"because {number}",
        "judge_error": TRACEBACK if value is None else None,
    }
    record.update(extra)
    return record


def add_run(
    store: RunStore,
    values: list[float | None],
    *,
    name: str = "run",
    judge: str | None = "gpt-test",
    dataset: str | None = "data/support.jsonl",
    unstable: tuple[int, ...] = (),
    hostile: int | None = None,
) -> str:
    """A stored run of metric ``judge`` with the given values (None: the metric failed)."""
    recorder = store.start_run(
        name=name,
        dataset_path=dataset,
        configs=[{"name": "judge", "class": "Judge", "config": None}],
    )
    recorder.names = ["judge"]
    if judge is not None:
        from sqlalchemy import update

        from turneval.store._schema import runs

        with store.writing() as connection:
            connection.execute(
                update(runs).where(runs.c.id == recorder.run_id).values(judge_model=judge)
            )
    for number, value in enumerate(values):
        details: dict[str, Any] = {"citations": [{"text": CITED}]}
        if number in unstable:
            details["repeats"] = {
                "votes": [0.0, 1.0, 1.0],
                "min": 0.0,
                "max": 1.0,
                "unstable": True,
            }
        record = _record(number, value, judge_details=details)
        text = _sample(number, HOSTILE if number == hostile else "")
        recorder.add_record(json.dumps(record), record, text)
    scored = [v for v in values if v is not None]
    mean = sum(scored) / len(scored)
    summary = {
        "metrics": {
            "judge": {
                "mean": mean,
                "ci_low": mean - 0.1,
                "ci_high": mean + 0.1,
                "count": len(scored),
                "failed": len(values) - len(scored),
                "usage": {"calls": 7, "input_tokens": 1234, "output_tokens": 56},
            }
        }
    }
    recorder.finish(summary)
    return recorder.run_id


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RunStore]:
    """The same pages on SQLite and on a real PostgreSQL server."""
    if request.param == "sqlite":
        url = str(tmp_path / "runs.db")
    else:
        url = str(request.getfixturevalue("postgres_server").database())
    with RunStore(url) as opened:
        yield opened


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf-token" content="([^"]+)"', page)
    assert found is not None
    return found.group(1)


def _indexes(page: str) -> list[int]:
    return [int(i) for i in re.findall(r"<tr class='row' data-index='(\d+)'", page)]


def test_a_conversation_shows_turns_votes_citations_and_errors_all_escaped(
    store: RunStore,
) -> None:
    run = add_run(store, [0.9, None, 0.2], unstable=(2,), hostile=2)
    client = TestClient(create_app(store))
    page = client.get(f"/runs/{run}/rows/2")
    assert page.status_code == 200
    text = page.text
    # hostile text is escaped, the bidi override and NUL are shown as marked codes
    assert "<script>alert" not in text and "<img src=x" not in text
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in text
    assert "&lt;U+202E&gt;" in text and "&lt;U+0000&gt;" in text
    assert "\u202e" not in text and "\x00" not in text
    # the only script is the page's own, nonce'd, and the policy runs nothing else
    policy = page.headers["content-security-policy"]
    assert "script-src 'nonce-" in policy and "unsafe-inline" not in policy.split("script-src")[1]
    # turns, the tool call with its arguments, the cited passage marked in the answer
    assert "<span class='role'>tool</span>" in text
    assert "lookup({&quot;q&quot;: &quot;&lt;q2&gt;&quot;})" in text
    assert f"<mark class='cite'>{CITED}</mark>" in text
    # the judge's explanation and its votes
    assert "because 2" in text and "votes: <span class='vote'>0.000</span>" in text
    # a failed row shows its error with the traceback
    failed = client.get(f"/runs/{run}/rows/1").text
    assert "TimeoutError: slow" in failed and "File &quot;judge.py&quot;, line 3" in failed
    assert client.get(f"/runs/{run}/rows/9").status_code == 404
    assert client.get("/runs/nope/rows/0").status_code == 404


def test_rows_page_with_keyset_pages_filters_and_sort(store: RunStore) -> None:
    values: list[float | None] = [(i % 10) / 10 for i in range(120)]
    values[7] = None
    run = add_run(store, values, unstable=(3, 77))
    client = TestClient(create_app(store))
    first = client.get(f"/runs/{run}/rows").text
    assert _indexes(first) == list(range(50))
    following = re.search(r"id='next' href='([^']+)'", first)
    assert following is not None and "after=49" in following.group(1)
    second = client.get(following.group(1).replace("&amp;", "&")).text
    assert _indexes(second) == list(range(50, 100))
    last = client.get(f"/runs/{run}/rows?after=99").text
    assert _indexes(last) == list(range(100, 120)) and "id='next'" not in last

    below = client.get(f"/runs/{run}/rows?metric=judge&below=0.2").text
    expected = [i for i, v in enumerate(values) if v is not None and v < 0.2]
    assert _indexes(below) == expected[:50]
    ranged = client.get(f"/runs/{run}/rows?min=0.4&max=0.5").text
    assert _indexes(ranged) == [
        i for i, v in enumerate(values) if v is not None and 0.4 <= v <= 0.5
    ]
    assert _indexes(client.get(f"/runs/{run}/rows?failed=1").text) == [7]
    assert _indexes(client.get(f"/runs/{run}/rows?unstable=1").text) == [3, 77]
    # text search in the conversation: "said row 11." is only in row 11's answer
    assert _indexes(client.get(f"/runs/{run}/rows?q=said+row+11.").text) == [11]
    ordered = sorted(
        (i for i, v in enumerate(values) if v is not None), key=lambda i: (-(values[i] or 0), i)
    )
    down = client.get(f"/runs/{run}/rows?sort=-value").text
    assert _indexes(down) == ordered[:50]
    up = client.get(f"/runs/{run}/rows?sort=value&offset=50").text
    rising = sorted(
        (i for i, v in enumerate(values) if v is not None), key=lambda i: (values[i] or 0, i)
    )
    assert _indexes(up) == rising[50:100]


def test_a_filtered_page_reads_past_one_scan_batch(store: RunStore) -> None:
    count = _SCAN + 30
    values: list[float | None] = [1.0] * count
    values[_SCAN + 5] = 0.0  # the one low row lies past the first batch read
    run = add_run(store, values)
    page = TestClient(create_app(store)).get(f"/runs/{run}/rows?below=0.5").text
    assert _indexes(page) == [_SCAN + 5]


def test_runs_list_filters_and_run_summary(store: RunStore) -> None:
    first = add_run(store, [1.0, 0.0], name="support-old", judge="gpt-a", dataset="a.jsonl")
    second = add_run(store, [1.0, 1.0], name="travel-new", judge="claude-b", dataset="b.jsonl")
    client = TestClient(create_app(store))

    def listed(query: str) -> set[str]:
        return set(re.findall(r"data-run='([0-9a-f]+)'", client.get("/" + query).text))

    assert listed("") == {first, second}
    assert listed("?q=travel") == {second}
    assert listed("?dataset=a.jsonl") == {first}
    assert listed("?model=claude") == {second}
    assert listed("?metric=judge") == {first, second} and listed("?metric=other") == set()
    assert listed("?since=2999-01-01") == set() and listed("?until=2000-01-01") == set()
    page = client.get(f"/runs/{first}").text
    # the summary's mean with its interval, the usage, a distribution of the two values
    assert "<td>0.500</td><td>[0.400, 0.600]</td>" in page
    assert "judge: 7 requests, 1,234 input + 56 output tokens" in page
    assert "judge histogram" in page and page.count("<rect ") == 10


def test_delete_needs_the_csrf_token_and_the_same_origin(store: RunStore) -> None:
    run = add_run(store, [1.0])
    client = TestClient(create_app(store))
    token = _csrf(client.get("/").text)
    assert client.post(f"/runs/{run}/delete", data={"csrf": "guess"}).status_code == 403
    evil = client.post(
        f"/runs/{run}/delete", data={"csrf": token}, headers={"Origin": "http://evil.example"}
    )
    assert evil.status_code == 403 and store.runs()[0].id == run
    done = client.post(
        f"/runs/{run}/delete",
        data={"csrf": token},
        headers={"Origin": "http://testserver"},
        follow_redirects=False,
    )
    assert done.status_code == 303 and store.runs() == []


def test_a_token_guards_every_request(store: RunStore) -> None:
    run = add_run(store, [1.0])
    client = TestClient(create_app(store, token="s3cret"))
    assert client.get("/").status_code == 401
    assert client.get(f"/runs/{run}/rows/0").status_code == 401
    assert client.get("/?token=wrong").status_code == 401
    assert client.get("/", headers={"X-Turneval-Token": "s3cret"}).status_code == 200
    first = client.get(f"/runs/{run}?token=s3cret&x=1", follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == f"/runs/{run}?x=1"
    cookie = first.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert client.get(f"/runs/{run}").status_code == 200  # the cookie now carries it


def test_a_dns_rebinding_host_is_refused(store: RunStore) -> None:
    client = TestClient(create_app(store, allowed_hosts=["127.0.0.1", "localhost"]))
    assert client.get("/", headers={"Host": "attacker.example"}).status_code == 400
    assert client.get("/", headers={"Host": "127.0.0.1:8765"}).status_code == 200


def test_serving_another_host_needs_a_token(tmp_path: Path, capsys: Any) -> None:
    with pytest.raises(ConfigError, match="--token"):
        serve(str(tmp_path / "runs.db"), host="0.0.0.0")
    assert main(["view", "--store", str(tmp_path / "runs.db"), "--host", "192.0.2.7"]) == 2
    assert "--host 192.0.2.7 serves the store to other machines" in capsys.readouterr().err


def test_labels_are_saved_at_once_and_export_as_calibrate_reads_them(store: RunStore) -> None:
    run = add_run(store, [0.9, 0.1, 0.8, 0.6], unstable=(3,))
    store.add_label(metric="judge", label=0, run_id=run, row_index=2)  # disagrees with 0.8
    client = TestClient(create_app(store, annotator="ana"))
    page = client.get(f"/runs/{run}/label?metric=judge&mode=disagree").text
    # disagreements first: row 2 (labeled 0, judged 0.8), then the unstable row 3
    assert "data-index='2'" in page and "row 1 of 4" in page
    second = client.get(f"/runs/{run}/label?metric=judge&mode=disagree&pos=1").text
    assert "data-index='3'" in second
    token = _csrf(page)
    body = {"run": run, "index": 1, "metric": "judge", "label": 1, "note": "fine <really>"}
    assert client.post("/api/labels", json=body).status_code == 403
    saved = client.post("/api/labels", json=body, headers={"X-CSRF-Token": token})
    assert saved.status_code == 200
    stored = store.labels(run_id=run)[-1]
    assert (stored.row_index, stored.label, stored.note, stored.annotator) == (
        1,
        1,
        "fine <really>",
        "ana",
    )
    exported = client.get(f"/runs/{run}/labels.jsonl?metric=judge").text
    assert [json.loads(line) for line in exported.splitlines()] == [
        {"index": 2, "metric": "judge", "label": 0},
        {"index": 1, "metric": "judge", "label": 1, "reason": "fine <really>"},
    ]
    bad = client.post("/api/labels", json={"run": run}, headers={"X-CSRF-Token": token})
    assert bad.status_code == 400
    absent = client.post("/api/labels", json={**body, "index": 9}, headers={"X-CSRF-Token": token})
    assert absent.status_code == 404 and "no row 9" in absent.text
    assert len(store.labels(run_id=run)) == 2
    # the "all" queue walks rows in order; the labeled row shows its label
    one = client.get(f"/runs/{run}/label?metric=judge&mode=all&pos=1").text
    assert "data-index='1'" in one and "labeled <b>1</b> (fine &lt;really&gt;)" in one
    assert "id='done'" in client.get(f"/runs/{run}/label?metric=judge&pos=4").text
    picked = client.get(f"/runs/{run}/label?metric=judge&mode=random&seed=3").text
    assert "row 1 of 4" in picked


def test_compare_lists_regressions_first_with_the_paired_p_value(store: RunStore) -> None:
    base = add_run(store, [1.0, 1.0, 0.0, 1.0, 1.0, 1.0], name="base")
    cand = add_run(store, [1.0, 0.0, 1.0, 0.0, 1.0, 1.0], name="cand")
    client = TestClient(create_app(store))
    page = client.get(f"/compare?a={base}&b={cand}").text
    expected = compare(store.result(base), store.result(cand)).metrics["judge"]
    assert expected.p_value is not None
    assert f"<td class='p'>{expected.p_value:.4f}</td>" in page
    kinds = re.findall(r"<tr class='flip \w+'><td>([^<]+)</td><td>judge</td><td>(s\d)</td>", page)
    assert kinds == [("regression", "s1"), ("regression", "s3"), ("improvement", "s2")]
    assert f"href='/runs/{cand}/rows/3'" in page
    assert "Compare two runs" in client.get("/compare").text
    unknown = client.get(f"/compare?a={base}&b=nope")
    assert unknown.status_code == 400 and "nope" in unknown.text


# -- item 25: IPv6 loopback, a busy port -----------------------------------------------------


def _free_port(family: int = socket.AF_INET, host: str = "127.0.0.1") -> int:
    with socket.socket(family) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def test_view_on_the_ipv6_loopback_answers_local_requests(tmp_path: Path) -> None:
    url = str(tmp_path / "runs.db")
    with RunStore(url) as store:
        run = add_run(store, [1.0])
    try:
        port = _free_port(socket.AF_INET6, "::1")
    except OSError:  # a machine (or container) without IPv6: nothing to listen on
        pytest.skip("this machine has no IPv6 loopback")
    command = [sys.executable, "-m", "turneval.cli", "view", "--store", url, "--host", "::1"]
    process = subprocess.Popen([*command, "--port", str(port)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        printed = process.stdout.readline()
        assert f"on http://[::1]:{port}/ (Ctrl-C stops)" in printed
        deadline = time.monotonic() + 30
        while True:  # the printed line comes before uvicorn answers: wait for it
            try:
                with urllib.request.urlopen(f"http://[::1]:{port}/runs/{run}", timeout=5) as page:
                    assert page.status == 200 and "Run run" in page.read().decode()
                break
            except urllib.error.URLError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()
    # the same check without a socket: the host's forms, and what is still refused
    from turneval.view._security import allowed_hosts as _allowed_hosts

    with RunStore(url) as store:
        client = TestClient(create_app(store, allowed_hosts=_allowed_hosts("::1")))
        for host in ("[::1]:8765", "[::1]", "127.0.0.1:8765", "localhost:8765", "[::1]:80"):
            assert client.get("/", headers={"Host": host}).status_code == 200, host
        for host in ("attacker.example", "[::2]:8765", "[::1", "[::1]x", "::1:8765", ""):
            assert client.get("/", headers={"Host": host}).status_code == 400, host


def test_view_on_a_busy_port_is_one_line_and_exit_2(tmp_path: Path, capsys: Any) -> None:
    url = str(tmp_path / "runs.db")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["view", "--store", url, "--port", str(port)]) == 2
    error = capsys.readouterr().err
    assert error == (
        f"turneval: error: turneval view cannot listen on 127.0.0.1:{port}: Address already in "
        "use; another process listens on it: give another --port\n"
    )
    assert main(["view", "--store", url, "--port", "70000"]) == 2
    assert "cannot listen on 127.0.0.1:70000" in capsys.readouterr().err


# -- item 23: labels on the metric's scale -----------------------------------------------------

_YES_NO = "agent_goal_accuracy_with_reference"  # a built-in yes/no judge: labels 0 or 1
_RUBRIC = "fluency"  # a built-in 1-5 rubric judge
_PAIRWISE = "pairwise_summarization_quality"  # CANDIDATE/TIE/BASELINE: 1, 0.5, 0
_SCALES: dict[str, tuple[float, ...] | None] = {
    _YES_NO: (0.0, 1.0),
    _RUBRIC: (1.0, 2.0, 3.0, 4.0, 5.0),
    _PAIRWISE: (0.0, 0.5, 1.0),
    "my_score": None,  # a metric of the user's: any number (or a word read as one)
    "reviewed": (0.0, 1.0),  # a column whose run record declares its scale (scenario review)
    "badly_declared": None,  # a declaration that is no scale: any number
}
_DECLARED = {"reviewed": [1, 0], "badly_declared": [True, False]}
_WORDS = {"yes": 1.0, "no": 0.0, "pass": 1.0, "fail": 0.0, "true": 1.0, "tie": 0.5}


def _labeled_run(store: RunStore) -> str:
    recorder = store.start_run(
        name="scales",
        configs=[
            {"name": n, "class": None, "config": None}
            | ({"scale": _DECLARED[n]} if n in _DECLARED else {})
            for n in _SCALES
        ],
    )
    recorder.names = list(_SCALES)
    record: dict[str, Any] = {"index": 0, "id": "s0"}
    for name in _SCALES:
        record.update({name: 1.0, f"{name}_reason": "ok", f"{name}_error": None})
    recorder.add_record(json.dumps(record), record, _sample(0))
    recorder.finish({"metrics": {}})
    return recorder.run_id


def _expected(label: Any, scale: tuple[float, ...] | None) -> bool:
    """Whether calibrate takes ``label`` on ``scale``: worked out here, not by the viewer."""
    if isinstance(label, bool):
        value = float(label)
    elif isinstance(label, (int, float)):
        value = float(label)
    elif label.strip().lower() in _WORDS:
        value = _WORDS[label.strip().lower()]
    else:
        try:
            value = float(label)
        except ValueError:
            return False
    if value != value or value in (float("inf"), float("-inf")):
        return False
    return scale is None or value in scale


_LABELS = st.one_of(
    st.integers(-3, 12),
    st.sampled_from([0.5, 2.5, -1.0, 1e300, 4.0]),
    st.booleans(),
    st.sampled_from(["yes", "No", " pass ", "tie", "maybe", "7", "0.5", "", "nan", "<b>1</b>"]),
)


def test_the_label_api_refuses_labels_off_the_metric_scale(tmp_path: Path) -> None:
    with RunStore(tmp_path / "runs.db") as store:
        run = _labeled_run(store)
        client = TestClient(create_app(store))
        headers = {"X-CSRF-Token": _csrf(client.get("/").text)}

        def post(metric: str, label: Any) -> Any:
            body = {"run": run, "index": 0, "metric": metric, "label": label}
            return client.post("/api/labels", json=body, headers=headers)

        # the issue's case: 7 on a yes/no judge, refused naming what it takes
        seven = post(_YES_NO, 7)
        assert seven.status_code == 400
        assert seven.text == (f"label 7 is not on the scale of {_YES_NO!r}: 0 (no) or 1 (yes)")
        assert post(_RUBRIC, 7).text.endswith(
            ": score 1 (inarticulate), score 2 (somewhat "
            "inarticulate), score 3 (neutral), score 4 (somewhat fluent) or score 5 (fluent)"
        )
        assert post(_PAIRWISE, 2).text.endswith(
            ": 0: BASELINE (the baseline response is better), 0.5: TIE (equally good) or "
            "1: CANDIDATE (the candidate response is better)"
        )
        assert (
            post("reviewed", 7).text
            == "label 7 is not on the scale of 'reviewed': 0 (no) or 1 (yes)"
        )
        absent = post("other", 1)
        assert absent.status_code == 400 and "has no metric 'other'" in absent.text
        assert store.labels(run_id=run) == []

        @settings(max_examples=60, deadline=None)
        @given(metric=st.sampled_from(list(_SCALES)), label=_LABELS)
        def check(metric: str, label: Any) -> None:
            before = len(store.labels(run_id=run))
            answer = post(metric, label)
            taken = _expected(label, _SCALES[metric])
            assert answer.status_code == (200 if taken else 400), (answer.status_code, answer.text)
            assert len(store.labels(run_id=run)) == before + taken
            if taken:
                assert store.labels(run_id=run)[-1].label == label  # kept as given
            else:
                assert repr(metric) in answer.text or "is not a score" in answer.text

        check()
        # whatever the API took, calibrate reads without a scale error
        for metric in (_YES_NO, _RUBRIC, _PAIRWISE):
            from turneval.calibration import label_from_record
            from turneval.calibration._scales import on_scale

            for record in store.label_records(run, metric):
                found = label_from_record(record, "stored")
                assert found is not None and on_scale(found.value, _SCALES[metric])


def test_the_labeling_page_shows_the_scale_keys(tmp_path: Path) -> None:
    with RunStore(tmp_path / "runs.db") as store:
        run = _labeled_run(store)
        client = TestClient(create_app(store))
        page = client.get(f"/runs/{run}/label?metric={_YES_NO}").text
        keys = re.search(r"data-keys='([^']+)'", page)
        assert keys is not None
        assert json.loads(keys.group(1).replace("&quot;", '"')) == {"0": 0.0, "1": 1.0}
        assert "<kbd>0</kbd> 0 (no) · <kbd>1</kbd> 1 (yes)" in page
        pairwise = client.get(f"/runs/{run}/label?metric={_PAIRWISE}").text
        keys = re.search(r"data-keys='([^']+)'", pairwise)
        assert keys is not None  # 0.5 has no digit: the keys 1, 2, 3 in order
        assert json.loads(keys.group(1).replace("&quot;", '"')) == {"1": 0.0, "2": 0.5, "3": 1.0}

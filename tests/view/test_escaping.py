"""Hostile runs in the viewer: imports are checked, and every stored value renders as text.

An imported ``summary.json`` once put a ``<meta http-equiv=refresh>`` into the run page (the
CSP runs no script, but a meta refresh is no script): its numbers were written unescaped. Now
an import is refused unless its files are strict JSON of turneval's layout, and whatever a
store holds (an import, an older turneval, a writer of its own) renders as escaped text: the
pages' tags and attributes are the same for any stored text.
"""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("sqlalchemy")
pytest.importorskip("starlette")

from starlette.testclient import TestClient

from turneval._hidden import shown
from turneval.cli import main
from turneval.errors import ConfigError
from turneval.store import RunStore
from turneval.view import create_app

REFRESH = '<meta http-equiv="refresh" content="0;url=http://evil.example/">'
PAYLOADS = [
    REFRESH,
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "' onmouseover='alert(1)",
    '"><svg onload=alert(1)>',
    "</textarea></pre></td></tr></table><b>",
    "javascript:alert(1)",
    "&lt;b&gt; &amp;",
    "evil\u202etxt.exe\x00\x1b[31m",
]


def _folder(root: Path, *, summary: Any = None, run: Any = None, line: str | None = None) -> Path:
    """A run folder: one results row (metric ``judge``), and the given summary/run.json."""
    folder = root / "run"
    folder.mkdir(exist_ok=True)
    record = {"index": 0, "id": "s0", "judge": 1.0, "judge_reason": "ok", "judge_error": None}
    (folder / "results.jsonl").write_text((line or json.dumps(record)) + "\n")
    for name, document in (("summary.json", summary), ("run.json", run)):
        if document is not None:
            text = document if isinstance(document, str) else json.dumps(document)
            (folder / name).write_text(text)
    return folder


@pytest.mark.parametrize(
    ("summary", "said"),
    [
        ({"metrics": {"judge": {"count": REFRESH}}}, "metrics.judge.count"),
        ({"metrics": {"judge": {"mean": REFRESH}}}, "metrics.judge.mean"),
        ({"metrics": {"judge": {"mean": True}}}, "metrics.judge.mean"),
        ({"metrics": {"judge": {"usage": {"calls": "7"}}}}, "metrics.judge.usage.calls"),
        ({"metrics": [REFRESH]}, "metrics"),
        ({"failed_rows": -1}, "failed_rows"),
        ('{"metrics": {"judge": {"mean": NaN}}}', "not strict JSON: key 'mean' holds NaN"),
        ('{"samples": 1, "samples": 2}', "not strict JSON: duplicate key 'samples'"),
        ("[1, 2]", "expected a JSON object"),
    ],
)
def test_an_import_with_a_summary_not_of_turnevals_layout_is_refused(
    tmp_path: Path, summary: Any, said: str, capsys: Any
) -> None:
    url = str(tmp_path / "runs.db")
    folder = _folder(tmp_path, summary=summary)
    with RunStore(url) as store, pytest.raises(ConfigError, match="summary.json") as raised:
        store.import_run(folder)
    assert said in str(raised.value) and "\n" not in str(raised.value)
    assert main(["store", "import", str(folder), "--store", url]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    with RunStore(url) as store:
        assert store.runs() == []  # nothing half-imported


@pytest.mark.parametrize(
    ("run", "line", "said"),
    [
        ({"judge": {"model": ["<b>"]}}, None, "run.json: not a turneval run.json: judge.model"),
        ({"metrics": [{"class": "x"}]}, None, "run.json: not a turneval run.json: metrics.0.name"),
        ('{"turneval_version": Infinity}', None, "run.json: not strict JSON"),
        (None, '{"index": 0, "judge": NaN, "judge_reason": "x"}', "line 1: not strict JSON"),
        (None, '{"index": "0", "judge": 1, "judge_reason": "x"}', "'index' must be an integer"),
        (None, json.dumps({"index": 0, "judge": REFRESH, "judge_reason": "x"}), "'judge' must be"),
    ],
)
def test_an_import_with_a_bad_run_file_or_row_is_refused(
    tmp_path: Path, run: Any, line: str | None, said: str
) -> None:
    folder = _folder(tmp_path, run=run, line=line)
    with RunStore(tmp_path / "runs.db") as store:
        with pytest.raises(ConfigError) as raised:
            store.import_run(folder)
        assert said in str(raised.value), str(raised.value)
        assert store.runs() == []


def test_hostile_text_in_the_places_text_belongs_is_imported_and_shown_as_text(
    tmp_path: Path,
) -> None:
    name = REFRESH
    record = {
        "index": 0,
        "id": REFRESH,
        name: 1.0,
        f"{name}_reason": REFRESH,
        f"{name}_error": None,
    }
    folder = _folder(
        tmp_path,
        line=json.dumps(record),
        summary={"metrics": {name: {"mean": 1.0, "count": 1, "failed": 0}}},
        run={"judge": {"model": REFRESH}, "dataset": {"path": REFRESH}},
    )
    with RunStore(tmp_path / "runs.db") as store:
        run = store.import_run(folder, name=REFRESH)
        client = TestClient(create_app(store))
        for path in ("/", f"/runs/{run}", f"/runs/{run}/rows", f"/runs/{run}/rows/0"):
            page = client.get(path)
            assert page.status_code == 200, path
            assert "<meta http-equiv" not in page.text, path
            assert "&lt;meta http-equiv=&quot;refresh&quot;" in page.text, path


def test_a_stored_summary_of_any_shape_is_escaped(tmp_path: Path) -> None:
    """A store written around the import's checks (an older turneval, a writer of its own)."""
    with RunStore(tmp_path / "runs.db") as store:
        recorder = store.start_run(
            name="raw", configs=[{"name": "judge", "class": None, "config": None}]
        )
        recorder.names = ["judge"]
        record = {"index": 0, "judge": 1.0, "judge_reason": "ok", "judge_error": None}
        recorder.add_record(json.dumps(record), record)
        hostile = {
            "count": REFRESH,
            "failed": [REFRESH],
            "mean": REFRESH,
            "ci_low": REFRESH,
            "ci_high": {"x": REFRESH},
            "usage": {"calls": REFRESH, "input_tokens": 5, "output_tokens": True},
        }
        recorder.finish({"metrics": {"judge": hostile, REFRESH: {"mean": 0.5}}})
        page = TestClient(create_app(store)).get(f"/runs/{recorder.run_id}")
        assert page.status_code == 200
        assert "<meta" not in page.text.replace("<meta charset=", "").replace(
            '<meta name="csrf-token"', ""
        )
        assert page.text.count("&lt;meta http-equiv=&quot;refresh&quot;") >= 4
        assert "judge: 0 requests, 5 input + 0 output tokens" in page.text  # counts only


# -- the property: any stored text renders as text -------------------------------------------


class _Tags(HTMLParser):
    """The start tags of a page with their attribute names (hidden-character marks aside)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, tuple[str, ...]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "span" and ("class", "hidden-char") in attrs:
            return  # a hidden character shown as <U+202E>: text, marked
        self.tags.append((tag, tuple(sorted(name for name, _ in attrs))))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _structure(page: str) -> tuple[list[tuple[str, tuple[str, ...]]], str]:
    parser = _Tags()
    parser.feed(page)
    return parser.tags, "".join(parser.text)


_TEXT = st.one_of(
    st.sampled_from(PAYLOADS),
    st.text(
        alphabet=st.sampled_from(list("<>&\"'=/ ab;:\u202e\x00\x1b\n")), min_size=1, max_size=30
    ),
    st.text(min_size=1, max_size=30),
).filter(lambda text: text.strip() != "")

_FIELDS = (
    "name",
    "dataset",
    "judge",
    "version",
    "error",
    "metric",
    "sample_id",
    "reason",
    "metric_error",
    "traceback",
    "detail",
    "vote",
    "agent_error",
    "human",
    "ai",
    "kind",
    "tool",
    "args",
    "call_id",
    "reference",
    "note",
    "summary",
)


def _hostile_run(store: RunStore, texts: dict[str, str]) -> str:
    """A run whose every stored text is one of ``texts`` (the shape fixed, the words not)."""
    from sqlalchemy import update

    from turneval.store._schema import runs

    metric = texts["metric"]
    recorder = store.start_run(
        name=texts["name"],
        dataset_path=texts["dataset"],
        configs=[{"name": metric, "class": texts["kind"], "config": {"x": texts["detail"]}}],
    )
    recorder.names = [metric]
    for index in range(2):
        record = {
            "index": index,
            "id": texts["sample_id"] + str(index),
            metric: 0.25 if index else None,
            f"{metric}_reason": texts["reason"] if index else None,
            f"{metric}_error": None if index else texts["metric_error"],
            f"{metric}_traceback": None if index else texts["traceback"],
            f"{metric}_details": {
                "note": texts["detail"],
                "repeats": {"votes": [0.0, texts["vote"]], "min": 0.0, "max": 1.0},
            },
            "agent_error": texts["agent_error"],
            "latency_in_seconds": 1.5,
        }
        sample = {
            "user_input": [
                {"type": "human", "content": texts["human"]},
                {
                    "type": texts["kind"],
                    "content": texts["ai"],
                    "tool_calls": [{"name": texts["tool"], "args": {texts["args"]: texts["args"]}}],
                },
                {"type": "tool", "content": texts["human"], "tool_call_id": texts["call_id"]},
            ],
            "reference": texts["reference"],
        }
        recorder.add_record(json.dumps(record), record, json.dumps(sample))
    summary = {metric: {"mean": texts["summary"], "count": texts["summary"], "failed": 1}}
    recorder.finish({"metrics": summary}, status="failed", error=texts["error"])
    with store.writing() as connection:
        connection.execute(
            update(runs)
            .where(runs.c.id == recorder.run_id)
            .values(judge_model=texts["judge"], turneval_version=texts["version"])
        )
    store.add_label(metric=metric, label=1, run_id=recorder.run_id, row_index=1, note=texts["note"])
    return recorder.run_id


def _pages(run: str, metric: str) -> list[str]:
    from urllib.parse import quote

    named = quote(metric, safe="")
    return [
        "/",
        f"/runs/{run}",
        f"/runs/{run}/rows",
        f"/runs/{run}/rows?sort=-value&metric={named}",
        f"/runs/{run}/rows/0",
        f"/runs/{run}/rows/1",
        f"/runs/{run}/label?metric={named}&pos=1",
        f"/compare?a={run}&b={run}",
    ]


def test_any_stored_text_renders_as_text_on_every_page(tmp_path: Path) -> None:
    plain = {field: f"plain {field}" for field in _FIELDS}
    with RunStore(tmp_path / "runs.db") as store:
        client = TestClient(create_app(store))

        def render(texts: dict[str, str]) -> list[tuple[Any, str, str]]:
            for old in store.runs():  # one run at a time: the runs page lists one
                store.delete_run(old.id)
            run = _hostile_run(store, texts)
            found = []
            for path in _pages(run, texts["metric"]):
                page = client.get(path)
                assert page.status_code == 200, (path, page.text[:300])
                found.append((*_structure(page.text.replace(run, "RUN")), path))
            return found

        reference = render(plain)

        @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
        @given(st.fixed_dictionaries({field: _TEXT for field in _FIELDS}))
        def check(texts: dict[str, str]) -> None:
            for (tags, text, path), (want, _, _) in zip(render(texts), reference, strict=True):
                # no tag, no attribute came from a stored text: they are the plain run's
                assert tags == want, path
                assert text.count("\x00") == 0 and "\u202e" not in text, path
            rows = render(texts)[4][1]  # the failed row's page, as text: each value readable
            for field in ("human", "metric_error", "sample_id", "agent_error"):
                assert " ".join(shown(texts[field]).split()) in " ".join(rows.split()), field

        check()

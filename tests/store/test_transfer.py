"""Run folders imported into the store and exported from it, from the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turneval.cli import main
from turneval.store import RunStore

from ._helpers import write_data

pytest.importorskip("sqlalchemy")


def test_cli_run_import_and_export_give_back_the_files(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    data, out = write_data(tmp_path / "data.jsonl"), tmp_path / "run"
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

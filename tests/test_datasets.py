"""Dataset versions: kept by content in the store, diffed by row, pinned by runs, checked by compare."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from turneval import ConfigError
from turneval.cli import main
from turneval.compare import compare_files
from turneval.store import RunStore, dataset_version, diff_files, file_digest


def sample(key: str, question: str) -> dict[str, Any]:
    call = {"name": "search", "args": {"q": question}}
    return {
        "user_input": [
            {"type": "human", "content": question},
            {"type": "ai", "content": "", "tool_calls": [call]},
        ],
        "reference_tool_calls": [call],
        "metadata": {"id": key},
    }


def write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


V1 = [sample("a", "x"), sample("b", "y"), sample("c", "z"), sample("d", "w")]
# by hand: b removed, c changed (its question), e added; a and d as they were (d reformatted)
V2 = [sample("a", "x"), sample("c", "zz"), sample("d", "w"), sample("e", "v")]


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        (tmp_path / "store").mkdir()  # a store's folder must exist (only the default is made)
        return str(tmp_path / "store" / "runs.db")
    server = request.getfixturevalue("postgres_server")
    return str(server.database())


def test_versions_by_content_and_a_diff_by_hand(store_url: str, tmp_path: Path) -> None:
    first = write(tmp_path / "v1.jsonl", V1)
    second = tmp_path / "v2.jsonl"  # d written with other spacing: the same row
    second.write_text(
        "".join(
            (
                json.dumps(row, separators=(",", ":"))
                if row["metadata"]["id"] == "d"
                else json.dumps(row)
            )
            + "\n"
            for row in V2
        )
    )
    with RunStore(store_url) as store:
        one, new = store.add_dataset(first, name="support")
        assert new and (one.name, one.version, one.rows) == ("support", 1, 4)
        assert one.digest == file_digest(first)
        again, new = store.add_dataset(first, name="support")
        assert not new and again.version == 1  # the same content is the same version
        two, new = store.add_dataset(second, name="support")
        assert new and two.version == 2 and two.digest == file_digest(second)
        other, _ = store.add_dataset(first, name="copy")  # one content, two names
        assert other.label == "copy@1" and other.digest == one.digest
        assert [d.label for d in store.datasets()] == ["copy@1", "support@1", "support@2"]
        assert [d.label for d in store.datasets(name="support")] == ["support@1", "support@2"]
        assert store.dataset("support").version == 2
        assert store.dataset(two.digest[:10]).label == "support@2"
        assert store.dataset(one.digest[:10]).digest == one.digest  # one content, two names
        assert store.dataset_of(one.digest) is not None
        assert store.dataset_of("0" * 64) is None
        with pytest.raises(ConfigError, match="no version 3 of 'support'"):
            store.dataset("support@3")


def test_the_diff_by_hand(store_url: str, tmp_path: Path) -> None:
    first, second = write(tmp_path / "v1.jsonl", V1), write(tmp_path / "v2.jsonl", V2)
    with RunStore(store_url) as store:
        store.add_dataset(first, name="support")
        store.add_dataset(second, name="support")
        diff = store.diff_datasets("support@1", "support@2")
        rows = store.dataset_rows("support@1")
    assert (diff.added, diff.removed, diff.changed, diff.unchanged) == (["e"], ["b"], ["c"], 2)
    assert diff.summary() == "1 added (e), 1 removed (b), 1 changed (c), 2 unchanged"
    assert [row.key for row in rows] == ["a", "b", "c", "d"]
    assert json.loads(rows[2].content) == V1[2]
    assert diff_files(first, second).to_dict() == {
        **diff.to_dict(),
        "old": str(first),
        "new": str(second),
    }


def test_rows_without_ids_are_keyed_by_line_and_repeats_are_told_apart(tmp_path: Path) -> None:
    plain = [{"user_input": "q1"}, {"id": "s", "user_input": "q2"}, {"id": "s", "user_input": "q3"}]
    changed = [
        {"user_input": "q1!"},
        {"id": "s", "user_input": "q2"},
        {"id": "s", "user_input": "q3"},
    ]
    diff = diff_files(write(tmp_path / "a.jsonl", plain), write(tmp_path / "b.jsonl", changed))
    assert (diff.changed, diff.unchanged) == (["line 1"], 2)  # s and s#2 are alike


def run_folder(tmp_path: Path, name: str, data: Path, store: str | None = None) -> Path:
    out = tmp_path / name
    args = ["evaluate", str(data), "--metric", "tool_call_f1", "--out", str(out), "--quiet"]
    assert main([*args, *(["--store", store] if store else [])]) == 0
    return out


def test_a_run_pins_the_version_it_read(tmp_path: Path) -> None:
    data = write(tmp_path / "v1.jsonl", V1)
    store = str(tmp_path / "runs.db")
    with RunStore(store) as kept:
        kept.add_dataset(data, name="support")
    out = run_folder(tmp_path, "run", data, store)
    version = json.loads((out / "run.json").read_text())["dataset"]["version"]
    assert version == {"digest": file_digest(data), "name": "support", "version": 1}
    with RunStore(store) as kept:
        (run,) = kept.runs()
        assert kept.dataset_of(run.dataset_digest) == kept.dataset("support@1")
    assert dataset_version(data) == {"digest": file_digest(data), "name": None, "version": None}


def test_compare_refuses_runs_over_other_versions_and_lists_the_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = write(tmp_path / "v1.jsonl", V1), write(tmp_path / "v2.jsonl", V2)
    store = str(tmp_path / "runs.db")
    with RunStore(store) as kept:
        kept.add_dataset(first, name="support")
        kept.add_dataset(second, name="support")
    base = run_folder(tmp_path, "base", first, store)
    cand = run_folder(tmp_path, "cand", second, store)
    with pytest.raises(ConfigError) as refused:
        compare_files(base, cand)
    # the input files are still as the runs read them: the diff is theirs
    assert "support@1 (sha256 " in str(refused.value) and ") -> support@2 (sha256 " in str(
        refused.value
    )
    assert "1 added (e), 1 removed (b), 1 changed (c), 2 unchanged" in str(refused.value)
    assert "--allow-dataset-change" in str(refused.value)
    first.unlink()  # the files are gone: the store keeps both versions
    with RunStore(store) as kept, pytest.raises(ConfigError, match="1 changed \\(c\\)"):
        compare_files(base, cand, store=kept)
    with pytest.raises(ConfigError, match="changed rows not known") as alone:
        compare_files(base, cand)  # no store, no files: ids only
    assert "1 added (e), 1 removed (b)" in str(alone.value)
    assert main(["compare", str(base), str(cand), "--store", store]) == 2
    assert "read different versions of the dataset" in capsys.readouterr().err
    assert main(["compare", str(base), str(cand), "--store", store, "--allow-dataset-change"]) == 0
    out = capsys.readouterr().out
    assert "note: compared although the dataset changed: support@1" in out
    assert "1 added (e), 1 removed (b), 1 changed (c), 2 unchanged" in out


def test_runs_over_one_version_compare_as_before(tmp_path: Path) -> None:
    data = write(tmp_path / "v1.jsonl", V1)
    base, cand = run_folder(tmp_path, "base", data), run_folder(tmp_path, "cand", data)
    assert not any("dataset" in note for note in compare_files(base, cand).config_notes)


def test_the_datasets_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, second = write(tmp_path / "v1.jsonl", V1), write(tmp_path / "v2.jsonl", V2)
    store = ["--store", str(tmp_path / "runs.db")]
    assert main(["datasets", "add", str(first), "--name", "support", *store]) == 0
    assert capsys.readouterr().out.startswith("added support@1 (sha256 ")
    assert main(["datasets", "add", str(first), "--name", "support", *store]) == 0
    assert capsys.readouterr().out.startswith("unchanged: already support@1")
    assert main(["datasets", "add", str(second), "--name", "support", *store]) == 0
    capsys.readouterr()
    assert main(["datasets", "list", *store]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listed] == ["support@1", "support@2"]
    assert main(["datasets", "show", "support@1", "--rows", "2", *store]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[0].startswith("support@1 (sha256 ") and shown[2].startswith("a: {")
    assert len(shown) == 4
    assert main(["datasets", "diff", "support@1", "support", "--json", *store]) == 0
    assert json.loads(capsys.readouterr().out)["changed"] == ["c"]
    assert main(["datasets", "show", "nope", *store]) == 2
    assert "dataset 'nope' is not in the store" in capsys.readouterr().err


def test_the_viewer_shows_a_runs_dataset_version_and_a_change(tmp_path: Path) -> None:
    from starlette.testclient import TestClient

    from turneval.view import create_app

    first, second = write(tmp_path / "v1.jsonl", V1), write(tmp_path / "v2.jsonl", V2)
    url = str(tmp_path / "runs.db")
    with RunStore(url) as kept:
        kept.add_dataset(first, name="support")
        kept.add_dataset(second, name="support")
    run_folder(tmp_path, "base", first, url)
    run_folder(tmp_path, "cand", second, url)
    loose = write(tmp_path / "loose.jsonl", V1[:2])
    run_folder(tmp_path, "loose", loose, url)
    with RunStore(url) as kept:
        runs = {Path(run.dataset_path or "").name: run for run in kept.runs()}
        client = TestClient(create_app(kept))
        page = client.get(f"/runs/{runs['v1.jsonl'].id}").text
        assert "<span id='dataset-version'>version support@1 (sha256 " in page
        loose_page = client.get(f"/runs/{runs['loose.jsonl'].id}").text
        assert "(not in 'turneval datasets')" in loose_page
        changed = client.get(f"/compare?a={runs['v1.jsonl'].id}&b={runs['v2.jsonl'].id}").text
        assert "id='dataset-change'" in changed
        assert "support@1 → support@2: 1 added (e), 1 removed (b), 1 changed (c)" in changed


def test_inputs_kept_as_no_version_are_not_checked_until_the_store_keeps_them(
    tmp_path: Path,
) -> None:
    first, second = write(tmp_path / "v1.jsonl", V1), write(tmp_path / "v2.jsonl", V2)
    base = run_folder(tmp_path, "base", first)  # two agents' conversation files, say
    cand = run_folder(tmp_path, "cand", second)
    assert not any("dataset" in note for note in compare_files(base, cand).config_notes)
    with RunStore(tmp_path / "runs.db") as kept:
        kept.add_dataset(first, name="support")
        (note,) = [n for n in compare_files(base, cand, store=kept).config_notes if "dataset" in n]
        assert note.startswith("dataset not checked: the baseline read support@1 (sha256 ")
        assert "the candidate an input kept as no dataset version (sha256 " in note
        kept.add_dataset(second, name="support")
        with pytest.raises(ConfigError, match=r"support@1 \(sha256 \w+\) -> support@2"):
            compare_files(base, cand, store=kept)

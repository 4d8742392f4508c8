"""Every command that reads a run takes the same RUN: a run folder, its results.jsonl or
summary.json, or a stored run's id in ``--store`` (``TURNEVAL_STORE`` honoured)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest

from turneval.cli import main
from turneval.metrics import ToolCallF1
from turneval.store import RunStore
from turneval.stream import evaluate_jsonl

from .store._helpers import GOOD, JUDGED, write_data

pytest.importorskip("sqlalchemy")


def _runs(tmp_path: Path) -> tuple[str, str, str]:
    """A store with two runs of one input (the second scores row 2 right too) and a third
    whose metric is configured differently; returns the three ids."""
    url = str(tmp_path / "runs.db")
    data = write_data(tmp_path / "data.jsonl")
    evaluate_jsonl(data, [ToolCallF1(name=JUDGED)], tmp_path / "a", store=url)
    lenient = ToolCallF1(name=JUDGED, arg_rules={"*": {"q": "ignore"}})  # every row scores 1
    evaluate_jsonl(data, [ToolCallF1(name=JUDGED)], tmp_path / "b", store=url)
    evaluate_jsonl(data, [lenient], tmp_path / "c", store=url)
    with RunStore(url) as store:
        ids = {Path(str(run.out_dir)).name: run.id for run in store.runs()}
        for index, good in enumerate(GOOD):
            label = "no" if index == 2 else ("yes" if good else "no")
            store.add_label(metric=JUDGED, label=label, run_id=ids["a"], row_index=index)
    return ids["a"], ids["b"], ids["c"]


def test_commands_take_a_stored_run_as_they_take_a_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    first, second, lenient = _runs(tmp_path)
    url = str(tmp_path / "runs.db")
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    # compare: two stored runs, a stored run and a folder, as two folders compare
    assert main(["compare", first[:8], second[:8], "--store", url]) == 0
    stored = capsys.readouterr().out
    assert main(["compare", "a", "b"]) == 0
    assert capsys.readouterr().out == stored
    assert main(["compare", "a", second, "--store", url]) == 0
    assert capsys.readouterr().out == stored
    # their manifests are checked as run.json files are
    assert main(["compare", first, lenient, "--store", url]) == 2
    assert "configured differently" in capsys.readouterr().err
    monkeypatch.setenv("TURNEVAL_STORE", url)  # from now on the store is the environment's
    assert main(["compare", first, lenient, "--allow-config-change"]) == 0
    assert "compared although configured differently" in capsys.readouterr().out
    # plan, clusters
    assert main(["plan", first, "--mde", "0.3"]) == 0
    planned = capsys.readouterr().out
    assert main(["plan", "a", "--mde", "0.3"]) == 0
    assert capsys.readouterr().out == planned
    assert main(["clusters", first, "--fail-under", "1"]) == 0
    assert capsys.readouterr().out.startswith("1 cluster(s) of 2 failed row(s), of 6 rows")
    # calibrate: a stored run's labels come from the store; a folder's from a file
    assert main(["calibrate", first[:10], "--html", "s.html"]) == 0
    from_store = capsys.readouterr().out.splitlines()[:-1]
    assert main(["labels", "export", first, "--output", "labels.jsonl"]) == 0
    assert "wrote 6 labels" in capsys.readouterr().out
    assert main(["calibrate", "a", "labels.jsonl", "--html", "f.html"]) == 0
    assert capsys.readouterr().out.splitlines()[:-1] == from_store
    assert main(["calibrate", "a"]) == 2
    assert "a run on disk has no labels" in capsys.readouterr().err
    assert main(["labels", "export", "a", "--output", "x.jsonl"]) == 2
    assert "labels are kept in the run store" in capsys.readouterr().err
    # store export writes the run's folder: what compare reads
    assert main(["store", "export", first[:8], "--out", "exported"]) == 0
    assert capsys.readouterr().out.startswith("wrote run.json, results.jsonl, summary.json")
    assert (tmp_path / "exported" / "results.jsonl").read_bytes() == (
        tmp_path / "a" / "results.jsonl"
    ).read_bytes()
    assert main(["compare", "exported", "b"]) == 0
    assert capsys.readouterr().out == stored
    # regrade needs a stored run's samples
    assert (
        main(["regrade", "a", "--judge-model", "m", "--judge-base-url", "http://127.0.0.1:9"]) == 2
    )
    assert "regrade: a is a run on disk" in capsys.readouterr().err
    # an unknown RUN says where it looked
    assert main(["plan", "nowhere", "--mde", "0.3"]) == 2
    assert "run 'nowhere' is not in the run store" in capsys.readouterr().err
    monkeypatch.delenv("TURNEVAL_STORE")
    assert main(["compare", first, second]) == 2  # no store named, no default store here
    assert f"{first}: no such file or folder" in capsys.readouterr().err


def test_the_run_flag_still_works_and_says_it_is_deprecated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    first, _, _ = _runs(tmp_path)
    monkeypatch.chdir(tmp_path)
    store = ["--store", str(tmp_path / "runs.db")]
    capsys.readouterr()
    assert main(["labels", "export", "--run", first, "--output", "l.jsonl", *store]) == 0
    assert (
        f"turneval: warning: labels export --run RUN is deprecated: give the run as RUN "
        f"(labels export {first})" in capsys.readouterr().err
    )
    labels = ["labels", "export", first, *store]
    assert main([*labels, "--out", "old.jsonl"]) == 0  # --out FILE, as earlier versions took it
    assert (
        "turneval: warning: labels export --out old.jsonl is deprecated: use --output old.jsonl"
        in capsys.readouterr().err
    )
    assert (tmp_path / "old.jsonl").read_text() == (tmp_path / "l.jsonl").read_text()
    assert main([*labels, "--out", "a.jsonl", "--output", "b.jsonl"]) == 2
    assert "give --output FILE, not --out" in capsys.readouterr().err
    assert main(labels) == 2
    assert "labels export needs --output FILE" in capsys.readouterr().err
    assert main(["calibrate", "--run", first, "--html", "c.html", *store]) == 0
    assert "calibrate --run RUN is deprecated" in capsys.readouterr().err
    assert main(["calibrate", "a", "l.jsonl", "--run", first, *store]) == 2
    assert "give no RESULTS or LABELS" in capsys.readouterr().err


def test_moved_names_still_work_with_a_deprecation_warning() -> None:
    from turneval import store
    from turneval.manifest import MetricSpec
    from turneval.manifest import judge_model as named

    metric = ToolCallF1(match_threshold=0.5)
    with pytest.warns(DeprecationWarning, match="turneval.store.metric_configs is deprecated"):
        records = store.metric_configs([metric])
    assert records == [MetricSpec.of(metric).to_dict()]
    with pytest.warns(DeprecationWarning, match="turneval.store.judge_model is deprecated"):
        assert store.judge_model(None) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert named(None) is None  # the new name warns of nothing
    assert json.loads(json.dumps(records))[0]["class"] == "turneval.metrics:ToolCallF1"

"""Human labels kept in the store, exported for calibrate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from turneval.cli import main
from turneval.metrics import ToolCallF1
from turneval.store import RunStore
from turneval.stream import evaluate_jsonl

from ._helpers import GOOD, JUDGED, write_data

pytest.importorskip("sqlalchemy")


def test_labels_export_and_calibrate_from_the_store(
    store_url: str, tmp_path: Path, capsys: Any
) -> None:
    data, out = write_data(tmp_path / "data.jsonl"), tmp_path / "run"
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


def test_calibrate_names_the_row_and_value_of_a_stored_label_off_the_scale(
    tmp_path: Path, capsys: Any
) -> None:
    data, out = write_data(tmp_path / "data.jsonl"), tmp_path / "run"
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

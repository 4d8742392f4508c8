"""The local engine, and the engine settings evaluate_jsonl once took itself (deprecated)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from turneval.engines import Local, Ray
from turneval.metrics import Evaluator
from turneval.options import RunOptions
from turneval.stream import evaluate_jsonl
from turneval.stream._chunks import Chunk
from turneval.stream.scoring import run_chunk

from .test_base import METRICS, rows, write


def test_the_default_engine_is_local(tmp_path: Path) -> None:
    data = write(tmp_path / "data.jsonl", 7)
    evaluate_jsonl(data, METRICS, tmp_path / "default")
    evaluate_jsonl(data, METRICS, tmp_path / "local", engine=Local())
    evaluate_jsonl(data, METRICS, tmp_path / "two", engine=Local(workers=2, chunk_size=2))
    assert rows(tmp_path / "default") == rows(tmp_path / "local") == rows(tmp_path / "two")


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ({"workers": 2}, Local(workers=2)),
        ({"chunk_size": 2}, Local(chunk_size=2)),
        ({"chunk_bytes": 300}, Local(chunk_bytes=300)),
    ],
)
def test_an_engine_setting_given_to_evaluate_jsonl_still_works_with_a_warning(
    tmp_path: Path, old: dict[str, Any], new: Local
) -> None:
    data = write(tmp_path / "data.jsonl", 7)
    (name,) = old
    message = rf"evaluate_jsonl\({name}=\.\.\.\) is deprecated: pass engine=Local\({name}=\.\.\.\)"
    with pytest.warns(DeprecationWarning, match=message) as warned:
        evaluate_jsonl(data, METRICS, tmp_path / "old", **old)
    assert warned[0].filename == __file__  # the warning points at the caller
    evaluate_jsonl(data, METRICS, tmp_path / "new", engine=new)
    assert rows(tmp_path / "old") == rows(tmp_path / "new")


def test_an_old_chunk_setting_reaches_a_bare_callable_engine(tmp_path: Path) -> None:
    data = write(tmp_path / "data.jsonl", 5)
    sizes: list[int] = []

    def engine(
        chunks: Iterator[tuple[Any, int, int]], metrics: list[Evaluator], options: RunOptions
    ) -> Iterator[Chunk]:
        for lines, first, keep in chunks:
            sizes.append(len(lines))
            yield run_chunk(lines, first, metrics, keep, options)

    with pytest.warns(DeprecationWarning, match=r"evaluate_jsonl\(chunk_size=\.\.\.\)"):
        evaluate_jsonl(data, METRICS, tmp_path / "out", engine=engine, chunk_size=2)
    assert sizes == [2, 2, 1]  # what the old call did: chunks of 2 lines


def test_an_engine_setting_beside_an_engine_object_is_refused(tmp_path: Path) -> None:
    data = write(tmp_path / "data.jsonl", 3)
    with (
        pytest.warns(DeprecationWarning),
        pytest.raises(TypeError, match=r"got chunk_size= beside engine=.*Ray\(chunk_size=\.\.\.\)"),
    ):
        evaluate_jsonl(data, METRICS, tmp_path / "out", engine=Ray(), chunk_size=2)
    with pytest.raises(TypeError, match="unexpected keyword argument 'chunksize'"):
        evaluate_jsonl(data, METRICS, tmp_path / "out", chunksize=2)
    assert not (tmp_path / "out").exists()  # refused before anything was made


def test_the_old_path_and_out_dir_keywords_still_work_with_a_warning(tmp_path: Path) -> None:
    data = write(tmp_path / "data.jsonl", 3)
    with pytest.warns(DeprecationWarning) as warned:
        evaluate_jsonl(path=data, metrics=METRICS, out_dir=tmp_path / "old")  # type: ignore[call-arg]
    assert sorted(str(w.message) for w in warned) == [
        "evaluate_jsonl(out_dir=...) is deprecated: pass out=...",
        "evaluate_jsonl(path=...) is deprecated: pass data=...",
    ]
    assert all(w.filename == __file__ for w in warned)  # the warnings point at the caller
    evaluate_jsonl(data, METRICS, tmp_path / "new")
    assert rows(tmp_path / "old") == rows(tmp_path / "new")
    with pytest.raises(TypeError, match=r"both path= \(its old name\) and data="):
        evaluate_jsonl(data, METRICS, tmp_path / "x", path=data)


def test_a_local_run_keeps_json_rows_identical_across_workers(tmp_path: Path) -> None:
    data = write(tmp_path / "data.jsonl", 40)
    one = evaluate_jsonl(data, METRICS, tmp_path / "one", engine=Local(workers=1, chunk_size=3))
    two = evaluate_jsonl(data, METRICS, tmp_path / "two", engine=Local(workers=2, chunk_size=3))
    assert rows(tmp_path / "one") == rows(tmp_path / "two")
    assert json.loads((tmp_path / "one" / "summary.json").read_text()) == json.loads(
        (tmp_path / "two" / "summary.json").read_text()
    )
    assert one.total_rows == two.total_rows == 40

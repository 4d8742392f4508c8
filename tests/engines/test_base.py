"""A new engine is one class in one file: a toy engine runs through evaluate_jsonl as any other."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from pydantic import Field

from turneval.engines import ChunkedEngine, Engine, Local
from turneval.errors import ConfigError
from turneval.metrics import Evaluator
from turneval.options import RunOptions
from turneval.stream import ChunkWork, StreamJob, StreamResult, evaluate_jsonl
from turneval.stream._chunks import Chunk
from turneval.stream.scoring import run_chunk

from .._builders import call, conversation

METRICS = ["tool_call_f1", "trajectory_in_order_match"]


class InProcess(ChunkedEngine):
    """A toy engine: every chunk scored here, one at a time; it notes each chunk's lines."""

    name: ClassVar[str] = "toy"
    seen: list[list[int]] = Field(default_factory=list)

    def score(
        self, chunks: Iterator[ChunkWork], metrics: list[Evaluator], options: RunOptions
    ) -> Iterator[Chunk]:
        for work in chunks:
            self.seen.append([number for number, _ in work.lines])
            yield run_chunk(work.lines, work.first_index, metrics, work.keep, options)


def write(path: Path, count: int) -> Path:
    lines = []
    for i in range(count):
        calls = [call("a"), call("b")][: 1 + i % 2]
        lines.append(conversation(calls, reference=[call("a"), call("b")]).model_dump_json())
    lines[2] = "{not json"  # an unreadable line is a row as everywhere
    path.write_text("".join(line + "\n" for line in lines))
    return path


def rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_a_toy_engine_runs_through_evaluate_jsonl_as_the_local_one(tmp_path: Path) -> None:
    data = write(tmp_path / "data.jsonl", 5)
    toy = InProcess(chunk_size=2)
    result = evaluate_jsonl(data, METRICS, tmp_path / "toy", engine=toy)
    local = evaluate_jsonl(data, METRICS, tmp_path / "local", engine=Local(workers=1))
    assert toy.seen == [[1, 2], [3, 4], [5]]  # its chunk size, lines numbered from 1
    assert rows(tmp_path / "toy") == rows(tmp_path / "local")
    assert (tmp_path / "toy" / "summary.json").read_text() == (
        tmp_path / "local" / "summary.json"
    ).read_text()
    # F1: the rows with one call score 2/3 (1/1 precision, 1/2 recall), those with two 1
    assert result.summaries["tool_call_f1"].mean == pytest.approx((2 / 3 + 2 / 3 + 1 + 1) / 4)
    assert result.total_rows == local.total_rows == 5 and result.bad_lines == 1
    assert (tmp_path / "toy" / "run.json").exists()  # the run around it is the same


def test_an_engine_that_runs_the_whole_job_its_own_way(tmp_path: Path) -> None:
    class Delegating(Engine):
        """Runs the job with the local engine, noting what it was given."""

        jobs: list[Any] = Field(default_factory=list)  # the StreamJob objects

        def run(self, job: StreamJob) -> StreamResult:
            self.jobs.append(job)
            return Local(workers=1).run(job)

    data = write(tmp_path / "data.jsonl", 3)
    engine = Delegating()
    result = evaluate_jsonl(data, METRICS, tmp_path / "out", engine=engine, report_rows=1)
    (job,) = engine.jobs
    assert job.source.path == data and job.out == tmp_path / "out" and job.report_rows == 1
    assert [metric.name for metric in job.metrics] == METRICS
    assert result.total_rows == 3 and len(result.report_rows) == 1


def test_an_engines_settings_are_validated_and_frozen() -> None:
    with pytest.raises(
        ConfigError,
        match="invalid Local engine setting: workers: Input should be greater than or equal to 1",
    ):
        Local(workers=0)
    with pytest.raises(ConfigError, match="invalid Local engine setting: worker: Extra inputs"):
        Local(worker=2)  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match="chunk_size: Input should be greater than or equal"):
        InProcess(chunk_size=0)
    engine = Local(workers=2)
    with pytest.raises(Exception, match="frozen"):
        engine.workers = 3  # type: ignore[misc]
    assert engine == Local(workers=2) and engine != Local()


def test_a_bare_callable_engine_still_scores_the_chunks(tmp_path: Path) -> None:
    data = write(tmp_path / "data.jsonl", 5)
    sizes: list[int] = []

    def engine(
        chunks: Iterator[tuple[Any, int, int]], metrics: list[Evaluator], options: RunOptions
    ) -> Iterable[Chunk]:
        for lines, first, keep in chunks:  # the ChunkEngine form unpacks a ChunkWork
            sizes.append(len(lines))
            yield run_chunk(lines, first, metrics, keep, options)

    evaluate_jsonl(data, METRICS, tmp_path / "bare", engine=engine)
    evaluate_jsonl(data, METRICS, tmp_path / "local", engine=Local(workers=1))
    assert sizes == [5] and rows(tmp_path / "bare") == rows(tmp_path / "local")

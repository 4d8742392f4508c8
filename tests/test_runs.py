"""Runs in, runs out: every sink receives a run the same way, and a run reads back from
wherever it was kept (a folder, its results.jsonl or summary.json, a run store) with its
manifest, so the same data gives the same summary through every sink."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from turneval import ConfigError, EvaluationAbortedError, SingleTurnSample, evaluate
from turneval._moved import MOVED
from turneval.engines import Local
from turneval.metrics import ExactMatch, Explained, PairwiseMetric, SingleTurnMetric
from turneval.results import EvaluationResult
from turneval.runs import FolderSink, MemorySink, Rows, StoreSink, open_run
from turneval.samples import Sample
from turneval.store import RunStore
from turneval.stream import evaluate_jsonl

from ._fakes import ScriptedChatModel
from .test_run_summary import EXPECTED, SAMPLES, _judge

OLD_PATHS = {new: old for old, new in MOVED.items()}  # module -> its path before it moved

pytest.importorskip("sqlalchemy")


class Collecting:
    """A sink of this test: a list of what it is told, in order (one class, three methods)."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def start(self, manifest: Any) -> None:
        self.events.append(("start", manifest.metric_names))

    def add(self, rows: Rows) -> None:
        self.events.append(("add", [row.index for row in rows.results]))

    def finish(
        self, summary: Mapping[str, Any] | None, status: str, error: str | None = None
    ) -> None:
        self.events.append(("finish", status, summary, error))


def _pairs() -> list[SingleTurnSample]:
    """The pairs of test_run_summary, each with a reference (ExactMatch: 'win' only)."""
    return [sample.model_copy(update={"reference": "win"}) for sample in SAMPLES]


def _metrics() -> list[Any]:
    return [
        PairwiseMetric(name="p", criteria="c", llm=ScriptedChatModel(responses=[_judge])),
        ExactMatch(),
    ]


def _data(tmp_path: Path) -> Path:
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(sample.model_dump_json() + "\n" for sample in _pairs()))
    return data


def test_a_sink_of_your_own_receives_the_run_in_memory_and_streamed(tmp_path: Path) -> None:
    mine = Collecting()
    result = evaluate(_pairs(), _metrics(), sinks=[mine], max_concurrency=1)
    assert mine.events[0] == ("start", ["p", "exact_match"])
    added = sorted(index for event in mine.events if event[0] == "add" for index in event[1])
    assert added == [0, 1, 2, 3]  # each row as it finished
    kind, status, summary, error = mine.events[-1]
    assert (kind, status, error) == ("finish", "finished", None)
    assert summary["samples"] == 4
    assert summary["metrics"]["p"]["extra"] == EXPECTED == result.summary()["p"].extra
    streamed = Collecting()
    evaluate_jsonl(
        _data(tmp_path), _metrics(), tmp_path / "out", sinks=[streamed], engine=Local(chunk_size=3)
    )
    assert [event[0] for event in streamed.events] == ["start", "add", "add", "finish"]
    assert [event[1] for event in streamed.events[1:3]] == [[0, 1, 2], [3]]  # input order
    written = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert streamed.events[-1][1:] == ("finished", written, None)


def test_a_run_that_fails_ends_its_sinks_failed(tmp_path: Path) -> None:
    mine = Collecting()
    broken = [*_pairs(), SingleTurnSample(user_input="q", response="r")]  # no reference
    with pytest.raises(EvaluationAbortedError):
        evaluate(broken, [ExactMatch()], sinks=[mine], fail_on_error=True, max_concurrency=1)
    kind, status, summary, error = mine.events[-1]
    assert (kind, status) == ("finish", "failed") and summary is not None
    assert "fail_on_error" in error
    data = tmp_path / "broken.jsonl"
    data.write_text("".join(s.model_dump_json() + "\n" for s in broken) + "not json\n")
    streamed = Collecting()
    with pytest.raises(EvaluationAbortedError):
        evaluate_jsonl(data, [ExactMatch()], tmp_path / "out", sinks=[streamed], fail_on_error=True)
    assert streamed.events[-1][:3] == ("finish", "failed", None)
    assert streamed.events[-1][3].startswith("EvaluationAbortedError: fail_on_error=True")
    with pytest.raises(ConfigError, match=r"sinks: .*expected sinks \(start, add and finish\)"):
        evaluate(_pairs(), [ExactMatch()], sinks=[object()])  # type: ignore[list-item]


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    if request.param == "sqlite":
        (tmp_path / "store").mkdir()  # a store's folder must exist (only the default's is made)
        url = str(tmp_path / "store" / "runs.db")
    else:
        url = str(request.getfixturevalue("postgres_server").database())
    with RunStore(url) as opened:
        yield opened


def test_the_same_data_gives_the_same_summary_through_every_sink(
    tmp_path: Path, store: RunStore
) -> None:
    memory = MemorySink()
    result = evaluate(
        _pairs(), _metrics(), sinks=[memory, FolderSink(tmp_path / "folder")], store=store
    )
    expected = result.summary().to_dict()
    assert expected["p"]["extra"] == EXPECTED
    streamed = evaluate_jsonl(_data(tmp_path), _metrics(), tmp_path / "streamed", store=store)
    summaries = {
        "memory sink": memory.result().summary().to_dict(),
        "folder sink": open_run(tmp_path / "folder").result.summary().to_dict(),
        "store sink": open_run(str(result.store_run), store).result.summary().to_dict(),
        "streamed": json.loads((tmp_path / "streamed" / "summary.json").read_text())["metrics"],
        "streamed, read back": open_run(tmp_path / "streamed").result.summary().to_dict(),
        "streamed, stored": open_run(str(streamed.store_run), store).result.summary().to_dict(),
    }
    for sink, summary in summaries.items():
        assert summary == expected, sink
    assert memory.status == "finished" and memory.manifest is not None
    assert json.loads((tmp_path / "folder" / "summary.json").read_text())["metrics"] == expected


def test_open_run_reads_a_folder_its_files_and_a_stored_run(
    tmp_path: Path, store: RunStore
) -> None:
    evaluate_jsonl(_data(tmp_path), _metrics(), tmp_path / "run", store=store)
    (stored,) = store.runs()
    folder = open_run(tmp_path / "run")
    kinds = {
        "folder": folder,
        "results": open_run(tmp_path / "run" / "results.jsonl"),
        "summary": open_run(tmp_path / "run" / "summary.json"),  # the rows beside it
        "store": open_run(stored.id[:8], store),  # a unique prefix of its id
    }
    for kind, run in kinds.items():
        assert run.kind == kind and run.has_rows
        assert run.manifest is not None and run.manifest.metric_names == ["p", "exact_match"]
        assert [type(m) for m in run.result.metrics] == [PairwiseMetric, ExactMatch]
        assert run.result.legacy_columns == frozenset()  # nothing guessed
        assert run.result.summary() == folder.result.summary()
        assert run.summary == folder.summary
    assert kinds["store"].label == f"run {stored.id[:12]}"
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "summary.json").write_text((tmp_path / "run" / "summary.json").read_text())
    means = open_run(alone / "summary.json")
    assert (means.kind, means.has_rows, means.manifest) == ("summary", False, None)
    assert means.means()["exact_match"] == 0.5
    with pytest.raises(ConfigError, match="a summary.json alone holds means, no rows"):
        means.result  # noqa: B018
    with pytest.raises(ConfigError, match=r"^nowhere: no such file or folder \(a stored run"):
        open_run("nowhere")
    with pytest.raises(ConfigError, match="run 'ffff' is not in the run store"):
        open_run("ffff", store)
    with pytest.raises(ConfigError, match="a run folder holds results.jsonl; there is none"):
        open_run(alone)


def test_a_run_is_written_from_one_sink_into_another(tmp_path: Path, store: RunStore) -> None:
    evaluate_jsonl(_data(tmp_path), _metrics(), tmp_path / "run", store=store, details=True)
    (stored,) = store.runs()
    with open_run(stored.id, store) as run:
        run.write(FolderSink(tmp_path / "exported"))
    for name in ("results.jsonl", "summary.json"):
        assert (tmp_path / "exported" / name).read_bytes() == (tmp_path / "run" / name).read_bytes()
    exported = open_run(tmp_path / "exported")
    assert exported.manifest is not None
    assert exported.manifest.metrics == open_run(tmp_path / "run").manifest.metrics  # type: ignore[union-attr]
    open_run(tmp_path / "exported").write(StoreSink(store, name="imported"))
    imported = next(run for run in store.runs() if run.name == "imported")
    assert list(store.record_lines(imported.id)) == list(store.record_lines(stored.id))
    assert imported.summary == stored.summary and imported.status == "finished"
    assert store.samples(imported.id, [0])[0] is None  # a folder keeps no samples
    copied = StoreSink(store, name="copied")
    open_run(stored.id, store).write(copied)  # a stored run's samples go with it
    assert copied.run_id is not None
    assert store.samples(copied.run_id, [2]) == store.samples(stored.id, [2])


class LooksPairwise(SingleTurnMetric):
    """A metric whose reasons read like a pairwise judge's verdicts (it is no such judge)."""

    name: str = "looks_pairwise"

    async def _evaluate(self, sample: Sample) -> Explained:
        return Explained(1.0, "CANDIDATE (both orders agree): the reference was found")


def test_only_files_from_before_the_manifest_are_guessed_at(tmp_path: Path) -> None:
    evaluate_jsonl(_data(tmp_path), [LooksPairwise(), *_metrics()], tmp_path / "run")
    read = EvaluationResult.from_jsonl(tmp_path / "run" / "results.jsonl")
    assert read.legacy_columns == frozenset()
    assert "candidate_win_rate" not in (read.summary()["looks_pairwise"].extra or {})
    assert read.summary()["p"].extra == EXPECTED  # from the rebuilt PairwiseMetric
    (tmp_path / "run" / "run.json").unlink()  # a run folder of a turneval from before it
    old = open_run(tmp_path / "run")
    assert old.manifest is None
    assert old.result.legacy_columns == {"looks_pairwise", "p", "exact_match"}
    assert old.result.metric_names == ["looks_pairwise", "p", "exact_match"]  # reason columns
    extra = old.result.summary()["looks_pairwise"].extra or {}
    assert extra["candidate_win_rate"] == 1.0  # the legacy guess, by the reasons' text
    assert old.result.summary()["p"].extra == EXPECTED
    # an empty run: its manifest names its metrics; an old file cannot
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    evaluate_jsonl(empty, [ExactMatch()], tmp_path / "none")
    assert open_run(tmp_path / "none").result.metric_names == ["exact_match"]
    (tmp_path / "none" / "run.json").unlink()
    assert open_run(tmp_path / "none").result.metric_names == []


def _as_the_old_writer_wrote_it(folder: Path) -> None:
    """Rewrite a run folder's run.json as turneval wrote it before the manifest: the class as
    its defining module's dotted path (the stream's and the store's writer)."""
    document = json.loads((folder / "run.json").read_text())
    for metric in document["metrics"]:
        module, _, name = metric["class"].partition(":")
        cls = getattr(__import__(module, fromlist=[name]), name)
        module = OLD_PATHS.get(cls.__module__, cls.__module__)  # where it was defined then
        metric["class"] = f"{module}.{cls.__qualname__}"
    (folder / "run.json").write_text(json.dumps(document, indent=2))


def test_run_folders_from_before_the_manifest_resume_and_compare_as_before(
    tmp_path: Path,
) -> None:
    from turneval.compare import compare_files
    from turneval.metrics import ToolCallF1

    from ._builders import call, conversation

    lines = [
        conversation([call("a", n=n)], reference=[call("a", n=n % 2)]).model_dump_json()
        for n in range(6)
    ]
    data = tmp_path / "data.jsonl"
    data.write_text("".join(line + "\n" for line in lines))
    evaluate_jsonl(data, [ToolCallF1()], tmp_path / "old", engine=Local(chunk_size=2, workers=1))
    evaluate_jsonl(data, [ToolCallF1()], tmp_path / "new", engine=Local(workers=1))
    _as_the_old_writer_wrote_it(tmp_path / "old")
    recorded = json.loads((tmp_path / "old" / "run.json").read_text())["metrics"][0]["class"]
    assert recorded == "turneval.metrics.tool_calls.ToolCallF1"
    assert compare_files(tmp_path / "old", tmp_path / "new").config_notes == []  # checked, equal
    evaluate_jsonl(
        data, [ToolCallF1(match_threshold=0.5)], tmp_path / "other", engine=Local(workers=1)
    )
    with pytest.raises(ConfigError, match=r"metric tool_call_f1 \(match_threshold 1.0 -> 0.5\)"):
        compare_files(tmp_path / "old", tmp_path / "other")
    rows = (tmp_path / "old" / "results.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "old" / "results.jsonl").write_text("".join(rows[:3]))  # as if killed
    with pytest.raises(ConfigError, match="match_threshold 1.0 -> 0.5; rerun without --resume"):
        evaluate_jsonl(data, [ToolCallF1(match_threshold=0.5)], tmp_path / "old", resume=True)
    resumed = evaluate_jsonl(
        data, [ToolCallF1()], tmp_path / "old", resume=True, engine=Local(workers=1)
    )
    assert resumed.total_rows == 6
    assert (tmp_path / "old" / "results.jsonl").read_text().splitlines(keepends=True) == rows


def test_an_agent_run_hands_its_rows_to_its_sinks() -> None:
    from turneval import AIMessage, HumanMessage, MultiTurnSample, ToolCall
    from turneval.agents import EvalTask

    async def agent(messages: list[Any]) -> list[Any]:  # calls "log" on even turns only
        said = str(messages[-1].content)
        calls = [ToolCall(name="log", args={})] if int(said.split()[-1]) % 2 == 0 else []
        return [AIMessage(content=f"you said {said}", tool_calls=calls)]

    dataset = [
        MultiTurnSample(
            user_input=[HumanMessage(content=f"hi {i}")],
            reference_tool_calls=[ToolCall(name="log")],
        )
        for i in range(4)
    ]
    mine, memory = Collecting(), MemorySink()
    result = EvalTask(dataset, ["tool_call_f1"], max_concurrency=1).evaluate(
        runnable=agent, sinks=[mine, memory]
    )
    assert mine.events[0] == ("start", ["tool_call_f1"])
    added = sorted(index for event in mine.events if event[0] == "add" for index in event[1])
    assert added == [0, 1, 2, 3]
    kind, status, summary, error = mine.events[-1]
    assert (kind, status, error) == ("finish", "finished", None)
    assert summary["metrics"]["tool_call_f1"]["mean"] == 0.5  # rows 0 and 2 call "log": 1, 0, 1, 0
    assert memory.status == "finished"
    assert memory.result().scores("tool_call_f1") == result.scores("tool_call_f1") == [1, 0, 1, 0]

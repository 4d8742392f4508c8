"""The streaming hot path (raw bytes, worker processes, orjson rows, collector policy) gives the
same rows as ``evaluate()`` on the same samples, for good and bad lines, across chunks, with
details, and when resumed."""

import gc
import json
from pathlib import Path
from typing import Any

import pytest

from turneval import evaluate
from turneval._gc import YOUNG_THRESHOLD, _Policy, batch_collection, freeze_process
from turneval.engines import Local
from turneval.metrics import (
    CallMatchingMetric,
    Evaluator,
    ExactMatch,
    ToolCallAccuracy,
    ToolCallF1,
    TrajectoryRecall,
)
from turneval.metrics.base import Explained
from turneval.pipeline import RunOptions, score_sample
from turneval.results import json_line
from turneval.results_codec import fast_line
from turneval.runner import resolve_metrics
from turneval.stream import evaluate_jsonl, scoring
from turneval.stream.scoring import plain_explainers, run_chunk

from .._builders import call, conversation

METRICS = ["tool_call_accuracy", "tool_call_f1", "trajectory_precision", "trajectory_recall"]
REFERENCE = [call("search", q="x"), call("book", id=1)]
SAMPLES = [
    conversation([call("search", q="x"), call("book", id=1)], reference=REFERENCE),
    conversation([call("book", id=1)], [call("search", q="x")], reference=REFERENCE),
    conversation([call("search", q="y")], reference=REFERENCE),
    conversation([], reference=REFERENCE),
    conversation([call("search", q="x"), call("search", q="x")], reference=REFERENCE),
    conversation([call("book", id=1, note="é ✓")], reference=[call("book", id=1, note="é ✓")]),
]
GOOD = [sample.model_dump_json(exclude_none=True).encode() for sample in SAMPLES]
# (line bytes, the sample it holds or None): good lines, hostile ones, blank ones.
LINES: list[tuple[bytes, int | None]] = [
    (b"\xef\xbb\xbf" + GOOD[0], 0),  # a byte-order mark on line 1
    (GOOD[1], 1),
    (b"{not json", None),
    (b"", None),  # blank: no row
    (GOOD[2] + b"\r", 2),  # a CRLF line ending
    (b"\xff\xfe not utf-8", None),
    (b'{"user_input": [{"type": "robot", "content": "x"}]}', None),
    (GOOD[3], 3),
    (b"   ", None),  # blank
    (GOOD[4], 4),
    (GOOD[5], 5),
    (b"[" * 5_000 + b"]" * 5_000, None),
]


def rows_of(out: Path) -> list[dict[str, Any]]:
    text = (out / "results.jsonl").read_bytes().decode("utf-8")  # valid UTF-8, every line
    return [json.loads(line) for line in text.splitlines()]


def write_data(path: Path) -> Path:
    path.write_bytes(b"".join(raw + b"\n" for raw, _ in LINES))
    return path


@pytest.mark.parametrize("details", [False, True])
def test_stream_rows_equal_evaluate_rows_across_chunks_and_workers(
    tmp_path: Path, details: bool
) -> None:
    data = write_data(tmp_path / "data.jsonl")
    expected = evaluate(SAMPLES, METRICS, details=details, show_progress=False).records(
        details=details
    )
    one = evaluate_jsonl(
        data, METRICS, tmp_path / "one", engine=Local(workers=1, chunk_size=3), details=details
    )
    evaluate_jsonl(
        data, METRICS, tmp_path / "two", engine=Local(workers=2, chunk_size=2), details=details
    )
    rows = rows_of(tmp_path / "one")
    assert rows == rows_of(tmp_path / "two")  # in-process and worker processes agree
    numbered = [(n, held) for n, (raw, held) in enumerate(LINES, start=1) if raw.strip()]
    assert [row["line"] for row in rows] == [n for n, _ in numbered]
    assert [row["index"] for row in rows] == list(range(len(numbered)))
    for row, (number, held) in zip(rows, numbered, strict=True):
        if held is None:  # a bad line: every metric fails, naming the line
            for name in METRICS:
                assert row[name] is None
                assert row[f"{name}_error"].startswith(f"InvalidSampleError: line {number}")
            continue
        want = {key: value for key, value in expected[held].items() if key != "index"}
        assert {key: row[key] for key in want} == want
        assert set(row) == {"index", "line", *want}
    assert one.total_rows == len(numbered) and one.bad_lines == 4
    # Hand-checked values: line 1 (after its BOM) has the reference's calls in order: 1 and 1;
    # line 2 has both calls, swapped, over two turns: F1 2*1*1/(1+1) = 1; line 5 calls
    # search(q="y"): no call matches (q differs), F1 0; line 10 repeats search(q="x"):
    # precision 1/2, recall 1/2.
    by_line = {row["line"]: row for row in rows}
    assert by_line[1]["tool_call_f1"] == 1.0 and by_line[1]["tool_call_accuracy"] == 1.0
    assert by_line[2]["tool_call_f1"] == 1.0
    assert by_line[5]["tool_call_f1"] == 0.0
    assert by_line[10]["trajectory_precision"] == 0.5 and by_line[10]["trajectory_recall"] == 0.5
    assert "line 6: not valid UTF-8" in by_line[6]["tool_call_f1_error"]


def test_resumed_run_gives_the_file_an_uninterrupted_run_gives(tmp_path: Path) -> None:
    data = write_data(tmp_path / "data.jsonl")
    evaluate_jsonl(data, METRICS, tmp_path / "full", engine=Local(workers=2, chunk_size=2))
    full = (tmp_path / "full" / "results.jsonl").read_text(encoding="utf-8").splitlines()
    out = tmp_path / "out"
    out.mkdir()
    torn = full[4][: len(full[4]) // 2]  # a run killed while writing its fifth row
    (out / "results.jsonl").write_text("\n".join(full[:4]) + "\n" + torn, encoding="utf-8")
    (out / "run.json").write_bytes((tmp_path / "full" / "run.json").read_bytes())
    resumed = evaluate_jsonl(data, METRICS, out, engine=Local(workers=2, chunk_size=2), resume=True)
    assert (out / "results.jsonl").read_text(encoding="utf-8").splitlines() == full
    assert resumed.total_rows == len(full) and resumed.bad_lines == 4


def test_plain_rows_take_orjson_and_write_what_the_stdlib_writes() -> None:
    names = ["m"]
    plain = {"index": 3, "m": 2 / 3, "m_reason": "é 2/3", "m_error": None, "line": 4}
    assert json.loads(fast_line(plain, 2 + 3 * len(names))) == json.loads(json_line(plain))
    surrogate = {**plain, "m_reason": "\ud800"}  # orjson refuses it: the stdlib escapes it
    assert fast_line(surrogate, 5) == json_line(surrogate)
    assert json.loads(fast_line(surrogate, 5))["m_reason"] == "\ud800"
    detailed = {**plain, "m_details": {"x": float("nan")}}  # not plain: the stdlib, as before
    assert fast_line(detailed, 5) == json_line(detailed)


def test_batch_collection_freezes_raises_the_threshold_and_restores() -> None:
    before = gc.get_threshold()
    assert gc.get_freeze_count() == 0
    kept = [[index] for index in range(1000)]  # tracked containers alive before the batch
    with batch_collection():
        assert gc.get_threshold() == (YOUNG_THRESHOLD, before[1], before[2])
        frozen = gc.get_freeze_count()
        assert frozen >= len(kept)
        with batch_collection():  # nested: the outer policy stays, nothing frozen twice
            # (the count only falls: other threads may free frozen objects meanwhile)
            assert gc.get_freeze_count() <= frozen
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0
    gc.freeze()  # a process that froze objects itself keeps them frozen
    try:
        mine = gc.get_freeze_count()  # it only falls as frozen objects are freed
        with batch_collection():
            assert 0 < gc.get_freeze_count() <= mine  # nothing more frozen
        assert gc.get_freeze_count() > mine // 2 and gc.get_threshold() == before  # not unfrozen
    finally:
        gc.unfreeze()


def test_cycles_made_in_a_batch_are_still_collected() -> None:
    import weakref

    class Node:
        self: object  # set to the node itself: a reference cycle

    with batch_collection():
        node = Node()
        node.self = node
        ref = weakref.ref(node)
        del node
        gc.collect()
        assert ref() is None


def test_evaluate_scores_under_the_batch_policy_and_restores_it() -> None:
    before = gc.get_threshold()
    seen: list[int] = []
    result = evaluate(
        SAMPLES[:2], ["tool_call_f1"], on_row=lambda row: seen.append(gc.get_threshold()[0])
    )
    assert seen == [YOUNG_THRESHOLD, YOUNG_THRESHOLD] and result["tool_call_f1"] == [1.0, 1.0]
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


@pytest.mark.parametrize("details", [False, True])
def test_one_sample_at_a_time_gives_the_chunk_the_batch_core_gives(
    details: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers score a rule-based chunk line by line (``max_concurrency=1``), rows of plain
    metrics without details straight from their value-and-reason functions; in-process runs
    with more samples in flight take the batch core: the chunks must be the same."""
    extra = [
        conversation([call("search", q="x")]),  # no reference: metrics fail, named
        conversation([call("search", q="x")], reference=REFERENCE),  # a scenario's columns
        conversation([call("book", id=1)], reference=REFERENCE),  # read from a trace
    ]
    extra[1].metadata = {"scenario_id": "s1", "trial": 2, "stop_reason": "done"}
    extra[2].metadata = {"source": "otel", "latency_in_seconds": 1.5, "input_tokens": 3}
    lines = [(n, raw) for n, (raw, _) in enumerate(LINES, start=1) if raw.strip()]
    for number, sample in enumerate(extra, start=len(LINES) + 1):
        lines.append((number, sample.model_dump_json(exclude_none=True).encode()))
    metrics = resolve_metrics(METRICS)
    scored: list[int] = []

    async def counted(index: int, *args: Any) -> Any:
        scored.append(index)
        return await score_sample(index, *args)

    monkeypatch.setattr(scoring, "score_sample", counted)
    lean = run_chunk(lines, 7, metrics, 4, RunOptions(max_concurrency=1, details=details))
    # Report rows (the first 4) and the extra samples take score_sample; without details the
    # other good lines are written from the plain functions.
    # Good lines: positions 0, 1, 3 (report rows), 6, 7, 8; the extra samples: 10, 11, 12.
    plain = [] if details else [7 + 6, 7 + 7, 7 + 8]
    assert scored == [index for index in [7, 8, 10, 13, 14, 15, 17, 18, 19] if index not in plain]
    batch = run_chunk(lines, 7, metrics, 4, RunOptions(max_concurrency=4, details=details))
    assert lean.records == batch.records and len(lean.records) == len(lines)
    assert (lean.values, lean.failed) == (batch.values, batch.failed)
    assert (lean.bad_lines, lean.failed_rows) == (batch.bad_lines, batch.failed_rows) == (4, 5)
    assert lean.first_errors == batch.first_errors
    assert str(lean.first_errors[-1]).startswith(f"line {len(LINES) + 1}: tool_call_accuracy:")
    kept = [(row.index, row.line, row.results, row.failures) for row in lean.report_rows]
    assert kept == [(row.index, row.line, row.results, row.failures) for row in batch.report_rows]
    assert [index for index, *_ in kept] == [7, 8, 9, 10]
    rows = [json.loads(record) for record in lean.records]
    assert [(row["index"], row["line"]) for row in rows[-3:]] == [(17, 13), (18, 14), (19, 15)]
    assert rows[-3]["tool_call_f1_error"].startswith("InvalidSampleError: line 13: ")
    assert (rows[-2]["scenario_id"], rows[-2]["trial"]) == ("s1", 2)
    assert (rows[-1]["latency_in_seconds"], rows[-1]["agent_input_tokens"]) == (1.5, 3)


def test_plain_rows_only_for_plain_metrics_without_details_or_timeout() -> None:
    class Overridden(ToolCallF1):
        async def ascore(self, sample: Any, *, details: bool = True) -> Any:
            return await super().ascore(sample, details=details)

    plain = RunOptions(max_concurrency=1, details=False)
    metrics = [ToolCallF1(), ToolCallAccuracy(strict_order=False), TrajectoryRecall()]
    assert len(plain_explainers(metrics, plain)) == 3
    assert plain_explainers(metrics, plain.replace(details=True)) == []
    assert plain_explainers(metrics, plain.replace(timeout=5.0)) == []
    others: list[Evaluator] = [
        TrajectoryRecall(arg_comparison_metric="levenshtein"),  # a comparator: records needed
        ToolCallAccuracy(arg_rules={"search": {"q": "ignore"}}),
        Overridden(),  # its own ascore is kept
        ExactMatch(),
    ]
    for other in others:
        assert plain_explainers([*metrics, other], plain) == [], other


def test_a_frozen_worker_skips_the_freeze_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """freeze_process() freezes once; batches then neither walk nor unfreeze the frozen set."""
    frozen: list[str] = []
    monkeypatch.setattr(_Policy, "process_frozen", False)
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append("freeze"))
    freeze_process()
    assert frozen == ["freeze"] and _Policy.process_frozen

    def walked() -> int:
        raise AssertionError("the frozen objects were walked")

    monkeypatch.setattr(gc, "get_freeze_count", walked)
    monkeypatch.setattr(gc, "unfreeze", lambda: frozen.append("unfreeze"))
    before = gc.get_threshold()
    with batch_collection():
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD
    assert gc.get_threshold() == before and frozen == ["freeze"]


class _Counted(CallMatchingMetric):
    """A user's call metric without a plain reason: its rows take the general path."""

    def _plain_value(self, predicted: Any, reference: Any) -> float:
        return float(len(predicted) == len(reference))

    async def _evaluate(self, sample: Any) -> Explained:
        if not sample.tool_calls:
            raise ValueError("no calls to count")
        return Explained(self._plain_value(sample.tool_calls, sample.reference_tool_calls), "n")


class _Raising(_Counted):
    def _plain_explained(self, predicted: Any, reference: Any) -> tuple[float, str] | None:
        if not predicted:
            raise ValueError("no calls to count")
        return None


def test_rows_a_plain_function_cannot_write_take_the_general_path() -> None:
    lines = [(number, raw) for number, raw in enumerate(GOOD, start=1)]
    for metric in (_Counted(name="counted"), _Raising(name="counted")):
        metrics = [resolve_metrics(["tool_call_f1"])[0], metric]
        assert len(plain_explainers(metrics, RunOptions(details=False))) == 2
        chunks = [
            run_chunk(lines, 0, metrics, 0, RunOptions(max_concurrency=flight, details=False))
            for flight in (1, 4)
        ]
        assert chunks[0].records == chunks[1].records
        rows = [json.loads(record) for record in chunks[0].records]
        assert [row["counted_reason"] for row in rows] == ["n", "n", "n", None, "n", "n"]
        assert rows[3]["counted_error"] == "ValueError: line 4: no calls to count"


def test_a_sample_id_is_written_by_the_plain_path_as_by_evaluate(tmp_path: Path) -> None:
    named = conversation([call("search", q="x")], reference=REFERENCE)
    named.metadata = {"id": "case-7"}
    data = tmp_path / "named.jsonl"
    data.write_text(named.model_dump_json(exclude_none=True) + "\n" + GOOD[0].decode() + "\n")
    # One sample at a time, without details and with no row kept for a report: rows are
    # written from the metrics' plain functions (the workers' path).
    plain = tmp_path / "plain"
    evaluate_jsonl(
        data,
        METRICS,
        plain,
        engine=Local(workers=1),
        details=False,
        max_concurrency=1,
        report_rows=0,
    )
    evaluate_jsonl(data, METRICS, tmp_path / "general", engine=Local(workers=1), details=True)
    by_plain, general = rows_of(plain), rows_of(tmp_path / "general")
    expected = evaluate([named], METRICS, details=False, show_progress=False).records()[0]
    assert list(by_plain[0])[:2] == ["index", "id"] and by_plain[0]["id"] == "case-7"
    assert {key: by_plain[0][key] for key in expected} == expected
    assert general[0]["id"] == "case-7" and "id" not in by_plain[1] and "id" not in general[1]

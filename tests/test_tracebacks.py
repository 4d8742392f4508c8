"""A failed metric keeps where it raised: on the row, in results.jsonl, the report, the CLI,
the run store and the viewer; from this process and from worker processes alike."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from turneval import MultiTurnSample, evaluate
from turneval.engines import Local
from turneval.messages import AIMessage, HumanMessage
from turneval.metrics import Explained, MultiTurnMetric
from turneval.pipeline import (
    TRACEBACK_CHARS,
    TRACEBACK_FRAMES,
    TRACEBACK_LINE,
    failure_traceback,
)
from turneval.results import EvaluationResult, MetricFailure
from turneval.stream import evaluate_jsonl

from ._builders import call, conversation


def _budget_of(sample: MultiTurnSample) -> float:
    metadata = sample.metadata or {}
    return float(metadata["budget"])  # a KeyError deep in a helper, as users write them


class BudgetLeft(MultiTurnMetric):
    """A user's metric: the budget its sample's metadata holds (None: it raises KeyError)."""

    name: str = "test_budget_left"

    async def _evaluate(self, sample: MultiTurnSample) -> Explained:
        return Explained(min(_budget_of(sample), 1.0), "budget read")


def _chat(budget: float | None) -> MultiTurnSample:
    metadata: dict[str, Any] = {"id": f"b{budget}"}
    if budget is not None:
        metadata["budget"] = budget
    return MultiTurnSample(
        user_input=[HumanMessage(content="book it"), AIMessage(content="done")],
        metadata=metadata,
    )


def _helper_frame(trace: str | None) -> None:
    """The traceback names the helper's frame, its line and the error, as Python prints it."""
    assert trace is not None
    assert trace.startswith("Traceback (most recent call last):")
    assert 'in _budget_of\n    return float(metadata["budget"])' in trace
    assert trace.endswith("KeyError: 'budget'")


def test_a_custom_metrics_keyerror_keeps_the_helpers_frame_through_file_and_report(
    tmp_path: Path,
) -> None:
    result = evaluate([_chat(0.5), _chat(None)], [BudgetLeft()], show_progress=False)
    failure = result.rows[1].failures["test_budget_left"]
    assert str(failure) == "KeyError: 'budget'"  # the error line is as before
    _helper_frame(failure.traceback)
    assert result.rows[0].results["test_budget_left"].value == 0.5
    # results.jsonl: <name>_traceback beside <name>_error, on the failed row only
    records = result.records()
    assert "test_budget_left_traceback" not in records[0]
    assert records[1]["test_budget_left_traceback"] == failure.traceback
    path = tmp_path / "results.jsonl"
    result.to_jsonl(path)
    again = EvaluationResult.from_jsonl(path)
    assert again.rows[1].failures["test_budget_left"] == failure
    # the report shows it on demand, escaped: quotes and brackets never reach the page raw
    result.to_html(tmp_path / "report.html")
    html = (tmp_path / "report.html").read_text()
    assert "<details class='traceback'><summary>traceback</summary>" in html
    assert "return float(metadata[&quot;budget&quot;])" in html
    assert 'metadata["budget"]' not in html


def test_a_worker_process_sends_the_traceback_back(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    lines = [_chat(None if i % 3 == 0 else 0.25).model_dump_json() for i in range(6)]
    data.write_text("".join(line + "\n" for line in lines))
    result = evaluate_jsonl(
        data, [BudgetLeft()], tmp_path / "out", engine=Local(workers=2, chunk_size=2)
    )
    assert result.failed_rows == 2
    assert result.first_errors[0].line == 1
    _helper_frame(result.first_errors[0].traceback)
    text = (tmp_path / "out" / "results.jsonl").read_text()
    rows = [json.loads(line) for line in text.splitlines()]
    traces = [row.get("test_budget_left_traceback") for row in rows]
    assert [trace is not None for trace in traces] == [True, False, False, True, False, False]
    _helper_frame(traces[3])
    report = (tmp_path / "out" / "report.html").read_text()
    assert "in _budget_of" in report


def test_the_kept_traceback_is_the_innermost_frames_and_a_few_kb() -> None:
    def dive(depth: int) -> None:  # two functions in turn: Python folds no repeated frame
        if depth == 0:
            raise ValueError("x" * 3 * TRACEBACK_CHARS)
        turn(depth - 1)

    def turn(depth: int) -> None:
        dive(depth)

    try:
        dive(50)
    except ValueError as exc:
        trace = failure_traceback(exc)
    assert trace is not None
    # the long message is cut (the row's error keeps it whole), never the frames
    assert trace.endswith("ValueError: " + "x" * (TRACEBACK_LINE - len("ValueError: ")) + " ...")
    frames = [line for line in trace.splitlines() if line.startswith("  File ")]
    assert len(frames) == TRACEBACK_FRAMES  # the innermost frames, not the first
    assert frames[-1].endswith("in dive") and "in test_the_kept" not in trace
    assert "raise ValueError" in trace and trace.startswith("Traceback")
    # a chain of errors longer than the limit keeps its last lines, the cut marked
    causes: list[BaseException] = []
    for _ in range(4):
        try:
            dive(50)
        except ValueError as exc:
            causes.append(exc)
    for cause, effect in zip(causes, causes[1:], strict=False):
        effect.__cause__ = cause
    try:
        raise KeyError("budget") from causes[-1]
    except KeyError as exc:
        chained = failure_traceback(exc)
    assert chained is not None
    assert len(chained) <= TRACEBACK_CHARS
    assert chained.startswith("...\n") and chained.endswith("KeyError: 'budget'")
    # an error the runner made up (a timeout) was never raised: no frames to keep
    assert failure_traceback(TimeoutError("sample exceeded its 1s timeout")) is None


def test_a_timeout_keeps_no_traceback() -> None:
    failure = MetricFailure("m", 0, "TimeoutError", "slow")
    assert failure.traceback is None
    row = EvaluationResult.from_records(
        [{"index": 0, "m": None, "m_reason": None, "m_error": "TimeoutError: slow"}]
    ).rows[0]
    assert row.failures["m"] == failure  # a file written before tracebacks still reads


def test_a_data_error_keeps_no_traceback() -> None:
    # a missing field is the data's fault, named by the error: no frames of turneval's check
    # (formatting them for every row of a bad file made such runs 16 times slower)
    no_reference = conversation([call("a")], reference=None)
    result = evaluate([no_reference], ["tool_call_f1"], show_progress=False)
    failure = result.rows[0].failures["tool_call_f1"]
    assert failure.error_type == "InvalidSampleError" and failure.traceback is None


def test_the_cli_prints_tracebacks_only_when_asked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from turneval.cli import main
    from turneval.metrics import ToolCallF1

    async def broken(self: ToolCallF1, sample: MultiTurnSample) -> Explained:
        return Explained(_budget_of(sample), "")  # a bug: KeyError in a helper

    # the metric's own code raises (its fast path off, so the in-process run reaches it)
    monkeypatch.setattr(ToolCallF1, "_evaluate", broken)
    monkeypatch.setattr(ToolCallF1, "_plain_explainer", lambda self: None)
    data = tmp_path / "data.jsonl"
    data.write_text(conversation([call("a")], [call("a")]).model_dump_json() + "\n")
    common = ["evaluate", str(data), "--metric", "tool_call_f1", "--quiet", "--overwrite"]
    common += ["--workers", "1"]
    assert main([*common, "--out", str(tmp_path / "plain")]) == 3
    plain = capsys.readouterr().err
    assert "line 1: tool_call_f1: KeyError" in plain
    assert "Traceback" not in plain
    assert main([*common, "--out", str(tmp_path / "traced"), "--traceback"]) == 3
    traced = capsys.readouterr().err
    error_line = next(line for line in traced.splitlines() if "KeyError" in line)
    assert error_line.startswith("  line 1: tool_call_f1:")
    shown = traced.split(error_line, 1)[1].splitlines()
    assert shown[1] == "    Traceback (most recent call last):"
    assert any("_budget_of" in line for line in shown)
    record = json.loads((tmp_path / "traced" / "results.jsonl").read_text())
    assert record["tool_call_f1_traceback"].startswith("Traceback (most recent call last):")


def test_the_store_keeps_the_traceback_and_the_viewer_shows_it_escaped(tmp_path: Path) -> None:
    pytest.importorskip("sqlalchemy")
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from turneval.store import RunStore
    from turneval.view import create_app

    with RunStore(str(tmp_path / "runs.db")) as store:
        result = evaluate([_chat(None)], [BudgetLeft()], show_progress=False, store=store)
        assert result.store_run is not None
        stored = store.result(result.store_run)
        _helper_frame(stored.rows[0].failures["test_budget_left"].traceback)
        page = TestClient(create_app(store)).get(f"/runs/{result.store_run}/rows/0").text
    assert "<details class='traceback'><summary>traceback</summary>" in page
    assert "return float(metadata[&quot;budget&quot;])" in page
    assert 'metadata["budget"]' not in page


def test_the_dataframe_keeps_its_columns() -> None:
    pytest.importorskip("pandas")
    result = evaluate([_chat(0.5), _chat(None)], [BudgetLeft()], show_progress=False)
    columns = list(result.to_pandas().columns)
    assert columns[-3:] == ["test_budget_left", "test_budget_left_reason", "test_budget_left_error"]


def test_a_resumed_run_keeps_the_tracebacks_of_the_rows_it_had(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    lines = [_chat(None if i == 0 else 0.25).model_dump_json() for i in range(4)]
    data.write_text("".join(line + "\n" for line in lines))
    out = tmp_path / "out"
    evaluate_jsonl(data, [BudgetLeft()], out, engine=Local(workers=1, chunk_size=2))
    written = (out / "results.jsonl").read_text().splitlines(keepends=True)
    (out / "results.jsonl").write_text("".join(written[:2]))  # stopped after the first chunk
    resumed = evaluate_jsonl(
        data, [BudgetLeft()], out, engine=Local(workers=1, chunk_size=2), resume=True
    )
    assert resumed.total_rows == 4 and resumed.failed_rows == 1
    _helper_frame(resumed.first_errors[0].traceback)  # read back from the row it had
    assert "in _budget_of" in (out / "report.html").read_text()


def test_assert_scores_shows_where_a_metric_raised() -> None:
    from turneval.testing import ScoreAssertionError, assert_scores

    with pytest.raises(ScoreAssertionError) as caught:
        assert_scores(_chat(None), [BudgetLeft()], 0.5)
    message = str(caught.value)
    assert "test_budget_left failed: KeyError: 'budget'" in message
    assert "    Traceback (most recent call last):" in message and "_budget_of" in message
    assert caught.value.failures == ["sample 0: test_budget_left failed: KeyError: 'budget'"]

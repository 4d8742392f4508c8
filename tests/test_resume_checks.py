"""``--resume`` continues only the run it was started as: run.json records the input read so
far, the metrics with their configurations and the judge, and a difference is refused."""

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_openai import ChatOpenAI

from turneval import ConfigError
from turneval.cli import main
from turneval.engines import Local
from turneval.metrics import ToolCallF1
from turneval.stream import ResumeWarning, evaluate_jsonl
from turneval.stream._sink import JsonlSink

from ._builders import call, conversation

LINES = [
    conversation([call("a", n=n)], reference=[call("a", n=n % 2)]).model_dump_json(
        exclude_none=True
    )
    for n in range(6)
]  # lines 1 and 2 score 1 (n == n % 2); lines 3-6 score 0 (the argument differs)


def setup(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """A finished run of tool_call_f1, then cut back to its first 3 rows (as if killed)."""
    data = tmp_path / "data.jsonl"
    data.write_text("".join(line + "\n" for line in LINES))
    out = tmp_path / "out"
    evaluate_jsonl(data, ["tool_call_f1"], out, engine=Local(workers=1, chunk_size=2))
    rows = (out / "results.jsonl").read_text().splitlines(keepends=True)
    (out / "results.jsonl").write_text("".join(rows[:3]))
    return data, out, rows


def test_run_json_records_the_run_before_the_first_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[dict[str, Any]] = []
    absorb = JsonlSink.absorb

    def first_absorb(self: JsonlSink, chunk: Any) -> None:
        run_json = self.folder.folder / "run.json"
        if not seen:  # before the first row: run.json is there, no input read yet
            assert self.folder.results_path.stat().st_size == 0
            assert json.loads(run_json.read_text())["dataset"]["lines_read"] == 0
        absorb(self, chunk)
        seen.append(json.loads(run_json.read_text()))  # it covers every row written

    monkeypatch.setattr(JsonlSink, "absorb", first_absorb)
    data = tmp_path / "data.jsonl"
    data.write_text("".join(line + "\n" for line in LINES))
    judge = ChatOpenAI(model="gpt-4o-mini", api_key="unused", base_url="http://127.0.0.1:9/v1")
    metric = ToolCallF1(match_threshold=0.5)
    evaluate_jsonl(
        data, [metric], tmp_path / "out", llm=judge, engine=Local(workers=1, chunk_size=4)
    )
    first = seen[0]  # as it stood once the first chunk's 4 rows were written
    assert set(first) == {"turneval_version", "metrics", "judge", "dataset"}
    assert first["metrics"] == [
        {
            "name": "tool_call_f1",
            "class": "turneval.metrics:ToolCallF1",
            "config": metric.model_dump(mode="json"),
        }
    ]
    assert first["judge"] == {
        "model": "gpt-4o-mini",
        "base_url": "http://127.0.0.1:9/v1",
        "prompt_version": None,
    }
    import hashlib

    raw = data.read_bytes()
    four = b"".join(raw.splitlines(keepends=True)[:4])  # the first chunk: lines 1-4, read
    assert first["dataset"] == {
        "path": str(data),
        "sha256": hashlib.sha256(four).hexdigest(),
        "lines_read": 4,
        "bytes_read": len(four),
        # the version the run reads (issue 49): the whole file's digest, named when a store
        # keeps it
        "version": {"digest": hashlib.sha256(raw).hexdigest(), "name": None, "version": None},
    }
    final = json.loads((tmp_path / "out" / "run.json").read_text())
    assert final["dataset"]["sha256"] == hashlib.sha256(raw).hexdigest()
    assert final["dataset"]["lines_read"] == 6


def test_resume_refuses_another_metric_set_configuration_judge_or_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data, out, rows = setup(tmp_path)
    kept = (out / "results.jsonl").read_text()
    args = ["evaluate", str(data), "--out", str(out), "--quiet", "--resume"]
    refusals = [
        (
            ["--metric", "tool_call_f1", "--metric", "trajectory_in_order_match"],
            "the metrics changed: the run has tool_call_f1; this one has tool_call_f1, "
            "trajectory_in_order_match",
        ),
        (
            ["--metric", "tool_call_f1:match_threshold=0.8"],
            "metric tool_call_f1's configuration changed: match_threshold 1.0 -> 0.8",
        ),
    ]
    for extra, difference in refusals:
        assert main([*args, *extra]) == 2
        err = capsys.readouterr().err
        assert err == (
            f"turneval: error: cannot resume {out}: {difference}; rerun without --resume "
            "(--overwrite) or into another --out folder\n"
        )
        assert (out / "results.jsonl").read_text() == kept  # nothing mixed in
    judge = ChatOpenAI(model="gpt-4o", api_key="unused", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ConfigError, match=r"^cannot resume .*: the judge changed: none -> gpt-4o;"):
        evaluate_jsonl(data, ["tool_call_f1"], out, llm=judge, resume=True)
    changed = LINES.copy()
    changed[1] = LINES[0]  # line 2 edited, inside the part the run had read
    data.write_text("".join(line + "\n" for line in changed))
    with pytest.raises(ConfigError, match=r"the input changed: the run had read lines 1-6 of"):
        evaluate_jsonl(data, ["tool_call_f1"], out, resume=True)
    data.write_text("".join(line + "\n" for line in LINES[:5]))  # cut short
    with pytest.raises(ConfigError, match=r"lines 1-6 of .*; it has fewer lines in"):
        evaluate_jsonl(data, ["tool_call_f1"], out, resume=True)
    assert (out / "results.jsonl").read_text() == kept
    data.write_text("".join(line + "\n" for line in LINES))  # the same input, the same run
    resumed = evaluate_jsonl(data, ["tool_call_f1"], out, resume=True, engine=Local(workers=1))
    assert (out / "results.jsonl").read_text().splitlines(keepends=True) == rows
    assert resumed.total_rows == 6 and resumed.summaries["tool_call_f1"].mean == 2 / 6


def test_a_grown_input_resumes_the_lines_it_had_not_read(tmp_path: Path) -> None:
    data, out, rows = setup(tmp_path)
    (out / "results.jsonl").write_text("".join(rows))  # the run finished
    data.write_text("".join(line + "\n" for line in [*LINES, LINES[0]]))  # a line appended
    resumed = evaluate_jsonl(data, ["tool_call_f1"], out, resume=True, engine=Local(workers=1))
    assert resumed.total_rows == 7
    assert json.loads((out / "results.jsonl").read_text().splitlines()[-1])["line"] == 7


def test_a_folder_without_run_json_resumes_with_a_note_and_its_rows_count_as_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A run folder of an older turneval (no run.json), resumed with one metric more: the old
    # rows have no trajectory_in_order_match value. They fail the gate, as the summary says.
    data, out, _ = setup(tmp_path)
    (out / "run.json").unlink()
    args = ["evaluate", str(data), "--out", str(out), "--quiet", "--resume"]
    metrics = ["--metric", "tool_call_f1", "--metric", "trajectory_in_order_match"]
    assert main([*args, *metrics]) == 3
    err = capsys.readouterr().err.splitlines()
    assert err[0] == (
        f"turneval: warning: {out} has no run.json (written by an older turneval): resuming "
        "without checking that the input, metrics and judge are the same"
    )
    assert err[1] == "FAIL: 3 of 6 rows failed; --max-failed allows 0"
    assert err[2] == (
        "  line 1: trajectory_in_order_match: NotScored: the resumed row has no value for it "
        "(written by a run with other metrics)"
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["failed_rows"] == 3
    assert summary["metrics"]["trajectory_in_order_match"]["failed"] == 3
    assert json.loads((out / "run.json").read_text())["metrics"][1]["name"] == (
        "trajectory_in_order_match"
    )  # from now on the folder records the run
    with pytest.warns(ResumeWarning):
        (out / "run.json").unlink()
        evaluate_jsonl(data, ["tool_call_f1", "trajectory_in_order_match"], out, resume=True)


def test_resume_refuses_another_judge_server_and_never_records_a_key(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(line + "\n" for line in LINES))
    out = tmp_path / "out"

    def judge(url: str) -> ChatOpenAI:
        return ChatOpenAI(model="m", api_key="sk-secret", base_url=url)

    evaluate_jsonl(data, ["tool_call_f1"], out, llm=judge("http://u:pw@127.0.0.1:9/v1?key=k"))
    recorded = (out / "run.json").read_text()
    assert json.loads(recorded)["judge"]["base_url"] == "http://127.0.0.1:9/v1"
    assert not any(secret in recorded for secret in ("sk-secret", "pw", "key=k"))
    with pytest.raises(
        ConfigError,
        match=r"^cannot resume .*: the judge's server changed: http://127.0.0.1:9/v1 -> "
        r"http://127.0.0.1:10/v1;",
    ):
        evaluate_jsonl(
            data, ["tool_call_f1"], out, llm=judge("http://127.0.0.1:10/v1"), resume=True
        )
    resumed = evaluate_jsonl(
        data, ["tool_call_f1"], out, llm=judge("http://127.0.0.1:9/v1"), resume=True
    )
    assert resumed.total_rows == 6  # the same server: it continues

"""Hostile input lines: every non-blank line yields one row, whatever its bytes; resume."""

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from turneval.cli import main
from turneval.engines import Local
from turneval.errors import ConfigError
from turneval.stream import JsonlSource, evaluate_jsonl

from ._builders import call, conversation

GOOD = conversation([call("a")], reference=[call("a")]).model_dump_json(exclude_none=True)
SURROGATE = GOOD.replace('"a"', '"\\ud800"', 1)
LISTED = [
    b"\xef\xbb\xbf" + GOOD.encode(),  # BOM on line 1: scored as usual
    b"[" * 10_000 + b"]" * 10_000,
    b'{"user_input": ' + b"[" * 10_000 + b"]" * 10_000 + b"}",
    b"\xff\xfe not utf-8",
    SURROGATE.encode(),
    b"",  # blank: skipped
    GOOD.encode(),
]


def rows_of(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_listed_hostile_lines_each_yield_one_row(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_bytes(b"\n".join(LISTED) + b"\n")
    result = evaluate_jsonl(data, ["tool_call_f1"], tmp_path / "out", engine=Local(workers=1))
    rows = rows_of(tmp_path / "out")
    assert [row["line"] for row in rows] == [1, 2, 3, 4, 5, 7]
    assert rows[0]["tool_call_f1"] == 1.0 and rows[5]["tool_call_f1"] == 1.0
    assert "line 2: JSON nested too deeply" in rows[1]["tool_call_f1_error"]
    assert rows[2]["tool_call_f1"] is None and "line 3" in rows[2]["tool_call_f1_error"]
    assert (
        f"line 4: not valid UTF-8 in {data} (byte 0xff at byte offset 0)"
        in (rows[3]["tool_call_f1_error"])
    )
    assert result.total_rows == 6 and (tmp_path / "out" / "report.html").stat().st_size > 0
    # CLI: same rows, no traceback; exit 3 because 4 rows failed and --max-failed is 0.
    assert (
        main(
            [
                "evaluate",
                str(data),
                "--metric",
                "tool_call_f1",
                "--out",
                str(tmp_path / "c"),
                "--quiet",
            ]
        )
        == 3
    )
    assert len(rows_of(tmp_path / "c")) == 6


COMPRESSED = {b"\x1f\x8b": "gzip", b"\x28\xb5\x2f\xfd": "zstd"}  # the magic numbers refused


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.binary(max_size=40).filter(lambda b: b"\n" not in b), min_size=1, max_size=6))
@example([b"\x1f\x8b\x08 gzip"])  # both outcomes are tried on every run, whatever the draw
@example([b"\x28\xb5\x2f\xfd zstd", b"x"])
@example([b"\x1f", b"\x8b"])  # the magic split by a newline is no magic: rows
def test_fuzzed_lines_each_yield_one_row(tmp_path: Path, lines: list[bytes]) -> None:
    # Every non-blank line yields one row; unless the file starts with a gzip or zstd magic
    # number: then it is refused whole, naming the compression (no row, no results file).
    data = tmp_path / "fuzz.jsonl"
    content = b"\n".join([*lines, GOOD.encode()]) + b"\n"
    data.write_bytes(content)
    out = tmp_path / "f"
    shutil.rmtree(out, ignore_errors=True)
    args = ["evaluate", str(data), "--metric", "tool_call_f1", "--out", str(out), "--quiet"]
    kind = next((kind for magic, kind in COMPRESSED.items() if content.startswith(magic)), None)
    if kind is not None:
        with pytest.raises(ConfigError, match=f"{kind}-compressed file; decompress it first"):
            evaluate_jsonl(data, ["tool_call_f1"], out, engine=Local(workers=1))
        assert main(args) == 2 and not (out / "results.jsonl").exists()
        return
    expected = [n for n, raw in enumerate([*lines, GOOD.encode()], 1) if raw.strip()]
    evaluate_jsonl(data, ["tool_call_f1"], out, engine=Local(workers=1))
    assert [row["line"] for row in rows_of(out)] == expected
    assert main([*args, "--max-failed", "1.0", "--overwrite"]) == 0


def test_resume_keeps_finished_rows_and_refuses_silent_overwrite(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text((GOOD + "\n") * 5)
    out = tmp_path / "out"
    args = ["evaluate", str(data), "--metric", "tool_call_f1", "--out", str(out), "--quiet"]
    assert main(args) == 0
    rows = (out / "results.jsonl").read_text().splitlines()
    kept = [json.loads(r) for r in rows[:2]]
    for row in kept:
        row["tool_call_f1"] = 0.5  # marks the rows an interrupted run finished
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept) + rows[2][:9])
    assert main(args) == 2 and "already exists" in capsys.readouterr().err
    assert main([*args, "--resume"]) == 0
    resumed = rows_of(out)
    assert [r["line"] for r in resumed] == [1, 2, 3, 4, 5]
    assert [r["tool_call_f1"] for r in resumed] == [0.5, 0.5, 1.0, 1.0, 1.0]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["metrics"]["tool_call_f1"]["count"] == 5
    assert summary["metrics"]["tool_call_f1"]["mean"] == (0.5 * 2 + 3) / 5


def test_resumed_run_counts_the_failed_rows_and_errors_the_whole_run_has(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Lines 2 and 5 hold no sample (unreadable); line 3 is a conversation without reference
    # calls (every metric rejects it, but the line was read): 3 failed rows, 2 bad lines.
    no_reference = conversation([call("a")]).model_dump_json(exclude_none=True)
    lines = [GOOD, "{not json", no_reference, GOOD, '{"user_input": 5}', GOOD]
    data = tmp_path / "data.jsonl"
    data.write_text("".join(line + "\n" for line in lines))
    full_out, out = tmp_path / "full", tmp_path / "out"
    full = evaluate_jsonl(data, ["tool_call_f1"], full_out, engine=Local(workers=1))
    assert (full.total_rows, full.failed_rows, full.bad_lines) == (6, 3, 2)
    assert [error.line for error in full.first_errors] == [2, 3, 5]
    rows = (full_out / "results.jsonl").read_text().splitlines()
    assert [json.loads(row).get("unreadable", False) for row in rows] == [
        False, True, False, False, True, False,
    ]  # fmt: skip
    for finished in (3, 5):  # interrupted after line 3, or after line 5
        out.mkdir(exist_ok=True)
        (out / "results.jsonl").write_text("".join(row + "\n" for row in rows[:finished]))
        (out / "run.json").write_bytes((full_out / "run.json").read_bytes())  # same run
        resumed = evaluate_jsonl(data, ["tool_call_f1"], out, engine=Local(workers=1), resume=True)
        assert (resumed.total_rows, resumed.failed_rows, resumed.bad_lines) == (6, 3, 2)
        assert resumed.first_errors == full.first_errors
        assert (out / "results.jsonl").read_text().splitlines() == rows
    # The gate of the command line sees them too: the resumed run exits 3 as the full one did.
    (out / "results.jsonl").write_text("".join(row + "\n" for row in rows[:4]))
    args = ["evaluate", str(data), "--metric", "tool_call_f1", "--out", str(out), "--quiet"]
    assert main([*args, "--resume"]) == 3
    err = capsys.readouterr().err
    assert "FAIL: 3 of 6 rows failed" in err
    assert "line 3: tool_call_f1: InvalidSampleError: " in err
    assert "line 3: tool_call_f1: InvalidSampleError: line 3:" not in err  # named once
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["failed_rows"], summary["bad_lines"]) == (3, 2)


def test_corrupt_cache_on_the_cli_is_one_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text(GOOD + "\n")
    bad = tmp_path / "c.sqlite"
    bad.write_bytes(b"garbage" * 200)
    args = ["evaluate", str(data), "--metric", "tool_call_f1", "--out", str(tmp_path / "o")]
    assert main([*args, "--cache", str(bad)]) == 2
    assert f"judge cache {bad} is not a readable SQLite database" in capsys.readouterr().err


def test_long_report_text_is_clipped_with_the_full_value_one_click_away(tmp_path: Path) -> None:
    from turneval import evaluate

    sample = conversation([call("a")], reference=[call("a")])
    long = "x" * 5_000
    sample.user_input[0].content = long
    evaluate([sample], ["tool_call_f1"]).to_html(tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    assert "show all 5,000 characters" in page and long in page


LOOSE = [  # (line, the error naming its key): not strict JSON, each read by --lenient-json
    (
        GOOD.replace(
            '"reference_tool_calls":', '"reference_tool_calls":[],"reference_tool_calls":'
        ),
        "duplicate key 'reference_tool_calls'",
    ),
    (GOOD.replace('"args":{}', '"args":{"q":1,"q":2}'), "duplicate key 'q'"),
    (GOOD[:-1] + ',"metadata":{"score":NaN}}', "key 'score' holds NaN, not a finite number"),
    (GOOD[:-1] + ',"metadata":{"w":[1,Infinity]}}', "key 'w' holds Infinity, not a finite number"),
    (GOOD[:-1] + ',"metadata":{"m":-Infinity}}', "key 'm' holds -Infinity, not a finite number"),
    (GOOD[:-1] + ',"metadata":{"big":1e400}}', "key 'big' holds 1e400, not a finite number"),
]


def test_lines_that_are_not_strict_json_are_error_rows_naming_line_and_key(
    tmp_path: Path,
) -> None:
    from turneval import EvaluationDataset, InvalidSampleError

    data = tmp_path / "data.jsonl"
    data.write_text("".join(line + "\n" for line in [GOOD, *(loose for loose, _ in LOOSE), GOOD]))
    evaluate_jsonl(data, ["tool_call_f1"], tmp_path / "strict", engine=Local(workers=1))
    rows = rows_of(tmp_path / "strict")
    assert [row["tool_call_f1"] for row in rows] == [1.0] + [None] * 6 + [1.0]
    hint = "--lenient-json or lenient_json=True reads it as before"
    assert [row["tool_call_f1_error"] for row in rows[1:7]] == [
        f"InvalidSampleError: line {number}: not strict JSON: {problem} ({hint})"
        for number, (_, problem) in enumerate(LOOSE, start=2)
    ]
    # Lenient: read as before (the last duplicate wins; NaN and 1e400 are numbers), also in
    # worker processes.
    source = JsonlSource(data, lenient_json=True)
    evaluate_jsonl(source, ["tool_call_f1"], tmp_path / "lenient", engine=Local(workers=2))
    assert [row["tool_call_f1"] for row in rows_of(tmp_path / "lenient")] == [1.0] * 8
    args = ["evaluate", str(data), "--metric", "tool_call_f1", "--quiet"]
    assert main([*args, "--out", str(tmp_path / "c")]) == 3  # 6 failed rows
    assert main([*args, "--out", str(tmp_path / "l"), "--lenient-json"]) == 0
    with pytest.raises(InvalidSampleError, match=rf"{data}: line 2 is not strict JSON: dup"):
        EvaluationDataset.from_jsonl(data)
    lenient = EvaluationDataset.from_jsonl(data, lenient_json=True)
    assert lenient[1].reference_tool_calls == [call("a")]  # type: ignore[union-attr]
    assert lenient[6].metadata == {"big": float("inf")}

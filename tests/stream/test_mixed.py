"""Mixed sample types in one file: each line is scored by its own type; errors name the line."""

import json
from pathlib import Path

import pytest

from turneval.cli import main
from turneval.engines import Local
from turneval.samples import SingleTurnSample
from turneval.stream import evaluate_jsonl

from .._builders import call, conversation

MULTI = conversation([call("a")], reference=[call("a")]).model_dump_json(exclude_none=True)
SINGLE = SingleTurnSample(user_input="q", response="yes", reference="yes").model_dump_json(
    exclude_none=True
)


def rows(out: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_a_single_turn_line_in_a_multi_turn_file_is_its_own_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join([MULTI] * 8 + [SINGLE] + [MULTI] * 3) + "\n")
    out = tmp_path / "out"
    code = main(
        [
            "evaluate",
            str(data),
            "--metric",
            "tool_call_f1",
            "--metric",
            "exact_match",
            "--out",
            str(out),
            "--quiet",
            "--max-failed",
            "1.0",
        ]
    )
    assert code == 0, capsys.readouterr().err
    written = rows(out)
    assert len(written) == 12 and [r["line"] for r in written] == list(range(1, 13))
    single = written[8]
    assert single["exact_match"] == 1.0  # scored by its own type
    assert single["tool_call_f1"] is None
    assert single["tool_call_f1_error"] == (
        "InvalidSampleError: line 9: metric 'tool_call_f1' scores MultiTurnSample, "
        "got SingleTurnSample"
    )
    assert [r["tool_call_f1"] for i, r in enumerate(written) if i != 8] == [1.0] * 11
    assert str(written[0]["exact_match_error"]).startswith("InvalidSampleError: line 1: ")
    assert {p.name for p in out.iterdir()} == {
        "results.jsonl",
        "summary.json",
        "report.html",
        "run.json",
    }


def test_lines_past_5000_are_named_right_across_chunks(tmp_path: Path) -> None:
    lines = [MULTI] * 5003
    lines[5000] = SINGLE  # line 5,001: the first of the sixth chunk
    lines[5002] = '{"user_input": [{"type": "robot", "content": "x"}]}'  # line 5,003
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(lines) + "\n")
    out = tmp_path / "out"
    result = evaluate_jsonl(data, ["tool_call_f1"], out, engine=Local(workers=2))
    written = rows(out)
    assert len(written) == 5003 and result.total_rows == 5003
    assert written[5000]["tool_call_f1_error"] == (
        "InvalidSampleError: line 5001: metric 'tool_call_f1' scores MultiTurnSample, "
        "got SingleTurnSample"
    )
    assert str(written[5002]["tool_call_f1_error"]).startswith(
        "InvalidSampleError: line 5003 (MultiTurnSample): user_input.0"
    )
    assert result.summaries["tool_call_f1"].failed == 2
    assert result.summaries["tool_call_f1"].count == 5001

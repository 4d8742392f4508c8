"""CI gates: failed rows count (exit 3), bars respect the metric's scale, compare gates (exit 1)."""

import json
from pathlib import Path

import pytest

from turneval.cli import main

from .._builders import call, conversation

GOOD = conversation([call("a")], reference=[call("a")]).model_dump_json(exclude_none=True)
HALF = conversation([call("a")], reference=[call("a"), call("b")]).model_dump_json(
    exclude_none=True
)


def corrupt_file(tmp_path: Path) -> Path:
    """2 good lines (lines 1 and 5), 7 bad ones."""
    lines = [GOOD, "{oops", "[]", '{"user_input": []}', GOOD, "{", "{", "{", "{"]
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def run(tmp_path: Path, data: Path, *extra: str, out: str = "out") -> int:
    return main(
        [
            "evaluate",
            str(data),
            "--metric",
            "tool_call_f1",
            "--out",
            str(tmp_path / out),
            "--overwrite",
            "--quiet",
            *extra,
        ]
    )


def test_failed_rows_exit_3_and_name_their_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = corrupt_file(tmp_path)
    assert run(tmp_path, data, "--fail-under", "tool_call_f1=0.4") == 3
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "FAIL: 7 of 9 rows failed; --max-failed allows 0"
    assert err[1].startswith("  line 2: tool_call_f1: InvalidSampleError: not valid JSON")
    assert [line.split(":")[0] for line in err[1:6]] == [
        "  line 2",
        "  line 3",
        "  line 4",
        "  line 6",
        "  line 7",
    ]
    assert err[6] == "  ... and 2 more failed rows (see results.jsonl)"
    assert all("Traceback" not in line for line in err)
    assert run(tmp_path, data, "--max-failed", "7") == 0
    assert run(tmp_path, data, "--max-failed", "6") == 3
    assert run(tmp_path, data, "--max-failed", "0.7") == 3  # 7/9 = 0.78 > 0.7
    assert run(tmp_path, data, "--max-failed", "80%") == 0
    capsys.readouterr()
    # Failed rows allowed, the bar still checked over the scored rows: exit 1.
    assert run(tmp_path, data, "--max-failed", "1.0", "--fail-under", "tool_call_f1=1.0") == 0
    assert run(tmp_path, corrupt_file(tmp_path), "--max-failed", "7", "--fail-under", "x=1") == 2


def test_a_bar_outside_the_metric_scale_is_bad_usage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text(GOOD + "\n" + HALF + "\n")
    assert run(tmp_path, data, "--fail-under", "tool_call_f1=1.5") == 2
    assert (
        "--fail-under tool_call_f1=1.5: tool_call_f1 scores lie in [0, 1]"
        in capsys.readouterr().err
    )
    fluency = ["--metric", "fluency", "--judge-base-url", "http://127.0.0.1:9/v1"]
    assert run(tmp_path, data, *fluency, "--fail-under", "fluency=6") == 2
    assert "fluency scores lie in [1, 5]" in capsys.readouterr().err
    for bad in ("--max-failed", "-1"), ("--max-failed", "1.5"), ("--max-failed", "many"):
        assert run(tmp_path, data, *bad) == 2
        assert "--max-failed" in capsys.readouterr().err
    assert run(tmp_path, data, "--fail-under", "tool_call_f1=0.9") == 1  # (1 + 2/3) / 2
    assert "FAIL: tool_call_f1 mean 0.8333 < 0.9" in capsys.readouterr().err


def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    base = tmp_path / "base.jsonl"
    base.write_text("\n".join([GOOD, GOOD, HALF]) + "\n")
    cand = tmp_path / "cand.jsonl"
    cand.write_text("\n".join([GOOD, HALF, HALF]) + "\n")
    assert run(tmp_path, base, out="a") == 0
    assert run(tmp_path, cand, "--metric", "trajectory_recall", out="b") == 0
    return tmp_path / "a", tmp_path / "b"


def test_compare_accepts_folders_and_files_and_gates_regressions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = two_runs(tmp_path)
    capsys.readouterr()
    for left, right in (
        (a, b),
        (a / "summary.json", b / "summary.json"),
        (a / "results.jsonl", b / "results.jsonl"),
    ):
        assert main(["compare", str(left), str(right)]) == 0
        out = capsys.readouterr().out
        assert "| tool_call_f1 | 0.8889 | 0.7778 | -0.1111 |" in out
        assert "note: trajectory_recall is only in the candidate" in out
    assert main(["compare", str(a), str(b), "--fail-on-regression", "0.2"]) == 0
    # one row of three fell: the sign-flip test cannot tell that from noise (p 1), so the gate
    # passes, saying why (issue 43: a gate fails on a significant drop)
    assert main(["compare", str(a), str(b), "--fail-on-regression", "tool_call_f1=0"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert (
        "note: tool_call_f1 mean fell 0.8889 -> 0.7778 (-0.1111, more than 0) but not "
        "significantly (p 1.0000, not below alpha 0.05): its gate passes" in out
    )
    assert "| tool_call_f1 | 0 | -0.1111 | 1.0000 | 1.0000 | pass (drop not significant) |" in out
    # six rows fell: 2 of the 64 sign patterns are as extreme, p = 2/64 < 0.05
    base, cand = tmp_path / "six-base.jsonl", tmp_path / "six-cand.jsonl"
    base.write_text(f"{GOOD}\n" * 6)
    cand.write_text(f"{HALF}\n" * 6)
    assert run(tmp_path, base, out="c") == run(tmp_path, cand, out="d") == 0
    capsys.readouterr()
    c, d = str(tmp_path / "c"), str(tmp_path / "d")
    assert main(["compare", c, d, "--fail-on-regression", "tool_call_f1=0"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "FAIL: tool_call_f1 mean fell 1.0000 -> 0.6667 (-0.3333, more than 0; p 0.0312 < alpha "
        "0.05); regressed rows: line 1, line 2, line 3, line 4, line 5, line 6"
    ]
    assert main(["compare", c, d, "--fail-on-regression", "tool_call_f1=0", "--alpha", "0.01"]) == 0
    assert main(["compare", str(a), str(b), "--fail-on-regression", "trajectory_recall=0"]) == 2
    assert "'trajectory_recall', which is not in both runs" in capsys.readouterr().err


def test_compare_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, _ = two_runs(tmp_path)
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"index": 0, "m": 1.0, "m_reason": ""}\n{not json\n')
    capsys.readouterr()
    for other in (broken, tmp_path / "missing", tmp_path / "base.jsonl"):
        assert main(["compare", str(a), str(other)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("turneval: error: ") and err.count("\n") == 1, err
        assert "Traceback" not in err
    summary = json.loads((a / "summary.json").read_text())
    assert summary["metrics"]["tool_call_f1"]["count"] == 3


def test_compare_means_of_lone_summaries(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = two_runs(tmp_path)
    for folder in (a, b):
        lone = tmp_path / f"lone-{folder.name}"
        lone.mkdir()
        (lone / "summary.json").write_text((folder / "summary.json").read_text())
    capsys.readouterr()
    left, right = tmp_path / "lone-a" / "summary.json", tmp_path / "lone-b" / "summary.json"
    assert main(["compare", str(left), str(right), "--fail-on-regression", "0.1"]) == 1
    out, err = capsys.readouterr()
    assert "| tool_call_f1 | 0.8889 | 0.7778 | -0.1111 | n/a | 0 | 0 |" in out
    assert err == (
        "FAIL: tool_call_f1 mean fell 0.8889 -> 0.7778 (-0.1111, more than 0.1; means alone: no "
        "paired rows to test)\n"
    )
    (tmp_path / "lone-a" / "summary.json").write_text("{}")
    assert main(["compare", str(left), str(right)]) == 2
    assert "not a turneval summary.json" in capsys.readouterr().err


def test_usage_errors_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["compare", "only-one"])
    assert info.value.code == 2
    assert capsys.readouterr().err == (
        "turneval: error: the following arguments are required: candidate "
        "(see 'turneval compare --help')\n"
    )


def test_a_regression_gate_fails_on_rows_the_candidate_could_not_score(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the same three samples; the candidate's judge (say) failed on some or every row
    good = tmp_path / "good.jsonl"
    good.write_text(f"{GOOD}\n{HALF}\n{GOOD}\n")
    assert run(tmp_path, good, out="base") == 0
    rows = [
        json.loads(line) for line in (tmp_path / "base" / "results.jsonl").read_text().splitlines()
    ]
    for name, broken in (("some", [1]), ("every", [0, 1, 2])):
        (tmp_path / name).mkdir()
        for index in broken:
            rows[index] |= {"tool_call_f1": None, "tool_call_f1_error": "JudgeCallError: 503"}
        (tmp_path / name / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    capsys.readouterr()
    # rows 1 and 3 (both 1.0) still pair: the mean did not move, but line 2 was lost
    assert (
        main(
            [
                "compare",
                str(tmp_path / "base"),
                str(tmp_path / "some"),
                "--fail-on-regression",
                "0.1",
            ]
        )
        == 1
    )
    out, err = capsys.readouterr()
    assert "| tool_call_f1 | 1.0000 | 1.0000 | +0.0000 |" in out
    assert "note: tool_call_f1 failed in the candidate on 1 row the baseline scored: line 2" in out
    assert (
        err == "FAIL: tool_call_f1 failed in the candidate on 1 row the baseline scored: line 2\n"
    )
    # nothing left to compare: a gate that cannot be checked fails
    assert (
        main(
            [
                "compare",
                str(tmp_path / "base"),
                str(tmp_path / "every"),
                "--fail-on-regression",
                "0.1",
            ]
        )
        == 1
    )
    assert capsys.readouterr().err.splitlines() == [
        "FAIL: tool_call_f1: no row scored by both runs",
        "FAIL: tool_call_f1 failed in the candidate on 3 rows the baseline scored: "
        "line 1, line 2, line 3",
    ]


def test_row_errors_on_the_terminal_show_hidden_characters_as_code_points(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data.jsonl"
    evil = '{"user_input": [{"type": "human", "content": "hi"}], "evil\\u202etxt\\u0000": 1}'
    data.write_text(evil + "\n")
    assert run(tmp_path, data) == 3
    err = capsys.readouterr().err
    assert "evil<U+202E>txt<U+0000>: Extra inputs are not permitted" in err
    assert "\u202e" not in err and "\x00" not in err
    # the report's helper and the terminal's agree (one table of hidden characters)
    from turneval._hidden import shown

    assert shown("a\u2066b\x7fc\td") == "a<U+2066>b<U+007F>c\td"

"""Errors name what to fix: disk full names the file (its own exit code); compare and calibrate
name the file and line of a bad input."""

import errno
import json
import sys
from pathlib import Path

import pytest

from turneval.cli import EXIT_DISK_FULL, main

from .._builders import call, conversation

GOOD = conversation([call("a")], reference=[call("a")]).model_dump_json(exclude_none=True)
FULL = Path("/dev/full")  # every write fails with ENOSPC, as on a full disk
needs_dev_full = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not FULL.exists(), reason="needs Linux's /dev/full"
)


def evaluate(data: Path, out: Path) -> int:
    return main(["evaluate", str(data), "--metric", "tool_call_f1", "--out", str(out), "--quiet"])


@needs_dev_full
@pytest.mark.parametrize("name", ["results.jsonl", "summary.json", "report.html"])
def test_disk_full_names_the_file_and_exits_with_its_own_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text(GOOD + "\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / name).symlink_to(FULL)  # this file lands on a full disk
    assert EXIT_DISK_FULL not in (0, 1, 2, 3)
    assert evaluate(data, out) == EXIT_DISK_FULL
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"turneval: error: no space left on the device writing {out / name}")
    assert "--out" in err


@needs_dev_full
def test_disk_full_in_demo_and_calibrate_names_the_file_and_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "on_device" / "results.jsonl"  # the first domain written
    results.parent.mkdir()
    results.symlink_to(FULL)
    assert main(["demo", "--out", str(tmp_path)]) == EXIT_DISK_FULL
    err = capsys.readouterr().err
    assert f"no space left on the device writing {results} " in err  # was: "the output"
    assert err.rstrip().endswith("free some space or write elsewhere (--out)")
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps(ROW) + "\n")
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"index": 0, "label": 1}\n')
    html = tmp_path / "calibration.html"
    html.symlink_to(FULL)
    assert main(["calibrate", str(good), str(labels), "--metric", "a"]) == EXIT_DISK_FULL
    err = capsys.readouterr().err  # calibrate has no --out or --resume to suggest
    assert err.rstrip().endswith(
        f"writing {html} (No space left on device); free some space "
        "or write the report elsewhere (--html)"
    )


def test_disk_full_without_a_file_name_still_exits_with_its_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps({"index": 0, "a": 1.0, "a_reason": "", "line": 1}) + "\n")
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"index": 0, "label": 1}\n')

    def full(self: Path, *args: object, **kwargs: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full)
    code = main(["calibrate", str(results), str(labels), "--metric", "a"])
    err = capsys.readouterr().err
    assert code == EXIT_DISK_FULL
    assert f"no space left on the device writing {tmp_path / 'calibration.html'}" in err


ROW = {"index": 0, "a": 1.0, "a_reason": "", "a_error": None, "line": 1}


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("{oops", "line 2: not a turneval results row (JSONDecodeError: Expecting property name"),
        ("[1, 2]", "line 2: not a turneval results row (TypeError: expected a JSON object, got"),
        ('{"index": "x", "a": 1}', "line 2: not a turneval results row (ValueError: 'index' must"),
        (
            '{"index": 1, "a": "high", "a_reason": ""}',
            "line 2: not a turneval results row (ValueError: 'a' must be a number, got 'high')",
        ),
        (b"\xff\xfe", "line 2: not a turneval results row (UnicodeDecodeError"),
    ],
)
def test_compare_and_calibrate_name_the_file_and_line_of_a_bad_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str | bytes, message: str
) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps(ROW) + "\n")
    broken = tmp_path / "broken.jsonl"
    tail = bad if isinstance(bad, bytes) else bad.encode()
    broken.write_bytes(json.dumps(ROW).encode() + b"\n" + tail + b"\n")
    labels = tmp_path / "labels.jsonl"
    labels.write_text('{"index": 0, "label": 1}\n')
    for argv in (
        ["compare", str(good), str(broken)],
        ["calibrate", str(broken), str(labels), "--metric", "a"],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"turneval: error: {broken} {message}"), err
        assert "Traceback" not in err and "TURNEVAL_DEBUG" not in err


def test_calibrate_labels_and_compare_summaries_name_what_is_wrong(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps(ROW) + "\n")
    labels = tmp_path / "labels.jsonl"
    labels.write_bytes(b'{"index": 0, "label": 1}\n\xff\n')
    assert main(["calibrate", str(results), str(labels), "--metric", "a"]) == 2
    assert "labels.jsonl line 2: not UTF-8 (byte 0xff at offset 0)" in capsys.readouterr().err
    summary = tmp_path / "lone" / "summary.json"
    summary.parent.mkdir()
    summary.write_text(json.dumps({"metrics": {"a": {"count": 1}}}))
    assert main(["compare", str(results), str(summary)]) == 2
    err = capsys.readouterr().err
    assert (
        f'{summary}: not a turneval summary.json (metrics.a: expected a number or null under "mean", got nothing)'
        in err
    )

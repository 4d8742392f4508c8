"""Sources: the input's options on the object that reads it; the old keywords still work."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from turneval.engines import Local
from turneval.errors import ConfigError, InvalidSampleError
from turneval.metrics import TrajectorySingleToolUse
from turneval.stream import JsonlSource, OtlpSource, evaluate_jsonl
from turneval.stream._sources import as_source

from .._builders import call, conversation
from ..test_four_sinks import traces_file

GOOD = conversation([call("a")], reference=[call("a")]).model_dump_json()
LOOSE = GOOD[:-1] + ',"metadata":{"score":NaN}}'  # not strict JSON: NaN


def rows(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_a_path_is_read_as_its_first_bytes_say(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text(GOOD + "\n")
    traces = traces_file(tmp_path)
    assert as_source(data) == JsonlSource(data)
    assert as_source(str(traces)) == OtlpSource(traces)
    assert as_source(data, input_format="otlp") == OtlpSource(data)
    source = OtlpSource(traces, group_by="session", strict=True)
    assert as_source(source) is source
    with pytest.raises(InvalidSampleError, match="unknown input format 'csv'"):
        as_source(data, input_format="csv")
    with pytest.raises(ConfigError, match="group_by='session' groups the traces of an OTLP"):
        as_source(data, group_by="session")
    with pytest.raises(ConfigError, match="group_by must be 'trace' or 'session', got 'user'"):
        OtlpSource(traces, group_by="user")  # type: ignore[arg-type]
    with pytest.raises(InvalidSampleError, match="no such file"):
        as_source(tmp_path / "none.jsonl")
    with pytest.raises(TypeError, match="data must be a path or a source"):
        as_source(3)  # type: ignore[arg-type]


def test_a_lenient_source_reads_what_a_strict_one_makes_error_rows_of(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text(GOOD + "\n" + LOOSE + "\n")
    evaluate_jsonl(data, ["tool_call_f1"], tmp_path / "strict", engine=Local(workers=1))
    lenient = JsonlSource(data, lenient_json=True)
    evaluate_jsonl(lenient, ["tool_call_f1"], tmp_path / "lenient", engine=Local(workers=1))
    assert [row["tool_call_f1"] for row in rows(tmp_path / "strict")] == [1.0, None]
    assert "holds NaN" in rows(tmp_path / "strict")[1]["tool_call_f1_error"]
    assert [row["tool_call_f1"] for row in rows(tmp_path / "lenient")] == [1.0, 1.0]
    with pytest.raises(InvalidSampleError, match="no such file"):
        evaluate_jsonl(JsonlSource(tmp_path / "none.jsonl"), ["tool_call_f1"], tmp_path / "x")


def test_a_trace_source_groups_by_session_and_is_strict_as_asked(tmp_path: Path) -> None:
    traces = traces_file(tmp_path)
    metrics = [TrajectorySingleToolUse(tool_name="f")]
    by_trace = evaluate_jsonl(OtlpSource(traces), metrics, tmp_path / "trace")
    assert by_trace.total_rows == 3 and by_trace.skipped_traces == {}
    # each of the three traces is its own session: grouped, the same rows
    by_session = evaluate_jsonl(OtlpSource(traces, group_by="session"), metrics, tmp_path / "s")
    assert by_session.total_rows == 3


@pytest.mark.parametrize(
    ("old", "new", "where"),
    [
        ({"input_format": "jsonl"}, "jsonl", "a source: JsonlSource"),
        ({"lenient_json": True}, "lenient", r"JsonlSource\(path, lenient_json=\.\.\.\)"),
        ({"group_by": "session"}, "session", r"OtlpSource\(path, group_by=\.\.\.\)"),
        ({"strict_traces": True}, "strict", r"OtlpSource\(path, strict=\.\.\.\)"),
    ],
)
def test_an_input_option_given_to_evaluate_jsonl_still_works_with_a_warning(
    tmp_path: Path, old: dict[str, Any], new: str, where: str
) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text(GOOD + "\n" + LOOSE + "\n")
    traces = traces_file(tmp_path)
    sources = {
        "jsonl": (data, JsonlSource(data)),
        "lenient": (data, JsonlSource(data, lenient_json=True)),
        "session": (traces, OtlpSource(traces, group_by="session")),
        "strict": (traces, OtlpSource(traces, strict=True)),
    }
    path, source = sources[new]
    metrics = [TrajectorySingleToolUse(tool_name="f")]
    (name,) = old
    with pytest.warns(DeprecationWarning, match=rf"evaluate_jsonl\({name}=\.\.\.\) .*{where}"):
        evaluate_jsonl(path, metrics, tmp_path / "old", **old)
    evaluate_jsonl(source, metrics, tmp_path / "new")
    assert rows(tmp_path / "old") == rows(tmp_path / "new")
    with (
        pytest.warns(DeprecationWarning),
        pytest.raises(TypeError, match="pass them to the source"),
    ):
        evaluate_jsonl(source, metrics, tmp_path / "both", **old)

"""Bad traces give one error row each, naming trace, span and attribute; the others are scored."""

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests._builders import messages_of, metadata_of
from tests.traces._spans import Recorder, assistant, chat, span_hex, trace_hex, user
from turneval import EvaluationDataset, ToolCall, evaluate
from turneval.cli import main
from turneval.errors import ConfigError
from turneval.metrics import TrajectorySingleToolUse
from turneval.samples import Sample
from turneval.traces import from_otel_spans, from_otlp_json, iter_otlp_json, write_otlp_json

ERROR = "conversion_error"


def _good(r: Recorder) -> None:
    with r.span("agent", gen_ai__operation__name="invoke_agent"):
        chat(r, [user("hi")], [assistant("", {"id": "c1", "name": "f", "arguments": {}})])
        chat(
            r,
            [
                user("hi"),
                assistant("", {"id": "c1", "name": "f", "arguments": {}}),
                {
                    "role": "tool",
                    "parts": [{"type": "tool_call_response", "id": "c1", "response": "ok"}],
                },
            ],
            [assistant("done")],
        )


def _error(sample: Sample) -> str:
    return str(metadata_of(sample).get(ERROR))


def test_each_defect_names_trace_span_and_attribute() -> None:
    r = Recorder()
    _good(r)
    with r.span("workflow", some_vendor__kind="step") as unknown:  # unknown instrumentation
        pass
    with r.span("llm", gen_ai__operation__name="chat") as uncaptured:  # content not captured
        pass
    with r.span(
        "llm",
        gen_ai__operation__name="chat",
        gen_ai__input__messages='[{"role": "user", "parts": [{"type": "te',
    ) as truncated:
        pass
    with r.span(
        "llm",
        openinference__span__kind="LLM",
        llm__input_messages__0__message__role="user",
        llm__input_messages__0__message__content="__REDACTED__",
    ) as redacted:
        pass
    with r.span("agent", gen_ai__operation__name="invoke_agent") as orphan_root:
        chat(r, [user("x")], [assistant("", {"id": "k1", "name": "f", "arguments": {}})])
        with r.span(
            "tool",
            gen_ai__operation__name="execute_tool",
            gen_ai__tool__name="f",
            gen_ai__tool__call__id="zz",
            gen_ai__tool__call__result="?",
        ) as orphan:
            pass
    with r.span(
        "llm",
        gen_ai__operation__name="chat",
        gen_ai__input__messages=json.dumps(
            [
                user("q"),
                {
                    "role": "tool",
                    "parts": [{"type": "tool_call_response", "id": "nope", "response": "r"}],
                },
            ]
        ),
        gen_ai__output__messages="[]",
    ) as unmatched:
        pass
    with r.span(
        "llm",
        gen_ai__operation__name="chat",
        gen_ai__input__messages=json.dumps([user("q")]),
        gen_ai__output__messages=json.dumps(
            [assistant("", {"id": "a", "name": "f", "arguments": "{oops"})]
        ),
    ) as bad_args:
        pass
    samples = from_otel_spans(r.spans(), strict_traces=True)  # `unknown` is a row, not skipped
    assert len(samples) == 8 and ERROR not in metadata_of(samples[0])
    expected = [
        (unknown, "gen_ai.operation.name", "no LLM span"),
        (uncaptured, "gen_ai.input.messages", "not captured"),
        (truncated, "gen_ai.input.messages", "not valid JSON"),
        (redacted, "llm.input_messages.0", "redacted"),
        (orphan, "gen_ai.tool.call.id", "'zz' matches no call"),
        (unmatched, "tool_call_id", "'nope' matches no call"),
        (bad_args, "gen_ai.output.messages[0].parts[0].arguments", "not valid JSON"),
    ]
    for sample, (span, attribute, problem) in zip(samples[1:], expected, strict=True):
        message = _error(sample)
        assert f"trace {trace_hex(span)}" in message and attribute in message and problem in message
        assert span_hex(span) in message  # for `unmatched`: the span of the offending message
    assert span_hex(orphan_root) not in _error(samples[5])

    result = evaluate(samples, [TrajectorySingleToolUse(tool_name="f")], show_progress=False)
    assert result.rows[0].score("trajectory_single_tool_use") == 1.0  # the good trace is scored
    for row in result.rows[1:]:
        failure = row.failures["trajectory_single_tool_use"]
        assert failure.error_type == "InvalidSampleError" and "trace " in failure.message
        assert row.failure == 1


def test_a_trace_with_no_model_call_is_skipped_and_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = Recorder()
    with r.span("create_agent react_agent", gen_ai__operation__name="create_agent"):
        pass  # OpenLLMetry's agent construction: a trace of its own with no LLM span
    _good(r)
    with r.span("GET /health", http__route="/health") as unknown:  # no GenAI span at all
        pass
    _good(r)
    spans = r.spans()
    counts = {"no_llm_span": 1, "no_genai_span": 1}
    dataset = from_otel_spans(spans)
    assert len(dataset) == 2 and dataset.skipped_traces == counts
    assert all(ERROR not in metadata_of(sample) for sample in dataset)
    result = evaluate(dataset, [TrajectorySingleToolUse(tool_name="f")], show_progress=False)
    assert result.skipped_traces == counts
    assert [row.score("trajectory_single_tool_use") for row in result.rows] == [1.0, 1.0]
    assert from_otel_spans(spans, group_by="session").skipped_traces == counts

    path = tmp_path / "t.jsonl"
    write_otlp_json(spans, path)  # one trace a line: lines 1 and 3 are no conversation
    for ordered in (True, False):  # streamed, and grouped in memory
        skipped: dict[str, int] = {}
        pairs = list(iter_otlp_json(path, ordered=ordered, skipped_traces=skipped))
        assert [line for line, _ in pairs] == [2, 4] and skipped == counts
    assert from_otlp_json(path, group_by="session").skipped_traces == counts
    strict = from_otlp_json(path, strict_traces=True)
    assert len(strict) == 4 and strict.skipped_traces == {}
    assert f"trace {trace_hex(unknown)}" in _error(strict[2]) and "no LLM span" in _error(strict[2])

    out = tmp_path / "out"
    args = ["evaluate", str(path), "--metric", "trajectory_single_tool_use:tool_name=f"]
    assert main([*args, "--out", str(out), "--quiet"]) == 0  # the default --max-failed 0 holds
    assert (
        "skipped 2 trace(s) that are not conversations (no_genai_span 1, no_llm_span 1); "
        "--strict-traces makes them failed rows" in capsys.readouterr().out
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["skipped_traces"] == counts
    assert (summary["samples"], summary["failed_rows"]) == (2, 0)
    assert len((out / "results.jsonl").read_text().splitlines()) == 2
    assert main([*args, "--out", str(out), "--quiet", "--overwrite", "--strict-traces"]) == 3
    summary = json.loads((out / "summary.json").read_text())
    assert summary["skipped_traces"] == {} and summary["failed_rows"] == 2
    assert "skipped" not in capsys.readouterr().out


def test_otlp_lines_that_are_not_json_and_unordered_files(tmp_path: Path) -> None:
    r = Recorder()
    _good(r)
    _good(r)
    spans = r.spans()
    path = tmp_path / "t.jsonl"
    write_otlp_json(spans, path)
    lines = path.read_text().splitlines()
    # Split each trace over two lines and interleave them: not ordered by trace.
    one = [json.loads(line) for line in lines]
    halves = []
    for request in one:
        spans_ = request["resourceSpans"][0]["scopeSpans"][0]["spans"]
        for part in (spans_[:2], spans_[2:]):
            copy = json.loads(json.dumps(request))
            copy["resourceSpans"][0]["scopeSpans"][0]["spans"] = part
            halves.append(json.dumps(copy))
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(
        "\n".join([halves[0], halves[2], halves[1], halves[3], "{not json", "[1]"]) + "\n"
    )
    rows = list(iter_otlp_json(mixed))  # auto: not contiguous -> grouped in memory
    assert [line for line, _ in rows] == [1, 2, 5, 6]  # in line order, each trace at its first
    assert "line 5: not valid JSON" in _error(rows[2][1])
    assert "line 6: not an OTLP/JSON" in _error(rows[3][1])
    assert [s for _, s in rows[:2]] == from_otel_spans(spans).samples
    contiguous = tmp_path / "split.jsonl"
    contiguous.write_text("\n".join(halves) + "\n")
    streamed = list(iter_otlp_json(contiguous))
    assert [line for line, _ in streamed] == [1, 3]
    assert [s for _, s in streamed] == from_otel_spans(spans).samples
    assert len(from_otlp_json(mixed, group_by="session")) == 4
    with pytest.raises(ConfigError, match="group_by"):
        from_otel_spans(spans, group_by="user")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"expected OpenTelemetry SDK spans .*got str: read"):
        from_otel_spans([*spans, "not a span"])


def test_cli_evaluates_otlp_with_auto_detection(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    r = Recorder()
    _good(r)
    with r.span("llm", gen_ai__operation__name="chat"):
        pass
    path = tmp_path / "traces.jsonl"
    write_otlp_json(r.spans(), path)
    for extra in ([], ["--format", "otlp"]):
        out = tmp_path / f"out{len(extra)}"
        main(
            [
                "evaluate",
                str(path),
                "--metric",
                "trajectory_single_tool_use:tool_name=f",
                "--out",
                str(out),
                "--quiet",
                *extra,
            ]
        )
        rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
        assert [row["trajectory_single_tool_use"] for row in rows] == [1.0, None]
        assert rows[0]["latency_in_seconds"] > 0 and rows[0]["failure"] == 0
        assert "not captured" in rows[1]["trajectory_single_tool_use_error"]
    assert main(["evaluate", str(path), "--metric", "tool_call_f1", "--dry-run"]) == 0
    assert "dry run over 2 samples" in capsys.readouterr().out  # one per trace


def _turn(r: Recorder, conversation: str, history: list[dict[str, Any]], answer: str) -> None:
    """One trace: a user turn of ``conversation`` answered by one chat call."""
    attributes = {
        "gen_ai__operation__name": "invoke_agent",
        "gen_ai__conversation__id": conversation,
    }
    with r.span("agent", **attributes):
        chat(r, history, [assistant(answer)])


def test_cli_groups_the_traces_of_a_session_into_one_sample(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A chat app traces each user turn on its own; two conversations, turns interleaved.
    r = Recorder()
    _turn(r, "conv-a", [user("a1")], "A1")
    _turn(r, "conv-b", [user("b1")], "B1")
    _turn(r, "conv-a", [user("a1"), assistant("A1"), user("a2")], "A2")
    _turn(r, "conv-b", [user("b1"), assistant("B1"), user("b2")], "B2")
    path = tmp_path / "turns.jsonl"
    write_otlp_json(r.spans(), path)  # one trace a line: a1, b1, a2, b2
    sessions = list(iter_otlp_json(path, group_by="session"))
    assert [line for line, _ in sessions] == [1, 2]
    texts = [[m.content for m in messages_of(sample)] for _, sample in sessions]
    assert texts == [["a1", "A1", "a2", "A2"], ["b1", "B1", "b2", "B2"]]
    assert [metadata_of(sample)["id"] for _, sample in sessions] == ["conv-a", "conv-b"]
    assert [s for _, s in sessions] == from_otlp_json(path, group_by="session").samples

    out = tmp_path / "out"
    args = ["evaluate", str(path), "--metric", "trajectory_single_tool_use:tool_name=f"]
    assert main([*args, "--group-by", "session", "--out", str(out), "--quiet"]) == 0
    results = out / "results.jsonl"
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert [(row["line"], row["id"]) for row in rows] == [(1, "conv-a"), (2, "conv-b")]
    results.write_text(results.read_text().splitlines(keepends=True)[0])  # interrupted
    assert main([*args, "--group-by", "session", "--out", str(out), "--quiet", "--resume"]) == 0
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert [(row["line"], row["id"]) for row in rows] == [(1, "conv-a"), (2, "conv-b")]
    # by trace (the default): four samples, one turn each
    assert main([*args, "--out", str(tmp_path / "traces"), "--quiet"]) == 0
    assert len((tmp_path / "traces" / "results.jsonl").read_text().splitlines()) == 4

    samples = tmp_path / "samples.jsonl"
    samples.write_text(from_otlp_json(path).samples[0].model_dump_json() + "\n")
    code = main(["evaluate", str(samples), "--metric", "tool_call_f1", "--group-by", "session"])
    assert code == 2
    assert "group_by='session' groups the traces of an OTLP/JSON file" in capsys.readouterr().err


def test_a_token_count_that_is_no_number_is_that_traces_error_row() -> None:
    r = Recorder()
    _good(r)
    with r.span("agent", gen_ai__operation__name="invoke_agent"):
        chat(r, [user("hi")], [assistant("hello")], gen_ai__usage__input_tokens="abc")
    good, bad = from_otel_spans(r.spans()).samples
    assert ERROR not in metadata_of(good) and metadata_of(good)["source"] == "otel"
    error = _error(bad)
    assert "attribute 'gen_ai.usage.input_tokens': expected a token count, got 'abc'" in error
    assert "span " in error and "('chat model')" in error


def test_a_torn_first_line_is_one_bad_row_and_the_traces_after_it_are_read(
    tmp_path: Path,
) -> None:
    r = Recorder()
    _good(r)
    _good(r)
    good = tmp_path / "good.jsonl"
    write_otlp_json(r.spans(), good)
    torn = tmp_path / "torn.jsonl"
    torn.write_text('{"resourceSpans": [{"scopeSp\n\n' + good.read_text())
    rows = list(iter_otlp_json(torn))
    assert [line for line, _ in rows] == [1, 3, 4]
    assert "line 1: not valid JSON" in _error(rows[0][1])
    assert [sample for _, sample in rows[1:]] == from_otlp_json(good).samples
    pretty = tmp_path / "pretty.json"  # one pretty-printed request is still one document
    pretty.write_text(json.dumps(json.loads(good.read_text().splitlines()[0]), indent=2))
    assert len(from_otlp_json(pretty)) == 1


def test_sample_lines_after_an_otlp_line_each_give_an_error_row(tmp_path: Path) -> None:
    # Auto-detection reads the first line; a sample line after it is no trace, and must not
    # vanish: it gives a row naming its line and what was expected.
    r = Recorder()
    _good(r)
    path = tmp_path / "t.jsonl"
    write_otlp_json(r.spans(), path)
    sample = '{"user_input": [{"type": "human", "content": "hi"}], "reference_tool_calls": []}'
    path.write_text(path.read_text() + sample + "\n" + sample + "\n")
    out = tmp_path / "out"
    metric = "trajectory_single_tool_use"
    args = ["evaluate", str(path), "--metric", f"{metric}:tool_name=f", "--out", str(out)]
    assert main([*args, "--quiet"]) == 3  # two failed rows, none allowed
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    rows.sort(key=lambda row: row["line"])  # a trace's row comes once the trace has ended
    assert [row["line"] for row in rows] == [1, 2, 3]
    assert rows[0][metric] == 1.0  # the trace calls f
    for row in rows[1:]:
        error = row[f"{metric}_error"]
        assert f"line {row['line']}: not an OTLP/JSON ExportTraceServiceRequest" in error
        assert "got one with keys 'user_input', 'reference_tool_calls'" in error


def test_turneval_import_does_not_load_the_traces_module() -> None:
    import subprocess

    code = "import sys, turneval; print('turneval.traces' in sys.modules, 'openinference' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
    blocked = "import sys; sys.modules['openinference'] = None; import turneval.traces"
    failed = subprocess.run([sys.executable, "-c", blocked], capture_output=True, text=True)
    assert "needs the 'otel' extra" in failed.stderr
    assert ToolCall(name="f")  # the sample types need no extra


def test_a_resumed_run_keeps_every_trace_of_a_batched_line(tmp_path: Path) -> None:
    # A collector's file exporter writes one request per batch: several traces on one line.
    # Each is its own row, named by its trace id; resuming skips only the finished ones.
    r = Recorder()
    for _ in range(3):
        _good(r)
    spans = r.spans()
    single = tmp_path / "single.jsonl"
    write_otlp_json(spans, single)
    requests = [json.loads(line) for line in single.read_text().splitlines()]
    batched = requests[0]
    for request in requests[1:]:
        batched["resourceSpans"] += request["resourceSpans"]
    path = tmp_path / "batched.jsonl"
    path.write_text(json.dumps(batched) + "\n")
    samples = from_otlp_json(path).samples
    trace_ids = [metadata_of(sample)["trace_id"] for sample in samples]
    assert [metadata_of(sample)["id"] for sample in samples] == trace_ids
    assert len(set(trace_ids)) == 3
    out = tmp_path / "out"
    args = ["evaluate", str(path), "--metric", "trajectory_single_tool_use:tool_name=f"]
    assert main([*args, "--out", str(out), "--quiet"]) == 0
    results = out / "results.jsonl"
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert [(row["line"], row["id"]) for row in rows] == [(1, trace) for trace in trace_ids]
    results.write_text(results.read_text().splitlines(keepends=True)[0])  # interrupted
    assert main([*args, "--out", str(out), "--quiet", "--resume"]) == 0
    rows = [json.loads(line) for line in results.read_text().splitlines()]
    assert sorted(row["id"] for row in rows) == sorted(trace_ids)
    assert json.loads((out / "summary.json").read_text())["samples"] == 3


def test_an_unreadable_span_fails_its_trace_alone(tmp_path: Path) -> None:
    # A batched line holds three traces; one span of the second has a broken start time.
    r = Recorder()
    for _ in range(3):
        _good(r)
    single = tmp_path / "single.jsonl"
    write_otlp_json(r.spans(), single)
    requests = [json.loads(line) for line in single.read_text().splitlines()]
    batched = requests[0]
    for request in requests[1:]:
        batched["resourceSpans"] += request["resourceSpans"]
    broken = batched["resourceSpans"][1]["scopeSpans"][0]["spans"][0]
    broken["startTimeUnixNano"] = "soon"
    path = tmp_path / "batched.jsonl"
    path.write_text(json.dumps(batched) + "\n")
    rows = list(iter_otlp_json(path))
    assert [line for line, _ in rows] == [1, 1, 1]
    errors = [_error(sample) for _, sample in rows]
    assert errors[0] == errors[2] == "None"  # the other traces of the line are read
    trace, span = broken["traceId"], broken["spanId"]
    assert errors[1].startswith(f"trace {trace}: span {span} could not be read (ValueError: ")
    assert metadata_of(rows[1][1])["id"] == trace
    # A span whose trace cannot be told is an error row of its own; its trace is read without it.
    del broken["traceId"]
    path.write_text(json.dumps(batched) + "\n")
    rows = list(iter_otlp_json(path))
    name = broken["name"]
    assert [_error(sample) for _, sample in rows] == [
        "None",
        f"line 1: span {span} ({name!r}) without a trace id (traceId missing)",
        "None",
        "None",
    ]


def test_a_span_without_a_valid_trace_id_is_its_own_error_row(tmp_path: Path) -> None:
    # One trace split over lines 1 and 3; line 2 holds spans whose trace id is missing or
    # invalid. They belong to no trace: each is one error row, and the trace stays one row.
    r = Recorder()
    _good(r)
    spans = r.spans()
    single = tmp_path / "single.jsonl"
    write_otlp_json(spans, single)
    request = json.loads(single.read_text())
    members = request["resourceSpans"][0]["scopeSpans"][0]["spans"]
    trace = members[0]["traceId"]

    def line_of(spans_: list[dict[str, Any]]) -> str:
        copy = json.loads(json.dumps(request))
        copy["resourceSpans"][0]["scopeSpans"][0]["spans"] = spans_
        return json.dumps(copy)

    bad_ids: list[Any] = [None, 123, "abc", "0" * 32, trace[:16], ""]
    strays = []
    for number, bad in enumerate(bad_ids):
        stray = {**members[1], "spanId": f"{number + 1:016x}"}
        if bad is None:
            del stray["traceId"]
        else:
            stray["traceId"] = bad
        strays.append(stray)
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join([line_of(members[:2]), line_of(strays), line_of(members[2:])]))
    expected = [
        "traceId missing",
        "traceId is int 123, not a string",
        "traceId 'abc' is not 32 hex digits",
        "traceId is all zeros (the invalid trace id)",
        f"traceId {trace[:16]!r} is not 32 hex digits",
        "traceId missing",
    ]
    errors = [
        f"line 2: span {number + 1:016x} ('chat model') without a trace id ({why})"
        for number, why in enumerate(expected)
    ]
    for ordered in (True, False):  # streamed, and grouped in memory
        rows = list(iter_otlp_json(path, ordered=ordered))
        assert [line for line, _ in rows] == [1, 2, 2, 2, 2, 2, 2]
        assert rows[0][1] == from_otel_spans(spans).samples[0]  # the whole trace, one row
        assert [_error(sample) for _, sample in rows[1:]] == errors
    assert len(from_otlp_json(path, group_by="session")) == 7
    out = tmp_path / "out"
    args = ["evaluate", str(path), "--metric", "trajectory_single_tool_use:tool_name=f"]
    assert main([*args, "--out", str(out), "--quiet", "--max-failed", "6"]) == 0
    results = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [row["trajectory_single_tool_use"] for row in results] == [1.0] + [None] * 6
    assert [row["id"] for row in results] == [trace] + [
        f"span {number + 1:016x}" for number in range(6)
    ]
    assert [row["trajectory_single_tool_use_error"] for row in results[1:]] == [
        f"InvalidSampleError: {error}" for error in errors
    ]


def test_a_compressed_file_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import gzip

    r = Recorder()
    _good(r)
    plain = tmp_path / "t.jsonl"
    write_otlp_json(r.spans(), plain)
    packed = tmp_path / "t.jsonl.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    with pytest.raises(ConfigError, match=r"t.jsonl.gz: a gzip-compressed file; decompress it"):
        from_otlp_json(packed)
    for fmt in ("otlp", "auto", "jsonl"):  # auto and jsonl read it as samples otherwise
        args = ["evaluate", str(packed), "--format", fmt, "--metric", "tool_call_f1"]
        assert main([*args, "--out", str(tmp_path / fmt), "--quiet"]) == 2
        assert "gzip-compressed file; decompress it first (gunzip)" in capsys.readouterr().err
        assert not (tmp_path / fmt / "results.jsonl").exists()
    samples = tmp_path / "samples.jsonl.zst"
    samples.write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" * 16)  # a zstd frame's magic
    with pytest.raises(ConfigError, match=r"a zstd-compressed file; decompress it first"):
        EvaluationDataset.from_jsonl(samples)


def _many_traces(path: Path, count: int) -> list[str]:
    """``count`` copies of one good trace, each with its own trace id, one request a line."""
    r = Recorder()
    _good(r)
    write_otlp_json(r.spans(), path)
    template = path.read_text().strip()
    trace = json.loads(template)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["traceId"]
    ids = [f"{number + 1:032x}" for number in range(count)]
    path.write_text("".join(template.replace(trace, tid) + "\n" for tid in ids))
    return ids


def test_one_bad_byte_in_an_otlp_file_costs_one_row(tmp_path: Path) -> None:
    path = tmp_path / "traces.jsonl"
    ids = _many_traces(path, 4000)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1999] = lines[1999].replace(b'"agent"', b'"ag\xffent"', 1)  # line 2000: one bad byte
    path.write_bytes(b"".join(lines))
    out = tmp_path / "out"
    metric = "trajectory_single_tool_use:tool_name=f"
    args = ["evaluate", str(path), "--metric", metric, "--out", str(out), "--quiet"]
    assert main([*args, "--max-failed", "1"]) == 0  # every good trace scored, the run passes
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 4000 and [row["line"] for row in rows] == list(range(1, 4001))
    scored = [row for row in rows if row["trajectory_single_tool_use"] == 1.0]
    assert [row["id"] for row in scored] == ids[:1999] + ids[2000:]
    error = rows[1999]["trajectory_single_tool_use_error"]
    assert error.startswith(f"InvalidSampleError: line 2000: not valid UTF-8 in {path} (byte 0xff")
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["samples"], summary["failed_rows"]) == (4000, 1)
    # The API gives the same error row (it does not raise), at the line's place.
    read = list(iter_otlp_json(path))
    assert len(read) == 4000 and read[1999][0] == 2000
    offset = lines[1999].index(b"\xff")
    assert _error(read[1999][1]) == (
        f"line 2000: not valid UTF-8 in {path} (byte 0xff at byte offset {offset})"
    )


def test_otlp_lines_that_are_not_strict_json_are_error_rows_naming_the_key(
    tmp_path: Path,
) -> None:
    path = tmp_path / "traces.jsonl"
    _many_traces(path, 3)
    lines = path.read_text().splitlines()
    lines[1] = lines[1].replace('"kind":1', '"kind":1,"kind":2', 1)  # a duplicate key
    lines[2] = lines[2].replace(
        '"attributes":[', '"attributes":[{"key":"x","value":{"doubleValue":NaN}},', 1
    )
    path.write_text("\n".join(lines) + "\n")
    hint = "--lenient-json or lenient_json=True reads it as before"
    rows = list(iter_otlp_json(path))
    assert [_error(sample) for _, sample in rows] == [
        "None",
        f"line 2: not strict JSON: duplicate key 'kind' ({hint})",
        f"line 3: not strict JSON: key 'doubleValue' holds NaN, not a finite number ({hint})",
    ]
    lenient = [_error(sample) for _, sample in iter_otlp_json(path, lenient_json=True)]
    assert lenient[:2] == ["None", "None"]  # as before: the last duplicate wins
    assert lenient[2].startswith("line 3: not valid JSON")  # as before: NaN is no JSON
    assert [_error(s) for s in from_otlp_json(path, group_by="session")][1:] == [
        _error(sample) for _, sample in rows[1:]
    ]

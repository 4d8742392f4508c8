"""Scores written back as gen_ai.evaluation.result events, parented to the evaluated trace."""

from collections.abc import Mapping
from typing import Any

from opentelemetry._logs import LogRecord
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

from tests.traces._spans import Recorder, assistant, chat, span_hex, trace_hex, user
from turneval import ToolCall, evaluate
from turneval.metrics import ToolCallF1, TrajectorySingleToolUse
from turneval.traces import from_otel_spans, to_otel_events


def attributes_of(record: LogRecord) -> Mapping[str, Any]:
    """The attributes of an emitted event, which every evaluation event has."""
    assert record.attributes is not None, record
    return record.attributes


def test_one_event_per_metric_and_conversation() -> None:
    r = Recorder()
    with r.span("agent", gen_ai__operation__name="invoke_agent") as root:
        chat(r, [user("hi")], [assistant("", {"id": "c1", "name": "f", "arguments": {"a": 1}})])
    with r.span("llm", gen_ai__operation__name="chat"):  # not captured: an error row, no event
        pass
    samples = from_otel_spans(r.spans())
    good = samples[0].model_copy(
        update={"reference_tool_calls": [ToolCall(name="f", args={"a": 2})]}
    )
    result = evaluate(
        [good, samples[1]],
        [ToolCallF1(), TrajectorySingleToolUse(tool_name="g")],
        show_progress=False,
    )
    exporter = InMemoryLogRecordExporter()
    provider = LoggerProvider()
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    events = to_otel_events(result, logger=provider.get_logger("turneval"))
    emitted = [item.log_record for item in exporter.get_finished_logs()]
    assert len(events) == len(emitted) == 4  # 2 metrics x 2 conversations
    by_name = {attributes_of(e)["gen_ai.evaluation.name"]: e for e in emitted[:2]}
    f1 = by_name["tool_call_f1"]
    assert f1.event_name == "gen_ai.evaluation.result"
    assert attributes_of(f1)["gen_ai.evaluation.score.value"] == 0.0  # args differ
    # Every tool_call_f1 and trajectory score here is 0 or 1 (pass/fail): labeled.
    assert attributes_of(f1)["gen_ai.evaluation.score.label"] == "fail"
    single = by_name["trajectory_single_tool_use"]
    assert attributes_of(single)["gen_ai.evaluation.score.label"] == "fail"  # g is not called
    assert "precision=0/1" in attributes_of(f1)["gen_ai.evaluation.explanation"]
    assert format(f1.trace_id, "032x") == trace_hex(root)
    assert format(f1.span_id, "016x") == span_hex(root)
    failed = emitted[2]
    assert attributes_of(failed)["error.type"] == "InvalidSampleError"
    assert "gen_ai.evaluation.score.value" not in attributes_of(failed)
    assert (
        to_otel_events(result) and len(exporter.get_finished_logs()) == 4
    )  # no logger: returned only


def test_a_metric_with_scores_between_0_and_1_gets_no_pass_fail_label() -> None:
    r = Recorder()
    with r.span("agent", gen_ai__operation__name="invoke_agent"):
        calls = [
            {"id": "c1", "name": "f", "arguments": {}},
            {"id": "c2", "name": "h", "arguments": {}},
        ]
        chat(r, [user("hi")], [assistant("", *calls)])
    [sample] = from_otel_spans(r.spans())
    sample = sample.model_copy(update={"reference_tool_calls": [ToolCall(name="f", args={})]})
    result = evaluate([sample], [ToolCallF1()], show_progress=False)
    [event] = to_otel_events(result)
    # precision 1/2, recall 1/1: F1 = 2/3, a score, not a pass or a fail
    assert attributes_of(event)["gen_ai.evaluation.score.value"] == 2 / 3
    assert "gen_ai.evaluation.score.label" not in attributes_of(event)

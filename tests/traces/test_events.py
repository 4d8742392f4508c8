"""Scores written back as gen_ai.evaluation.result events, parented to the evaluated trace."""

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor

from tests.traces._spans import Recorder, assistant, chat, span_hex, trace_hex, user
from turneval import ToolCall, evaluate
from turneval.metrics import ToolCallF1, TrajectorySingleToolUse
from turneval.traces import from_otel_spans, to_otel_events


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
    by_name = {e.attributes["gen_ai.evaluation.name"]: e for e in emitted[:2]}  # type: ignore[index]
    f1 = by_name["tool_call_f1"]
    assert f1.event_name == "gen_ai.evaluation.result"
    assert f1.attributes["gen_ai.evaluation.score.value"] == 0.0  # type: ignore[index]  # args differ
    assert "precision=0/1" in f1.attributes["gen_ai.evaluation.explanation"]  # type: ignore[index, operator]
    assert format(f1.trace_id, "032x") == trace_hex(root)
    assert format(f1.span_id, "016x") == span_hex(root)
    failed = emitted[2]
    assert failed.attributes["error.type"] == "InvalidSampleError"  # type: ignore[index]
    assert "gen_ai.evaluation.score.value" not in failed.attributes  # type: ignore[operator]
    assert (
        to_otel_events(result) and len(exporter.get_finished_logs()) == 4
    )  # no logger: returned only

"""Every documented source shape, built by hand on the real SDK, becomes the right conversation."""

import base64
import json
from pathlib import Path

import pytest
from opentelemetry.trace import Status, StatusCode

from tests._builders import messages_of, metadata_of
from tests.traces._spans import (
    Recorder,
    assistant,
    chat,
    genai_messages,
    no_trace_ids,
    span_hex,
    tool_result,
    trace_hex,
    user,
)
from turneval import AIMessage, HumanMessage, SystemMessage, ToolCall, ToolMessage, evaluate
from turneval.traces import GENAI_SEMCONV_VERSION, from_otel_spans, from_otlp_json, write_otlp_json

CALL = {"id": " c1 ", "name": "lookup", "arguments": {"q": "x"}}  # a stray space in the id


def test_genai_v1_38_messages_tool_spans_aliases_and_metadata() -> None:
    assert GENAI_SEMCONV_VERSION == "1.38.0"
    r = Recorder()
    with r.span(
        "agent",
        gen_ai__operation__name="invoke_agent",
        gen_ai__agent__name="helper",
        gen_ai__conversation__id="conv-7",
    ) as root:
        chat(
            r,
            [user("find x")],
            [assistant("", CALL)],
            gen_ai__system_instructions=json.dumps([{"type": "text", "content": "be brief"}]),
            gen_ai__usage__prompt_tokens=7,
            gen_ai__usage__completion_tokens=3,  # pre-1.27 names
            gen_ai__request__model="m-1",
        )
        with r.span(
            "tool",
            gen_ai__operation__name="execute_tool",
            gen_ai__tool__name="lookup",
            gen_ai__tool__call__id="c1",
            gen_ai__tool__call__result="found x",
        ):
            pass
        chat(
            r,
            [user("find x"), assistant("", CALL), tool_result("c1", {"hits": 1}, key="result")],
            [assistant("x found", {"id": "c2", "name": "notify", "arguments": '{"to": "me"}'})],
            gen_ai__usage__input_tokens=11,
            gen_ai__usage__output_tokens=5,
            gen_ai__response__model="m-1-2025",
        )
        with r.span(  # answers the last call, which no later LLM call saw
            "tool",
            gen_ai__operation__name="execute_tool",
            gen_ai__tool__name="notify",
            gen_ai__tool__call__id="c2",
            gen_ai__tool__call__result="sent",
        ):
            pass
        root.set_status(Status(StatusCode.ERROR, "gave up"))
    (sample,) = from_otel_spans(r.spans())
    assert no_trace_ids(messages_of(sample)) == no_trace_ids(
        [
            SystemMessage(content="be brief"),
            HumanMessage(content="find x"),
            AIMessage(content="", tool_calls=[ToolCall(name="lookup", args={"q": "x"}, id="c1")]),
            ToolMessage(content='{"hits": 1}', tool_call_id="c1"),
            AIMessage(
                content="x found", tool_calls=[ToolCall(name="notify", args={"to": "me"}, id="c2")]
            ),
            ToolMessage(content="sent", tool_call_id="c2"),
        ]
    )
    meta = sample.metadata
    assert meta is not None
    assert (meta["trace_id"], meta["root_span_id"]) == (trace_hex(root), span_hex(root))
    assert meta["session_id"] == "conv-7" and meta["agent_name"] == "helper"
    assert meta["model"] == "m-1-2025" and (meta["input_tokens"], meta["output_tokens"]) == (18, 8)
    assert meta["status"] == "ERROR" and "gave up" in meta["error"]
    assert metadata_of(messages_of(sample)[5])["span_id"] != span_hex(root)
    row = evaluate([sample], ["trajectory_precision"], show_progress=False).rows[0]
    assert row.failure == 1 and "gave up" in (row.agent_error or "")


def test_indexed_prompt_completion_attributes_of_older_instrumentations() -> None:
    r = Recorder()
    history = {
        "gen_ai__prompt__0__role": "system",
        "gen_ai__prompt__0__content": "sys",
        "gen_ai__prompt__1__role": "user",
        "gen_ai__prompt__1__content": "hi",
    }
    call = {"id": "t1", "name": "f", "arguments": '{"a": [1, null]}'}
    with r.span("workflow", traceloop__span__kind="workflow"):
        with r.span(
            "llm",
            llm__request__type="chat",
            **history,
            gen_ai__completion__0__role="assistant",
            **{f"gen_ai__completion__0__tool_calls__0__{k}": v for k, v in call.items()},
        ):
            pass
        with r.span(
            "tool",
            traceloop__span__kind="tool",
            gen_ai__tool__name="f",
            gen_ai__tool__call__result="ok",
        ):
            pass
        with r.span(
            "llm",
            llm__request__type="chat",
            **history,
            gen_ai__prompt__2__role="assistant",
            **{f"gen_ai__prompt__2__tool_calls__0__{k}": v for k, v in call.items()},
            gen_ai__prompt__3__role="tool",
            gen_ai__prompt__3__content="ok",
            gen_ai__prompt__3__tool_call_id="t1",
            gen_ai__completion__0__role="assistant",
            gen_ai__completion__0__content="done",
        ):
            pass
    (sample,) = from_otel_spans(r.spans())
    assert no_trace_ids(messages_of(sample)) == [
        {"type": "system", "content": "sys"},
        {"type": "human", "content": "hi"},
        {
            "type": "ai",
            "content": "",
            "tool_calls": [{"name": "f", "args": {"a": [1, None]}, "id": "t1"}],
        },
        {"type": "tool", "content": "ok", "tool_call_id": "t1"},
        {"type": "ai", "content": "done"},
    ]
    # The tool span's result is already in the next call's history: nothing added or guessed.
    assert metadata_of(sample)["approximations"] is None


def test_message_events_and_openinference_tool_spans_paired_by_name() -> None:
    r = Recorder()
    with r.span("run", openinference__span__kind="CHAIN", session__id="s-1"):
        with r.span("llm", gen_ai__operation__name="chat") as llm:
            llm.add_event("gen_ai.user.message", {"content": "weather?"})
            llm.add_event(
                "gen_ai.choice",
                {
                    "message": json.dumps(
                        {
                            "content": "",
                            "tool_calls": [
                                {
                                    "id": "w1",
                                    "function": {
                                        "name": "weather",
                                        "arguments": '{"city": "Oslo"}',
                                    },
                                },
                                {
                                    "id": "w2",
                                    "function": {
                                        "name": "weather",
                                        "arguments": '{"city": "Rome"}',
                                    },
                                },
                            ],
                        }
                    )
                },
            )
        for result in ("cold", "warm"):  # OpenInference TOOL spans record no call id
            with r.span(
                "t", openinference__span__kind="TOOL", tool__name="weather", output__value=result
            ):
                pass
    (sample,) = from_otel_spans(r.spans(), group_by="session")
    assert no_trace_ids(messages_of(sample))[2:] == [
        {"type": "tool", "content": "cold", "tool_call_id": "w1"},
        {"type": "tool", "content": "warm", "tool_call_id": "w2"},
    ]
    assert metadata_of(sample)["session_id"] == "s-1"
    assert len(metadata_of(sample)["approximations"]) == 2
    assert "by name and order" in metadata_of(sample)["approximations"][0]


def test_openinference_indexed_messages_and_nested_wrapper_llm_spans() -> None:
    r = Recorder()
    oi = {
        "openinference__span__kind": "LLM",
        "llm__input_messages__0__message__role": "user",
        "llm__input_messages__0__message__contents__0__message_content__text": "two ",
        "llm__input_messages__0__message__contents__1__message_content__text": "parts",
        "llm__output_messages__0__message__role": "assistant",
        "llm__output_messages__0__message__content": "answer",
        "llm__token_count__prompt": 4,
        "llm__token_count__completion": 2,
    }
    with r.span("wrapper", **oi):
        with r.span("provider", **oi):  # the same call, recorded twice
            pass
    (sample,) = from_otel_spans(r.spans())
    assert no_trace_ids(messages_of(sample)) == [
        {"type": "human", "content": "two parts"},
        {"type": "ai", "content": "answer"},
    ]
    assert metadata_of(sample)["input_tokens"] == 4  # counted once


def test_calls_whose_input_messages_were_not_captured_are_noted() -> None:
    # OPENINFERENCE_HIDE_INPUT_MESSAGES: each LLM span holds its output messages only.
    r = Recorder()
    with r.span("agent", openinference__span__kind="AGENT"):
        for text in ("first", "second"):
            with r.span(
                "llm",
                openinference__span__kind="LLM",
                llm__output_messages__0__message__role="assistant",
                llm__output_messages__0__message__content=text,
            ):
                pass
    (sample,) = from_otel_spans(r.spans())
    assert [m.content for m in messages_of(sample)] == ["first", "second"]
    notes = metadata_of(sample)["approximations"]
    assert len(notes) == 2  # both calls, the first included, and not as a restarted history
    assert all("input messages were not captured, only its output" in note for note in notes)


def test_memoryless_calls_are_appended_and_noted(tmp_path: Path) -> None:
    r = Recorder()
    with r.span("agent", gen_ai__operation__name="invoke_agent"):
        chat(r, [user("a")], [assistant("1")])
        chat(r, [user("b")], [assistant("2")])
    (sample,) = from_otel_spans(r.spans())
    assert [m.content for m in messages_of(sample)] == ["a", "1", "b", "2"]
    assert "does not extend" in metadata_of(sample)["approximations"][0]
    r = Recorder()
    with r.span("agent", gen_ai__operation__name="invoke_agent"):
        chat(r, [user("a")], [assistant("", {"id": "x1", "name": "f", "arguments": {}})])
        chat(
            r,
            [
                user("a"),
                assistant("", {"id": "x9", "name": "f", "arguments": {}}),
                tool_result("x9", "r"),
            ],
            [assistant("ok")],
        )
    (sample,) = from_otel_spans(r.spans())  # the history is kept by position, never by text
    assert [m.type for m in messages_of(sample)] == ["human", "ai", "tool", "ai"]
    assert (
        "(ai calling x9) differs from the earlier calls' (ai calling x1)"
        in (metadata_of(sample)["approximations"][0])
    )
    path = tmp_path / "one.json"  # one pretty-printed document is read too
    write_otlp_json(r.spans(), tmp_path / "lines.jsonl")
    document = json.loads((tmp_path / "lines.jsonl").read_text())
    path.write_text(json.dumps(document, indent=2))
    assert from_otlp_json(path).samples == from_otel_spans(r.spans()).samples
    assert genai_messages(user("a"))  # the helper writes the documented JSON shape


def test_otlp_json_value_types_base64_ids_and_status_names(tmp_path: Path) -> None:
    def kv(key: str, value: dict[str, object]) -> dict[str, object]:
        return {"key": key, "value": value}

    trace_b64 = base64.b64encode(bytes.fromhex("0af7651916cd43dd8448eb211c80319c")).decode()
    chat_span = {
        "traceId": trace_b64,
        "spanId": base64.b64encode(bytes.fromhex("b7ad6b7169203331")).decode(),
        "name": "chat",
        "startTimeUnixNano": "1000",
        "endTimeUnixNano": "3000000000",
        "status": {"code": "STATUS_CODE_ERROR", "message": "rate limited"},
        "attributes": [
            kv("gen_ai.operation.name", {"stringValue": "chat"}),
            kv("gen_ai.input.messages", {"stringValue": json.dumps([user("hi")])}),
            kv("gen_ai.output.messages", {"stringValue": json.dumps([assistant("yo")])}),
            kv("gen_ai.usage.input_tokens", {"intValue": "12"}),
            kv("x.ratio", {"doubleValue": 0.5}),
            kv("x.flag", {"boolValue": True}),
            kv("x.list", {"arrayValue": {"values": [{"intValue": "1"}, {"stringValue": "a"}]}}),
            kv("x.map", {"kvlistValue": {"values": [kv("k", {"boolValue": False})]}}),
            kv("x.bytes", {"bytesValue": "AAE="}),
            kv("x.empty", {}),
            kv("x.empty_map", {"kvlistValue": {}}),  # proto3 JSON leaves empty lists out
            kv("x.empty_list", {"arrayValue": {}}),
        ],
    }
    request = {"resourceSpans": [{"scopeSpans": [{"spans": [chat_span]}]}]}
    path = tmp_path / "typed.jsonl"
    path.write_text(json.dumps(request) + "\n\n")
    (sample,) = from_otlp_json(path)
    meta = sample.metadata
    assert meta is not None
    assert meta["trace_id"] == "0af7651916cd43dd8448eb211c80319c"
    assert meta["root_span_id"] == "b7ad6b7169203331"
    assert meta["input_tokens"] == 12 and meta["latency_in_seconds"] == pytest.approx(2.999999)
    assert meta["status"] == "ERROR" and "rate limited" in meta["error"]
    assert [m.content for m in messages_of(sample)] == ["hi", "yo"]
    from turneval.traces._spans import from_otlp_span

    attributes = from_otlp_span(chat_span).attributes
    assert attributes["x.ratio"] == 0.5 and attributes["x.flag"] is True
    assert attributes["x.list"] == (1, "a") and attributes["x.map"] == {"k": False}
    assert attributes["x.bytes"] == "AAE=" and attributes["x.empty"] is None
    assert attributes["x.empty_map"] == {} and attributes["x.empty_list"] == ()

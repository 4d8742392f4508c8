"""turneval watch: real OTLP/HTTP exports in, one scored row per conversation out."""

import gzip
import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult

from turneval.metrics import StepBudget
from turneval.watch import Watcher

from ._helpers import conversation, post, protobuf, results, serving, trace_id, wait_for


def test_sdk_exports_become_one_scored_row_per_conversation(tmp_path: Path) -> None:
    watcher = Watcher([StepBudget(max_steps=1)], tmp_path, idle=0.2)
    traces = [conversation(calls) for calls in (1, 2, 4)]
    with serving(watcher) as port:
        exporter = OTLPSpanExporter(
            endpoint=f"http://127.0.0.1:{port}/v1/traces", compression=Compression.Gzip
        )
        for spans in traces:  # two exports per trace: the agent span comes last
            assert exporter.export(spans[:-1]) is SpanExportResult.SUCCESS
            assert exporter.export(spans[-1:]) is SpanExportResult.SUCCESS
        wait_for(lambda: len(results(tmp_path)) == 3)
    rows = {row["id"]: row for row in results(tmp_path)}
    # step_budget with max_steps=1: 1 when one model step, else 1/steps
    assert {trace_id(spans): rows[trace_id(spans)]["step_budget"] for spans in traces} == {
        trace_id(traces[0]): 1.0,
        trace_id(traces[1]): 0.5,
        trace_id(traces[2]): 0.25,
    }
    assert sorted(row["index"] for row in rows.values()) == [0, 1, 2]
    assert watcher.counts["spans_accepted"] == (1 + 1) + (2 + 1) + (4 + 1)  # chats + agent


def test_json_bodies_and_retried_exports_score_each_conversation_once(tmp_path: Path) -> None:
    from google.protobuf.json_format import MessageToJson
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    watcher = Watcher([StepBudget(max_steps=1)], tmp_path, idle=0.2)
    spans = conversation(2)
    body = MessageToJson(encode_spans(spans)).encode()
    with serving(watcher) as port:
        for _ in range(3):  # an exporter retrying a request whose answer it lost
            status, _, answer = post(port, body, "application/json")
            assert (status, json.loads(answer)) == (200, {})
        wait_for(lambda: len(results(tmp_path)) == 1)
        assert post(port, body, "application/json")[0] == 200  # late: after it was scored
    assert [row["id"] for row in results(tmp_path)] == [trace_id(spans)]
    assert watcher.counts["spans_duplicate"] == 2 * 3
    assert watcher.counts["spans_late"] == 3


@pytest.mark.parametrize(
    ("body", "kind", "headers", "reason"),
    [
        (b"\xff\x00 not protobuf", "application/x-protobuf", {}, "no ExportTraceServiceRequest"),
        (b"{not json", "application/json", {}, "not valid JSON"),
        (b"[1, 2]", "application/json", {}, "expected a JSON object, got list"),
        (b'{"resourceSpans": 3}', "application/json", {}, "resourceSpans must be a list, got int"),
        (
            json.dumps(  # a good span, then one that cannot be read: neither is taken
                {
                    "resourceSpans": [
                        {
                            "scopeSpans": [
                                {
                                    "spans": [
                                        {"traceId": "ab" * 16, "spanId": "ef" * 8},
                                        {
                                            "traceId": "ab" * 16,
                                            "spanId": "cd" * 8,
                                            "startTimeUnixNano": "soon",
                                        },
                                    ]
                                }
                            ]
                        }
                    ]
                }
            ).encode(),
            "application/json",
            {},
            "unreadable span: ValueError",
        ),
        (b"{}", "text/plain", {}, "Content-Type 'text/plain' is not supported"),
        (b"plain", "application/json", {"Content-Encoding": "gzip"}, "not gzip"),
        (b"{}", "application/json", {"Content-Encoding": "br"}, "'br' is not supported"),
    ],
)
def test_a_bad_body_is_a_400_with_its_reason_and_the_receiver_goes_on(
    tmp_path: Path, body: bytes, kind: str, headers: dict[str, str], reason: str
) -> None:
    watcher = Watcher([StepBudget(max_steps=1)], tmp_path, idle=0.1)
    spans = conversation(1)
    with serving(watcher) as port:
        status, _, answer = post(port, body, kind, **headers)
        assert status == 400
        assert reason in json.loads(answer)["message"]
        good = gzip.compress(protobuf(spans))
        assert post(port, good, **{"Content-Encoding": "gzip"})[0] == 200
        wait_for(lambda: len(results(tmp_path)) == 1)
    assert watcher.counts["requests_bad"] == 1
    assert watcher.counts["spans_accepted"] == 2  # the good request's only


def test_a_full_queue_answers_503_with_retry_after_and_accepts_nothing(tmp_path: Path) -> None:
    watcher = Watcher([StepBudget(max_steps=1)], tmp_path, idle=60, max_queue=3)
    first, second = conversation(1), conversation(1)  # two spans each
    with serving(watcher) as port:
        assert post(port, protobuf(first))[0] == 200
        status, headers, answer = post(port, protobuf(second))
        assert status == 503
        assert int(headers["Retry-After"]) > 0
        assert "the queue holds 3" in json.loads(answer)["message"]
        assert watcher.queued == 2
        spooled = (tmp_path / "spool.jsonl").read_text().splitlines()
    assert len(spooled) == 1  # the refused spans were not spooled: the exporter sends them again
    assert watcher.counts["requests_rejected"] == 1


def test_healthz_and_prometheus_metrics(tmp_path: Path) -> None:
    watcher = Watcher([StepBudget(max_steps=1)], tmp_path, idle=0.1)
    spans = conversation(3)
    with serving(watcher) as port:
        assert post(port, protobuf(spans))[0] == 200
        assert post(port, protobuf(spans))[0] == 200
        wait_for(lambda: len(results(tmp_path)) == 1)
        base = f"http://127.0.0.1:{port}"
        with urllib.request.urlopen(f"{base}/healthz", timeout=5) as answer:
            assert answer.status == 200
        with urllib.request.urlopen(f"{base}/metrics", timeout=5) as answer:
            text = answer.read().decode()
    values = _samples(text)
    assert values["turneval_watch_spans_accepted_total"] == 4.0
    assert values["turneval_watch_spans_duplicate_total"] == 4.0
    assert values["turneval_watch_conversations_complete_total"] == 1.0
    assert values["turneval_watch_conversations_scored_total"] == 1.0
    assert values['turneval_watch_conversations_skipped_total{reason="budget"}'] == 0.0
    assert values["turneval_watch_queue_depth"] == 0.0


def _samples(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--listen", "4318"], "--listen '4318' is not HOST:PORT"),
        (["--budget", "20USD/day"], "a USD budget needs the judge prices"),
        (["--budget", "20USD/day", "--price-input", "0.15"], "needs --price-output too"),
        (["--budget", "lots"], "budget 'lots' is not AMOUNT UNIT/PERIOD"),
        (["--filter", "service.name"], "filter 'service.name' is not KEY=VALUE"),
    ],
)
def test_watch_refuses_bad_options_before_listening(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], message: str
) -> None:
    from turneval.cli import main

    command = ["watch", "--metric", "step_budget:max_steps=1", "--out", str(tmp_path / "s")]
    assert main([*command, *options]) == 2
    assert message in capsys.readouterr().err


def test_protobuf_bodies_read_as_protobuf_json_mapping_reads_them() -> None:
    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from opentelemetry.trace import Status, StatusCode

    from turneval.traces._spans import spans_of_request
    from turneval.watch import decode_body

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("tests")
    with tracer.start_as_current_span("root", attributes={"n": 3, "x": 0.5, "ok": True}):
        with tracer.start_as_current_span("child", attributes={"tags": ("a", "b")}) as child:
            child.add_event("gen_ai.choice", {"index": 0, "text": "hi"})
            child.set_status(Status(StatusCode.ERROR, "boom"))
    message = encode_spans(exporter.get_finished_spans())
    fast = decode_body(message.SerializeToString(), "application/x-protobuf", "")
    reference = MessageToDict(message)
    assert list(spans_of_request(fast)) == list(spans_of_request(reference))
    assert [s.status for s in spans_of_request(fast)] == ["ERROR", "UNSET"]


def test_a_chunked_body_is_read_whole(tmp_path: Path) -> None:
    import http.client

    spans = conversation(2)
    body = protobuf(spans)
    with (
        Watcher([StepBudget(max_steps=1)], tmp_path, idle=0.1) as watcher,
        serving(watcher) as port,
    ):
        connection = http.client.HTTPConnection("127.0.0.1", port)
        halves = iter([body[: len(body) // 2], body[len(body) // 2 :]])  # sent as two chunks
        connection.request(
            "POST",
            "/v1/traces",
            halves,
            {"Content-Type": "application/x-protobuf"},
            encode_chunked=True,
        )
        assert connection.getresponse().status == 200
        connection.close()
        wait_for(lambda: len(results(tmp_path)) == 1)
    assert watcher.counts["spans_accepted"] == 3


def test_unknown_paths_and_unreadable_lengths_are_refused(tmp_path: Path) -> None:
    import http.client

    with Watcher([StepBudget(max_steps=1)], tmp_path) as watcher, serving(watcher) as port:
        for method, path, status in (("GET", "/", 404), ("POST", "/v1/logs", 404)):
            connection = http.client.HTTPConnection("127.0.0.1", port)
            connection.request(method, path, b"{}" if method == "POST" else None)
            answer = connection.getresponse()
            assert answer.status == status
            assert "POST /v1/traces" in json.loads(answer.read())["message"]
            connection.close()
        for headers, status in (
            ({"Content-Length": "many"}, 400),
            ({"Content-Length": str(64 * 2**20 + 1)}, 413),
        ):
            connection = http.client.HTTPConnection("127.0.0.1", port)
            connection.putrequest("POST", "/v1/traces", skip_accept_encoding=True)
            connection.putheader("Content-Type", "application/json")
            for name, value in headers.items():
                connection.putheader(name, value)
            connection.endheaders()
            assert connection.getresponse().status == status
            connection.close()
    assert watcher.counts["spans_accepted"] == 0


def test_a_scoring_error_is_counted_and_the_receiver_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    watcher = Watcher([StepBudget(max_steps=1)], tmp_path, idle=0.05)

    def unreachable(batch: Any) -> None:
        raise ConnectionError("the store is unreachable")

    monkeypatch.setattr(watcher, "_score", unreachable)
    with serving(watcher) as port:
        assert post(port, protobuf(conversation(1)))[0] == 200
        wait_for(lambda: watcher.counts["errors"] == 1)
        assert post(port, protobuf(conversation(1)))[0] == 200
        wait_for(lambda: watcher.counts["errors"] == 2)
    claims = (tmp_path / "ledger.jsonl").read_text().splitlines()
    assert len(claims) == 2  # claimed, never written: a restart scores them

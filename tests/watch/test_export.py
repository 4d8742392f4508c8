"""--export-to: the scores go back to an OTLP endpoint as gen_ai.evaluation.result events."""

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from turneval.metrics import StepBudget
from turneval.watch import Watcher

from ._helpers import conversation, trace_id


@pytest.fixture
def collector() -> Iterator[tuple[str, list[ExportLogsServiceRequest]]]:
    """An OTLP/HTTP logs endpoint keeping what it receives."""
    received: list[ExportLogsServiceRequest] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            assert self.path == "/v1/logs"
            received.append(ExportLogsServiceRequest.FromString(body))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", received
    server.shutdown()
    server.server_close()


def test_scores_are_sent_back_as_evaluation_events_on_their_traces(
    tmp_path: Path, collector: tuple[str, list[ExportLogsServiceRequest]]
) -> None:
    url, received = collector
    traces = [conversation(1), conversation(4)]
    with Watcher([StepBudget(max_steps=2)], tmp_path, idle=0, export_to=url) as watcher:
        for spans in traces:
            watcher.accept(MessageToDict(encode_spans(spans)))
        assert watcher.tick() == 2
    records = [
        record
        for request in received
        for resource in request.resource_logs
        for scope in resource.scope_logs
        for record in scope.log_records
    ]
    events = {
        record.trace_id.hex(): {kv.key: MessageToDict(kv.value) for kv in record.attributes}
        for record in records
    }
    assert [record.event_name for record in records] == ["gen_ai.evaluation.result"] * 2
    # step_budget with max_steps=2: 1 step -> 1.0; 4 steps -> 2/4
    assert {t: e["gen_ai.evaluation.score.value"] for t, e in events.items()} == {
        trace_id(traces[0]): {"doubleValue": 1.0},
        trace_id(traces[1]): {"doubleValue": 0.5},
    }
    roots = {trace_id(spans): format(spans[-1].context.span_id, "016x") for spans in traces}
    assert {record.trace_id.hex(): record.span_id.hex() for record in records} == roots
    assert {e["gen_ai.evaluation.name"]["stringValue"] for e in events.values()} == {"step_budget"}

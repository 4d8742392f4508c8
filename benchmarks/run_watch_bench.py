"""turneval watch: spans/s accepted (protobuf, spooled and fsync'd) and time to answer an export.

Starts ``turneval watch`` in its own process (idle timeout of an hour: only receiving is
measured), then sends EXPORTS protobuf exports of SPANS spans each (GenAI chat spans, as the
SDK's BatchSpanProcessor batches them, 10 traces per export) over one keep-alive connection,
and reports spans/s by wall clock and per CPU second of the receiver (its one core), and the
p50/p99 time to answer an export.

    .venv/bin/python benchmarks/run_watch_bench.py --exports 200 --spans 100
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def _bodies(exports: int, spans: int) -> list[bytes]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("bench")
    bodies = []
    per_trace = max(1, spans // 10)
    for _ in range(exports):
        exporter.clear()
        for _trace in range(spans // per_trace):
            with tracer.start_as_current_span("invoke_agent"):
                for turn in range(per_trace - 1):
                    messages = [{"role": "user", "parts": [{"type": "text", "content": "q"}]}]
                    attributes = {
                        "gen_ai.operation.name": "chat",
                        "gen_ai.input.messages": json.dumps(messages * (turn + 1)),
                        "gen_ai.output.messages": json.dumps(messages),
                    }
                    with tracer.start_as_current_span("chat", attributes=attributes):
                        pass
        bodies.append(bytes(encode_spans(exporter.get_finished_spans()).SerializeToString()))
    return bodies


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exports", type=int, default=200)
    parser.add_argument("--spans", type=int, default=100)
    args = parser.parse_args()
    bodies = _bodies(args.exports, args.spans)
    per_trace = max(1, args.spans // 10)
    total = args.exports * (args.spans // per_trace) * per_trace
    with tempfile.TemporaryDirectory() as state:
        command = [sys.executable, "-m", "turneval.cli", "watch", "--listen", "127.0.0.1:0"]
        command += ["--idle", "1h", "--out", state, "--max-queue", str(10 * total)]
        command += ["--metric", "step_budget:max_steps=1"]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        assert process.stdout is not None
        port = int(process.stdout.readline().rsplit(":", 1)[1].split("/")[0])
        connection = http.client.HTTPConnection("127.0.0.1", port)
        latencies = []
        cpu = _cpu_seconds(process.pid)
        start = time.perf_counter()
        for body in bodies:
            sent = time.perf_counter()
            connection.request(
                "POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"}
            )
            answer = connection.getresponse()
            answer.read()
            assert answer.status == 200, answer.status
            latencies.append(time.perf_counter() - sent)
        elapsed = time.perf_counter() - start
        cpu = _cpu_seconds(process.pid) - cpu
        process.terminate()
        process.wait()
        process.stdout.close()
    latencies.sort()
    p50 = latencies[len(latencies) // 2] * 1000
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000
    print(
        f"{total} spans in {args.exports} exports: {total / elapsed:,.0f} spans/s wall, "
        f"{total / cpu:,.0f} spans per receiver CPU second; "
        f"answer p50 {p50:.1f} ms, p99 {p99:.1f} ms"
    )


if __name__ == "__main__":
    main()

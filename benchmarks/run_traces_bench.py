"""OTLP/JSON traces to conversations: spans/s on one core, and peak memory against file size.

Writes N traces of 10 spans each (default 10,000 traces = 100,000 spans, GenAI v1.38 shapes:
an invoke_agent root, 3 chat spans with cumulative gen_ai.input.messages, 2 execute_tool spans,
4 framework task spans; one ExportTraceServiceRequest per trace and line, as a collector's
file exporter writes them), then converts the file with ``turneval.traces.iter_otlp_json`` in a
fresh single-threaded process per round and reports spans/s and that process's peak RSS. A file
10x smaller is converted too: equal peak memory shows it is bounded by the largest trace, not
the file.

    .venv/bin/python benchmarks/run_traces_bench.py --traces 10000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

CHILD = r"""
import resource, sys, time
from turneval.traces import iter_otlp_json
start, cpu = time.perf_counter(), time.process_time()
samples = spans = errors = 0
for _, sample in iter_otlp_json(sys.argv[1]):
    samples += 1
    errors += bool(sample.metadata.get("conversion_error"))
elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(samples, errors, elapsed, cpu, peak)
"""


def _kv(attributes: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for key, value in attributes.items():
        if isinstance(value, int):
            out.append({"key": key, "value": {"intValue": str(value)}})
        else:
            out.append({"key": key, "value": {"stringValue": value}})
    return out


def _trace(number: int, rng: random.Random) -> str:
    trace_id = f"{number + 1:032x}"
    t0 = 1_700_000_000_000_000_000 + number * 10_000_000
    spans: list[dict[str, Any]] = []

    def span(index: int, parent: int | None, attributes: dict[str, Any]) -> None:
        raw: dict[str, Any] = {
            "traceId": trace_id,
            "spanId": f"{number * 16 + index + 1:016x}",
            "name": "span",
            "kind": 1,
            "startTimeUnixNano": str(t0 + index * 1000),
            "endTimeUnixNano": str(t0 + 9_000_000 - index * 1000),
            "attributes": _kv(attributes),
            "status": {"code": 0},
        }
        if parent is not None:
            raw["parentSpanId"] = f"{number * 16 + parent + 1:016x}"
        spans.append(raw)

    span(0, None, {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "bench"})
    history: list[dict[str, Any]] = [
        {"role": "user", "parts": [{"type": "text", "content": f"request {number}"}]}
    ]
    index = 1
    for step in range(3):
        call_id = f"call_{number}_{step}"
        args = {"city": rng.choice(["Oslo", "Rome", "Lima"]), "days": rng.randint(1, 9)}
        if step < 2:
            output = {
                "role": "assistant",
                "parts": [
                    {"type": "tool_call", "id": call_id, "name": "forecast", "arguments": args}
                ],
            }
        else:
            output = {"role": "assistant", "parts": [{"type": "text", "content": "Sunny."}]}
        span(index, 0, {"gen_ai.operation.name": "execute_task", "gen_ai.task.name": "agent"})
        span(
            index + 1,
            index,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-bench",
                "gen_ai.input.messages": json.dumps(history),
                "gen_ai.output.messages": json.dumps([output]),
                "gen_ai.usage.input_tokens": 100 + step,
                "gen_ai.usage.output_tokens": 10,
            },
        )
        if step == 2:  # the final answer: no tool runs, a routing task does
            span(
                index + 2, 0, {"gen_ai.operation.name": "execute_task", "gen_ai.task.name": "route"}
            )
            break
        span(
            index + 2,
            0,
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "forecast",
                "gen_ai.tool.call.id": call_id,
                "gen_ai.tool.call.arguments": json.dumps(args),
                "gen_ai.tool.call.result": "sunny",
            },
        )
        index += 3
        history.append(output)
        history.append(
            {
                "role": "tool",
                "parts": [{"type": "tool_call_response", "id": call_id, "response": "sunny"}],
            }
        )
    scope = {"scope": {"name": "bench"}, "spans": spans}
    return json.dumps({"resourceSpans": [{"resource": {"attributes": []}, "scopeSpans": [scope]}]})


def write(path: Path, traces: int) -> int:
    rng = random.Random(7)
    with path.open("w", encoding="utf-8") as handle:
        for number in range(traces):
            handle.write(_trace(number, rng) + "\n")
    return traces * 10


def run(path: Path) -> tuple[int, int, float, float, float]:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(path)],
        capture_output=True,
        text=True,
        check=True,
        env={"OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"},
    ).stdout.split()
    return int(out[0]), int(out[1]), float(out[2]), float(out[3]), float(out[4])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--traces", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        big, small = Path(folder) / "big.jsonl", Path(folder) / "small.jsonl"
        spans = write(big, args.traces)
        write(small, max(args.traces // 10, 1))
        print(f"{args.traces:,} traces, {spans:,} spans, {big.stat().st_size / 1e6:.1f} MB")
        walls, cpus = [], []
        for _ in range(args.rounds):
            samples, errors, elapsed, cpu, peak = run(big)
            assert samples == args.traces and errors == 0, (samples, errors)
            walls.append(spans / elapsed)
            cpus.append(spans / cpu)
            print(
                f"  wall {elapsed:.2f}s = {spans / elapsed:,.0f} spans/s; "
                f"CPU {cpu:.2f}s = {spans / cpu:,.0f} spans/s; peak RSS {peak:.0f} MB"
            )
        small_peak = run(small)[4]
        walls.sort()
        cpus.sort()
        print(
            f"median: wall {walls[len(walls) // 2]:,.0f} spans/s, "
            f"CPU {cpus[len(cpus) // 2]:,.0f} spans/s; "
            f"peak RSS {small_peak:.0f} MB for a file 10x smaller"
        )


if __name__ == "__main__":
    main()

"""Provider quota: judged samples against the local OpenAI-compatible stub under a quota.

Each sample is judged by one PointwiseMetric through a real ChatOpenAI pointed at the stub
(tests/_openai_stub.py), under ``RateLimit(requests_per_minute=RPM)``. The stub records when
each request arrives; the benchmark reports the most requests in any 10-second and any
60-second window (quota: RPM/6 and RPM), wall time against the quota floor (requests / quota)
and rows lost. ``--fail-rate 0.1`` answers 10% of requests with 429 (``Retry-After: 1``).

    .venv/bin/python benchmarks/run_ratelimit_bench.py --n 2000 --rpm 600
    .venv/bin/python benchmarks/run_ratelimit_bench.py --n 2000 --rpm 600 --fail-rate 0.1
    .venv/bin/python benchmarks/run_ratelimit_bench.py --n 2000 --rpm 600 --engine ray --workers 2

``--engine ray`` runs ``evaluate_jsonl(engine=Ray(...))`` on a local Ray cluster
(``ray.init(num_cpus=2)``) with ``--workers`` scoring actors sharing one quota actor; the judge
is built in each actor from ``llm_factory``.
"""

from __future__ import annotations

import argparse
import bisect
import json
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from langchain_openai import ChatOpenAI  # noqa: E402
from tests._openai_stub import OpenAIStub, Reply  # noqa: E402

from turneval import RateLimit, SingleTurnSample, evaluate  # noqa: E402
from turneval.metrics import PointwiseMetric  # noqa: E402
from turneval.ratelimit import RateLimiter  # noqa: E402

RATED = json.dumps({"explanation": "fine", "score": 3})


def most_in_window(times: list[float], span: float) -> int:
    """The most arrivals in any half-open window of ``span`` seconds."""
    ordered = sorted(times)
    return max(
        (bisect.bisect_left(ordered, t + span) - i for i, t in enumerate(ordered)), default=0
    )


def run(
    n: int,
    rpm: float,
    max_in_flight: int,
    latency: float,
    fail_rate: float,
    engine: str = "local",
    workers: int = 2,
) -> dict[str, Any]:
    stub = OpenAIStub(keep_alive=True)
    rng = random.Random(7)
    lock = threading.Lock()
    throttled = 0

    def respond(body: dict[str, Any]) -> Reply:
        nonlocal throttled
        with lock:
            fail = rng.random() < fail_rate
            throttled += fail
        if fail:
            return Reply(status=429, headers={"retry-after": "1"}, delay=latency)
        return Reply(RATED, delay=latency)

    stub.reset(responder=respond)
    llm = ChatOpenAI(model="gpt-4o-mini", base_url=stub.url, api_key="bench")
    metric = PointwiseMetric(
        name="clarity", criteria="c", rating_rubric={"1": "a", "3": "b", "5": "c"}, llm=llm
    )
    samples = [SingleTurnSample(user_input=f"question {i}?", response=str(i)) for i in range(n)]
    quota = RateLimit(requests_per_minute=rpm, max_in_flight=max_in_flight)
    limiter = RateLimiter(quota)
    if engine == "ray":
        wall, lost = run_on_ray(samples, metric, quota, stub.url, workers, max_in_flight)
    else:
        start = time.perf_counter()
        result = evaluate(samples, [metric], rate_limit=limiter, max_concurrency=4 * max_in_flight)
        wall = time.perf_counter() - start
        lost = sum(1 for row in result.rows if row.failures)
    stub.close()
    times = list(stub.times)
    requests = len(times)
    floor = requests / rpm * 60
    return {
        "samples": n,
        "rpm": rpm,
        "requests": requests,
        "answered_429": throttled,
        "max_in_any_10s": most_in_window(times, 10.0),
        "quota_per_10s": rpm / 6,
        "max_in_any_60s": most_in_window(times, 60.0),
        "wall_s": round(wall, 1),
        "floor_s": round(floor, 1),
        "wall_over_floor": round(wall / floor, 3),
        "rows_lost": lost,
        "engine": engine if engine == "local" else f"ray, {workers} workers",
        **({"lowest_window": limiter.lowest_window} if engine == "local" else {}),
    }


def run_on_ray(
    samples: list[SingleTurnSample],
    metric: PointwiseMetric,
    quota: RateLimit,
    url: str,
    workers: int,
    max_in_flight: int,
) -> tuple[float, int]:
    """Wall time (s) and failed rows of the Ray engine on a local 2-CPU cluster."""
    import os
    import tempfile

    import ray

    from turneval.engines import Ray
    from turneval.stream import evaluate_jsonl

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    folder = Path(tempfile.mkdtemp(prefix="ratelimit-ray-"))
    data = folder / "samples.jsonl"
    data.write_text("".join(s.model_dump_json(exclude_none=True) + "\n" for s in samples))
    unbound = metric.model_copy(update={"llm": None})

    def factory() -> ChatOpenAI:
        return ChatOpenAI(model="gpt-4o-mini", base_url=url, api_key="bench")

    start = time.perf_counter()
    engine = Ray(
        llm_factory=factory, workers=workers, chunk_size=len(samples) // (4 * workers) or 1
    )
    result = evaluate_jsonl(
        data,
        [unbound],
        folder / "out",
        engine=engine,
        rate_limit=quota,
        max_concurrency=4 * max_in_flight,
    )
    wall = time.perf_counter() - start
    ray.shutdown()
    return wall, result.failed_rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--rpm", type=float, default=600)
    parser.add_argument("--max-in-flight", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.2, help="stub answer delay (s)")
    parser.add_argument("--fail-rate", type=float, default=0.0, help="share of 429 answers")
    parser.add_argument("--engine", choices=["local", "ray"], default="local")
    parser.add_argument("--workers", type=int, default=2, help="Ray scoring actors")
    args = parser.parse_args()
    figures = run(
        args.n,
        args.rpm,
        args.max_in_flight,
        args.latency,
        args.fail_rate,
        args.engine,
        args.workers,
    )
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()

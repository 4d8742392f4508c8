"""The ``turneval`` command: evaluate JSONL files, list metrics, run the demo, compare runs.

Exit codes: 0 success, 1 a ``--fail-under`` bar was not met, 2 bad usage or input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from turneval.errors import TurnevalError
from turneval.metrics import Metric

__all__ = ["build_parser", "main", "parse_metric"]


class UsageError(Exception):
    """Bad command-line usage (exit code 2)."""


def parse_metric(spec: str) -> Metric | str:
    """``NAME`` or ``NAME:key=value,key=value`` (values parsed as JSON when they can be)."""
    from turneval.metrics import TrajectorySingleToolUse
    from turneval.runner import metric_names

    name, _, options = spec.partition(":")
    known: dict[str, type[Metric]] = {
        **metric_names(),
        "trajectory_single_tool_use": TrajectorySingleToolUse,
    }
    if name not in known:
        raise UsageError(f"unknown metric {name!r}; run 'turneval metrics' for the list")
    if not options:
        if name == "trajectory_single_tool_use":
            raise UsageError(
                "trajectory_single_tool_use needs its tool: "
                "--metric trajectory_single_tool_use:tool_name=NAME"
            )
        return name
    config: dict[str, Any] = {}
    for item in options.split(","):
        key, equals, value = item.partition("=")
        if not equals:
            raise UsageError(f"metric option {item!r} in {spec!r} is not key=value")
        try:
            config[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            config[key.strip()] = value
    try:
        return known[name].model_validate(config)
    except ValidationError as exc:
        raise UsageError(f"metric {spec!r}: {exc.errors(include_url=False)[0]['msg']}") from exc


def _metric_list(specs: Sequence[str]) -> list[Metric | str]:
    return [parse_metric(spec) for spec in specs]


def _fail_under(items: Sequence[str], names: Sequence[str]) -> dict[str, float]:
    bars = {}
    for item in items:
        name, equals, value = item.partition("=")
        if not equals:
            raise UsageError(f"--fail-under {item!r} is not NAME=VALUE")
        if name not in names:
            raise UsageError(
                f"--fail-under names {name!r}, which is not among the metrics {list(names)}"
            )
        try:
            bars[name] = float(value)
        except ValueError:
            raise UsageError(f"--fail-under {item!r}: {value!r} is not a number") from None
    return bars


def _judge(args: argparse.Namespace) -> Any:
    if not args.judge_model and not args.judge_base_url:
        return None
    from langchain_openai import ChatOpenAI

    key = os.environ.get(args.judge_api_key_env) or ("unused" if args.judge_base_url else None)
    if key is None:
        raise UsageError(
            f"--judge-model needs an API key in ${args.judge_api_key_env} (or --judge-base-url "
            "for a local OpenAI-compatible server)"
        )
    return ChatOpenAI(
        model=args.judge_model or "default", base_url=args.judge_base_url, api_key=key
    )


def _print_summary(result: Any, out: Path | None) -> None:
    names = result.metric_names
    width = max(len(name) for name in names)
    print(
        f"{'metric':<{width}}  {'mean':>7}  {'95% CI':>17}  {'std':>7}  {'scored':>8}  {'failed':>7}"
    )
    for name in names:
        s = result.summaries[name]
        mean = "n/a" if s.mean is None else f"{s.mean:.4f}"
        ci = "n/a" if s.ci_low is None else f"[{s.ci_low:.4f}, {s.ci_high:.4f}]"
        std = "n/a" if s.std is None else f"{s.std:.4f}"
        print(f"{name:<{width}}  {mean:>7}  {ci:>17}  {std:>7}  {s.count:>8}  {s.failed:>7}")
    usage = result.usage
    if usage.calls or usage.cached_calls:
        print(
            f"judge: {usage.calls} requests, {usage.cached_calls} cached, "
            f"{usage.input_tokens:,} input + {usage.output_tokens:,} output tokens"
        )
    if result.bad_lines:
        print(
            f"{result.bad_lines} input line(s) could not be read; their errors are in results.jsonl"
        )
    if out is not None:
        print(f"wrote {out / 'results.jsonl'}, {out / 'summary.json'}, {out / 'report.html'}")


def _dry_run(args: argparse.Namespace, metrics: list[Metric | str]) -> int:
    from turneval.dataset import EvaluationDataset
    from turneval.estimate import estimate
    from turneval.results import Prices
    from turneval.runner import resolve_metrics

    dataset = EvaluationDataset.from_jsonl(args.data)
    result = estimate(dataset, resolve_metrics(metrics))
    print(result)
    if args.price_input is not None:
        cost = result.input_cost(Prices(args.price_input, args.price_output or 0.0))
        print(f"estimated prompt cost: {cost:.4f} (at {args.price_input} per 1M input tokens)")
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from turneval.stream import evaluate_jsonl

    metrics = _metric_list(args.metric)
    names = [m if isinstance(m, str) else m.name for m in metrics]
    bars = _fail_under(args.fail_under, names)
    if args.dry_run:
        return _dry_run(args, metrics)
    out = Path(args.out)
    result = evaluate_jsonl(
        args.data,
        metrics,
        out,
        llm=_judge(args),
        cache=args.cache,
        concurrency=args.concurrency,
        llm_concurrency=args.llm_concurrency,
        workers=args.workers,
        details=args.details,
        timeout=args.timeout,
        report_rows=args.report_rows,
        progress=not args.quiet and sys.stderr.isatty(),
        chunk_bytes=int(args.chunk_mb * 2**20),
        resume=args.resume,
        overwrite=args.overwrite,
    )
    _print_summary(result, out)
    if args.price_input is not None and (result.usage.calls or result.usage.cached_calls):
        from turneval.results import Prices

        prices = Prices(args.price_input, args.price_output or 0.0)
        print(f"judge cost: {prices.cost(result.usage):.4f}")
        for name, summary in result.summaries.items():
            if summary.usage is not None:
                print(f"  {name}: {prices.cost(summary.usage):.4f}")
    return _check_bars(bars, result.summaries)


def _check_bars(bars: dict[str, float], summaries: Any) -> int:
    missed = []
    for name, bar in bars.items():
        mean = summaries[name].mean
        if mean is None or mean < bar:
            missed.append(f"{name} mean {'n/a' if mean is None else f'{mean:.4f}'} < {bar}")
    for line in missed:
        print(f"FAIL: {line}", file=sys.stderr)
    return 1 if missed else 0


def _metrics(args: argparse.Namespace) -> int:
    from turneval.metrics import TrajectorySingleToolUse
    from turneval.runner import metric_names

    entries = {name: cls for name, cls in metric_names().items()}
    entries["trajectory_single_tool_use"] = TrajectorySingleToolUse
    width = max(map(len, entries))
    for name in sorted(entries):
        cls = entries[name]
        doc = (cls.__doc__ or "").strip().splitlines()[0]
        judge = " [LLM judge]" if cls.uses_llm else ""
        print(f"{name:<{width}}  {doc}{judge}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from turneval.demo import run_demo

    return run_demo(Path(args.out), llm=_judge(args), cache=args.cache)


def _compare(args: argparse.Namespace) -> int:
    from turneval.compare import compare_files

    comparison = compare_files(args.baseline, args.candidate, pass_threshold=args.pass_threshold)
    print(comparison)
    return 0


def _add_judge_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--judge-model", help="judge model name (OpenAI-compatible chat API)")
    parser.add_argument(
        "--judge-base-url", help="base URL of an OpenAI-compatible server (vLLM, Ollama, ...)"
    )
    parser.add_argument(
        "--judge-api-key-env", default="OPENAI_API_KEY", help="variable holding the API key"
    )
    parser.add_argument("--cache", help="SQLite judge cache: a re-run pays for nothing twice")


def build_parser() -> argparse.ArgumentParser:
    """The ``turneval`` argument parser."""
    parser = argparse.ArgumentParser(prog="turneval", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("evaluate", help="score a JSONL file of samples")
    run.add_argument("data", help="JSONL file, one sample per line")
    run.add_argument(
        "--metric",
        action="append",
        required=True,
        metavar="NAME[:key=value,...]",
        help="a metric to compute (repeatable); see 'turneval metrics'",
    )
    run.add_argument("--out", default="turneval-out", help="output folder (default: turneval-out)")
    run.add_argument(
        "--fail-under",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="exit 1 when the metric's mean is below VALUE (repeatable)",
    )
    run.add_argument("--concurrency", type=int, default=16, help="samples scored at once")
    run.add_argument("--llm-concurrency", type=int, default=8, help="judge requests in flight")
    run.add_argument("--workers", type=int, default=None, help="processes for rule-based metrics")
    run.add_argument("--timeout", type=float, default=None, help="seconds allowed per sample")
    run.add_argument("--details", action="store_true", help="write each metric's details too")
    run.add_argument("--report-rows", type=int, default=2000, help="rows in the HTML report")
    run.add_argument("--quiet", action="store_true", help="no progress line")
    run.add_argument(
        "--resume",
        action="store_true",
        help="continue OUT/results.jsonl of an interrupted run: finished lines are not scored again",
    )
    run.add_argument(
        "--overwrite", action="store_true", help="replace an existing OUT/results.jsonl"
    )
    run.add_argument(
        "--chunk-mb",
        type=float,
        default=64.0,
        help="input megabytes scored at once at most (memory bound; default 64)",
    )
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="estimate judge calls and prompt tokens; call nothing",
    )
    run.add_argument(
        "--price-input", type=float, default=None, help="judge price per 1M input tokens"
    )
    run.add_argument(
        "--price-output", type=float, default=None, help="judge price per 1M output tokens"
    )
    _add_judge_options(run)
    run.set_defaults(handler=_evaluate)

    listing = commands.add_parser("metrics", help="list metric names")
    listing.set_defaults(handler=_metrics)

    demo = commands.add_parser("demo", help="evaluate the bundled example datasets")
    demo.add_argument("--out", default="turneval-demo", help="output folder")
    _add_judge_options(demo)
    demo.set_defaults(handler=_demo)

    diff = commands.add_parser("compare", help="compare two results.jsonl files of one dataset")
    diff.add_argument("baseline")
    diff.add_argument("candidate")
    diff.add_argument("--pass-threshold", type=float, default=0.5)
    diff.set_defaults(handler=_compare)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
        return code
    except (UsageError, TurnevalError, OSError) as exc:
        print(f"turneval: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

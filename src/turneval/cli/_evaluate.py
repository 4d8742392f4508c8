"""``turneval evaluate``: the run, its dry run, its gates (``--fail-under``, ``--max-failed``)."""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turneval.cli._arguments import (
    fail_under_bars,
    max_failed,
    metric_list,
    positive_number,
    whole_number,
)
from turneval.cli._batch import add_batch_options, evaluate_batch
from turneval.cli._engines import rate_limit_of, run_aggregates, run_streamed, source_of
from turneval.cli._judge_flags import dry_run_judge, judge_from_flags, require_judge
from turneval.cli._optimize import add_judge_config_option, with_judge_config
from turneval.cli._options import add_concurrency_options, add_gate_options
from turneval.cli._summary import EXIT_INTERRUPTED, EXIT_TERMINATED, gates_exit, print_summary
from turneval.cli._vocabulary import add_flag, add_judge_group, with_repeats

if TYPE_CHECKING:
    from turneval.metrics import Evaluator

ENGINE_NAMES = ("local", "ray", "batch")
"""``--engine``'s choices: the names of :data:`turneval.engines.ENGINES` (a test checks it)."""


def add_evaluate_command(commands: Any) -> None:
    """``turneval evaluate DATA``: score a file of samples or traces."""
    run = commands.add_parser("evaluate", help="score a JSONL file of samples")
    run.add_argument("data", help="JSONL file, one sample per line")
    run.add_argument(
        "--metric",
        action="append",
        required=True,
        metavar="NAME[:key=value,...]",
        help="a metric to compute (repeatable); see 'turneval metrics'",
    )
    add_flag(run, "--out", default="turneval-out", detail="default turneval-out")
    add_flag(
        run,
        "--name",
        detail="this run's name in the store and run.json, so two runs of one file can be told "
        "apart in turneval view and store list (default: the input file's name)",
    )
    add_gate_options(run)
    add_concurrency_options(run)
    run.add_argument(
        "--workers",
        type=whole_number,
        default=None,
        help="processes for rule-based metrics (with --engine ray: scoring actors, default 2)",
    )
    run.add_argument(
        "--engine",
        choices=ENGINE_NAMES,
        default="local",
        help="score here (local), on a Ray cluster (ray; needs the ray extra), or ask the "
        "judge through the provider's batch API at about half price (batch; answers within "
        "24 h; needs --out for the run's folder)",
    )
    add_batch_options(run)
    run.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDR",
        help="the Ray cluster to join (default: a running one, else a local one)",
    )
    run.add_argument("--details", action="store_true", help="write each metric's details too")
    run.add_argument("--report-rows", type=int, default=2000, help="rows in the HTML report")
    run.add_argument(
        "--format",
        choices=("auto", "jsonl", "otlp"),
        default="auto",
        help="input: samples (jsonl) or OTLP/JSON traces (otlp); auto-detected by default",
    )
    add_flag(
        run,
        "--group-by",
        choices=("trace", "session"),
        default="trace",
        detail="OTLP/JSON traces sharing gen_ai.conversation.id or session.id (the file is "
        "grouped in memory)",
    )
    run.add_argument(
        "--strict-traces",
        action="store_true",
        help="OTLP/JSON traces: a trace with no model call (no LLM span) is a failed row "
        "instead of a skipped trace",
    )
    run.add_argument(
        "--lenient-json",
        action="store_true",
        help="accept input lines that are not strict JSON: duplicate keys (the last wins) and "
        "NaN, Infinity or 1e400 as numbers (by default each such line is an error row)",
    )
    run.add_argument(
        "--resume",
        action="store_true",
        help="continue OUT/results.jsonl of an interrupted run: finished lines are not scored "
        "again (refused if OUT/run.json shows other metrics, judge or input)",
    )
    run.add_argument(
        "--overwrite", action="store_true", help="replace an existing OUT/results.jsonl"
    )
    add_flag(
        run,
        "--store",
        nargs="?",
        const=".turneval/runs.db",
        detail="keep the run there too (alone: .turneval/runs.db; default: $TURNEVAL_STORE when "
        "set)",
    )
    run.add_argument(
        "--chunk-mb",
        type=positive_number,
        default=64.0,
        help="input megabytes scored at once at most (memory bound; default 64)",
    )
    run.add_argument(
        "--aggregate",
        action="append",
        default=[],
        metavar="NAME",
        help="run-level figures to add to summary.json (repeatable): databricks",
    )
    add_flag(run, "--dry-run")
    add_judge_group(run)
    add_judge_config_option(run)
    run.set_defaults(handler=_evaluate)


def _evaluate(args: argparse.Namespace) -> int:
    from turneval.runner import resolve_metrics

    metrics = with_judge_config(metric_list(args.metric), args.judge_config)
    bars = fail_under_bars(args.fail_under, resolve_metrics(metrics))
    metrics = with_repeats(metrics, args.repeats, bars)
    allowed = max_failed(args.max_failed)
    rate_limit = rate_limit_of(args)  # a bad quota fails before any work
    run_aggregates(args.aggregate)  # so does an unknown aggregate name
    if args.dry_run:
        return _dry_run(args, metrics)
    out = Path(args.out)
    from turneval.runner import resolve_metrics

    llm = judge_from_flags(args, needed=any(m.uses_llm for m in resolve_metrics(metrics)))
    require_judge(metrics, llm)
    received = None
    if args.engine == "batch":
        result = evaluate_batch(args, metrics, out, llm)
        if result is None:  # Ctrl-C: the batches keep running
            return EXIT_INTERRUPTED
        return gates_exit(result, bars, allowed, args.max_failed, tracebacks=args.traceback)
    result, received = run_streamed(args, metrics, out, llm, rate_limit)
    print_summary(result, out)
    if getattr(result, "stopped", False):
        by = "Ctrl-C (SIGINT)" if received == signal.SIGINT else "SIGTERM"
        print(
            f"turneval: stopped by {by} after {result.total_rows} rows (the chunks in flight "
            f"were finished and written); continue with the same command and --resume",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED if received == signal.SIGINT else EXIT_TERMINATED
    if args.price_input is not None and (result.usage.calls or result.usage.cached_calls):
        from turneval.results import Prices

        prices = Prices(args.price_input, args.price_output or 0.0)
        print(f"judge cost: {prices.cost(result.usage):.4f}")
        for name, summary in result.summaries.items():
            if summary.usage is not None:
                print(f"  {name}: {prices.cost(summary.usage):.4f}")
    return gates_exit(result, bars, allowed, args.max_failed, tracebacks=args.traceback)


def _dry_run(args: argparse.Namespace, metrics: list[Evaluator | str]) -> int:
    from turneval.dataset import EvaluationDataset
    from turneval.estimate import estimate
    from turneval.results import Prices
    from turneval.runner import resolve_metrics
    from turneval.stream import OtlpSource

    source = source_of(args)
    if isinstance(source, OtlpSource):
        from turneval.traces import from_otlp_json

        dataset = from_otlp_json(
            source.path,
            group_by=source.group_by,
            strict_traces=source.strict,
            lenient_json=source.lenient_json,
        )
    else:
        dataset = EvaluationDataset.from_jsonl(source.path, lenient_json=args.lenient_json)
    result = estimate(dataset, resolve_metrics(metrics), llm=dry_run_judge(args))
    print(result)
    if args.price_input is not None:
        prices = Prices(args.price_input, args.price_output or 0.0)
        cost = result.input_cost(prices)
        print(f"estimated prompt cost: {cost:.4f} (at {args.price_input} per 1M input tokens)")
        print(
            f"  live: {cost:.4f}   through a batch API (--engine batch): "
            f"{result.batch_input_cost(prices):.4f}"
        )
    return 0

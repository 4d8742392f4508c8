"""``turneval clusters`` (why rows failed, grouped) and ``turneval judge-bench`` (a judge vs people)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from turneval._files import naming
from turneval.cli.arguments import UsageError, named_number, whole_number
from turneval.cli.judge_flags import dry_run_judge, judge_from_flags
from turneval.cli.options import add_judge_options, add_run_argument, runs_store


def add_clusters_command(commands: Any) -> None:
    """``turneval clusters RUN``."""
    clusters = commands.add_parser(
        "clusters", help="group a run's failed rows by why they failed (largest group first)"
    )
    add_run_argument(clusters)
    clusters.add_argument(
        "--fail-under",
        action="append",
        default=[],
        metavar="[NAME=]VALUE",
        help="a row fails a metric scored below VALUE (default 0.5; repeatable, per metric)",
    )
    clusters.add_argument(
        "--metric",
        action="append",
        default=None,
        help="only these metrics decide which rows failed (repeatable; default: all)",
    )
    clusters.add_argument(
        "--method",
        choices=["auto", "tfidf", "fuzzy"],
        default="auto",
        help="tfidf (scikit-learn) or fuzzy (rapidfuzz); auto: tfidf when installed",
    )
    clusters.add_argument(
        "--min-similarity", type=float, default=None, help="how alike reasons must be to group"
    )
    clusters.add_argument(
        "--examples", type=whole_number, default=3, help="example rows shown per cluster"
    )
    clusters.add_argument("--json", help="also write the clusters to this JSON file")
    clusters.add_argument(
        "--name",
        action="store_true",
        help="ask the judge (--judge-model, or $OPENAI_API_KEY) to name each cluster",
    )
    add_judge_options(clusters)
    clusters.set_defaults(handler=_clusters)


def add_judge_bench_command(commands: Any) -> None:
    """``turneval judge-bench who-and-when``."""
    bench = commands.add_parser(
        "judge-bench", help="measure a judge against people's labels on a public benchmark"
    )
    benches = bench.add_subparsers(dest="bench", required=True)
    who = benches.add_parser(
        "who-and-when",
        help="failure attribution on Who&When (Algorithm-Generated): agent and step accuracy",
    )
    who.add_argument(
        "--mode",
        choices=["all_at_once", "step_by_step", "binary_search"],
        default="all_at_once",
        help="the attribution method (the paper's three)",
    )
    who.add_argument(
        "--no-ground-truth",
        action="store_true",
        help="do not show the judge the task's correct answer",
    )
    who.add_argument("--limit", type=whole_number, default=None, help="judge the first N logs")
    who.add_argument("--data", help="other Who&When logs: a folder of N.json files or a JSONL file")
    who.add_argument("--out", help="write the run's results.jsonl and accuracy.json here")
    who.add_argument(
        "--dry-run", action="store_true", help="count the judge requests and tokens; ask nothing"
    )
    who.add_argument(
        "--max-llm-concurrency", type=whole_number, default=8, help="judge requests in flight"
    )
    add_judge_options(who)
    bench.set_defaults(handler=_judge_bench)


def _bars(items: Sequence[str]) -> float | dict[str, float]:
    from turneval.clusters import DEFAULT_FAIL_UNDER

    named: dict[str, float] = {}
    default = DEFAULT_FAIL_UNDER
    for item in items:
        name, value = named_number("--fail-under", item, "[NAME=]VALUE, e.g. tool_call_f1=0.8")
        if name is None:
            default = value
        else:
            named[name] = value
    if not named:
        return default
    return {"*": default, **named}


def _clusters(args: argparse.Namespace) -> int:
    from turneval.clusters import cluster_failures, name_clusters, read_run

    result = read_run(args.run, runs_store(args))
    bars = _bars(args.fail_under)
    if isinstance(bars, dict):
        unknown = sorted(set(bars) - {"*"} - set(result.metric_names))
        if unknown:
            raise UsageError(
                f"--fail-under names {unknown}, not among the run's metrics {result.metric_names}"
            )
        default = bars.pop("*")
        bars = {name: bars.get(name, default) for name in result.metric_names}
    clusters = cluster_failures(
        result.rows,
        fail_under=bars,
        metrics=args.metric,
        method=args.method,
        min_similarity=args.min_similarity,
    )
    if args.name and clusters:
        llm = judge_from_flags(args)
        if llm is None:
            raise UsageError(
                "--name needs a judge: --judge-model MODEL (with $OPENAI_API_KEY or "
                "--judge-base-url), or $OPENAI_API_KEY alone"
            )
        name_clusters(clusters, llm)
    failed = sum(cluster.size for cluster in clusters)
    print(
        f"{len(clusters)} cluster(s) of {failed} failed row(s), of {len(result.rows)} rows"
        if clusters
        else f"no failed row among {len(result.rows)} rows"
    )
    for number, cluster in enumerate(clusters, start=1):
        title = f"{cluster.name} ({cluster.label})" if cluster.name else cluster.label
        print(f"\n{number}. {title or '(no words)'}: {cluster.size} row(s), {cluster.share:.0%}")
        if cluster.agents:
            blamed = ", ".join(f"{agent} {count}" for agent, count in cluster.agents.items())
            print(f"   blamed: {blamed}")
        print(f"   metrics: {', '.join(f'{m} {c}' for m, c in cluster.metrics.items())}")
        for row in cluster.examples(args.examples):
            where = f"row {row.index}" + (f" ({row.id})" if row.id else "")
            reason = " ".join(row.reason.split())
            shown = reason if len(reason) <= 300 else reason[:297] + "..."
            print(f"   - {where}: {shown}")
    if args.json:
        out = Path(args.json)
        with naming(out):
            out.write_text(
                json.dumps(
                    [cluster.to_dict(args.examples) for cluster in clusters],
                    ensure_ascii=False,
                    indent=2,
                ),
                encoding="utf-8",
            )
        print(f"\nwrote {out}")
    return 0


def _judge_bench(args: argparse.Namespace) -> int:
    from turneval.estimate import estimate
    from turneval.judge_bench import load_cases, score, to_sample
    from turneval.metrics import FailureAttribution
    from turneval.runner import evaluate

    cases = load_cases(args.data)
    if args.limit is not None:
        cases = cases[: args.limit]
    truth = not args.no_ground_truth
    samples = [to_sample(case, ground_truth=truth) for case in cases]
    metric = FailureAttribution(mode=args.mode)
    if args.dry_run:
        print(estimate(samples, [metric], llm=dry_run_judge(args)))
        return 0
    llm = judge_from_flags(args)
    if llm is None:
        raise UsageError(
            "judge-bench needs a judge: --judge-model MODEL (with $OPENAI_API_KEY or "
            "--judge-base-url URL), or $OPENAI_API_KEY alone"
        )
    result = evaluate(
        samples,
        [metric],
        llm=llm,
        cache=args.cache,
        max_llm_concurrency=args.max_llm_concurrency,
    )
    accuracy = score(result, cases, mode=args.mode, ground_truth=truth)
    print(accuracy)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        result.to_jsonl(out / "results.jsonl")
        figures = {
            "cases": accuracy.cases,
            "mode": args.mode,
            "ground_truth": truth,
            "agent_accuracy": accuracy.agent_accuracy,
            "agent_interval": list(accuracy.agent_interval),
            "step_accuracy": accuracy.step_accuracy,
            "step_interval": list(accuracy.step_interval),
            "not_attributed": accuracy.failed,
        }
        (out / "accuracy.json").write_text(json.dumps(figures, indent=2), encoding="utf-8")
        print(f"wrote {out / 'results.jsonl'} and {out / 'accuracy.json'}")
    return 0

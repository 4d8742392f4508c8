"""``turneval clusters`` (why rows failed, grouped) and ``turneval judge-bench`` (a judge vs people)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from turneval._files import naming
from turneval.cli._arguments import UsageError, named_number, whole_number
from turneval.cli._judge_flags import dry_run_judge, judge_from_flags
from turneval.cli._options import add_run_argument, runs_store
from turneval.cli._vocabulary import (
    add_deprecated,
    add_flag,
    add_judge_group,
    deprecated,
    judge_limits,
    paced_client,
    with_repeats,
)


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
    add_flag(clusters, "--output", detail="the clusters as JSON (they are printed either way)")
    add_deprecated(clusters, "--json", "--output FILE", metavar="FILE")
    clusters.add_argument(
        "--name-clusters",
        action="store_true",
        help="ask the judge (--judge-model, or $OPENAI_API_KEY) to name each cluster",
    )
    add_deprecated(clusters, "--name", "--name-clusters", action="store_true", default=False)
    add_judge_group(clusters, scoring=False)
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
    add_flag(who, "--limit", detail="the first N logs are judged")
    add_flag(who, "--data", detail="other Who&When logs: a folder of N.json files or a JSONL file")
    add_flag(who, "--out", detail="the run's results.jsonl and accuracy.json")
    add_flag(who, "--dry-run")
    add_judge_group(who)
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
    if args.name_deprecated:
        deprecated("clusters", "--name", "--name-clusters (--name is a run's name)")
    output = args.output
    if args.json_deprecated is not None:
        if output is not None:
            raise UsageError("clusters takes its file once: give --output FILE, not --json")
        deprecated("clusters", f"--json {args.json_deprecated}", f"--output {args.json_deprecated}")
        output = args.json_deprecated
    if (args.name_clusters or args.name_deprecated) and clusters:
        llm = judge_from_flags(args)
        if llm is None:
            raise UsageError(
                "--name-clusters needs a judge: --judge-model MODEL (with $OPENAI_API_KEY or "
                "--judge-base-url), or $OPENAI_API_KEY alone"
            )
        llm, cap = paced_client(llm, args, "clusters")
        name_clusters(clusters, llm, max_concurrency=cap)
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
    if output is not None:
        out = Path(output)
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
    metrics = with_repeats([FailureAttribution(mode=args.mode)], args.repeats)
    if args.dry_run:
        print(estimate(samples, metrics, llm=dry_run_judge(args)))
        return 0
    llm = judge_from_flags(args)
    if llm is None:
        raise UsageError(
            "judge-bench needs a judge: --judge-model MODEL (with $OPENAI_API_KEY or "
            "--judge-base-url URL), or $OPENAI_API_KEY alone"
        )
    result = evaluate(
        samples,
        metrics,
        llm=llm,
        cache=args.cache,
        max_llm_concurrency=args.llm_concurrency,
        rate_limit=judge_limits(args),
        timeout=args.timeout,
        show_progress=False if args.quiet else None,
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

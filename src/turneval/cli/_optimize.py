"""``turneval optimize``: make a judge agree with human labels, measured on rows it never saw.

Also the ``--judge-config FILE`` option of the commands that run judges, and how it is applied.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turneval.cli._arguments import UsageError, parse_metric
from turneval.cli._judge_flags import dry_run_judge, judge_from_flags
from turneval.cli._options import add_store_option, run_store
from turneval.cli._vocabulary import (
    add_deprecated,
    add_flag,
    add_judge_group,
    file_flag,
    paced_client,
)

if TYPE_CHECKING:
    from turneval.metrics import Evaluator


def add_judge_config_option(parser: argparse.ArgumentParser) -> None:
    """``--judge-config FILE``: a judge configuration the judged metrics load."""
    add_flag(parser, "--judge-config")


def with_judge_config(metrics: list[Evaluator | str], path: str | None) -> list[Evaluator | str]:
    """The metrics, the judged one the configuration names (or every judged one) loading it.

    Raises:
        UsageError: the file is not a judge configuration, or no metric of the run takes it.
    """
    if path is None:
        return metrics
    from turneval.errors import ConfigError
    from turneval.judge import JudgeConfig
    from turneval.metrics import JudgedMetric
    from turneval.runner import resolve_metrics

    try:
        config = JudgeConfig.load(path)
    except ConfigError as exc:
        raise UsageError(f"--judge-config: {exc}") from None
    resolved = resolve_metrics(metrics)
    chosen = [
        m for m in resolved if isinstance(m, JudgedMetric) and config.metric in (None, m.name)
    ]
    if not chosen:
        judged = [m.name for m in resolved if isinstance(m, JudgedMetric)]
        raise UsageError(
            f"--judge-config {path} is for {config.metric or 'any judged metric'}; this run's "
            f"judged metrics: {', '.join(judged) or 'none'}"
        )
    return [m.model_copy(update={"judge_config": config}) if m in chosen else m for m in resolved]


def add_optimize_command(commands: Any) -> None:
    """``turneval optimize --metric NAME (--run RUN | --data FILE --labels FILE)``."""
    run = commands.add_parser(
        "optimize",
        help="search a judge's instructions and examples to agree with human labels (GEPA), "
        "measured on held-out rows",
    )
    run.add_argument("--metric", required=True, help="the judged metric (NAME[:key=value,...])")
    run.add_argument("--run", help="a stored run: its samples and its labels from the store")
    add_store_option(run)
    add_flag(run, "--data", detail="the samples (JSONL) the labels file's indexes name")
    run.add_argument("--labels", help='labels JSONL: {"index"|"id", "metric", "label", "item"?}')
    add_flag(run, "--output", detail="the judge configuration (default: judge-config.json)")
    add_deprecated(run, "--out", "--output FILE", metavar="FILE")
    add_flag(run, "--report", detail="the report as JSON (it is printed either way)")
    run.add_argument("--start", help="a judge configuration to start from")
    run.add_argument("--budget", type=int, default=None, help="most model calls (hard limit)")
    run.add_argument(
        "--budget-cost", type=float, default=None, help="most money (needs --price-input)"
    )
    run.add_argument("--validation", type=float, default=0.3, help="share of rows held out")
    add_flag(run, "--seed", default=0, detail="of the split and the search (default 0)")
    run.add_argument("--rounds", type=int, default=20, help="search rounds at most")
    run.add_argument("--examples", type=int, default=4, help="worked examples at most (0: none)")
    run.add_argument("--engine", choices=["live", "batch"], default="live")
    run.add_argument("--reflection-model", help="the model proposing instructions (default: judge)")
    add_flag(run, "--dry-run")
    add_judge_group(run, scoring=False)
    run.set_defaults(handler=_optimize)


def _labeled(args: argparse.Namespace, name: str) -> tuple[list[Any], str | None]:
    """The labeled rows (and the stored run's id, when they come from the store)."""
    from turneval.calibration._records import read_label_records, rows_from_records

    if args.run is not None:
        if args.data or args.labels:
            raise UsageError("optimize --run reads samples and labels from the store: no --data")
        store = run_store(args, default=True)
        try:
            run = store.run(args.run)
            records = store.label_records(run.id, name)
            ids = {str(r["id"]): int(r["index"]) for r in store.records(run.id) if r.get("id")}
            wanted = {int(r["index"]) for r in records if "index" in r} | {
                ids[str(r["id"])] for r in records if str(r.get("id")) in ids
            }
            samples = _samples(store.samples(run.id, wanted))
            return rows_from_records(records, samples, name, ids=ids), run.id
        finally:
            store.close()
    if not (args.data and args.labels):
        raise UsageError("optimize needs --run RUN (with --store), or --data FILE --labels FILE")
    from turneval.dataset import EvaluationDataset

    dataset = EvaluationDataset.from_jsonl(args.data)
    samples = dict(enumerate(dataset.samples))
    ids = {
        str(s.metadata["id"]): i
        for i, s in samples.items()
        if s.metadata and s.metadata.get("id") is not None
    }
    return rows_from_records(read_label_records(args.labels), samples, name, ids=ids), None


def _samples(stored: dict[int, Any]) -> dict[int, Any]:
    from turneval._sample_lines import parse_line

    return {i: None if s is None else parse_line(json.dumps(s), i + 1) for i, s in stored.items()}


def _optimize(args: argparse.Namespace) -> int:
    from turneval.calibration import Budget, optimize, plan_optimization
    from turneval.results import Prices
    from turneval.runner import resolve_metrics

    (metric,) = resolve_metrics([parse_metric(args.metric)])
    if args.start:
        (metric,) = with_judge_config([metric], args.start)  # type: ignore[assignment]
    prices = None
    if args.price_input is not None:
        prices = Prices(args.price_input, args.price_output or 0.0)
    if args.budget_cost is not None and prices is None:
        raise UsageError("--budget-cost needs the prices: --price-input (and --price-output)")
    budget = Budget(args.budget, args.budget_cost, prices)
    output = file_flag(args, "optimize") or "judge-config.json"
    labels, run_id = _labeled(args, metric.name)
    if args.dry_run:
        dry = plan_optimization(
            metric,
            labels,
            validation=args.validation,
            seed=args.seed,
            rounds=args.rounds,
            budget=budget,
            prices=prices,
        )
        dry_run_judge(args)
        print(dry)
        return 0
    llm = judge_from_flags(args)
    if llm is None:
        raise UsageError("optimize needs a judge: --judge-model (and --judge-base-url), or a key")
    llm, cap = paced_client(llm, args, "optimize")
    reflection = None
    if args.reflection_model:
        args_copy = argparse.Namespace(**{**vars(args), "judge_model": args.reflection_model})
        reflection, _ = paced_client(judge_from_flags(args_copy), args, "optimize")
    report = optimize(
        metric,
        labels,
        llm=llm,
        reflection_llm=reflection,
        budget=budget,
        validation=args.validation,
        seed=args.seed,
        rounds=args.rounds,
        examples=args.examples,
        cache=args.cache,
        engine=args.engine,
        prices=prices,
        max_concurrency=cap,
    )
    print(report)
    out = report.config.save(output)
    print(f"wrote {out} (use it with --judge-config {out})")
    if args.report:
        Path(args.report).write_text(json.dumps(report.to_dict(), indent=2), encoding="utf-8")
    if run_id is not None:
        store = run_store(args, default=True)
        try:
            config = {**report.config.model_dump(mode="json"), "digest": report.config.digest}
            kept = store.add_judge_config(config, run_id=run_id, report=report.to_dict())
        finally:
            store.close()
        print(f"kept as judge configuration {kept} beside run {run_id[:12]} (turneval view)")
    return 0

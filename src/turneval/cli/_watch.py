"""``turneval watch`` (score production traces as they arrive) and ``turneval regrade``."""

from __future__ import annotations

import argparse
import logging
import math
import signal
import sys
import threading
from typing import Any

from turneval.cli._arguments import UsageError, duration, metric_list, whole_number
from turneval.cli._judge_flags import judge_from_flags, require_judge
from turneval.cli._optimize import add_judge_config_option, with_judge_config
from turneval.cli._options import (
    add_concurrency_options,
    add_run_argument,
    open_cli_run,
    run_store,
)
from turneval.cli._vocabulary import (
    add_flag,
    add_judge_group,
    deprecated,
    judge_limits,
    sample_limit,
    with_repeats,
)


def add_watch_commands(commands: Any) -> None:
    """``turneval watch``: score production traces as they arrive (see docs/how-to/watch.md)."""
    watch = commands.add_parser(
        "watch", help="receive OTLP traces and score each conversation once it is complete"
    )
    watch.add_argument(
        "--metric",
        action="append",
        required=True,
        metavar="NAME[:key=value,...]",
        help="a metric to compute (repeatable); see 'turneval metrics'",
    )
    watch.add_argument(
        "--listen",
        default="127.0.0.1:4318",
        metavar="HOST:PORT",
        help="where to receive OTLP/HTTP (default: 127.0.0.1:4318; port 0 picks a free one)",
    )
    add_flag(
        watch,
        "--out",
        default="turneval-watch",
        detail="the state: spool, ledger, and results.jsonl without a store (default: "
        "turneval-watch)",
    )
    add_flag(
        watch,
        "--store",
        detail="the rows are written there (default: $TURNEVAL_STORE, else OUT/results.jsonl)",
    )
    add_flag(
        watch,
        "--group-by",
        choices=("trace", "session"),
        default="trace",
        detail="traces sharing gen_ai.conversation.id or session.id",
    )
    watch.add_argument(
        "--idle",
        type=duration,
        default=30.0,
        metavar="DURATION",
        help="a conversation is complete after this long without a new span (default: 30s)",
    )
    add_flag(watch, "--sample", default=1.0, detail="of their id (default: 1)")
    watch.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="score only conversations with this resource or span attribute (repeatable)",
    )
    watch.add_argument(
        "--budget",
        metavar="AMOUNT/PERIOD",
        help="judge budget, input and output tokens: e.g. 20USD/day (needs --price-input and "
        "--price-output) or 100000tokens/hour",
    )
    watch.add_argument(
        "--max-queue",
        type=int,
        default=100_000,
        help="spans held at most; past it exports get 503 with Retry-After (default: 100000)",
    )
    watch.add_argument(
        "--max-connections",
        type=whole_number,
        default=128,
        metavar="N",
        help="connections served at once, a thread each; as many more wait, then 503 "
        "(default: 128)",
    )
    watch.add_argument(
        "--read-timeout",
        type=duration,
        default=10.0,
        metavar="DURATION",
        help="close a connection silent this long, idle or mid-request (default: 10s)",
    )
    watch.add_argument(
        "--export-to",
        metavar="OTLP_ENDPOINT",
        help="send the scores as gen_ai.evaluation.result events to this OTLP/HTTP endpoint "
        "(e.g. http://collector:4318; /v1/logs is appended)",
    )
    watch.add_argument(  # issue 49: alerts
        "--alert",
        action="append",
        default=[],
        metavar="EXPR",
        help="alert when a metric over a window crosses a number: '[STAT(]METRIC[)] OP NUMBER "
        "over DURATION [min N rows]', e.g. 'goal_accuracy < 0.8 over 1h' or "
        "'p95(turn_latency) > 3 over 15m' (STAT: mean, p50, p90, p95, p99, max, min, sum; "
        "repeatable); fires as a log line, an OTLP event with --export-to, and --alert-webhook",
    )
    watch.add_argument(
        "--alert-webhook",
        action="append",
        default=[],
        metavar="URL",
        help="POST each alert (firing, resolved) as JSON to this URL (repeatable)",
    )
    watch.add_argument(
        "--write-alert-rules",
        metavar="FILE",
        help="write the --alert rules as a Prometheus rule file over this receiver's /metrics "
        "(turneval_watch_score), then exit",
    )
    add_concurrency_options(watch)
    add_judge_group(watch)
    add_judge_config_option(watch)
    watch.set_defaults(handler=_watch)
    regrading = commands.add_parser(
        "regrade", help="re-score a stored run's judged metrics with another judge, and compare"
    )
    add_run_argument(regrading, help="the stored run (its id or a unique prefix, with --store)")
    add_flag(
        regrading,
        "--limit",
        detail="rows re-scored, those whose index hashes lowest (default: all)",
    )
    add_flag(
        regrading,
        "--sample",
        detail="of the row index, as watch's (a whole number above 1 is the row count of "
        "earlier versions: deprecated, use --limit)",
    )
    regrading.add_argument(
        "--metric", action="append", default=None, help="only this judged metric (repeatable)"
    )
    add_judge_group(regrading)
    add_judge_config_option(regrading)
    regrading.set_defaults(handler=_regrade)


def _regrade(args: argparse.Namespace) -> int:
    """``turneval regrade RUN --judge-model NEW``: prints the agreement, the flips, the cost."""
    config = None
    if args.judge_config:
        from turneval.judge import JudgeConfig

        config = JudgeConfig.load(args.judge_config)
        args.judge_model = args.judge_model or config.model  # the model it was made with
    if not args.judge_model:
        raise UsageError("regrade needs --judge-model: the new judge")
    limit = sample_limit(args, "regrade")  # checked (a deprecated form warned) before reading
    from turneval.pipeline import RunOptions
    from turneval.results import Prices
    from turneval.watch import regrade

    prices = (
        None if args.price_input is None else Prices(args.price_input, args.price_output or 0.0)
    )
    run = open_cli_run(args, args.run)
    if run.store is None:
        run.close()
        raise UsageError(
            f"regrade: {args.run} is a run on disk; regrade scores a stored run's samples "
            "again (give its id, with --store)"
        )
    with run:
        rows = run.stored.rows if run.stored is not None else None
        if limit is None and args.sample is not None and args.sample < 1 and rows is not None:
            limit = max(1, math.ceil(args.sample * rows))  # a share of the stored rows
        report = regrade(
            run.store,
            run,
            judge_from_flags(args),
            sample=limit,
            metrics=args.metric,
            prices=prices,
            options=RunOptions(
                cache=args.cache,
                max_llm_concurrency=args.llm_concurrency,
                timeout=args.timeout,
                rate_limit=judge_limits(args),
            ),
            judge_config=config,
            repeats=args.repeats,
        )
    print(report)
    if report.new_run_id:
        print(f"the new judge's rows: run {report.new_run_id[:12]} in the store")
    return 0


def _watch(args: argparse.Namespace) -> int:
    """``turneval watch``: serve until SIGTERM or Ctrl-C."""
    from turneval.pipeline import RunOptions
    from turneval.runner import resolve_metrics

    sample = _watch_share(args.sample)  # a deprecated form warns before anything starts
    metrics = resolve_metrics(
        with_repeats(with_judge_config(metric_list(args.metric), args.judge_config), args.repeats)
    )
    alerts = _alerts(args, [metric.name for metric in metrics])
    if args.write_alert_rules:
        return 0
    llm = judge_from_flags(args, needed=any(m.uses_llm for m in metrics))
    require_judge(list(metrics), llm)
    host, _, port = args.listen.rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"--listen {args.listen!r} is not HOST:PORT (e.g. 127.0.0.1:4318)")
    from turneval.results import Prices
    from turneval.watch import Budget, Watcher, WatchServer, parse_filter

    budget = None if args.budget is None else Budget.parse(args.budget)
    if budget is not None and budget.unit == "USD" and args.price_input is not None:
        if args.price_output is None:  # output tokens are most of a judge's cost
            raise UsageError("a USD budget needs --price-output too: output tokens cost")
    prices = (
        None if args.price_input is None else Prices(args.price_input, args.price_output or 0.0)
    )
    watcher = Watcher(
        metrics,
        args.out,
        store=run_store(args),
        options=RunOptions(
            llm=llm,
            cache=args.cache,
            max_concurrency=args.concurrency,
            max_llm_concurrency=args.llm_concurrency,
            timeout=args.timeout,
            rate_limit=judge_limits(args),
            show_progress=False,
        ),
        group_by=args.group_by,
        idle=args.idle,
        max_queue=args.max_queue,
        sample=sample,
        filters=[parse_filter(item) for item in args.filter],
        budget=budget,
        prices=prices,
        export_to=args.export_to,
        alerts=alerts,
    )
    server = WatchServer(
        (host, int(port)),
        watcher,
        tick=min(1.0, args.idle / 4),
        max_connections=args.max_connections,
        read_timeout=args.read_timeout,
    )
    bound = f"{host}:{server.server_address[1]}"
    print(f"turneval watch: receiving OTLP/HTTP on http://{bound}/v1/traces", flush=True)

    def on_signal(signum: int, frame: Any) -> None:
        threading.Thread(target=server.stop, daemon=True).start()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        server.serve()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        server.server_close()
        watcher.close()
        if watcher.store is not None:
            watcher.store.close()
    print(
        f"turneval watch: stopped; {int(watcher.counts['conversations_scored'])} conversations "
        f"scored, skipped {dict(watcher.skipped)}; the spans still waiting are in the spool, "
        "scored after a restart",
        file=sys.stderr,
    )
    return 0


def _watch_share(sample: float) -> float:
    """``watch --sample``: a share in (0, 1]; above 1, earlier versions' "all" (deprecated)."""
    if sample <= 1:
        return sample
    deprecated("watch", f"--sample {sample:g} (above 1, read as 1)", "--sample 1 (a share)")
    return 1.0


def _alerts(args: argparse.Namespace, names: list[str]) -> Any:
    """The ``--alert`` rules with their sinks; ``--write-alert-rules`` writes them out."""
    from pathlib import Path

    from turneval.watch import Alerts, LogSink, WebhookSink, alert_rules

    if not args.alert:
        if args.write_alert_rules or args.alert_webhook:
            raise UsageError("--write-alert-rules and --alert-webhook need --alert rules")
        return None
    shown = logging.getLogger("turneval.alerts")
    if not shown.handlers:  # each alert, firing or resolved, as a line on stderr
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s turneval watch: %(message)s"))
        shown.addHandler(handler)
        shown.setLevel(logging.INFO)
        shown.propagate = False
    sinks: list[Any] = [LogSink(), *(WebhookSink(url) for url in args.alert_webhook)]
    alerts = Alerts(args.alert, sinks)
    alerts.check_metrics(names)
    if args.write_alert_rules:
        target = Path(args.write_alert_rules)
        target.write_text(alert_rules(alerts.rules), encoding="utf-8")
        print(
            f"wrote {len(alerts.rules)} alert rule{'s' if len(alerts.rules) != 1 else ''} to "
            f"{target}: list it under rule_files in Prometheus, which scrapes this receiver's "
            "/metrics"
        )
    return alerts

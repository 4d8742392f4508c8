"""``turneval compare`` and ``turneval plan``: two runs side by side, their gates and power."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from turneval.cli._arguments import UsageError, fraction, named_number, run_name
from turneval.cli._options import RUN_HELP, add_power_options, add_run_argument, runs_store


def add_compare_command(commands: Any) -> None:
    """``turneval compare BASELINE CANDIDATE``."""
    diff = commands.add_parser("compare", help="compare two runs of one dataset")
    add_run_argument(diff, "baseline", metavar="baseline", help=f"the baseline: {RUN_HELP}")
    add_run_argument(diff, "candidate", metavar="candidate", help=f"the candidate: {RUN_HELP}")
    diff.add_argument(
        "--pass-threshold",
        action="append",
        default=[],
        metavar="[NAME=]VALUE",
        help="a row passes at or above VALUE (default 0.5), for the regressions and "
        "improvements columns; NAME=VALUE for one metric, e.g. a 1-5 judge, or at or below "
        "it for a metric where lower is better, e.g. turn_latency=2 (repeatable)",
    )
    diff.add_argument(
        "--fail-on-regression",
        action="append",
        default=[],
        metavar="[NAME=]MAX_DROP",
        help="exit 1 when the metric's mean (every shared metric's, without NAME) worsens by "
        "more than MAX_DROP and the change is significant at --alpha, Holm-corrected over the "
        "gated metrics (repeatable); worse is lower for a score, higher for a metric where "
        "lower is better (turn latency, cost, tokens: MAX_DROP is the rise allowed)",
    )
    diff.add_argument(
        "--allow-config-change",
        action="store_true",
        help="compare even when a metric of one name is configured differently in the two runs "
        "(their run.json files; by default that is refused, naming the metric and its fields)",
    )
    diff.add_argument(
        "--allow-dataset-change",
        action="store_true",
        help="compare even when the runs read different versions of the dataset (their "
        "run.json digests; by default that is refused, listing the rows added, removed and "
        "changed: from --store when it keeps both versions, see 'turneval datasets')",
    )
    add_power_options(diff, mde_default=0.05)
    diff.add_argument(
        "--min-power",
        type=fraction,
        default=None,
        metavar="P",
        help=f"exit {UNDERPOWERED} when a gated metric's power to find a drop of --mde is below P "
        "(e.g. 0.8), "
        "instead of passing an under-powered comparison",
    )
    diff.set_defaults(handler=_compare)


def add_plan_command(commands: Any) -> None:
    """``turneval plan RUN``."""
    planning = commands.add_parser(
        "plan", help="rows (or scenarios x trials) needed to find a drop, and a run's power"
    )
    add_run_argument(planning)
    planning.add_argument("--metric", help="the metric to plan (default: every metric)")
    planning.add_argument(
        "--baseline",
        metavar="RUN",
        help="an earlier run of the same samples (a RUN as the first): plan from the paired "
        "rows' real spread",
    )
    add_power_options(planning, mde_default=None)
    planning.set_defaults(handler=_plan)


def _compare(args: argparse.Namespace) -> int:
    from turneval.compare import compare_files, regression_gates

    default, named = _pass_thresholds(args.pass_threshold)
    url = runs_store(args)
    store = None
    if url is not None:  # opened once: the runs and the datasets' versions are read there
        from turneval.store import RunStore

        store = RunStore(url)
    try:
        comparison = compare_files(
            args.baseline,
            args.candidate,
            pass_threshold=default,
            pass_thresholds=named,
            allow_config_change=args.allow_config_change,
            allow_dataset_change=args.allow_dataset_change,
            store=store,
        )
    finally:
        if store is not None:
            store.close()
    drops = _regression_gates(args.fail_on_regression, comparison)
    print(comparison)
    gates = regression_gates(comparison, drops, alpha=args.alpha)
    if drops:
        print(gates)
    underpowered = _power_lines(args, comparison, list(drops))
    for message in gates.messages():
        print(f"FAIL: {message}", file=sys.stderr)
    if gates.failed:
        return 1
    if underpowered:
        print(f"FAIL: {underpowered}", file=sys.stderr)
        return UNDERPOWERED
    return 0


UNDERPOWERED = 4
"""Exit code of ``compare --min-power`` when a gated metric's power falls short."""

SHOWN_ROWS = 10
"""Regressed rows a failed ``--fail-on-regression`` gate names (as :mod:`turneval.compare`)."""


def _power_lines(args: argparse.Namespace, comparison: Any, gated: list[str]) -> str:
    """Print the gated metrics' test, CI, p-value and power; what ``--min-power`` refuses."""
    from importlib.util import find_spec

    from turneval.stats import gate_report

    if find_spec("statsmodels") is None:
        if args.min_power is not None:
            raise UsageError("--min-power needs statsmodels: pip install 'turneval[stats]'")
        print("power: not computed (pip install 'turneval[stats]' to see each gate's power)")
        return ""
    names = [name for name in gated or comparison.metrics if comparison.metrics[name].pairs]
    if not names:
        if args.min_power is None:
            return ""
        return (
            f"--min-power {args.min_power:g}: no paired rows (a summary.json alone has only "
            "means), so the comparison's power is unknown"
        )
    report = gate_report(comparison, names, mde=args.mde, alpha=args.alpha, power=args.power)
    print(report)
    if args.min_power is None:
        return ""
    weak = report.underpowered(args.min_power)
    if not weak:
        return ""
    figures = ", ".join(
        f"{name} {'n/a' if report.metrics[name].power is None else f'{report.metrics[name].power:.3f}'}"
        for name in weak
    )
    return (
        f"under-powered comparison: power to find a drop of {args.mde:g} below "
        f"--min-power {args.min_power:g}: {figures}; see 'turneval plan' for the rows needed"
    )


def _plan(args: argparse.Namespace) -> int:
    from turneval.stats import plan, read_run

    store = runs_store(args)
    run = read_run(args.run, store)
    print(
        plan(
            run,
            mde=args.mde,
            metric=None if args.metric is None else run_name(args.metric, run.metric_names),
            alpha=args.alpha,
            power=args.power,
            baseline=None if args.baseline is None else read_run(args.baseline, store),
        )
    )
    return 0


def _pass_thresholds(items: Sequence[str]) -> tuple[float, dict[str, float]]:
    """``[NAME=]VALUE`` items: the threshold of every metric, and those of named metrics."""
    default = 0.5
    named: dict[str, float] = {}
    for item in items:
        form = "[NAME=]VALUE, e.g. 0.5 or clarity=3"
        name, number = named_number("--pass-threshold", item, form)
        if name is None:
            default = number
        else:
            named[run_name(name)] = number
    return default, named


def _regression_gates(items: Sequence[str], comparison: Any) -> dict[str, float]:
    """``[NAME=]MAX_DROP`` items: a gate per named metric, or for every shared metric."""
    gates: dict[str, float] = {}
    for item in items:
        form = "[NAME=]MAX_DROP, e.g. 0.02"
        name, drop = named_number("--fail-on-regression", item, form)
        if drop < 0:
            raise UsageError(f"--fail-on-regression {item!r}: MAX_DROP must be >= 0")
        if name is not None:
            name = run_name(name, comparison.metrics)
        if name is None:
            gates.update(dict.fromkeys(comparison.metrics, drop))
        elif name not in comparison.metrics:
            raise UsageError(f"--fail-on-regression names {name!r}, which is not in both runs")
        else:
            gates[name] = drop
    return gates

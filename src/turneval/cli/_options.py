"""Option groups several commands share: the judge, its prices, concurrency, the run store, power."""

from __future__ import annotations

import argparse
import os
from typing import Any

from turneval.cli._vocabulary import add_flag
from turneval.options import option_default


def add_judge_options(parser: argparse.ArgumentParser) -> None:
    """``--judge-model``, ``--judge-base-url``, ``--judge-api-key-env`` and ``--cache``.

    A command that calls a judge takes the whole group instead
    (:func:`~turneval.cli._vocabulary.add_judge_group`: the judge, its limits and prices).
    """
    for name in ("--judge-model", "--judge-base-url", "--judge-api-key-env", "--cache"):
        add_flag(parser, name)


def add_price_options(parser: argparse.ArgumentParser) -> None:
    """``--price-input`` and ``--price-output``: the judge's prices per 1M tokens."""
    add_flag(parser, "--price-input")
    add_flag(parser, "--price-output")


def add_gate_options(parser: argparse.ArgumentParser, *, inherited: str | None = None) -> None:
    """``--fail-under``, ``--max-failed`` and ``--traceback``: a finished run's gates.

    With ``inherited`` (what the defaults are instead: ``batch collect`` takes those of the
    ``evaluate`` that submitted the run), ``--fail-under`` and ``--max-failed`` default to None.
    """
    parser.add_argument(
        "--fail-under",
        action="append",
        default=None if inherited else [],
        metavar="NAME=VALUE",
        help="exit 1 when the metric's mean is below VALUE (repeatable"
        + (f"; default: {inherited})" if inherited else ")"),
    )
    add_flag(
        parser,
        "--max-failed",
        default=None if inherited else "0",
        detail="default " + (f"{inherited}, else 0" if inherited else "0"),
    )
    add_flag(
        parser,
        "--traceback",
        detail="its traceback; results.jsonl keeps it as <name>_traceback either way",
    )


def add_concurrency_options(parser: argparse.ArgumentParser) -> None:
    """``--max-concurrency`` (the run option's name and default; ``--concurrency`` still works).

    ``--max-llm-concurrency`` is the judge group's
    (:func:`~turneval.cli._vocabulary.add_judge_group`).
    """
    add_flag(
        parser,
        "--max-concurrency",
        default=option_default("max_concurrency"),
        detail="default %(default)s",
    )


def add_store_option(parser: argparse.ArgumentParser) -> None:
    """``--store URL`` (default: ``TURNEVAL_STORE``, else ``.turneval/runs.db``)."""
    add_flag(parser, "--store", detail="default: $TURNEVAL_STORE, else .turneval/runs.db")


RUN_HELP = (
    "a run: its folder (--out), results.jsonl or summary.json, or a stored run's id (or a "
    "unique prefix) in the run store (--store)"
)
"""What RUN means in every command that reads one (compare, plan, calibrate, clusters, ...)."""


def add_run_argument(
    parser: argparse.ArgumentParser,
    name: str = "run",
    *,
    help: str = RUN_HELP,
    metavar: str | None = None,
    **kwargs: Any,
) -> None:
    """A positional RUN argument (see :data:`RUN_HELP`) and ``--store``."""
    parser.add_argument(name, metavar=metavar or name.upper(), help=help, **kwargs)
    if not any("--store" in action.option_strings for action in parser._actions):
        add_store_option(parser)


def runs_store(args: argparse.Namespace) -> str | None:
    """Where a RUN that is no path is looked up (None: nowhere, such a RUN is no run).

    ``--store``, else ``TURNEVAL_STORE``, else the default store when it exists.
    """
    from turneval.store import DEFAULT_STORE

    named = store_url(args)
    if named is not None:
        return named
    return DEFAULT_STORE if os.path.isfile(DEFAULT_STORE) else None


def open_cli_run(args: argparse.Namespace, ref: str) -> Any:
    """The :class:`~turneval.runs.OpenedRun` a RUN argument names.

    The store is opened only for a stored run (and closed with the run).
    """
    from turneval.runs import open_run

    return open_run(ref, runs_store(args))


def add_power_options(parser: argparse.ArgumentParser, *, mde_default: float | None) -> None:
    """``--mde``, ``--alpha`` and ``--power`` of ``plan`` and ``compare``."""
    add_flag(
        parser,
        "--mde",
        default=mde_default,
        required=mde_default is None,
        detail="the rise, for a metric where lower is better: seconds for turn_latency; on the "
        "metric's scale" + ("" if mde_default is None else f" (default {mde_default:g})"),
    )
    add_flag(parser, "--alpha", default=0.05, detail="default 0.05")
    add_flag(parser, "--power", default=0.8, detail="default 0.8")


def store_url(args: argparse.Namespace) -> str | None:
    """The store ``--store`` or ``TURNEVAL_STORE`` names (None: no store)."""
    return str(args.store or os.environ.get("TURNEVAL_STORE") or "") or None


def run_store(args: argparse.Namespace, *, default: bool = False) -> Any:
    """The store ``--store`` (or ``TURNEVAL_STORE``) names, opened; None when neither does.

    With ``default``, the default store (``.turneval/runs.db``) when neither names one.
    """
    url = args.store or os.environ.get("TURNEVAL_STORE") or None
    if url is None and not default:
        return None
    from turneval.store import RunStore

    return RunStore(url)

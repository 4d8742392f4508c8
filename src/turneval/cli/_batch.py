"""The batch engine on the command line: ``evaluate --engine batch`` and ``turneval batch``.

``evaluate --engine batch`` keeps in the run's folder the flags ``turneval batch`` needs to
come back to it (never a key): the judge's, the gates (``--max-failed``, ``--fail-under``), the
prices and the run store. ``turneval batch collect`` applies the gates as ``evaluate`` does
(:func:`~turneval.cli._summary.gates_exit`): those given to it, else those remembered.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from turneval.cli._arguments import fail_under_bars, max_failed
from turneval.cli._judge_flags import judge_from_flags
from turneval.cli._options import add_gate_options, add_judge_options, add_price_options
from turneval.cli._summary import gates_exit, print_summary
from turneval.cli._vocabulary import add_flag
from turneval.errors import ConfigError

if TYPE_CHECKING:
    from turneval.batch import BatchRun, Fallback
    from turneval.results import Prices

__all__ = ["add_batch_command", "add_batch_options", "evaluate_batch"]

_JUDGE_FLAGS = ("judge_model", "judge_base_url", "judge_api_key_env")

_RUN_FLAGS = ("max_failed", "fail_under", "price_input", "price_output", "name")
"""The other flags of ``evaluate`` that ``turneval batch collect`` takes by default."""

_DEFAULT_STORE = ".turneval/runs.db"


def add_batch_options(parser: argparse.ArgumentParser) -> None:
    """The ``evaluate`` options of ``--engine batch``."""
    add_flag(
        parser,
        "--batch-fallback",
        choices=("fail", "sync"),
        default="fail",
        detail="--engine batch; default fail",
    )
    parser.add_argument(
        "--batch-attempts",
        type=int,
        default=3,
        metavar="N",
        help="--engine batch: times an errored or expired request is sent at most (default 3)",
    )
    add_flag(parser, "--poll-interval", default=30.0, detail="--engine batch; default 30")


def add_batch_command(commands: Any) -> None:
    """``turneval batch status|collect|cancel DIR``."""
    parser = commands.add_parser(
        "batch", help="follow, collect or cancel a run of 'evaluate --engine batch'"
    )
    parser.add_argument("action", choices=("status", "collect", "cancel"))
    parser.add_argument("dir", help="the --out folder of 'evaluate --engine batch'")
    add_flag(
        parser,
        "--batch-fallback",
        choices=("fail", "sync"),
        default=None,
        detail="collect: overrides the fallback chosen at submission",
    )
    add_gate_options(parser, inherited="those 'evaluate --engine batch' was given")
    add_flag(
        parser,
        "--store",
        nargs="?",
        const=_DEFAULT_STORE,
        detail="collect: keep the run there too (alone: .turneval/runs.db; default: the store "
        "'evaluate --engine batch' was given, else $TURNEVAL_STORE)",
    )
    add_price_options(parser)
    add_flag(parser, "--quiet")
    add_judge_options(parser)
    parser.set_defaults(handler=batch_command)


def _judge_of(args: argparse.Namespace, stored: dict[str, Any] | None) -> Any:
    """The judge from the flags given now, else from those stored at submission."""
    if args.judge_model is None and stored:
        for name in _JUDGE_FLAGS:
            setattr(args, name, stored.get(name))
    return judge_from_flags(args) if args.judge_model or stored else None


def _keepable(url: str | None) -> str | None:
    """A store URL the folder may keep: none with a password in it (None then)."""
    if url is None:
        return None
    try:
        password = urlsplit(url).password
    except ValueError:  # not a URL: a path
        return url
    return url if password is None else None


def _prices(args: argparse.Namespace) -> Prices | None:
    if args.price_input is None:
        return None
    from turneval.results import Prices

    return Prices(args.price_input, args.price_output or 0.0)


def _cost_lines(run: BatchRun, prices: Prices | None) -> None:
    if prices is None:
        return
    batch, live = run.cost(prices)
    print(f"judge cost through batches: {batch:.4f} (live it would have been {live:.4f})")


def _finish(
    run: BatchRun,
    args: argparse.Namespace,
    fallback: Fallback | None,
    store: str | None,
    name: str | None = None,
) -> Any:
    prices = _prices(args)
    result = run.collect_files(
        fallback=fallback,
        show_progress=False if args.quiet else None,
        store=store,
        prices=prices,
        name=name,
    )
    status = run.status()
    print_summary(result, run.out)
    print(f"batches: {status}")
    print(status.explain())
    _cost_lines(run, prices)
    return result


def evaluate_batch(args: argparse.Namespace, metrics: list[Any], out: Path, llm: Any) -> Any | None:
    """``evaluate --engine batch``: submit (or resume), wait with a progress bar, collect.

    Returns the run's result, or None when interrupted (Ctrl-C): the batches keep running at
    the provider and ``turneval batch status|collect OUT`` comes back to them. Rerun on
    another input file than the run's, it is refused (exit 2), naming both files' digests.
    """
    from turneval.cli._engines import engine_of
    from turneval.cli._options import store_url
    from turneval.engines import Batch
    from turneval.runner import resolve_metrics

    engine = engine_of(args)  # --batch-attempts, --batch-fallback, --poll-interval
    assert isinstance(engine, Batch)
    if llm is None:
        raise ConfigError("--engine batch needs a judge (--judge-model, or $OPENAI_API_KEY)")
    store = store_url(args)
    reopened = Batch.holds_run(out)  # the same command again resumes the run (planned)
    run = engine.start(Path(args.data), resolve_metrics(metrics), out, llm, args.cache)
    if not reopened:
        run.remember(
            {name: getattr(args, name) for name in (*_JUDGE_FLAGS, *_RUN_FLAGS)}
            | {"store": _keepable(store)}
        )
    try:
        run.wait(progress=not args.quiet, poll_interval=engine.poll_interval)
    except KeyboardInterrupt:
        again = " --store URL" if store is not None and _keepable(store) is None else ""
        print(
            f"\nturneval: the batches keep running at the provider ({run.status()}); come "
            f"back with 'turneval batch status {out}', then 'turneval batch collect {out}{again}' "
            f"(or cancel them: 'turneval batch cancel {out}')",
            file=sys.stderr,
        )
        return None
    return _finish(run, args, None, store, args.name)


def batch_command(args: argparse.Namespace) -> int:
    """``turneval batch status|collect|cancel DIR``.

    ``collect`` exits as ``evaluate`` does on the same result: 3 past ``--max-failed``, 1
    for a ``--fail-under`` mean not met (the flags given, else those of the ``evaluate`` that
    submitted the run).
    """
    from turneval.batch import BatchRun

    stored = BatchRun.remembered(args.dir) or {}
    for name in ("price_input", "price_output"):
        if getattr(args, name) is None:
            setattr(args, name, stored.get(name))
    run = BatchRun.open(args.dir, llm=_judge_of(args, stored))
    if args.action == "cancel":
        run.cancel()
        print(f"cancelled: {run.poll()}")
        return 0
    if args.action == "status":
        status = run.poll()
        print(status)
        for batch_id, state in status.batches:
            print(f"  {batch_id}: {state}")
        print(status.explain())
        _cost_lines(run, _prices(args))
        return 0
    text = args.max_failed if args.max_failed is not None else stored.get("max_failed") or "0"
    allowed = max_failed(text)  # bad gates fail before any work
    items = args.fail_under if args.fail_under is not None else stored.get("fail_under") or []
    bars = fail_under_bars(items, run.metrics)
    status = run.poll()
    if not status.done:
        raise ConfigError(
            f"the batches of {run.out} are still running ({status}): check again later with "
            f"'turneval batch status {run.out}'"
        )
    store = args.store or stored.get("store") or os.environ.get("TURNEVAL_STORE") or None
    result = _finish(run, args, args.batch_fallback, store, stored.get("name"))
    return gates_exit(result, bars, allowed, text, tracebacks=args.traceback)

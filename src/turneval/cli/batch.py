"""The batch engine on the command line: ``evaluate --engine batch`` and ``turneval batch``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turneval.cli.judge_flags import judge_from_flags
from turneval.cli.options import add_judge_options, add_price_options
from turneval.cli.summary import print_summary
from turneval.errors import ConfigError

if TYPE_CHECKING:
    from turneval.batch import BatchRun, Fallback

__all__ = ["add_batch_command", "add_batch_options", "evaluate_batch"]

_JUDGE_FLAGS = ("judge_model", "judge_base_url", "judge_api_key_env")


def add_batch_options(parser: argparse.ArgumentParser) -> None:
    """The ``evaluate`` options of ``--engine batch``."""
    parser.add_argument(
        "--batch-fallback",
        choices=("fail", "sync"),
        default="fail",
        help="--engine batch: a request every batch attempt failed fails its cell with the "
        "provider's error (fail, default) or is asked live (sync)",
    )
    parser.add_argument(
        "--batch-attempts",
        type=int,
        default=3,
        metavar="N",
        help="--engine batch: times an errored or expired request is sent at most (default 3)",
    )
    parser.add_argument(
        "--poll-interval",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="--engine batch: seconds between polls of the provider (default 30)",
    )


def add_batch_command(commands: Any) -> None:
    """``turneval batch status|collect|cancel DIR``."""
    parser = commands.add_parser(
        "batch", help="follow, collect or cancel a run of 'evaluate --engine batch'"
    )
    parser.add_argument("action", choices=("status", "collect", "cancel"))
    parser.add_argument("dir", help="the --out folder of 'evaluate --engine batch'")
    parser.add_argument(
        "--batch-fallback",
        choices=("fail", "sync"),
        default=None,
        help="collect: override the fallback chosen at submission",
    )
    add_price_options(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    add_judge_options(parser)
    parser.set_defaults(handler=batch_command)


def _judge_of(args: argparse.Namespace, stored: dict[str, Any] | None) -> Any:
    """The judge from the flags given now, else from those stored at submission."""
    if args.judge_model is None and stored:
        for name in _JUDGE_FLAGS:
            setattr(args, name, stored.get(name))
    return judge_from_flags(args) if args.judge_model or stored else None


def _open(args: argparse.Namespace) -> BatchRun:
    from turneval.batch import BatchRun

    stored = BatchRun.remembered(args.dir)
    return BatchRun.open(args.dir, llm=_judge_of(args, stored))


def _cost_lines(run: BatchRun, args: argparse.Namespace) -> None:
    if args.price_input is None:
        return
    from turneval.results import Prices

    batch, live = run.cost(Prices(args.price_input, args.price_output or 0.0))
    print(f"judge cost through batches: {batch:.4f} (live it would have been {live:.4f})")


def _finish(run: BatchRun, args: argparse.Namespace, fallback: Fallback | None) -> Any:
    status = run.status()
    result = run.collect_files(fallback=fallback, show_progress=False if args.quiet else None)
    print_summary(result, run.out)
    print(f"batches: {status}")
    _cost_lines(run, args)
    return result


def evaluate_batch(args: argparse.Namespace, metrics: list[Any], out: Path, llm: Any) -> Any | None:
    """``evaluate --engine batch``: submit (or resume), wait with a progress bar, collect.

    Returns the run's result, or None when interrupted (Ctrl-C): the batches keep running at
    the provider and ``turneval batch status|collect OUT`` comes back to them.
    """
    from turneval.batch import BatchRun, submit
    from turneval.runner import resolve_metrics

    if args.batch_attempts < 1:
        raise ConfigError(f"--batch-attempts must be at least 1, got {args.batch_attempts}")
    if llm is None:
        raise ConfigError("--engine batch needs a judge (--judge-model, or $OPENAI_API_KEY)")
    if (out / "state.sqlite").exists():  # the same command again resumes the run
        run = BatchRun.open(out, llm=llm, metrics=resolve_metrics(metrics))
    else:
        from turneval.dataset import EvaluationDataset

        run = submit(
            EvaluationDataset.from_jsonl(args.data),
            metrics,
            llm=llm,
            out=out,
            cache=args.cache,
            max_attempts=args.batch_attempts,
            fallback=args.batch_fallback,
        )
        run.remember({name: getattr(args, name) for name in _JUDGE_FLAGS})
    try:
        run.wait(progress=not args.quiet, poll_interval=args.poll_interval)
    except KeyboardInterrupt:
        print(
            f"\nturneval: the batches keep running at the provider ({run.status()}); come "
            f"back with 'turneval batch status {out}', then 'turneval batch collect {out}' "
            f"(or cancel them: 'turneval batch cancel {out}')",
            file=sys.stderr,
        )
        return None
    return _finish(run, args, None)


def batch_command(args: argparse.Namespace) -> int:
    """``turneval batch status|collect|cancel DIR``."""
    run = _open(args)
    if args.action == "cancel":
        run.cancel()
        print(f"cancelled: {run.poll()}")
        return 0
    status = run.poll()
    if args.action == "status":
        print(status)
        for batch_id, state in status.batches:
            print(f"  {batch_id}: {state}")
        _cost_lines(run, args)
        return 0
    if not status.done:
        raise ConfigError(
            f"the batches of {run.out} are still running ({status}): check again later with "
            f"'turneval batch status {run.out}'"
        )
    _finish(run, args, args.batch_fallback)
    return 0

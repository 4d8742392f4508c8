"""Where ``evaluate`` scores: here (with SIGTERM and Ctrl-C handled) or on a Ray cluster."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turneval.cli.arguments import UsageError
from turneval.cli.judge_flags import judge_from_flags
from turneval.cli.options import store_url

if TYPE_CHECKING:
    from turneval.metrics import Evaluator


def rate_limit_of(args: argparse.Namespace) -> Any:
    """The RateLimit of ``--rpm``, ``--tpm`` and ``--max-in-flight`` (None without them)."""
    if args.rpm is None and args.tpm is None and args.max_in_flight is None:
        return None
    from turneval.ratelimit import RateLimit

    cap = args.llm_concurrency if args.max_in_flight is None else args.max_in_flight
    return RateLimit(args.rpm, args.tpm, cap)


def run_aggregates(names: Sequence[str]) -> list[Any]:
    """The ``--aggregate`` names as objects; an unknown name fails, listing the known ones."""
    import turneval.metrics  # noqa: F401  (defines the built-in aggregates)
    from turneval.aggregate import builtin_aggregates

    known = builtin_aggregates()
    unknown = [name for name in names if name not in known]
    if unknown:
        raise UsageError(
            f"unknown aggregate {unknown[0]!r}; known aggregates: {', '.join(known) or 'none'}"
        )
    return [known[name]() for name in dict.fromkeys(names)]


def run_here(
    args: argparse.Namespace, metrics: list[Evaluator | str], out: Path, llm: Any, rate_limit: Any
) -> Any:
    """``evaluate`` in this process (and its workers); SIGTERM or Ctrl-C stop it between chunks.

    Returns the run and the signal that stopped it (None when it ran to the end).
    """
    from turneval.stream import evaluate_jsonl

    with _stop_on_signals() as (stop, received):
        result = evaluate_jsonl(
            args.data,
            metrics,
            out,
            llm=llm,
            cache=args.cache,
            max_concurrency=args.concurrency,
            max_llm_concurrency=args.llm_concurrency,
            workers=args.workers,
            details=args.details,
            timeout=args.timeout,
            report_rows=args.report_rows,
            show_progress=False if args.quiet else None,
            input_format=args.format,
            group_by=args.group_by,
            strict_traces=args.strict_traces,
            lenient_json=args.lenient_json,
            chunk_bytes=int(args.chunk_mb * 2**20),
            resume=args.resume,
            overwrite=args.overwrite,
            rate_limit=rate_limit,
            aggregates=run_aggregates(args.aggregate),
            stop=stop,
            store=store_url(args),
        )
        return result, (received[0] if received else None)


@contextmanager
def _stop_on_signals() -> Iterator[tuple[threading.Event | None, list[int]]]:
    """An event set by SIGTERM or a first Ctrl-C (SIGINT) while the block runs, and the signals.

    A second Ctrl-C interrupts at once. Outside the main thread the event is None.
    """
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield None, received
        return
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        if signum == signal.SIGINT and received:
            raise KeyboardInterrupt
        received.append(signum)
        stop.set()
        if signum == signal.SIGINT:
            print(
                "\nturneval: stopping after the chunks in flight (Ctrl-C again to stop now)",
                file=sys.stderr,
            )

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop, received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def run_on_ray(
    args: argparse.Namespace,
    metrics: list[Evaluator | str],
    out: Path,
    judged: bool,
    rate_limit: Any,
) -> Any:
    """``evaluate --engine ray``: the same run, its chunks scored by Ray Data actors.

    The judge is built in each worker from the same flags (and the same environment).
    """
    from functools import partial

    from turneval.distributed import evaluate_on_ray

    return evaluate_on_ray(
        args.data,
        metrics,
        output=out,
        address=args.ray_address,
        llm_factory=partial(judge_from_flags, args, True) if judged else None,
        cache=args.cache,
        rate_limit=rate_limit,
        concurrency=args.workers or 2,
        max_concurrency=args.concurrency,
        max_llm_concurrency=args.llm_concurrency,
        details=args.details,
        timeout=args.timeout,
        report_rows=args.report_rows,
        show_progress=not args.quiet,
        input_format=args.format,
        group_by=args.group_by,
        strict_traces=args.strict_traces,
        lenient_json=args.lenient_json,
        resume=args.resume,
        overwrite=args.overwrite,
        aggregates=run_aggregates(args.aggregate),
        store=store_url(args),
    ).stream

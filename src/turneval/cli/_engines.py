"""Where ``evaluate`` scores: ``--engine local|ray|batch``, one engine object each, from flags.

Each engine's settings come from the flags :data:`ENGINE_FLAGS` names, the source's options
from ``--format``, ``--group-by``, ``--strict-traces`` and ``--lenient-json``
(:func:`source_of`); the run options are the same flags whatever the engine. A local run
handles SIGTERM and Ctrl-C (stopping between chunks); ``--engine batch`` has its own flow
(:mod:`turneval.cli._batch`).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turneval.cli._arguments import UsageError
from turneval.cli._judge_flags import judge_from_flags
from turneval.cli._options import store_url
from turneval.errors import ConfigError

if TYPE_CHECKING:
    from turneval.engines import Engine
    from turneval.metrics import Evaluator
    from turneval.stream import Source

ENGINE_FLAGS: dict[str, dict[str, str]] = {
    "local": {"workers": "workers", "chunk_bytes": "chunk_mb"},
    "ray": {"workers": "workers", "chunk_bytes": "chunk_mb", "address": "ray_address"},
    "batch": {
        "poll_interval": "poll_interval",
        "max_attempts": "batch_attempts",
        "fallback": "batch_fallback",
    },
}
"""Each engine's settings on the command line: the setting, and the flag (its ``dest``)."""


def engine_of(args: argparse.Namespace, *, llm_factory: Any = None) -> Engine:
    """The engine ``--engine`` names, its settings from the flags (a flag not given: its default).

    ``--chunk-mb`` is in megabytes (``chunk_bytes`` in bytes). ``llm_factory`` builds the judge
    where the engine scores (Ray).

    Raises:
        UsageError: a flag's value the engine refuses, naming the flag.
    """
    from turneval.engines import ENGINES

    flags = ENGINE_FLAGS[args.engine]
    settings: dict[str, Any] = {}
    for setting, dest in flags.items():
        value = getattr(args, dest)
        if value is not None:
            settings[setting] = int(value * 2**20) if dest == "chunk_mb" else value
    if llm_factory is not None:
        settings["llm_factory"] = llm_factory
    try:
        return ENGINES[args.engine](**settings)
    except ConfigError as exc:
        message = str(exc)
        for setting, dest in flags.items():
            message = message.replace(f" {setting}: ", f" --{dest.replace('_', '-')}: ")
        raise UsageError(message) from None


def source_of(args: argparse.Namespace, engine: Engine | None = None) -> Source:
    """The input, read as ``--format``, ``--group-by``, ``--strict-traces``, ``--lenient-json`` say.

    With ``engine``, as that engine reads it (``--engine ray`` also reads Parquet).
    """
    from turneval.stream._sources import as_source

    options = {
        "input_format": args.format,
        "group_by": args.group_by,
        "strict_traces": args.strict_traces,
        "lenient_json": args.lenient_json,
    }
    return (
        as_source(args.data, **options) if engine is None else engine.source(args.data, **options)
    )


def rate_limit_of(args: argparse.Namespace) -> Any:
    """The RateLimit of ``--rpm``, ``--tpm`` and ``--max-in-flight`` (None without them)."""
    from turneval.cli._vocabulary import judge_limits

    return judge_limits(args)


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


def run_streamed(
    args: argparse.Namespace, metrics: list[Evaluator | str], out: Path, llm: Any, rate_limit: Any
) -> Any:
    """``evaluate`` with ``--engine local`` or ``ray``: one ``evaluate_jsonl`` call.

    A local run stops between chunks on SIGTERM or a first Ctrl-C; on Ray the judge is built in
    each worker from the same flags (and the same environment). Returns the run and the signal
    that stopped it (None when it ran to the end).
    """
    from functools import partial

    from turneval.stream import evaluate_jsonl

    local = args.engine == "local"
    factory = None if local or llm is None else partial(judge_from_flags, args, True)
    engine = engine_of(args, llm_factory=factory)
    source = source_of(args, engine)
    with _stop_on_signals() if local else _no_stop() as (stop, received):
        result = evaluate_jsonl(
            source,
            metrics,
            out,
            engine=engine,
            llm=llm if local else None,
            cache=args.cache,
            max_concurrency=args.concurrency,
            max_llm_concurrency=args.llm_concurrency,
            details=args.details,
            timeout=args.timeout,
            report_rows=args.report_rows,
            show_progress=False if args.quiet else (None if local else True),
            resume=args.resume,
            overwrite=args.overwrite,
            rate_limit=rate_limit,
            aggregates=run_aggregates(args.aggregate),
            stop=stop,
            store=store_url(args),
            name=args.name,
        )
        return result, (received[0] if received else None)


@contextmanager
def _no_stop() -> Iterator[tuple[threading.Event | None, list[int]]]:
    """No stop event: Ctrl-C interrupts at once (a run on Ray)."""
    yield None, []


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

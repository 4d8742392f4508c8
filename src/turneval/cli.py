"""The ``turneval`` command: evaluate files and traces, compare and gate runs, keep and browse them.

Exit codes: 0 success; 1 a ``--fail-under`` (or ``compare --fail-on-regression``) bar was not
met; 2 bad usage or input (every error is one line, never a traceback); 3 more failed rows than
``--max-failed`` allows (default 0); 4 ``compare --min-power``: the comparison passed its gates
but had too little power to see a drop of ``--mde``; 5 (:data:`EXIT_DISK_FULL`) an output file
could not be written for lack of space; 143 (:data:`EXIT_TERMINATED`) ``evaluate`` was stopped
by SIGTERM after writing the chunks in flight; 130 (:data:`EXIT_INTERRUPTED`) Ctrl-C: ``evaluate``
stops as on SIGTERM (a second Ctrl-C stops at once). When rows failed beyond the allowance, 3
wins over 1; a bar not met (1) wins over 4.
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import signal
import sys
import textwrap
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from pydantic import ValidationError

from turneval._files import naming
from turneval._hidden import shown
from turneval._version import VERSION
from turneval.errors import ConfigError, TurnevalError
from turneval.judge.cache import CacheWarning
from turneval.options import option_default

if TYPE_CHECKING:
    from turneval.metrics import Evaluator

__all__ = [
    "EXIT_DISK_FULL",
    "EXIT_TERMINATED",
    "build_parser",
    "main",
    "max_failed",
    "parse_metric",
]


class UsageError(Exception):
    """Bad command-line usage (exit code 2)."""


def _split_options(options: str) -> list[str]:
    """Split ``key=value,key=value`` at the commas outside JSON brackets and strings."""
    items, depth, quoted, start = [], 0, False, 0
    for index, char in enumerate(options):
        if char == '"' and (index == 0 or options[index - 1] != "\\"):
            quoted = not quoted
        elif not quoted and char in "[{":
            depth += 1
        elif not quoted and char in "]}":
            depth -= 1
        elif char == "," and not quoted and depth == 0:
            items.append(options[start:index])
            start = index + 1
    items.append(options[start:])
    return items


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors on one line (``turneval: error: ...``) and exit code 2."""

    def error(self, message: str) -> NoReturn:
        """Print the error on one line, with a pointer to ``--help``, and exit 2."""
        self.exit(2, f"turneval: error: {message} (see '{self.prog} --help')\n")


def _known_name(name: str, known: dict[str, type[Evaluator]]) -> str:
    """``name``, or the one built-in metric ragas calls so (``bleu_score`` is ``bleu``).

    An unknown name fails, suggesting the closest known name (or ragas name) when there is one.
    """
    if name in known:
        return name
    ragas = [key for key, cls in known.items() if name in cls.ragas_names]
    if len(ragas) == 1:
        return ragas[0]
    if ragas:
        raise UsageError(f"{name!r} is ragas' name for {' and '.join(ragas)}: name one of them")
    import difflib

    spellings = [*known, *{alias for cls in known.values() for alias in cls.ragas_names}]
    close = difflib.get_close_matches(name, spellings, n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise UsageError(f"unknown metric {name!r}; {hint}run 'turneval metrics' for the list")


def _run_name(name: str, names: Iterable[str] | None = None) -> str:
    """``name`` as turneval calls the metric (``bleu`` for ragas' ``bleu_score``).

    ``names`` are the run's metrics (None: every built-in). A name among them stays as it is;
    ragas' name of exactly one of them is mapped to it; anything else is returned as it is
    (the caller says what is wrong with it).
    """
    from turneval.metrics import builtin_metrics

    known = builtin_metrics()
    among = set(known if names is None else names)
    if name in among:
        return name
    meant = [key for key, cls in known.items() if name in cls.ragas_names and key in among]
    return meant[0] if len(meant) == 1 else name


def parse_metric(spec: str) -> Evaluator | str:
    """``NAME`` or ``NAME:key=value,key=value`` (values parsed as JSON when they can be)."""
    from turneval.metrics import builtin_metrics

    name, _, options = spec.partition(":")
    known = builtin_metrics()
    name = _known_name(name, known)
    if not options and known[name].buildable_by_name():
        return name
    config: dict[str, Any] = {}
    for item in _split_options(options) if options else []:
        key, equals, value = item.partition("=")
        if not equals:
            raise UsageError(f"metric option {item!r} in {spec!r} is not key=value")
        try:
            config[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            config[key.strip()] = value
    try:
        return known[name].model_validate(config)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        where = ".".join(map(str, error["loc"]))
        if error["type"] == "missing":
            raise UsageError(
                f"metric {name!r} needs its option {where!r}: --metric {name}:{where}=VALUE"
            ) from exc
        raise UsageError(f"metric {spec!r}: {where}: {error['msg']}") from exc


def _metric_list(specs: Sequence[str]) -> list[Evaluator | str]:
    return [parse_metric(spec) for spec in specs]


def _fail_under(items: Sequence[str], metrics: Sequence[Evaluator]) -> dict[str, float]:
    scales = {metric.name: metric.scale for metric in metrics}
    bars = {}
    for item in items:
        name, equals, value = item.partition("=")
        if not equals:
            raise UsageError(f"--fail-under {item!r} is not NAME=VALUE")
        name = _run_name(name, scales)
        if name not in scales:
            raise UsageError(
                f"--fail-under names {name!r}, which is not among the metrics {list(scales)}"
            )
        try:
            bar = float(value)
        except ValueError:
            raise UsageError(f"--fail-under {item!r}: {value!r} is not a number") from None
        low, high = scales[name]
        if not low <= bar <= high:
            raise UsageError(
                f"--fail-under {item}: {name} scores lie in [{low:g}, {high:g}]; "
                "a bar off that scale is always or never met"
            )
        bars[name] = bar
    return bars


def _with_votes(
    metrics: list[Evaluator | str], repeats: int | None, bars: dict[str, float]
) -> list[Evaluator | str]:
    """``--repeats`` on every judged metric, ``--fail-under`` bars as their pass thresholds."""
    from turneval.metrics.votes import with_vote_options
    from turneval.runner import resolve_metrics

    resolved = resolve_metrics(metrics)
    if repeats is None and not any(m.votes_per_row > 1 for m in resolved):
        return metrics  # nothing votes more than once: the metrics as given
    try:
        return list(with_vote_options(resolved, repeats=repeats, thresholds=bars))
    except ConfigError as exc:
        raise UsageError(f"--repeats {repeats}: {exc}") from exc


def max_failed(text: str) -> Callable[[int], float]:
    """``--max-failed``: a count ``N`` (``"3"``) or a fraction (``"0.05"``, ``"5%"``) of rows.

    Returns a function of the number of rows giving the number of failed rows allowed.
    """
    try:
        if text.endswith("%"):
            fraction = float(text[:-1]) / 100
        elif any(mark in text for mark in ".eE"):
            fraction = float(text)
        else:
            count = int(text)
            if count < 0:
                raise ValueError
            return lambda rows: count
    except ValueError:
        raise UsageError(
            f"--max-failed {text!r}: expected a count N >= 0, a fraction in [0, 1] or a "
            "percentage (e.g. 3, 0.05, 5%)"
        ) from None
    if not 0.0 <= fraction <= 1.0:
        raise UsageError(f"--max-failed {text!r}: a fraction must lie in [0, 1]")
    return lambda rows: fraction * rows


SHOWN_ERRORS = 5
"""Errors of failed rows printed when ``--max-failed`` is exceeded."""


def _check_failed(
    result: Any, allowed: Callable[[int], float], text: str, *, tracebacks: bool = False
) -> int:
    """Exit code 3 past ``--max-failed``, printing the first errors.

    With ``tracebacks`` (``--traceback``), each error's traceback follows it, indented.
    """
    failed = result.failed_rows
    if failed <= allowed(result.total_rows):
        return 0
    print(
        f"FAIL: {failed} of {result.total_rows} rows failed; --max-failed allows {text}",
        file=sys.stderr,
    )
    for error in result.first_errors[:SHOWN_ERRORS]:
        print(f"  {shown(error)}", file=sys.stderr)
        trace = getattr(error, "traceback", None) if tracebacks else None
        if trace:
            print(textwrap.indent(shown(trace), "    "), file=sys.stderr)
    if failed > SHOWN_ERRORS:
        print(
            f"  ... and {failed - SHOWN_ERRORS} more failed rows (see results.jsonl)",
            file=sys.stderr,
        )
    return 3


API_KEY_ENV = "OPENAI_API_KEY"
"""The variable read for the judge's API key unless ``--judge-api-key-env`` names another."""

DEFAULT_JUDGE_MODEL = "gpt-4o-mini"
"""The judge model used when only an API key is given (``$TURNEVAL_JUDGE_MODEL`` overrides)."""


def _judge(args: argparse.Namespace, needed: bool = True) -> Any:
    """The judge from ``--judge-model``/``--judge-base-url``, or from the API key alone.

    The same rules for ``evaluate`` and ``demo``: ``--judge-base-url`` needs ``--judge-model``;
    ``--judge-model`` without a server needs the key in ``--judge-api-key-env``
    (``$OPENAI_API_KEY``); with neither flag, a key alone picks ``$TURNEVAL_JUDGE_MODEL`` or
    ``gpt-4o-mini``. Returns None when no judge is configured or ``needed`` is False.
    """
    env = args.judge_api_key_env or API_KEY_ENV
    key = os.environ.get(env)
    if needed and args.judge_api_key_env and not key:  # named on purpose: say it is missing
        raise UsageError(f"--judge-api-key-env {env}: ${env} is not set or empty")
    if args.judge_base_url and not args.judge_model:
        raise UsageError(
            "--judge-base-url needs --judge-model: the model name the server serves "
            "(e.g. --judge-model llama3.1)"
        )
    if args.judge_model and not args.judge_base_url and not key:
        raise UsageError(
            f"--judge-model {args.judge_model} needs an API key in ${env} "
            "(set it, name another variable with --judge-api-key-env, or pass --judge-base-url "
            "for a local OpenAI-compatible server)"
        )
    model = args.judge_model or (
        key and os.environ.get("TURNEVAL_JUDGE_MODEL", DEFAULT_JUDGE_MODEL)
    )
    if not needed or not model:
        return None
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model=model, base_url=args.judge_base_url, api_key=key or "unused")


def _require_judge(metrics: list[Evaluator | str], llm: Any) -> None:
    """Fail before the run, naming the CLI flags, when a judged metric has no judge."""
    from turneval.runner import resolve_metrics

    judged = [  # grounding metrics need none: they fall back to their offline backend
        m.name for m in resolve_metrics(metrics) if m.needs_judge(llm) and m.judge_llm(llm) is None
    ]
    if judged:
        raise UsageError(
            f"{', '.join(judged)} {'needs' if len(judged) == 1 else 'need'} an LLM judge: "
            f"set $OPENAI_API_KEY (the model is "
            f"{DEFAULT_JUDGE_MODEL} unless --judge-model says otherwise), or pass "
            "--judge-model MODEL, or --judge-base-url URL --judge-model MODEL for an "
            "OpenAI-compatible server"
        )


def _print_summary(result: Any, out: Path | None) -> None:
    from turneval.aggregate import SummaryTable

    agent = result.agent_summaries  # latency, failure rate, tokens, steps (traces)
    print(SummaryTable([*agent.items(), *((n, result.summaries[n]) for n in result.metric_names)]))
    for name in result.metric_names:  # --repeats with a --fail-under bar
        extra = result.summaries[name].extra or {}
        if "unstable" in extra:
            count = int(extra["unstable"])
            print(
                f"{name}: {count} unstable row{'s' if count != 1 else ''} "
                f"({extra['unstable_share']:.1%}): votes on both sides of the pass threshold"
            )
    usage = result.usage
    if usage.calls or usage.cached_calls:
        print(
            f"judge: {usage.calls} requests, {usage.cached_calls} cached, "
            f"{usage.input_tokens:,} input + {usage.output_tokens:,} output tokens"
        )
    if result.bad_lines:
        print(
            f"{result.bad_lines} input line(s) could not be read; their errors are in results.jsonl"
        )
    skipped = getattr(result, "skipped_traces", None)
    if skipped:
        counts = ", ".join(f"{reason} {count}" for reason, count in sorted(skipped.items()))
        print(
            f"skipped {sum(skipped.values())} trace(s) that are not conversations ({counts}); "
            "--strict-traces makes them failed rows"
        )
    for figure, value in result.aggregates.items():
        print(f"{figure}: {value:.4f}")
    for name, error in result.aggregate_errors.items():
        print(shown(f"aggregate {name} failed: {error}"), file=sys.stderr)
    if out is not None:
        print(f"wrote {out / 'results.jsonl'}, {out / 'summary.json'}, {out / 'report.html'}")


def _dry_run(args: argparse.Namespace, metrics: list[Evaluator | str]) -> int:
    from turneval.dataset import EvaluationDataset
    from turneval.estimate import estimate
    from turneval.results import Prices
    from turneval.runner import resolve_metrics
    from turneval.stream import _is_otlp

    if args.format == "otlp" or (args.format == "auto" and _is_otlp(Path(args.data))):
        from turneval.traces import from_otlp_json

        dataset = from_otlp_json(
            args.data, strict_traces=args.strict_traces, lenient_json=args.lenient_json
        )
    else:
        dataset = EvaluationDataset.from_jsonl(args.data, lenient_json=args.lenient_json)
    result = estimate(dataset, resolve_metrics(metrics), llm=_dry_run_judge(args))
    print(result)
    if args.price_input is not None:
        prices = Prices(args.price_input, args.price_output or 0.0)
        cost = result.input_cost(prices)
        print(f"estimated prompt cost: {cost:.4f} (at {args.price_input} per 1M input tokens)")
        print(
            f"  live: {cost:.4f}   through a batch API (--engine batch): "
            f"{result.batch_input_cost(prices):.4f}"
        )
    return 0


def _dry_run_judge(args: argparse.Namespace) -> Any:
    """The judge a run with these flags would have (never called; a dry run needs no key).

    Metrics with an offline fallback (grounding) send judge requests only when there is a
    judge, so the estimate counts them only with one.
    """
    key = os.environ.get(args.judge_api_key_env or API_KEY_ENV)
    model = args.judge_model or (
        key and os.environ.get("TURNEVAL_JUDGE_MODEL", DEFAULT_JUDGE_MODEL)
    )
    if not model:
        return None
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model=model, base_url=args.judge_base_url, api_key="unused")


def _rate_limit(args: argparse.Namespace) -> Any:
    """The RateLimit of ``--rpm``, ``--tpm`` and ``--max-in-flight`` (None without them)."""
    if args.rpm is None and args.tpm is None and args.max_in_flight is None:
        return None
    from turneval.ratelimit import RateLimit

    cap = args.llm_concurrency if args.max_in_flight is None else args.max_in_flight
    return RateLimit(args.rpm, args.tpm, cap)


def _aggregates(names: Sequence[str]) -> list[Any]:
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


def _evaluate_here(
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
            aggregates=_aggregates(args.aggregate),
            stop=stop,
            store=_store_url(args),
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


def _store_url(args: argparse.Namespace) -> str | None:
    """The store ``--store`` or ``TURNEVAL_STORE`` names (None: no store)."""
    return str(args.store or os.environ.get("TURNEVAL_STORE") or "") or None


def _run_store(args: argparse.Namespace, *, default: bool = False) -> Any:
    """The store ``--store`` (or ``TURNEVAL_STORE``) names, opened; None when neither does.

    With ``default``, the default store (``.turneval/runs.db``) when neither names one.
    """
    url = args.store or os.environ.get("TURNEVAL_STORE") or None
    if url is None and not default:
        return None
    from turneval.store import RunStore

    return RunStore(url)


def _store_command(args: argparse.Namespace) -> int:
    store = _run_store(args, default=True)
    try:
        if args.store_command == "import":
            run_id = store.import_run(args.run_dir, name=args.name)
            run = store.run(run_id)
            print(f"imported {args.run_dir} as run {run.id} ({run.rows} rows) into {store.url}")
        elif args.store_command == "delete":
            run = store.run(args.run)
            store.delete_run(run.id)
            print(f"deleted run {run.id} ({run.name}, {run.rows} rows, its labels too)")
        elif args.store_command == "export":
            out = store.export_run(args.run, args.out)
            print(f"wrote {out / 'results.jsonl'} and {out / 'summary.json'}")
        else:
            for run in store.runs(limit=args.limit):
                created = run.created.strftime("%Y-%m-%d %H:%M")
                judge = f"  judge {run.judge_model}" if run.judge_model else ""
                print(
                    f"{run.id[:12]}  {created}  {run.status:<11} {run.rows:>9} rows  "
                    f"{run.name}  [{', '.join(run.metric_names)}]{judge}"
                )
    finally:
        store.close()
    return 0


def _stored_labels(store: Any, run: str, metric: str | None) -> list[Any]:
    """A stored run's labels, as calibrate reads them from a labels file."""
    from turneval.calibration import label_from_record

    labels = [
        label_from_record(record, f"stored label {number} of run {run}")
        for number, record in enumerate(store.label_records(run, metric), start=1)
    ]
    return [label for label in labels if label is not None]


def _labels_command(args: argparse.Namespace) -> int:
    store = _run_store(args, default=True)
    try:
        count = store.export_labels(args.run, args.out, metric=args.metric)
    finally:
        store.close()
    print(f"wrote {count} labels to {args.out}")
    return 0


def _evaluate_on_ray(
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
        llm_factory=partial(_judge, args, True) if judged else None,
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
        aggregates=_aggregates(args.aggregate),
        store=_store_url(args),
    ).stream


def _evaluate(args: argparse.Namespace) -> int:
    from turneval.runner import resolve_metrics

    metrics = _metric_list(args.metric)
    bars = _fail_under(args.fail_under, resolve_metrics(metrics))
    metrics = _with_votes(metrics, args.repeats, bars)
    allowed = max_failed(args.max_failed)
    rate_limit = _rate_limit(args)  # a bad quota fails before any work
    _aggregates(args.aggregate)  # so does an unknown aggregate name
    if args.dry_run:
        return _dry_run(args, metrics)
    out = Path(args.out)
    from turneval.runner import resolve_metrics

    llm = _judge(args, needed=any(m.uses_llm for m in resolve_metrics(metrics)))
    _require_judge(metrics, llm)
    received = None
    if args.engine == "ray":
        result = _evaluate_on_ray(args, metrics, out, llm is not None, rate_limit)
    elif args.engine == "batch":
        result = _evaluate_batch(args, metrics, out, llm)
        if result is None:  # Ctrl-C: the batches keep running
            return 130
        missed = _check_bars(bars, result.summaries)
        return _check_failed(result, allowed, args.max_failed, tracebacks=args.traceback) or missed
    else:
        result, received = _evaluate_here(args, metrics, out, llm, rate_limit)
    _print_summary(result, out)
    if getattr(result, "stopped", False):
        by = "Ctrl-C (SIGINT)" if received == signal.SIGINT else "SIGTERM"
        print(
            f"turneval: stopped by {by} after {result.total_rows} rows (the chunks in flight "
            f"were finished and written); continue with the same command and --resume",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED if received == signal.SIGINT else EXIT_TERMINATED
    if args.price_input is not None and (result.usage.calls or result.usage.cached_calls):
        from turneval.results import Prices

        prices = Prices(args.price_input, args.price_output or 0.0)
        print(f"judge cost: {prices.cost(result.usage):.4f}")
        for name, summary in result.summaries.items():
            if summary.usage is not None:
                print(f"  {name}: {prices.cost(summary.usage):.4f}")
    missed = _check_bars(bars, result.summaries)
    return _check_failed(result, allowed, args.max_failed, tracebacks=args.traceback) or missed


def _evaluate_batch(
    args: argparse.Namespace, metrics: list[Evaluator | str], out: Path, llm: Any
) -> Any:
    """``evaluate --engine batch`` (see :mod:`turneval.batch`)."""
    from turneval.batch._cli import evaluate_batch

    return evaluate_batch(args, metrics, out, llm)


def _add_batch_command(commands: Any) -> None:
    """``turneval batch status|collect|cancel DIR`` and ``evaluate``'s batch options."""
    from turneval.batch._cli import add_batch_command

    add_batch_command(commands, _add_judge_options)


def _check_bars(bars: dict[str, float], summaries: Any) -> int:
    missed = []
    for name, bar in bars.items():
        mean = summaries[name].mean
        if mean is None or mean < bar:
            missed.append(f"{name} mean {'n/a' if mean is None else f'{mean:.4f}'} < {bar}")
    for line in missed:
        print(f"FAIL: {shown(line)}", file=sys.stderr)
    return 1 if missed else 0


def _metrics(args: argparse.Namespace) -> int:
    from turneval.metrics import builtin_metrics

    entries = builtin_metrics()
    width = max(map(len, entries))
    for name in sorted(entries):
        cls = entries[name]
        doc = (cls.__doc__ or "").strip().splitlines()[0]
        judge = " [LLM judge]" if cls.uses_llm else ""
        print(f"{name:<{width}}  {doc}{judge}")
    return 0


def _demo(args: argparse.Namespace) -> int:
    from turneval.demo import run_demo

    return run_demo(Path(args.out), llm=_judge(args), cache=args.cache, store=args.store)


def _compare(args: argparse.Namespace) -> int:
    from turneval.compare import compare_files

    default, named = _pass_thresholds(args.pass_threshold)
    comparison = compare_files(
        args.baseline,
        args.candidate,
        pass_threshold=default,
        pass_thresholds=named,
        allow_config_change=args.allow_config_change,
    )
    gates = _regression_gates(args.fail_on_regression, comparison)
    print(comparison)
    underpowered = _power_lines(args, comparison, list(gates))
    failed = 0
    for name, max_drop in gates.items():
        m = comparison.metrics[name]
        # a gate that cannot be checked, or rows left out of the means, fail it too
        if m.difference is None:
            failed = 1
            print(f"FAIL: {name}: no row scored by both runs", file=sys.stderr)
        if m.newly_failed:
            failed = 1
            print(f"FAIL: {m.failed_note()}", file=sys.stderr)
        if m.difference is None or m.difference >= -max_drop:
            continue
        failed = 1
        rows = ", ".join(m.row_label(i) for i in m.worse[:SHOWN_ROWS])
        more = f" (+{len(m.worse) - SHOWN_ROWS} more)" if len(m.worse) > SHOWN_ROWS else ""
        listed = f"; regressed rows: {rows}{more}" if m.worse else ""
        print(
            f"FAIL: {name} mean fell {m.baseline_mean:.4f} -> {m.candidate_mean:.4f} "
            f"({m.difference:+.4f}, more than {max_drop:g}){listed}",
            file=sys.stderr,
        )
    if not failed and underpowered:
        print(f"FAIL: {underpowered}", file=sys.stderr)
        return UNDERPOWERED
    return failed


UNDERPOWERED = 4
"""Exit code of ``compare --min-power`` when a gated metric's power falls short."""


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
    from turneval.stats import _read_run, plan

    run = _read_run(args.run)
    print(
        plan(
            run,
            mde=args.mde,
            metric=None if args.metric is None else _run_name(args.metric, run.metric_names),
            alpha=args.alpha,
            power=args.power,
            baseline=None if args.baseline is None else _read_run(args.baseline),
        )
    )
    return 0


SHOWN_ROWS = 10
"""Regressed rows listed per metric when a ``--fail-on-regression`` gate is crossed."""


def _named_number(option: str, item: str, form: str) -> tuple[str | None, float]:
    """An ``option``'s ``[NAME=]NUMBER`` item: the name (None without one) and the number."""
    name, equals, value = item.rpartition("=")
    try:
        return (name if equals else None), float(value)
    except ValueError:
        raise UsageError(f"{option} {item!r}: expected {form}") from None


def _pass_thresholds(items: Sequence[str]) -> tuple[float, dict[str, float]]:
    """``[NAME=]VALUE`` items: the threshold of every metric, and those of named metrics."""
    default = 0.5
    named: dict[str, float] = {}
    for item in items:
        form = "[NAME=]VALUE, e.g. 0.5 or clarity=3"
        name, number = _named_number("--pass-threshold", item, form)
        if name is None:
            default = number
        else:
            named[_run_name(name)] = number
    return default, named


def _regression_gates(items: Sequence[str], comparison: Any) -> dict[str, float]:
    """``[NAME=]MAX_DROP`` items: a gate per named metric, or for every shared metric."""
    gates: dict[str, float] = {}
    for item in items:
        form = "[NAME=]MAX_DROP, e.g. 0.02"
        name, drop = _named_number("--fail-on-regression", item, form)
        if drop < 0:
            raise UsageError(f"--fail-on-regression {item!r}: MAX_DROP must be >= 0")
        if name is not None:
            name = _run_name(name, comparison.metrics)
        if name is None:
            gates.update(dict.fromkeys(comparison.metrics, drop))
        elif name not in comparison.metrics:
            raise UsageError(f"--fail-on-regression names {name!r}, which is not in both runs")
        else:
            gates[name] = drop
    return gates


def _calibrate(args: argparse.Namespace) -> int:
    from turneval.calibration import agreement, render_agreement_html
    from turneval.results import EvaluationResult

    if args.run is not None:  # the run and its labels from the store
        if args.results is not None or args.labels is not None:
            raise UsageError(
                "calibrate --run reads the run and its labels from the store: "
                "give no RESULTS or LABELS"
            )
        store = _run_store(args, default=True)
        try:
            result = store.result(args.run)
            metric = None if args.metric is None else _run_name(args.metric, result.metric_names)
            labels = _stored_labels(store, args.run, metric)
        finally:
            store.close()
        report = agreement(result, labels, metric)
        print(report)
        out = Path(args.html) if args.html else Path("calibration.html")
    else:
        if args.results is None or args.labels is None:
            raise UsageError("calibrate needs RESULTS and LABELS (or --run RUN with --store)")
        results = Path(args.results)
        if results.is_dir():  # a run's --out folder, as compare takes
            results = results / "results.jsonl"
        result = EvaluationResult.from_jsonl(results)
        metric = None if args.metric is None else _run_name(args.metric, result.metric_names)
        report = agreement(result, args.labels, metric)
        print(report)
        out = Path(args.html) if args.html else results.with_name("calibration.html")
    page = render_agreement_html(report, title=f"Can I trust {report.metric}?")
    with naming(out):
        out.write_text(page, encoding="utf-8")
    print(f"wrote {out}")
    return 0


def _add_batch_options(parser: argparse.ArgumentParser) -> None:
    from turneval.batch._cli import add_batch_options

    add_batch_options(parser)


def _add_judge_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--judge-model", help="judge model name (OpenAI-compatible chat API)")
    parser.add_argument(
        "--judge-base-url", help="base URL of an OpenAI-compatible server (vLLM, Ollama, ...)"
    )
    parser.add_argument(
        "--judge-api-key-env",
        default=None,
        help="variable holding the API key (default: OPENAI_API_KEY; an error if set and empty)",
    )
    parser.add_argument("--cache", help="SQLite judge cache: a re-run pays for nothing twice")


def _add_concurrency_options(parser: argparse.ArgumentParser) -> None:
    """``--max-concurrency`` and ``--max-llm-concurrency`` (the run options' names and defaults).

    ``--concurrency`` and ``--llm-concurrency``, their first names, still work.
    """
    parser.add_argument(
        "--max-concurrency",
        "--concurrency",
        dest="concurrency",
        type=_count,
        default=option_default("max_concurrency"),
        metavar="N",
        help="samples scored at once (default %(default)s)",
    )
    parser.add_argument(
        "--max-llm-concurrency",
        "--llm-concurrency",
        dest="llm_concurrency",
        type=_count,
        default=option_default("max_llm_concurrency"),
        metavar="N",
        help="judge requests in flight at once (default %(default)s)",
    )


def build_parser() -> argparse.ArgumentParser:
    """The ``turneval`` argument parser."""
    parser = _Parser(prog="turneval", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"turneval {VERSION}")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("evaluate", help="score a JSONL file of samples")
    run.add_argument("data", help="JSONL file, one sample per line")
    run.add_argument(
        "--metric",
        action="append",
        required=True,
        metavar="NAME[:key=value,...]",
        help="a metric to compute (repeatable); see 'turneval metrics'",
    )
    run.add_argument("--out", default="turneval-out", help="output folder (default: turneval-out)")
    run.add_argument(
        "--fail-under",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="exit 1 when the metric's mean is below VALUE (repeatable)",
    )
    run.add_argument(
        "--repeats",
        type=_count,
        default=None,
        metavar="N",
        help="ask every judged metric N times per row: the value is the mean of the votes "
        "(majority for yes/no and pairwise judges); with --fail-under, rows whose votes "
        "straddle the bar are counted as unstable (N times the judge requests)",
    )
    run.add_argument(
        "--max-failed",
        default="0",
        metavar="N|FRACTION",
        help="failed rows allowed before exit code 3: a count, a fraction or N%% (default 0)",
    )
    _add_concurrency_options(run)
    run.add_argument(
        "--traceback",
        action="store_true",
        help="with the errors printed past --max-failed, print where each metric raised (its "
        "traceback; results.jsonl keeps it as <name>_traceback either way)",
    )
    run.add_argument(
        "--rpm", type=float, default=None, help="judge provider quota: requests per minute"
    )
    run.add_argument(
        "--tpm", type=float, default=None, help="judge provider quota: tokens per minute"
    )
    run.add_argument(
        "--max-in-flight",
        type=_count,
        default=None,
        help="judge requests in flight at most, adapting to 429s (default: --llm-concurrency)",
    )
    run.add_argument(
        "--workers",
        type=_count,
        default=None,
        help="processes for rule-based metrics (with --engine ray: scoring actors, default 2)",
    )
    run.add_argument(
        "--engine",
        choices=("local", "ray", "batch"),
        default="local",
        help="score here (local), on a Ray cluster (ray; needs the ray extra), or ask the "
        "judge through the provider's batch API at about half price (batch; answers within "
        "24 h; needs --out for the run's folder)",
    )
    _add_batch_options(run)
    run.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDR",
        help="the Ray cluster to join (default: a running one, else a local one)",
    )
    run.add_argument(
        "--timeout",
        type=float,
        default=option_default("timeout"),
        help="seconds allowed per sample",
    )
    run.add_argument("--details", action="store_true", help="write each metric's details too")
    run.add_argument("--report-rows", type=int, default=2000, help="rows in the HTML report")
    run.add_argument("--quiet", action="store_true", help="no progress line")
    run.add_argument(
        "--format",
        choices=("auto", "jsonl", "otlp"),
        default="auto",
        help="input: samples (jsonl) or OTLP/JSON traces (otlp); auto-detected by default",
    )
    run.add_argument(
        "--group-by",
        choices=("trace", "session"),
        default="trace",
        help="OTLP/JSON traces: one sample per trace, or per session (traces sharing "
        "gen_ai.conversation.id or session.id; the file is grouped in memory)",
    )
    run.add_argument(
        "--strict-traces",
        action="store_true",
        help="OTLP/JSON traces: a trace with no model call (no LLM span) is a failed row "
        "instead of a skipped trace",
    )
    run.add_argument(
        "--lenient-json",
        action="store_true",
        help="accept input lines that are not strict JSON: duplicate keys (the last wins) and "
        "NaN, Infinity or 1e400 as numbers (by default each such line is an error row)",
    )
    run.add_argument(
        "--resume",
        action="store_true",
        help="continue OUT/results.jsonl of an interrupted run: finished lines are not scored "
        "again (refused if OUT/run.json shows other metrics, judge or input)",
    )
    run.add_argument(
        "--overwrite", action="store_true", help="replace an existing OUT/results.jsonl"
    )
    run.add_argument(
        "--store",
        nargs="?",
        const=".turneval/runs.db",
        metavar="URL",
        help="keep the run in a run store too: a SQLite file or postgresql://... (alone: "
        ".turneval/runs.db; default: $TURNEVAL_STORE when set)",
    )
    run.add_argument(
        "--chunk-mb",
        type=_positive,
        default=64.0,
        help="input megabytes scored at once at most (memory bound; default 64)",
    )
    run.add_argument(
        "--aggregate",
        action="append",
        default=[],
        metavar="NAME",
        help="run-level figures to add to summary.json (repeatable): databricks",
    )
    run.add_argument(
        "--dry-run",
        action="store_true",
        help="estimate judge calls and prompt tokens; call nothing",
    )
    run.add_argument(
        "--price-input", type=float, default=None, help="judge price per 1M input tokens"
    )
    run.add_argument(
        "--price-output", type=float, default=None, help="judge price per 1M output tokens"
    )
    _add_judge_options(run)
    run.set_defaults(handler=_evaluate)
    _add_batch_command(commands)

    listing = commands.add_parser("metrics", help="list metric names")
    listing.set_defaults(handler=_metrics)

    demo = commands.add_parser("demo", help="evaluate the bundled example datasets")
    demo.add_argument("--out", default="turneval-demo", help="output folder")
    _add_judge_options(demo)
    demo.add_argument(
        "--store",
        nargs="?",
        const=".turneval/runs.db",
        metavar="URL",
        help="keep the three runs in a run store too (alone: .turneval/runs.db)",
    )
    demo.set_defaults(handler=_demo)

    diff = commands.add_parser("compare", help="compare two runs of one dataset")
    diff.add_argument("baseline", help="run folder (--out), results.jsonl or summary.json")
    diff.add_argument("candidate", help="run folder (--out), results.jsonl or summary.json")
    diff.add_argument(
        "--pass-threshold",
        action="append",
        default=[],
        metavar="[NAME=]VALUE",
        help="a row passes at or above VALUE (default 0.5), for the regressions and "
        "improvements columns; NAME=VALUE for one metric, e.g. a 1-5 judge (repeatable)",
    )
    diff.add_argument(
        "--fail-on-regression",
        action="append",
        default=[],
        metavar="[NAME=]MAX_DROP",
        help="exit 1 when the metric's mean (every shared metric's, without NAME) falls by "
        "more than MAX_DROP (repeatable)",
    )
    diff.add_argument(
        "--allow-config-change",
        action="store_true",
        help="compare even when a metric of one name is configured differently in the two runs "
        "(their run.json files; by default that is refused, naming the metric and its fields)",
    )
    _add_power_options(diff, mde_default=0.05)
    diff.add_argument(
        "--min-power",
        type=_fraction,
        default=None,
        metavar="P",
        help=f"exit {UNDERPOWERED} when a gated metric's power to find a drop of --mde is below P "
        "(e.g. 0.8), "
        "instead of passing an under-powered comparison",
    )
    diff.set_defaults(handler=_compare)

    planning = commands.add_parser(
        "plan", help="rows (or scenarios x trials) needed to find a drop, and a run's power"
    )
    planning.add_argument("run", help="run folder (--out) or results.jsonl")
    planning.add_argument("--metric", help="the metric to plan (default: every metric)")
    planning.add_argument(
        "--baseline",
        help="an earlier run of the same samples: plan from the paired rows' real spread",
    )
    _add_power_options(planning, mde_default=None)
    planning.set_defaults(handler=_plan)

    calibrate = commands.add_parser(
        "calibrate", help="agreement of a judged metric with human labels (kappa, confusion)"
    )
    calibrate.add_argument(
        "results", nargs="?", help="results.jsonl of a run (or the run's --out folder)"
    )
    calibrate.add_argument(
        "labels", nargs="?", help='JSONL of {"index"|"id": ..., "metric": ..., "label": ...}'
    )
    calibrate.add_argument(
        "--run", help="a stored run (id or prefix): its rows and labels from the store"
    )
    _add_store_option(calibrate)
    calibrate.add_argument("--metric", help="the metric to check (default: the only one labeled)")
    calibrate.add_argument(
        "--html", help="HTML report to write (default: calibration.html beside the results)"
    )
    calibrate.set_defaults(handler=_calibrate)

    stored = commands.add_parser("store", help="the run store: import, export and list runs")
    store_commands = stored.add_subparsers(dest="store_command", required=True)
    importing = store_commands.add_parser(
        "import", help="bring a run folder (results.jsonl, summary.json, run.json) in"
    )
    importing.add_argument("run_dir", help="a run's --out folder")
    importing.add_argument("--name", help="the run's name (default: the folder's)")
    exporting = store_commands.add_parser(
        "export", help="write a stored run's folder (what compare and calibrate read)"
    )
    exporting.add_argument("run", help="the run's id (or a unique prefix)")
    exporting.add_argument("--out", required=True, help="the folder to write")
    listing_runs = store_commands.add_parser("list", help="the stored runs, newest first")
    listing_runs.add_argument("--limit", type=_count, default=None, help="at most this many")
    deleting = store_commands.add_parser("delete", help="delete a run, its rows and labels")
    deleting.add_argument("run", help="the run's id (or a unique prefix)")
    for command in (importing, exporting, listing_runs, deleting):
        _add_store_option(command)
    stored.set_defaults(handler=_store_command)

    labeling = commands.add_parser("labels", help="human labels kept in the run store")
    label_commands = labeling.add_subparsers(dest="labels_command", required=True)
    label_export = label_commands.add_parser(
        "export", help="write a run's labels as the JSONL file calibrate takes"
    )
    label_export.add_argument("--run", required=True, help="the run's id (or a unique prefix)")
    label_export.add_argument("--metric", help="only this metric's labels")
    label_export.add_argument("--out", required=True, help="the labels file to write")
    _add_store_option(label_export)
    labeling.set_defaults(handler=_labels_command)
    _add_view_command(commands)
    _add_watch_command(commands)
    return parser


def _add_view_command(commands: Any) -> None:
    """``turneval view``: the local web app over the run store."""
    viewing = commands.add_parser(
        "view", help="browse, compare and label stored runs in a local web app"
    )
    _add_store_option(viewing)
    viewing.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    viewing.add_argument("--port", type=int, default=8765, help="port (default 8765)")
    viewing.add_argument(
        "--token", help="a secret every request must carry (needed for any other host)"
    )
    viewing.add_argument("--annotator", help="the name labels are saved under (default: $USER)")
    viewing.set_defaults(handler=_view_command)


def _view_command(args: argparse.Namespace) -> int:
    from turneval.view import serve

    serve(
        _store_url(args),
        host=args.host,
        port=args.port,
        token=args.token or None,
        annotator=args.annotator,
    )
    return 0


def _duration(text: str) -> float:
    """An argparse type: seconds, as ``30``, ``30s``, ``5m`` or ``1h`` (above 0)."""
    units = {"s": 1.0, "m": 60.0, "h": 3600.0}
    number, unit = (text[:-1], units[text[-1]]) if text[-1:] in units else (text, 1.0)
    try:
        value = float(number) * unit
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a duration (30s, 5m), got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {text}")
    return value


def _add_watch_command(commands: Any) -> None:
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
    watch.add_argument(
        "--out",
        default="turneval-watch",
        help="state folder: spool, ledger, and results.jsonl without a store "
        "(default: turneval-watch)",
    )
    watch.add_argument(
        "--store",
        metavar="URL",
        help="write the rows to this run store (default: $TURNEVAL_STORE, else results.jsonl)",
    )
    watch.add_argument(
        "--group-by",
        choices=("trace", "session"),
        default="trace",
        help="one conversation per trace (default) or per session id",
    )
    watch.add_argument(
        "--idle",
        type=_duration,
        default=30.0,
        metavar="DURATION",
        help="a conversation is complete after this long without a new span (default: 30s)",
    )
    watch.add_argument(
        "--sample",
        type=_bounded(float, 0, above=True, what="a number"),
        default=1.0,
        metavar="RATE",
        help="share of conversations scored, chosen by a hash of their id (default: 1)",
    )
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
        help="judge budget, e.g. 20USD/day (needs --price-input) or 100000tokens/hour",
    )
    watch.add_argument(
        "--price-input", type=float, default=None, help="judge price per 1M input tokens"
    )
    watch.add_argument(
        "--price-output", type=float, default=None, help="judge price per 1M output tokens"
    )
    watch.add_argument(
        "--max-queue",
        type=int,
        default=100_000,
        help="spans held at most; past it exports get 503 with Retry-After (default: 100000)",
    )
    watch.add_argument(
        "--export-to",
        metavar="OTLP_ENDPOINT",
        help="send the scores as gen_ai.evaluation.result events to this OTLP/HTTP endpoint "
        "(e.g. http://collector:4318; /v1/logs is appended)",
    )
    _add_concurrency_options(watch)
    _add_judge_options(watch)
    watch.set_defaults(handler=_watch)
    regrading = commands.add_parser(
        "regrade", help="re-score a stored run's judged metrics with another judge, and compare"
    )
    regrading.add_argument("run", metavar="RUN", help="the stored run (its id or a unique prefix)")
    regrading.add_argument(
        "--sample", type=int, default=None, metavar="N", help="re-score N rows (default: all)"
    )
    regrading.add_argument(
        "--metric", action="append", default=None, help="only this judged metric (repeatable)"
    )
    regrading.add_argument(
        "--price-input", type=float, default=None, help="judge price per 1M input tokens"
    )
    regrading.add_argument(
        "--price-output", type=float, default=None, help="judge price per 1M output tokens"
    )
    _add_store_option(regrading)
    _add_judge_options(regrading)
    regrading.set_defaults(handler=_regrade)


def _regrade(args: argparse.Namespace) -> int:
    """``turneval regrade RUN --judge-model NEW``: prints the agreement, the flips, the cost."""
    if not args.judge_model:
        raise UsageError("regrade needs --judge-model: the new judge")
    if args.sample is not None and args.sample < 1:
        raise UsageError(f"--sample must be at least 1, got {args.sample}")
    from turneval.pipeline import RunOptions
    from turneval.results import Prices
    from turneval.watch import regrade

    prices = (
        None if args.price_input is None else Prices(args.price_input, args.price_output or 0.0)
    )
    report = regrade(
        _run_store(args, default=True),
        args.run,
        _judge(args),
        sample=args.sample,
        metrics=args.metric,
        prices=prices,
        options=RunOptions(cache=args.cache),
    )
    print(report)
    if report.new_run_id:
        print(f"the new judge's rows: run {report.new_run_id[:12]} in the store")
    return 0


def _watch(args: argparse.Namespace) -> int:
    """``turneval watch``: serve until SIGTERM or Ctrl-C."""
    from turneval.pipeline import RunOptions
    from turneval.runner import resolve_metrics

    metrics = resolve_metrics(_metric_list(args.metric))
    llm = _judge(args, needed=any(m.uses_llm for m in metrics))
    _require_judge(list(metrics), llm)
    host, _, port = args.listen.rpartition(":")
    if not host or not port.isdigit():
        raise UsageError(f"--listen {args.listen!r} is not HOST:PORT (e.g. 127.0.0.1:4318)")
    from turneval.results import Prices
    from turneval.watch import Budget, Watcher, WatchServer, parse_filter

    prices = (
        None if args.price_input is None else Prices(args.price_input, args.price_output or 0.0)
    )
    watcher = Watcher(
        metrics,
        args.out,
        store=_run_store(args),
        options=RunOptions(
            llm=llm,
            cache=args.cache,
            max_concurrency=args.concurrency,
            max_llm_concurrency=args.llm_concurrency,
            show_progress=False,
        ),
        group_by=args.group_by,
        idle=args.idle,
        max_queue=args.max_queue,
        sample=min(args.sample, 1.0),
        filters=[parse_filter(item) for item in args.filter],
        budget=None if args.budget is None else Budget.parse(args.budget),
        prices=prices,
        export_to=args.export_to,
    )
    server = WatchServer((host, int(port)), watcher, tick=min(1.0, args.idle / 4))
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


def _add_store_option(parser: argparse.ArgumentParser) -> None:
    """``--store URL`` (default: ``TURNEVAL_STORE``, else ``.turneval/runs.db``)."""
    parser.add_argument(
        "--store",
        metavar="URL",
        help="the run store: a SQLite file or sqlite:///PATH, or postgresql://... "
        "(default: $TURNEVAL_STORE, else .turneval/runs.db)",
    )


def _bounded(
    parse: Callable[[str], float], bound: float, *, above: bool, what: str
) -> Callable[[str], float]:
    """An argparse type: ``parse(text)``, at least ``bound`` (or above it); errors name it."""

    def check(text: str) -> float:
        try:
            value = parse(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if not (value > bound or (not above and value == bound)):  # NaN fails too
            limit = "above" if above else "at least"
            raise argparse.ArgumentTypeError(f"must be {limit} {bound:g}, got {text}")
        return value

    return check


def _fraction(text: str) -> float:
    """An argparse type: a number strictly between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value < 1:  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be between 0 and 1, got {text}")
    return value


def _add_power_options(parser: argparse.ArgumentParser, *, mde_default: float | None) -> None:
    """``--mde``, ``--alpha`` and ``--power`` of ``plan`` and ``compare``."""
    parser.add_argument(
        "--mde",
        type=_positive,
        default=mde_default,
        required=mde_default is None,
        metavar="D",
        help="the drop to detect, on the metric's scale"
        + ("" if mde_default is None else f" (default {mde_default:g})"),
    )
    parser.add_argument(
        "--alpha", type=_fraction, default=0.05, help="the test's level (default 0.05)"
    )
    parser.add_argument(
        "--power", type=_fraction, default=0.8, help="the power wanted (default 0.8)"
    )


_count = _bounded(int, 1, above=False, what="a whole number")
_positive = _bounded(float, 0, above=True, what="a number")


EXIT_TERMINATED = 143
"""Exit code of ``evaluate`` stopped by SIGTERM (128 + 15, as a shell reports a process it
ended): the chunks in flight were finished and written; ``--resume`` continues the run."""

EXIT_INTERRUPTED = 130
"""Exit code of a command interrupted by Ctrl-C (SIGINT; 128 + 2). ``evaluate`` stops as on
SIGTERM, finishing and writing the chunks in flight (a second Ctrl-C stops at once)."""

EXIT_DISK_FULL = 5
"""Exit code when an output file (results, summary, report) could not be written: no space."""

_DISK_FULL = frozenset(
    code for code in (errno.ENOSPC, getattr(errno, "EDQUOT", None)) if code is not None
)


_DISK_FULL_HINT = {
    "evaluate": " or write elsewhere (--out), then resume (--resume)",
    "demo": " or write elsewhere (--out)",
    "calibrate": " or write the report elsewhere (--html)",
}
"""What a command can do about a full disk, after "free some space"."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (errors are printed on one line)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning
            # turneval's own warnings (a failing cache, a resume without run.json) are shown,
            # one line each, whatever the filters say
            warnings.simplefilter("default", CacheWarning)
            warnings.filterwarnings("default", category=UserWarning, module=r"turneval\.")
            code: int = args.handler(args)
        return code
    except OSError as exc:
        if exc.errno in _DISK_FULL:
            where = f"writing {exc.filename}" if exc.filename else "writing the output"
            print(
                f"turneval: error: no space left on the device {where} ({exc.strerror}); "
                f"free some space{_DISK_FULL_HINT.get(args.command, '')}",
                file=sys.stderr,
            )
            return EXIT_DISK_FULL
        print(f"turneval: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except (UsageError, TurnevalError) as exc:
        print(f"turneval: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C (a second one, in evaluate): no traceback
        print("\nturneval: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # never a traceback; TURNEVAL_DEBUG=1 shows it
        if os.environ.get("TURNEVAL_DEBUG"):
            raise
        print(
            f"turneval: error: {type(exc).__name__}: {_one_line(exc)} "
            "(set TURNEVAL_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return 2


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: Any = None,
    line: str | None = None,
) -> None:
    """Show a warning as one line on stderr (``turneval: warning: ...``), without source."""
    print(f"turneval: warning: {shown(' '.join(str(message).split()))}", file=sys.stderr)


def _one_line(exc: BaseException) -> str:
    """The error's message on one line, hidden characters shown as ``<U+202E>``."""
    return shown(" ".join(str(exc).split()) or type(exc).__name__)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

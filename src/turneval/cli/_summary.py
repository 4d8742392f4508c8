"""What a run prints when it ends, and the exit codes it ends with."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from turneval._hidden import shown


def print_summary(result: Any, out: Path | None) -> None:
    """A run's summary table, unstable rows, judge usage and aggregates; where it was written."""
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
    for line in agent_lines(result.metric_names, result.summaries):
        print(line)
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


def agent_lines(names: Any, summaries: Any) -> list[str]:
    """Per metric, its figures by agent (``by_agent``) and the agents blamed (attribution)."""
    from turneval.aggregate import AGENT_PREFIX, BLAME_PREFIX

    lines = []
    for name in names:
        extra = summaries[name].extra or {}
        for prefix, label in ((AGENT_PREFIX, "by agent"), (BLAME_PREFIX, "blamed")):
            parts = []
            for key, value in extra.items():
                if key.startswith(prefix) and not key.endswith(".rows"):
                    rows = int(extra.get(f"{key}.rows", 0))
                    shown_value = f"{value:.1%}" if prefix == BLAME_PREFIX else f"{value:.3f}"
                    parts.append(f"{key[len(prefix) :]} {shown_value} ({rows} rows)")
            if parts:
                lines.append(f"{name} {label}: {', '.join(parts)}")
    return lines


SHOWN_ERRORS = 5
"""Errors of failed rows printed when ``--max-failed`` is exceeded."""


def check_failed(
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


def check_bars(bars: dict[str, float], summaries: Any) -> int:
    """Exit code 1 when a metric's mean is below its ``--fail-under`` bar, printing each miss."""
    missed = []
    for name, bar in bars.items():
        mean = summaries[name].mean
        if mean is None or mean < bar:
            missed.append(f"{name} mean {'n/a' if mean is None else f'{mean:.4f}'} < {bar}")
    for line in missed:
        print(f"FAIL: {shown(line)}", file=sys.stderr)
    return 1 if missed else 0


def gates_exit(
    result: Any,
    bars: dict[str, float],
    allowed: Callable[[int], float],
    text: str,
    *,
    tracebacks: bool = False,
) -> int:
    """The exit code of a finished run's gates, each miss printed.

    One rule for ``evaluate`` (any engine) and ``batch collect``: 3 past ``--max-failed``,
    which wins over 1, a ``--fail-under`` mean not met; else 0.
    """
    missed = check_bars(bars, result.summaries)
    return check_failed(result, allowed, text, tracebacks=tracebacks) or missed


EXIT_TERMINATED = 143
"""Exit code of ``evaluate`` stopped by SIGTERM (128 + 15, as a shell reports a process it
ended): the chunks in flight were finished and written; ``--resume`` continues the run."""

EXIT_INTERRUPTED = 130
"""Exit code of a command interrupted by Ctrl-C (SIGINT; 128 + 2). ``evaluate`` stops as on
SIGTERM, finishing and writing the chunks in flight (a second Ctrl-C stops at once)."""

EXIT_DISK_FULL = 5
"""Exit code when an output file (results, summary, report) could not be written: no space."""

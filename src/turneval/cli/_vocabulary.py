"""The command line's vocabulary: each flag commands share, declared once, with its meaning.

A flag means the same thing in every command that takes it: ``--sample`` is a share of the
rows in (0, 1], ``--limit N`` a count; ``--out`` is a folder, ``--output FILE`` a file;
``--name`` the name a run (or dataset) is kept under. :data:`FLAGS` declares them (the
``dest``, the type, the action and the help's meaning), commands add them with
:func:`add_flag`, and every command that calls a judge adds the same group
(:func:`add_judge_group`): the judge, its limits, its prices and ``--quiet``. A test walks
every command's parser and checks each flag against this table, so drift fails it.

Spellings of earlier versions still work, with a deprecation warning (:data:`DEPRECATED`).

Longer than 400 lines: a third of it is the tables (:data:`FLAGS`, :data:`OWN_MEANINGS`,
:data:`DEPRECATED`), and the short functions that add and read those flags sit beside them, so
a flag's declaration and its use are read together.
"""

from __future__ import annotations

import argparse
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from turneval.cli._arguments import (
    UsageError,
    fraction,
    positive_number,
    whole_number,
)
from turneval.options import option_default

__all__ = [
    "DEPRECATED",
    "FLAGS",
    "JUDGE_COMMANDS",
    "OWN_MEANINGS",
    "SCORING_COMMANDS",
    "Flag",
    "add_deprecated",
    "add_flag",
    "add_judge_group",
    "deprecated",
    "file_flag",
    "in_flight",
    "judge_limits",
    "paced_client",
    "sample_limit",
    "share",
    "with_repeats",
]


def share(text: str) -> float:
    """An argparse type: a share above 0 (``--sample``); above 1 is checked by the command.

    Earlier versions read a whole number above 1 as a row count (``regrade``) or as 1
    (``watch``): :func:`sample_limit` keeps those working, with a deprecation warning.
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a share in (0, 1], got {text!r}") from None
    if not value > 0 or math.isinf(value):  # NaN fails too
        raise argparse.ArgumentTypeError(f"must be a share in (0, 1], got {text}")
    return value


@dataclass(frozen=True)
class Flag:
    """One flag of the vocabulary, as every command that takes it declares it.

    Attributes:
        names: Its spellings: the first is the flag, the others aliases that keep working.
        dest: The attribute the parsed value is kept in.
        meaning: What it means: the start of its help in every command (a command may add
            details after it).
        type: The argparse type (None: a string).
        action: ``store``, ``store_true`` or ``append``.
        metavar: What its value is called in ``--help`` (None: argparse's).
    """

    names: tuple[str, ...]
    dest: str
    meaning: str
    type: Callable[[str], Any] | None = None
    action: str = "store"
    metavar: str | None = None


def _flag(
    names: str | tuple[str, ...],
    meaning: str,
    *,
    dest: str | None = None,
    type: Callable[[str], Any] | None = None,
    action: str = "store",
    metavar: str | None = None,
) -> Flag:
    spelled = (names,) if isinstance(names, str) else names
    return Flag(
        spelled,
        dest or spelled[0].removeprefix("--").replace("-", "_"),
        meaning,
        type,
        action,
        metavar,
    )


FLAGS: dict[str, Flag] = {
    flag.names[0]: flag
    for flag in (
        # what a command reads and writes
        _flag("--out", "the output folder", metavar="DIR"),
        _flag("--output", "the file to write", metavar="FILE"),
        _flag("--data", "the input file", metavar="FILE"),
        _flag("--report", "the report file to write", metavar="FILE"),
        _flag("--name", "the name it is kept under in the run store", metavar="NAME"),
        _flag(
            "--store",
            "the run store: a SQLite file or sqlite:///PATH, or postgresql://...",
            metavar="URL",
        ),
        # how many rows
        _flag(
            "--sample",
            "the share of the rows (or conversations) scored, in (0, 1], chosen by a hash",
            type=share,
            metavar="SHARE",
        ),
        _flag("--limit", "at most N", type=whole_number, metavar="N"),
        _flag("--seed", "the seed", type=int),
        # what a run shows
        _flag("--quiet", "no progress bar or progress lines", action="store_true"),
        _flag(
            "--dry-run", "count the judge requests and their cost; ask nothing", action="store_true"
        ),
        # the judge
        _flag(
            "--judge-model", "the judge model's name (OpenAI-compatible chat API)", metavar="MODEL"
        ),
        _flag(
            "--judge-base-url",
            "the base URL of an OpenAI-compatible server (vLLM, Ollama, ...)",
            metavar="URL",
        ),
        _flag(
            "--judge-api-key-env",
            "the variable holding the judge's API key (default: OPENAI_API_KEY; an error if set "
            "and empty)",
            metavar="VAR",
        ),
        _flag("--cache", "the SQLite judge cache: a re-run pays for nothing twice", metavar="FILE"),
        _flag(
            "--judge-config",
            "a judge configuration (turneval optimize writes one): its instructions and "
            "examples go to the judged metric it names",
            metavar="FILE",
        ),
        # the judge's limits
        _flag(
            ("--max-llm-concurrency", "--llm-concurrency"),
            "judge requests in flight at once",
            dest="llm_concurrency",
            type=whole_number,
            metavar="N",
        ),
        _flag(
            ("--max-concurrency", "--concurrency"),
            "samples scored at once",
            dest="concurrency",
            type=whole_number,
            metavar="N",
        ),
        _flag("--rpm", "the judge provider's quota: requests per minute", type=positive_number),
        _flag("--tpm", "the judge provider's quota: tokens per minute", type=positive_number),
        _flag(
            "--max-in-flight",
            "judge requests in flight at most, adapting to 429s",
            type=whole_number,
            metavar="N",
        ),
        _flag(
            "--timeout",
            "seconds allowed to score one sample (its metrics unfinished then fail on its row)",
            type=positive_number,
            metavar="SECONDS",
        ),
        _flag(
            "--repeats",
            "ask every judged metric N times per row: the value is the mean of the votes "
            "(majority for yes/no and pairwise judges)",
            type=whole_number,
            metavar="N",
        ),
        # the judge's prices
        _flag("--price-input", "the judge's price per 1M input tokens", type=float),
        _flag("--price-output", "the judge's price per 1M output tokens", type=float),
        # gates and statistics
        _flag(
            "--max-failed",
            "failed rows allowed before exit code 3: a count, a fraction or N%%",
            metavar="N|FRACTION",
        ),
        _flag(
            "--traceback",
            "with the errors printed past --max-failed, print where each metric raised",
            action="store_true",
        ),
        _flag("--mde", "the drop to detect", type=positive_number, metavar="D"),
        _flag("--alpha", "the test's level", type=fraction),
        _flag("--power", "the power wanted", type=fraction),
        # inputs
        _flag("--group-by", "one conversation per trace (default), or per session"),
        _flag("--port", "the viewer's port", type=int),
        _flag(
            "--poll-interval",
            "seconds between polls of the provider's batches",
            type=float,
            metavar="SECONDS",
        ),
        _flag(
            "--batch-fallback",
            "a request every batch attempt failed fails its cell (fail) or is asked live (sync)",
        ),
    )
}
"""Every flag two commands share (and the vocabulary's own), by its first spelling."""

OWN_MEANINGS: dict[str, str] = {
    "--metric": "a metric: repeatable where a command scores several, one where it reads one",
    "--fail-under": "a bar below which a metric fails: the mean's (evaluate, batch) or each "
    "row's (clusters, which groups the failed rows)",
    "--engine": "where the requests go: local|ray|batch for evaluate, live|batch for the "
    "commands that only ask a judge (optimize, scenarios generate)",
    "--examples": "how many examples: rows shown per cluster (clusters), worked examples a "
    "judge is shown (optimize)",
    "--budget": "a judge budget: an amount per period (watch) or most model calls (optimize)",
    "--run": "a stored run: the RUN argument's deprecated spelling (calibrate, labels export), "
    "or the run a command reads from the store (optimize, scenarios generate)",
}
"""Flags two commands share whose form differs by command, and why (checked by a test)."""

DEPRECATED: dict[tuple[str, str], str] = {
    ("labels export", "--out"): "--output",
    ("optimize", "--out"): "--output",
    ("scenarios generate", "--out"): "--output",
    ("scenarios accepted", "--out"): "--output",
    ("clusters", "--name"): "--name-clusters",
    ("clusters", "--json"): "--output",
    ("calibrate", "--run"): "RUN",
    ("labels export", "--run"): "RUN",
}
"""Each command's spellings of earlier versions, and what to write instead."""

JUDGE_COMMANDS = (
    "evaluate",
    "watch",
    "regrade",
    "optimize",
    "scenarios generate",
    "judge-bench who-and-when",
    "clusters",
)
"""Commands that call a judge: each takes :func:`add_judge_group`'s flags."""

SCORING_COMMANDS = ("evaluate", "watch", "regrade", "judge-bench who-and-when")
"""Judge commands that score rows with metrics: they take ``--timeout`` and ``--repeats`` too."""

_JUDGE = ("--judge-model", "--judge-base-url", "--judge-api-key-env", "--cache")
_LIMITS = ("--max-llm-concurrency", "--rpm", "--tpm", "--max-in-flight")
_PRICES = ("--price-input", "--price-output")
_SCORING = ("--timeout", "--repeats")


def add_flag(
    parser: argparse.ArgumentParser,
    name: str,
    *,
    detail: str | None = None,
    **kwargs: Any,
) -> argparse.Action:
    """Add the declared flag ``name`` to ``parser``: its spellings, dest, type and meaning.

    ``detail`` is added to the help after the meaning; ``kwargs`` (``default``,
    ``required``, ``choices``, ``nargs``, ``const``) are the command's own.
    """
    flag = FLAGS[name]
    help_text = flag.meaning if detail is None else f"{flag.meaning}: {detail}"
    declared: dict[str, Any] = {"dest": flag.dest, "help": help_text, "action": flag.action}
    if flag.type is not None:
        declared["type"] = flag.type
    if flag.metavar is not None and flag.action != "store_true":
        declared["metavar"] = flag.metavar
    declared.update(kwargs)
    return parser.add_argument(*flag.names, **declared)


def add_deprecated(
    parser: argparse.ArgumentParser, name: str, instead: str, **kwargs: Any
) -> argparse.Action:
    """A spelling of earlier versions: kept in ``<name>_deprecated``, its help saying so."""
    dest = name.removeprefix("--").replace("-", "_") + "_deprecated"
    return parser.add_argument(
        name, dest=dest, help=f"deprecated: use {instead}", **{"default": None, **kwargs}
    )


def deprecated(command: str, old: str, new: str) -> None:
    """Warn (one line on stderr, through ``main``) that ``old`` is deprecated for ``new``."""
    warnings.warn(f"{command} {old} is deprecated: use {new}", DeprecationWarning, stacklevel=3)


def file_flag(args: argparse.Namespace, command: str) -> str | None:
    """``--output FILE``, or the deprecated ``--out FILE`` (with a warning); None: neither.

    Raises:
        UsageError: both given.
    """
    old = getattr(args, "out_deprecated", None)
    if old is None:
        return None if args.output is None else str(args.output)
    if args.output is not None:
        raise UsageError(f"{command} takes its file once: give --output FILE, not --out")
    deprecated(command, f"--out {old}", f"--output {old} (--out is a folder in every command)")
    return str(old)


def sample_limit(args: argparse.Namespace, command: str, rows: int | None = None) -> int | None:
    """The rows ``--sample SHARE`` or ``--limit N`` leave of ``rows`` (None: every row).

    A share is of ``rows`` (rounded up, at least 1). Earlier versions of ``regrade`` read
    ``--sample N`` (a whole number above 1) as a row count: it still is, with a deprecation
    warning.

    Raises:
        UsageError: both given, or a share above 1 that is no whole number.
    """
    sample = args.sample
    if sample is not None and args.limit is not None:
        raise UsageError("give --sample SHARE or --limit N, not both")
    if sample is None or sample == 1.0:
        limit: int | None = args.limit
        return limit
    if sample <= 1:
        return None if rows is None else max(1, math.ceil(sample * rows))
    if not float(sample).is_integer():
        raise UsageError(f"--sample must be a share of the rows in (0, 1], got {sample:g}")
    count = int(sample)
    deprecated(
        command,
        f"--sample {count} as a row count",
        f"--limit {count} (--sample is a share in (0, 1], as in watch)",
    )
    return count


def add_judge_group(parser: argparse.ArgumentParser, *, scoring: bool = True) -> None:
    """The flags of every command that calls a judge, as :data:`FLAGS` declares them.

    The judge (``--judge-model``, ``--judge-base-url``, ``--judge-api-key-env``, ``--cache``),
    its limits (``--max-llm-concurrency``, ``--rpm``, ``--tpm``, ``--max-in-flight``), its
    prices (``--price-input``, ``--price-output``) and ``--quiet``; with ``scoring`` (a
    command scoring rows with metrics) ``--timeout`` and ``--repeats`` too.
    """
    for name in _JUDGE:
        add_flag(parser, name)
    add_flag(
        parser,
        "--max-llm-concurrency",
        default=option_default("max_llm_concurrency"),
        detail="default %(default)s",
    )
    for name in _LIMITS[1:]:
        add_flag(parser, name)
    for name in _PRICES:
        add_flag(parser, name)
    if scoring:
        add_flag(parser, "--timeout", default=option_default("timeout"))
        add_flag(parser, "--repeats")
    add_flag(parser, "--quiet")


def judge_group_flags(scoring: bool) -> tuple[str, ...]:
    """The flags :func:`add_judge_group` adds (with ``scoring``: ``--timeout``, ``--repeats``)."""
    return (*_JUDGE, *_LIMITS, *_PRICES, *(_SCORING if scoring else ()), "--quiet")


def with_repeats(
    metrics: list[Any], repeats: int | None, bars: dict[str, float] | None = None
) -> list[Any]:
    """``--repeats`` on every judged metric, ``--fail-under`` bars as their pass thresholds.

    Raises:
        UsageError: a metric that cannot vote (naming it).
    """
    from turneval.errors import ConfigError
    from turneval.metrics._votes import with_vote_options
    from turneval.runner import resolve_metrics

    resolved = resolve_metrics(metrics)
    if repeats is None and not any(m.votes_per_row > 1 for m in resolved):
        return metrics  # nothing votes more than once: the metrics as given
    try:
        return list(with_vote_options(resolved, repeats=repeats, thresholds=bars or {}))
    except ConfigError as exc:
        raise UsageError(f"--repeats {repeats}: {exc}") from exc


def judge_limits(args: argparse.Namespace) -> Any:
    """The :class:`~turneval.ratelimit.RateLimit` of ``--rpm``, ``--tpm`` and ``--max-in-flight``.

    None without them; the cap in flight is ``--max-in-flight``, else
    ``--max-llm-concurrency``.
    """
    if args.rpm is None and args.tpm is None and args.max_in_flight is None:
        return None
    from turneval.ratelimit import RateLimit

    return RateLimit(args.rpm, args.tpm, in_flight(args))


def in_flight(args: argparse.Namespace) -> int:
    """Judge requests in flight at most: ``--max-in-flight``, else ``--max-llm-concurrency``."""
    cap: int = args.llm_concurrency if args.max_in_flight is None else args.max_in_flight
    return cap


def paced_client(llm: Any, args: argparse.Namespace, command: str) -> tuple[Any, int]:
    """The judge's client paced to ``--rpm``, and the requests in flight it allows.

    For commands whose requests do not go through a run's rate limiter (``optimize``,
    ``clusters --name-clusters``): ``--rpm`` paces the client itself (LangChain's
    ``InMemoryRateLimiter``); in flight at once: ``--max-in-flight``, else
    ``--max-llm-concurrency``.

    Raises:
        UsageError: ``--tpm``, which such a command cannot hold to (naming it).
    """
    if args.tpm is not None:
        raise UsageError(
            f"{command} cannot hold to --tpm: its requests are paced by count only (use --rpm)"
        )
    cap = in_flight(args)
    if llm is None or args.rpm is None:
        return llm, cap
    from langchain_core.rate_limiters import InMemoryRateLimiter

    limiter = InMemoryRateLimiter(
        requests_per_second=args.rpm / 60, check_every_n_seconds=0.05, max_bucket_size=1
    )
    return llm.model_copy(update={"rate_limiter": limiter}), cap

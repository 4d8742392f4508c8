"""The ``turneval`` command: evaluate files and traces, compare and gate runs, keep and browse them.

Exit codes: 0 success; 1 a ``--fail-under`` (or ``compare --fail-on-regression``) bar was not
met; 2 bad usage or input (every error is one line, never a traceback); 3 more failed rows than
``--max-failed`` allows (default 0), or ``scenarios generate`` requests that got no usable
answer; 4 ``compare --min-power``: the comparison passed its gates
but had too little power to see a drop of ``--mde``; 5 (:data:`EXIT_DISK_FULL`) an output file
could not be written for lack of space; 143 (:data:`EXIT_TERMINATED`) ``evaluate`` was stopped
by SIGTERM after writing the chunks in flight; 130 (:data:`EXIT_INTERRUPTED`) Ctrl-C: ``evaluate``
stops as on SIGTERM (a second Ctrl-C stops at once). When rows failed beyond the allowance, 3
wins over 1; a bar not met (1) wins over 4.

The package holds one module per seam: :mod:`~turneval.cli._entry` (``main``: errors as one line
and an exit code), :mod:`~turneval.cli._parser` (the parser, assembled from the command modules),
:mod:`~turneval.cli._arguments` (metric specs, typed values) and :mod:`~turneval.cli._options`
(option groups several commands share), :mod:`~turneval.cli._judge_flags` (the judge the flags
configure), :mod:`~turneval.cli._summary` (what a run prints when it ends, and the exit codes), then
the commands: :mod:`~turneval.cli._evaluate` with :mod:`~turneval.cli._engines` and
:mod:`~turneval.cli._batch`, :mod:`~turneval.cli._compare` (and ``plan``),
:mod:`~turneval.cli._calibrate` (and ``labels``), :mod:`~turneval.cli._store` (and ``view``),
:mod:`~turneval.cli._watch` (and ``regrade``), :mod:`~turneval.cli._metrics` (and ``demo``),
:mod:`~turneval.cli._scenarios` (``scenarios generate|accepted``).
"""

from turneval.cli._arguments import UsageError, max_failed, parse_metric
from turneval.cli._compare import SHOWN_ROWS, UNDERPOWERED
from turneval.cli._entry import main
from turneval.cli._judge_flags import API_KEY_ENV, DEFAULT_JUDGE_MODEL
from turneval.cli._parser import build_parser
from turneval.cli._summary import EXIT_DISK_FULL, EXIT_INTERRUPTED, EXIT_TERMINATED, SHOWN_ERRORS

__all__ = [
    "API_KEY_ENV",
    "DEFAULT_JUDGE_MODEL",
    "EXIT_DISK_FULL",
    "EXIT_INTERRUPTED",
    "EXIT_TERMINATED",
    "SHOWN_ERRORS",
    "SHOWN_ROWS",
    "UNDERPOWERED",
    "UsageError",
    "build_parser",
    "main",
    "max_failed",
    "parse_metric",
]

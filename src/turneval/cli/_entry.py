"""``turneval``'s entry point: run a command, turn every error into one line and an exit code."""

from __future__ import annotations

import errno
import os
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from turneval._hidden import shown
from turneval.cli._arguments import UsageError
from turneval.cli._parser import build_parser
from turneval.cli._summary import EXIT_DISK_FULL, EXIT_INTERRUPTED
from turneval.errors import TurnevalError
from turneval.judge._cache import CacheWarning

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
            # a flag or command form that is deprecated says so, one line
            warnings.filterwarnings("default", category=DeprecationWarning, module=r"turneval\.cli")
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

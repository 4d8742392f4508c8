"""The ``turneval`` argument parser: each command module adds its own commands."""

from __future__ import annotations

import argparse
from typing import NoReturn

from turneval._version import VERSION
from turneval.cli._agents import add_clusters_command, add_judge_bench_command
from turneval.cli._batch import add_batch_command
from turneval.cli._calibrate import add_calibrate_command, add_labels_command
from turneval.cli._compare import add_compare_command, add_plan_command
from turneval.cli._datasets import add_datasets_command
from turneval.cli._evaluate import add_evaluate_command
from turneval.cli._metrics import add_demo_command, add_metrics_command
from turneval.cli._optimize import add_optimize_command
from turneval.cli._scenarios import add_scenarios_command
from turneval.cli._store import add_store_command, add_view_command
from turneval.cli._watch import add_watch_commands

_DESCRIPTION = "evaluate files and traces, compare and gate runs, keep and browse them"
"""What ``turneval --help`` says the command does; the package docstring's first line says it too
(the parser sits below the package, so it does not read it from there)."""


class _Parser(argparse.ArgumentParser):
    """argparse, with its errors on one line (``turneval: error: ...``) and exit code 2."""

    def error(self, message: str) -> NoReturn:
        """Print the error on one line, with a pointer to ``--help``, and exit 2."""
        self.exit(2, f"turneval: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``turneval`` argument parser."""
    parser = _Parser(prog="turneval", description=_DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"turneval {VERSION}")
    commands = parser.add_subparsers(dest="command", required=True)
    add_evaluate_command(commands)
    add_batch_command(commands)
    add_metrics_command(commands)
    add_demo_command(commands)
    add_compare_command(commands)
    add_plan_command(commands)
    add_calibrate_command(commands)
    add_optimize_command(commands)
    add_store_command(commands)
    add_datasets_command(commands)  # issue 49
    add_labels_command(commands)
    add_view_command(commands)
    add_watch_commands(commands)
    add_clusters_command(commands)
    add_judge_bench_command(commands)
    add_scenarios_command(commands)
    return parser

"""``turneval metrics`` (the built-in metrics) and ``turneval demo``."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from turneval.cli._judge_flags import judge_from_flags
from turneval.cli._options import add_judge_options
from turneval.cli._vocabulary import add_flag


def add_metrics_command(commands: Any) -> None:
    """``turneval metrics``: the built-in metrics, one a line."""
    listing = commands.add_parser("metrics", help="list metric names")
    listing.set_defaults(handler=_metrics)


def add_demo_command(commands: Any) -> None:
    """``turneval demo``: evaluate the bundled example datasets."""
    demo = commands.add_parser("demo", help="evaluate the bundled example datasets")
    add_flag(demo, "--out", default="turneval-demo", detail="default turneval-demo")
    add_judge_options(demo)
    add_flag(
        demo,
        "--store",
        nargs="?",
        const=".turneval/runs.db",
        detail="keep the three runs there too (alone: .turneval/runs.db)",
    )
    demo.set_defaults(handler=_demo)


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

    return run_demo(Path(args.out), llm=judge_from_flags(args), cache=args.cache, store=args.store)

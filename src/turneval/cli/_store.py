"""``turneval store`` and ``turneval view``: the run store, on the command line and in a browser."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from turneval._hidden import shown
from turneval.cli._options import (
    add_run_argument,
    add_store_option,
    open_cli_run,
    run_store,
    store_url,
)
from turneval.cli._vocabulary import add_flag


def add_store_command(commands: Any) -> None:
    """``turneval store import|export|list|delete``."""
    stored = commands.add_parser("store", help="the run store: import, export and list runs")
    store_commands = stored.add_subparsers(dest="store_command", required=True)
    importing = store_commands.add_parser(
        "import", help="bring a run folder (results.jsonl, summary.json, run.json) in"
    )
    importing.add_argument("run_dir", help="a run's --out folder")
    add_flag(
        importing, "--name", detail="the run's (default: its run.json's name, else the folder's)"
    )
    exporting = store_commands.add_parser(
        "export", help="write a stored run's folder (what compare and calibrate read)"
    )
    add_run_argument(exporting)
    add_flag(exporting, "--out", required=True, detail="the run's folder to write")
    listing_runs = store_commands.add_parser("list", help="the stored runs, newest first")
    add_flag(listing_runs, "--limit", detail="runs listed, the newest")
    deleting = store_commands.add_parser("delete", help="delete a run, its rows and labels")
    deleting.add_argument("run", help="the run's id (or a unique prefix)")
    for command in (importing, listing_runs, deleting):
        add_store_option(command)
    stored.set_defaults(handler=_store_command)


def add_view_command(commands: Any) -> None:
    """``turneval view``: the local web app over the run store."""
    viewing = commands.add_parser(
        "view", help="browse, compare and label stored runs in a local web app"
    )
    add_store_option(viewing)
    viewing.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    add_flag(viewing, "--port", default=8765, detail="default 8765")
    viewing.add_argument(
        "--token", help="a secret every request must carry (needed for any other host)"
    )
    viewing.add_argument("--annotator", help="the name labels are saved under (default: $USER)")
    viewing.set_defaults(handler=_view_command)


def _store_command(args: argparse.Namespace) -> int:
    if args.store_command == "export":
        return _export(args)
    store = run_store(args, default=True)
    try:
        # every stored text is shown on one line, its control characters as <U+001B>: a run's
        # name or a metric's (an imported folder's) cannot move the cursor or recolour the
        # terminal, nor forge another line
        if args.store_command == "import":
            run_id = store.import_run(args.run_dir, name=args.name)
            run = store.run(run_id)
            print(
                _line(f"imported {args.run_dir} as run {run.id} ({run.rows} rows) into {store.url}")
            )
        elif args.store_command == "delete":
            run = store.run(args.run)
            store.delete_run(run.id)
            print(_line(f"deleted run {run.id} ({run.name}, {run.rows} rows, its labels too)"))
        else:
            for run in store.runs(limit=args.limit):
                created = run.created.strftime("%Y-%m-%d %H:%M")
                judge = f"  judge {run.judge_model}" if run.judge_model else ""
                line = (
                    f"{run.id[:12]}  {created}  {run.status:<11} {run.rows:>9} rows  "
                    f"{run.name}  [{', '.join(run.metric_names)}]{judge}"
                )
                print(_line(line))
    finally:
        store.close()
    return 0


def _export(args: argparse.Namespace) -> int:
    """``store export RUN --out DIR``: the run's folder, written through the folder sink."""
    from turneval.runs import FolderSink

    with open_cli_run(args, args.run) as run:
        run.write(FolderSink(args.out))
    written = ", ".join(
        name
        for name in ("run.json", "results.jsonl", "summary.json")
        if (Path(args.out) / name).exists()
    )
    print(_line(f"wrote {written} in {args.out}"))
    return 0


def _line(text: str) -> str:
    """``text`` as one terminal line: control characters and line breaks as ``<U+000A>``."""
    return shown(text).replace("\r", "<U+000D>").replace("\n", "<U+000A>")


def _view_command(args: argparse.Namespace) -> int:
    from turneval.view import serve

    serve(
        store_url(args),
        host=args.host,
        port=args.port,
        token=args.token or None,
        annotator=args.annotator,
    )
    return 0

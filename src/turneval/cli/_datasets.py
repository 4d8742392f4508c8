"""``turneval datasets add|list|show|diff``: dataset versions in the run store (issue 49)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from turneval.cli._arguments import whole_number
from turneval.cli._options import add_store_option, run_store
from turneval.cli._vocabulary import add_flag


def add_datasets_command(commands: Any) -> None:
    """``turneval datasets add|list|show|diff``."""
    datasets = commands.add_parser(
        "datasets", help="dataset versions: keep a JSONL file by its content, list, show, diff"
    )
    actions = datasets.add_subparsers(dest="datasets_command", required=True)
    adding = actions.add_parser(
        "add", help="keep a JSONL file as the next version of a named dataset"
    )
    adding.add_argument("file", help="the JSONL file (samples or scenarios)")
    add_flag(adding, "--name", required=True, detail="the dataset's")
    listing = actions.add_parser("list", help="every dataset version, by name then version")
    listing.add_argument("name", nargs="?", help="only this dataset's versions")
    showing = actions.add_parser("show", help="one version and its first rows")
    showing.add_argument("ref", help="NAME (its latest version), NAME@VERSION or a digest")
    showing.add_argument("--rows", type=whole_number, default=10, help="rows to print (default 10)")
    diffing = actions.add_parser("diff", help="the rows added, removed and changed")
    diffing.add_argument("old", help="NAME@VERSION (or a digest)")
    diffing.add_argument("new", help="NAME@VERSION, NAME (its latest) or a digest")
    diffing.add_argument("--json", action="store_true", help="print the diff as JSON")
    for command in (adding, listing, showing, diffing):
        add_store_option(command)
    datasets.set_defaults(handler=_datasets)


def _datasets(args: argparse.Namespace) -> int:
    store = run_store(args, default=True)
    try:
        if args.datasets_command == "add":
            found, new = store.add_dataset(args.file, name=args.name)
            verb = "added" if new else "unchanged: already"
            print(f"{verb} {found} from {args.file}")
        elif args.datasets_command == "list":
            for version in store.datasets(name=args.name):
                created = version.created.strftime("%Y-%m-%d %H:%M")
                print(
                    f"{version.label:<24} {version.digest[:12]}  {version.rows:>9,} rows  "
                    f"{created}  {version.path or ''}"
                )
        elif args.datasets_command == "show":
            version = store.dataset(args.ref)
            print(
                f"{version} added {version.created.strftime('%Y-%m-%d %H:%M')} from "
                f"{version.path or '?'}"
            )
            print(f"sha256 {version.digest}")
            for row in store.dataset_rows(version.label, limit=args.rows):
                shown = row.content if len(row.content) <= 160 else row.content[:157] + "..."
                print(f"{row.key}: {shown}")
        else:
            found = store.diff_datasets(args.old, args.new)
            print(json.dumps(found.to_dict(), indent=2) if args.json else found)
    finally:
        store.close()
    return 0

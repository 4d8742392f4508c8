"""``turneval calibrate`` and ``turneval labels``: a judge against human labels."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from turneval._files import naming
from turneval.cli.arguments import UsageError, run_name
from turneval.cli.options import add_store_option, run_store
from turneval.errors import ConfigError


def add_calibrate_command(commands: Any) -> None:
    """``turneval calibrate [RESULTS LABELS | --run RUN]``."""
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
    add_store_option(calibrate)
    calibrate.add_argument("--metric", help="the metric to check (default: the only one labeled)")
    calibrate.add_argument(
        "--html", help="HTML report to write (default: calibration.html beside the results)"
    )
    calibrate.set_defaults(handler=_calibrate)


def add_labels_command(commands: Any) -> None:
    """``turneval labels export``: a stored run's labels as a file."""
    labeling = commands.add_parser("labels", help="human labels kept in the run store")
    label_commands = labeling.add_subparsers(dest="labels_command", required=True)
    label_export = label_commands.add_parser(
        "export", help="write a run's labels as the JSONL file calibrate takes"
    )
    label_export.add_argument("--run", required=True, help="the run's id (or a unique prefix)")
    label_export.add_argument("--metric", help="only this metric's labels")
    label_export.add_argument("--out", required=True, help="the labels file to write")
    add_store_option(label_export)
    labeling.set_defaults(handler=_labels_command)


def _calibrate(args: argparse.Namespace) -> int:
    from turneval.calibration import agreement, render_agreement_html
    from turneval.results import EvaluationResult

    if args.run is not None:  # the run and its labels from the store
        if args.results is not None or args.labels is not None:
            raise UsageError(
                "calibrate --run reads the run and its labels from the store: "
                "give no RESULTS or LABELS"
            )
        store = run_store(args, default=True)
        try:
            run = store.run(args.run)
            result = store.result(run.id)
            metric = None if args.metric is None else run_name(args.metric, result.metric_names)
            labels = _stored_labels(store, run.id, metric)
        finally:
            store.close()
        if not labels:
            of = f" of {metric!r}" if metric is not None else ""
            raise ConfigError(
                f"run {run.id[:12]} has no labels{of} in the store {store.url}: label its rows "
                "in turneval view (the run's 'label rows' page) or with RunStore.add_label, "
                "or calibrate a labels file (turneval calibrate RESULTS LABELS)"
            )
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
        metric = None if args.metric is None else run_name(args.metric, result.metric_names)
        report = agreement(result, args.labels, metric)
        print(report)
        out = Path(args.html) if args.html else results.with_name("calibration.html")
    page = render_agreement_html(report, title=f"Can I trust {report.metric}?")
    with naming(out):
        out.write_text(page, encoding="utf-8")
    print(f"wrote {out}")
    return 0


def _stored_labels(store: Any, run: str, metric: str | None) -> list[Any]:
    """A stored run's labels, as calibrate reads them from a labels file.

    Each is named in errors by its row and metric (``run 3f2a9c row 4, 'fluency'``), so a
    label off the scale says which row to label again.
    """
    from turneval.calibration import label_from_record

    labels = []
    for record in store.label_records(run, metric):
        row = f"row {record['index']}" if "index" in record else f"sample id {record.get('id')!r}"
        where = f"the stored label of run {run[:12]} {row} for {record.get('metric')!r}"
        labels.append(label_from_record(record, where))
    return [label for label in labels if label is not None]


def _labels_command(args: argparse.Namespace) -> int:
    store = run_store(args, default=True)
    try:
        count = store.export_labels(args.run, args.out, metric=args.metric)
    finally:
        store.close()
    print(f"wrote {count} labels to {args.out}")
    return 0

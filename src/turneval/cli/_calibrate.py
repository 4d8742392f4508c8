"""``turneval calibrate`` and ``turneval labels``: a judge against human labels."""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path
from typing import Any

from turneval._files import naming
from turneval.cli._arguments import UsageError, run_name
from turneval.cli._options import add_run_argument, open_cli_run
from turneval.cli._vocabulary import add_deprecated, add_flag, file_flag
from turneval.errors import ConfigError


def add_calibrate_command(commands: Any) -> None:
    """``turneval calibrate RUN [LABELS]``."""
    calibrate = commands.add_parser(
        "calibrate", help="agreement of a judged metric with human labels (kappa, confusion)"
    )
    add_run_argument(calibrate, "ref", metavar="RUN", nargs="?")
    calibrate.add_argument(
        "labels",
        nargs="?",
        help='JSONL of {"index"|"id": ..., "metric": ..., "label": ...} (default for a stored '
        "run: its labels in the store)",
    )
    calibrate.add_argument(
        "--run", dest="run_flag", metavar="RUN", help="deprecated: give the stored run as RUN"
    )
    calibrate.add_argument("--metric", help="the metric to check (default: the only one labeled)")
    calibrate.add_argument(
        "--html", help="HTML report to write (default: calibration.html beside the results)"
    )
    calibrate.set_defaults(handler=_calibrate)


def add_labels_command(commands: Any) -> None:
    """``turneval labels export RUN``: a stored run's labels as a file."""
    labeling = commands.add_parser("labels", help="human labels kept in the run store")
    label_commands = labeling.add_subparsers(dest="labels_command", required=True)
    label_export = label_commands.add_parser(
        "export", help="write a run's labels as the JSONL file calibrate takes"
    )
    add_run_argument(
        label_export, "ref", metavar="RUN", nargs="?", help="the stored run (its id or a prefix)"
    )
    label_export.add_argument(
        "--run", dest="run_flag", metavar="RUN", help="deprecated: give the run as RUN"
    )
    label_export.add_argument("--metric", help="only this metric's labels")
    add_flag(label_export, "--output", detail="the labels JSONL")
    add_deprecated(label_export, "--out", "--output FILE", metavar="FILE")
    labeling.set_defaults(handler=_labels_command)


def _run_ref(args: argparse.Namespace, command: str) -> str:
    """RUN, or the deprecated ``--run RUN`` (with a warning)."""
    if args.run_flag is None:
        if args.ref is None:
            raise UsageError(f"{command} needs RUN: a run folder, a results file or a stored run")
        return str(args.ref)
    warnings.warn(
        f"{command} --run RUN is deprecated: give the run as RUN ({command} {args.run_flag})",
        DeprecationWarning,
        stacklevel=2,
    )
    if args.ref is not None and command == "labels export":
        raise UsageError("labels export takes RUN once: give it as RUN, not --run")
    return str(args.run_flag)


def _calibrate(args: argparse.Namespace) -> int:
    from turneval.calibration import agreement, render_agreement_html

    if args.run_flag is not None and (args.ref is not None or args.labels is not None):
        raise UsageError(
            "calibrate --run reads the run and its labels from the store: give no RESULTS or "
            "LABELS (give the stored run as RUN instead: --run is deprecated)"
        )
    ref = _run_ref(args, "calibrate")
    with open_cli_run(args, ref) as run:
        result = run.result
        metric = None if args.metric is None else run_name(args.metric, result.metric_names)
        if args.labels is not None:
            labels: Any = args.labels
        elif run.stored is not None:  # the run's labels from the store
            labels = _stored_labels(run.store, run.stored.id, metric)
            if not labels:
                of = f" of {metric!r}" if metric is not None else ""
                raise ConfigError(
                    f"run {run.stored.id[:12]} has no labels{of} in the store "
                    f"{run.store.url}: label its rows in turneval view (the run's 'label rows' "
                    "page) or with RunStore.add_label, or calibrate a labels file (turneval "
                    "calibrate RUN LABELS)"
                )
        else:
            raise UsageError(
                f"calibrate {ref} needs LABELS: a run on disk has no labels (a stored run's "
                "come from the store)"
            )
        report = agreement(result, labels, metric)
        where = run.path
    print(report)
    if args.html:
        out = Path(args.html)
    else:
        out = Path("calibration.html") if where is None else where.with_name("calibration.html")
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
    ref = _run_ref(args, "labels export")
    output = file_flag(args, "labels export")
    if output is None:
        raise UsageError("labels export needs --output FILE: the labels file to write")
    with open_cli_run(args, ref) as run:
        if run.stored is None or run.store is None:
            raise UsageError(
                f"labels export: {ref} is a run on disk; labels are kept in the run store "
                "(give a stored run's id, with --store)"
            )
        count = run.store.export_labels(run.stored.id, output, metric=args.metric)
    print(f"wrote {count} labels to {output}")
    return 0

"""Reading back a partial run: the rows an interrupted streamed run finished, for ``resume``.

The results.jsonl of an interrupted run is read by the results codec
(:func:`~turneval.results_codec.read_finished`, a torn last line cut off); its rows are kept,
counted into the new run's totals as a new row would be (:func:`absorb_finished`), and their
lines are not scored again.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Mapping, Sequence
from typing import Any

from turneval.aggregate import RunFigures
from turneval.metrics._votes import rethreshold
from turneval.results import MetricResult, SampleResult
from turneval.results_codec import decode, read_finished
from turneval.stream._chunks import RowError

__all__ = [
    "Done",
    "ResumeWarning",
    "absorb_finished",
    "finished_lines",
    "finished_rows",
    "row_error",
]


class ResumeWarning(UserWarning):
    """A run folder is resumed without its ``run.json``, so nothing checks it is the same run."""


def finished_lines(results: str | os.PathLike[str]) -> dict[int, dict[str, Any]]:
    """The rows an earlier run of ``evaluate_jsonl`` finished, by input line number.

    Reads ``results`` (a results.jsonl) and cuts off a torn last line (a run killed while
    writing it), so that appending continues the file cleanly. Rows are complete JSON objects
    with a ``line``; the first row seen for a line wins.

    Raises:
        ConfigError: the file holds a line that is not such a row (not a results.jsonl).
    """
    return finished_rows(results, otlp=False)


Done = dict[Any, dict[str, Any]]
"""Finished rows by input line, or by ``(line, id)`` for traces (a line may hold several)."""


def finished_rows(results: str | os.PathLike[str], *, otlp: bool) -> Done:
    """:func:`finished_lines`; for OTLP/JSON input keyed by ``(line, id)``: one row per trace."""
    if otlp:
        return read_finished(results, key=lambda record: (int(record["line"]), record.get("id")))
    return read_finished(results, key=lambda record: int(record["line"]))


def row_error(row: SampleResult, names: Sequence[str]) -> RowError | None:
    """The first error of a finished row (None: every metric scored it).

    A metric with neither a value nor an error on the row (written by a run with other
    metrics) failed on it too: it is counted as failed in the summary, so the row fails.
    """
    line = row.line or 0
    for name in names:
        failure = row.failures.get(name)
        if failure is not None:
            return RowError(line, name, str(failure), failure.traceback)
        if name not in row.results:
            return RowError(
                line,
                name,
                "NotScored: the resumed row has no value for it (written by a run with other "
                "metrics)",
            )
    return None


def absorb_finished(
    done: Done,
    names: Sequence[str],
    values: dict[str, array[float]],
    failed: dict[str, int],
    kept: list[SampleResult],
    report_rows: int,
    extras: dict[str, list[MetricResult]],
    figures: RunFigures,
    thresholds: Mapping[str, float | None],
) -> list[SampleResult]:
    """Count the finished rows of a resumed run into the totals; returns them, decoded.

    Each record is decoded by the results codec (:func:`~turneval.results_codec.decode`), so
    its agent run and trial count in as a new row's do. A row's vote record is marked again
    with this run's pass threshold (``thresholds``), which may differ from the one the row was
    written with: it changes no score.
    """
    rows = []
    for number, record in enumerate(done.values(), start=1):
        row = decode(record, names, number)
        rows.append(row)
        if row.agent is not None or row.trial is not None:
            figures.add(row, names)
        for name in names:
            result = row.results.get(name)
            if result is None:
                failed[name] += 1
            else:
                values[name].append(result.value)
                if name in extras:
                    details = rethreshold(result.details, thresholds[name])
                    extras[name].append(MetricResult(name, result.value, "", details))
        if len(kept) < report_rows:
            kept.append(row)
    return rows

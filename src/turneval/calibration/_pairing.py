"""A run's judge scores paired with human labels of its rows, and their agreement.

Each label names its row by index or by sample id (``metadata["id"]``); the judge's score on
that row is read onto the metric's scale and compared with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from turneval.calibration._labels import Label, as_labels
from turneval.calibration._report import AgreementReport
from turneval.calibration._scales import (
    check_judged,
    judge_verdict,
    metric_class,
    on_scale,
    scale_of,
)
from turneval.calibration._statistics import agreement_statistics, require_extra
from turneval.errors import ConfigError

if TYPE_CHECKING:
    from turneval.metrics.base import Metric
    from turneval.results import EvaluationResult

__all__ = ["agreement"]

_MAX_CLASSES = 20


def _pick_metric(result: EvaluationResult, labels: list[Label], metric: Any) -> str:
    from turneval.metrics.base import Metric

    if isinstance(metric, Metric):
        name: str = metric.name
    elif isinstance(metric, str):
        name = metric
    else:
        named = sorted({label.metric for label in labels if label.metric is not None})
        candidates = [n for n in named if n in result.metric_names] or named
        if len(candidates) == 1:
            name = candidates[0]
        elif len(result.metric_names) == 1 and not named:
            name = result.metric_names[0]
        else:
            options = candidates or result.metric_names
            raise ConfigError(f"which metric? pass metric=... (one of {options})")
    if name not in result.metric_names:
        raise ConfigError(f"metric {name!r} is not in the results; they have {result.metric_names}")
    return name


def _row_of(label: Label, result: EvaluationResult, ids: dict[str, int]) -> int:
    where = label.where or f"label for row {label.row!r}"
    if isinstance(label.row, int):
        if not 0 <= label.row < len(result.rows):
            raise ConfigError(
                f"{where}: row index {label.row} is unknown; the results have rows "
                f"0-{len(result.rows) - 1}"
            )
        return label.row
    if label.row not in ids:
        hint = "" if ids else " (the rows carry no sample ids: label by index)"
        raise ConfigError(f"{where}: no row has sample id {label.row!r}{hint}")
    row = ids[label.row]
    if row < 0:  # several rows share the id (trials of one scenario, a repeated sample)
        rows = [i for i, r in enumerate(result.rows) if r.sample_id == label.row]
        raise ConfigError(
            f"{where}: sample id {label.row!r} names rows {', '.join(map(str, rows))}: "
            "label them by index"
        )
    return row


def agreement(
    result: EvaluationResult,
    labels: Any,
    metric: Metric | str | None = None,
    *,
    seed: int = 0,
    resamples: int = 1000,
) -> AgreementReport:
    """Compare a judged metric's scores in ``result`` with human labels of the same rows.

    Args:
        result: A run's results (``evaluate(...)`` or ``EvaluationResult.from_jsonl``).
        labels: Human labels: a column (a list, array or pandas Series: one value, or None/NaN
            for unlabeled, per row), a mapping from row index
            or sample id (``metadata["id"]``) to a value, a list of :class:`Label`, or the path
            of a JSONL of ``{"index"|"id": ..., "metric": ..., "label": ...}``.
        metric: The metric (name or object; an object gives its rubric's scale). None: the
            only metric in the results or in the labels.
        seed: Seed of the bootstrap.
        resamples: Bootstrap resamples for the 95% intervals.

    Raises:
        ConfigError: naming the label, for a label off the metric's scale, a label of an
            unknown row, a row labeled twice, a sample id several rows share, or a metric that
            is not judged.
    """
    require_extra()
    entries = as_labels(labels, len(result.rows))
    name = _pick_metric(result, entries, metric)
    known = metric_class(metric if metric is not None and not isinstance(metric, str) else name)
    check_judged(known, name)
    scale = scale_of(known)
    ids: dict[str, int] = {}  # the sample's metadata["id"], or a results file's "id"
    for position, sample_id in enumerate(r.sample_id for r in result.rows):
        if sample_id is not None:
            ids[sample_id] = -1 if sample_id in ids else position  # -1: ambiguous
    human: list[float] = []
    judge: list[float] = []
    seen: dict[int, str] = {}
    skipped = 0
    others: dict[str, int] = {}  # labels of other metrics: ignored, named if nothing is left
    for label in entries:
        if label.metric is not None and label.metric != name:
            others[label.metric] = others.get(label.metric, 0) + 1
            continue
        where = label.where or f"label for row {label.row!r}"
        if not on_scale(label.value, scale):
            values = ", ".join(f"{v:g}" for v in scale or ())
            if known is not None and known.yes_no:
                values = "a yes/no judge: 0 or no, 1 or yes"
            raise ConfigError(
                f"{where}: label {label.value:g} is outside the scale of {name!r} ({values})"
            )
        row = _row_of(label, result, ids)
        if row in seen:
            raise ConfigError(f"{where}: row {row} of {name!r} is already labeled ({seen[row]})")
        seen[row] = where
        scored = result.rows[row].results.get(name)
        if scored is None:
            skipped += 1
            continue
        verdict = judge_verdict(known, scored.value, scored.details, scale)
        if not on_scale(verdict, scale):
            raise ConfigError(
                f"row {row}: the judge's {name!r} score {scored.value:g} is not on its scale"
            )
        human.append(label.value)
        judge.append(verdict)
    if not human:
        why = f": the judge failed on all {skipped} labeled rows" if skipped else ""
        if others and not seen:
            named = ", ".join(f"{metric!r} ({count})" for metric, count in sorted(others.items()))
            why = f": the labels name other metrics only: {named}"
        raise ConfigError(f"no labeled row of {name!r} has a judge score to compare{why}")
    if scale is None:
        scale = tuple(sorted(set(human) | set(judge)))
        if len(scale) > _MAX_CLASSES:
            raise ConfigError(
                f"metric {name!r} takes {len(scale)} distinct values; agreement needs a discrete "
                "scale (a rubric, yes/no or pairwise judge)"
            )
    if len(scale) < 2:
        scale = (*scale, scale[0] + 1.0) if scale[0] == 0.0 else (0.0, *scale)
    return agreement_statistics(
        name, human, judge, scale, skipped=skipped, seed=seed, resamples=resamples
    )

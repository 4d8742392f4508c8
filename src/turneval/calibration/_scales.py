"""A judged metric's scale, and the judge's verdict and a human label read and written on it.

The scale comes from the metric itself: a rubric's scores, CANDIDATE/TIE/BASELINE (1/0.5/0)
for pairwise judges, 0/1 for yes/no judges, or its ``scale_points``.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from turneval.errors import ConfigError

if TYPE_CHECKING:
    from turneval.metrics.base import Evaluator, Metric

__all__ = [
    "check_judged",
    "judge_verdict",
    "metric_class",
    "on_scale",
    "scale_of",
    "verdict_text",
]


def metric_class(metric: Metric | str) -> Metric | type[Evaluator] | None:
    """The metric object itself, or the built-in metric class of that name (None if unknown)."""
    from turneval.metrics.base import Metric
    from turneval.runner import metric_names

    if isinstance(metric, Metric):
        return metric
    return metric_names().get(metric)


def scale_of(metric: Evaluator | type[Evaluator] | None) -> tuple[float, ...] | None:
    """The metric's own scale (:attr:`~turneval.metrics.Evaluator.scale_values`), or None.

    ``metric`` is a metric object or a class buildable by name (its default configuration
    gives the scale: a preset's rubric), or None.
    """
    if isinstance(metric, type):
        metric = metric.model_validate({}) if metric.buildable_by_name() else None
    return None if metric is None else metric.scale_values


def check_judged(metric: Evaluator | type[Evaluator] | None, name: str) -> None:
    """Refuse a metric that no LLM judges (None, an unknown metric, passes).

    Raises:
        ConfigError: naming the metric, when it is not judged.
    """
    if metric is not None and not metric.uses_llm:
        raise ConfigError(
            f"metric {name!r} is not judged by an LLM: agreement and alignment apply to judged "
            "metrics (rubric judges, assessments, topic adherence, goal accuracy, ...)"
        )


def on_scale(value: float, scale: tuple[float, ...] | None) -> bool:
    """Whether ``value`` is a point of ``scale`` (any value is, when the scale is unknown)."""
    return scale is None or value in scale


def judge_verdict(
    metric: Evaluator | type[Evaluator] | None,
    value: float,
    details: Any,
    scale: tuple[float, ...] | None,
) -> float:
    """The judge's verdict on its own scale: a repeated row's votes reduced onto the scale.

    A row judged ``repeats`` times holds the mean of its votes (say 0.333) unless the metric
    is categorical. Compared with a human label, it is the votes' majority for categorical
    and yes/no judges (ties: the lowest value, as ``repeats`` takes it), and the scale point
    nearest the mean of the votes for a rubric or another scale (ties: the lower point). Any
    other value off the scale is returned as it is (the caller refuses it).
    """
    if scale is None or value in scale:
        return value
    record = details.get("repeats") if isinstance(details, dict) else None
    votes = record.get("values") if isinstance(record, dict) else None
    if not isinstance(votes, list) or not votes:
        return value
    if not all(isinstance(v, (int, float)) and float(v) in scale for v in votes):
        return value
    if metric is not None and (metric.categorical or metric.yes_no):
        counts = Counter(float(v) for v in votes)
        top = max(counts.values())
        return min(v for v, count in counts.items() if count == top)
    mean = sum(float(v) for v in votes) / len(votes)
    return min(scale, key=lambda point: (abs(point - mean), point))


def verdict_text(metric: Evaluator, label: float, reason: str = "") -> str:
    """How a human label is written as the worked example's verdict, on the metric's scale.

    The metric's :meth:`~turneval.metrics.Evaluator.label_text`, then ``: reason`` if any.
    """
    text = metric.label_text(label)
    return f"{text}: {reason}" if reason else text

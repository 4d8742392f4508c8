"""Repeated judge votes: one row judged N times, reduced to one value with its spread.

A judged metric with ``repeats=N`` asks its whole set of requests N times (each repeat its own
cache entry) and calls its ``verdict`` once per repeat. :func:`combine_votes` reduces the N
outcomes: the mean, or for a metric whose value is a category coded as a number
(``categorical``: yes/no, a pairwise choice) the most frequent value, ties going to the lowest
(a split never counts as a pass). The details keep every vote and their spread; with a
``pass_threshold``, whether the votes fall on both sides of it (``unstable``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from turneval.metrics._judged import JudgedMetric
from turneval.metrics._voting import Voted, check_repeats, combine_votes, rethreshold
from turneval.metrics.base import Evaluator

__all__ = ["Voted", "check_repeats", "combine_votes", "rethreshold", "with_vote_options"]


def with_vote_options(
    metrics: Iterable[Evaluator],
    *,
    repeats: int | None = None,
    thresholds: Mapping[str, float] | None = None,
) -> list[Evaluator]:
    """The run's metrics with ``repeats`` and pass thresholds set on its judged metrics.

    ``repeats`` (the CLI's ``--repeats``) applies to every judged metric; ``thresholds`` (the
    front end's pass bars by metric name: ``--fail-under``, ``success_thresholds``,
    ``assert_scores``' thresholds) become the ``pass_threshold`` of judged metrics that vote
    more than once and have none. Other metrics are returned as they are.

    Raises:
        ConfigError: ``repeats`` < 1 or incompatible with a metric's ``repeat_temperature``.
    """
    chosen: list[Evaluator] = []
    for metric in metrics:
        if isinstance(metric, JudgedMetric):
            update: dict[str, Any] = {}
            if repeats is not None and repeats != metric.repeats:
                check_repeats(metric.name, repeats, metric.repeat_temperature)
                update["repeats"] = repeats
            bar = (thresholds or {}).get(metric.name)
            voting = update.get("repeats", metric.repeats) > 1
            if voting and bar is not None and metric.pass_threshold is None:
                update["pass_threshold"] = float(bar)
            if update:
                metric = metric.model_copy(update=update)
        chosen.append(metric)
    return chosen

"""Repeated judge votes: one row judged N times, reduced to one value with its spread.

A judged metric with ``repeats=N`` asks its whole set of requests N times (each repeat its own
cache entry) and calls its ``verdict`` once per repeat. :func:`combine_votes` reduces the N
outcomes: the mean, or for a metric whose value is a category coded as a number
(``categorical``: yes/no, a pairwise choice) the most frequent value, ties going to the lowest
(a split never counts as a pass). The details keep every vote and their spread; with a
``pass_threshold``, whether the votes fall on both sides of it (``unstable``).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from turneval.errors import ConfigError
from turneval.metrics.base import Evaluator, Explained

__all__ = ["check_repeats", "combine_votes", "rethreshold", "with_vote_options"]


def check_repeats(name: str, repeats: object, temperature: object) -> None:
    """Refuse ``repeats`` below 1, and several repeats whose votes would all be the same.

    Raises:
        ConfigError: ``repeats`` < 1, or ``repeats`` > 1 with ``repeat_temperature`` <= 0.
    """
    if isinstance(repeats, int) and repeats < 1:
        raise ConfigError(
            f"metric {name!r}: repeats must be at least 1 (one vote per row), got {repeats}"
        )
    if (
        isinstance(repeats, int)
        and repeats > 1
        and isinstance(temperature, (int, float))
        and temperature <= 0
    ):
        raise ConfigError(
            f"metric {name!r}: repeats={repeats} with repeat_temperature={temperature:g}: at "
            "temperature 0 the judge gives the same answer every time, so the votes would be "
            "identical; set repeat_temperature > 0 (default 0.7)"
        )


@dataclass
class Voted(Explained):
    """The outcome of repeated votes: without details it still keeps the votes' spread.

    ``explain(details=False)`` gives ``{"repeats": ...}`` without each vote's reason and
    details, so a run with ``details=False`` (the CLI's default) still counts unstable rows.
    """

    def explain(self, details: bool = True) -> tuple[str, dict[str, Any]]:
        """The reason and details; without details, the vote record alone (no ``votes``)."""
        if details:
            return self.reason, self.details
        record = {key: v for key, v in self.details["repeats"].items() if key != "votes"}
        return self.reason, {"repeats": record}


def _shown(values: list[float]) -> str:
    return ", ".join(f"{value:g}" for value in values)


def combine_votes(
    votes: list[Explained], *, majority: bool, pass_threshold: float | None
) -> Explained:
    """One outcome from the outcomes of each repeat (at least two).

    Args:
        votes: Each repeat's outcome, in repeat order.
        majority: Take the most frequent value (ties: the lowest) instead of the mean.
        pass_threshold: The value at or above which a row passes; with it the record says
            whether the votes straddle it (``min < pass_threshold <= max``).

    Returns:
        The value and reason of the reduction; the details are those of the vote the value
        comes from (the first vote for a mean, the first vote giving the majority value
        otherwise) plus ``details["repeats"]``: ``n``, ``rule``, ``values``, ``std`` (sample
        standard deviation), ``min``, ``max``, each vote's ``value``, ``reason`` and
        ``details`` under ``votes``, and ``pass_threshold`` and ``unstable`` when a threshold
        applies.
    """
    values = [vote.value for vote in votes]
    n = len(values)
    if majority:
        counts = Counter(values)
        top = max(counts.values())
        value = min(v for v, count in counts.items() if count == top)
        chosen = votes[values.index(value)]
        reason = f"majority of {n} votes = {value:g} ({_shown(values)}): {chosen.reason}"
    else:
        value = statistics.fmean(values)
        chosen = votes[0]
        reason = f"mean of {n} votes = {value:.4g} ({_shown(values)}); vote 1: {chosen.reason}"
    record: dict[str, Any] = {
        "n": n,
        "rule": "majority" if majority else "mean",
        "values": values,
        "std": statistics.stdev(values),
        "min": min(values),
        "max": max(values),
        "votes": [
            {"value": vote.value, "reason": vote.reason, "details": vote.details} for vote in votes
        ],
    }
    if pass_threshold is not None:
        record["pass_threshold"] = pass_threshold
        record["unstable"] = min(values) < pass_threshold <= max(values)
        if record["unstable"]:
            reason += f" [unstable: votes on both sides of {pass_threshold:g}]"
    return Voted(value, reason, {**chosen.details, "repeats": record})


def rethreshold(details: Mapping[str, Any], threshold: float | None) -> dict[str, Any]:
    """``details`` whose vote record says ``pass_threshold`` and ``unstable`` for ``threshold``.

    A pass threshold changes no score, only which rows are unstable: a resumed run whose
    ``--fail-under`` changed marks its finished rows again from their votes' min and max
    (without a threshold, neither key). Details without a vote record are returned as given.
    """
    record = details.get("repeats")
    if not isinstance(record, dict) or not all(
        isinstance(record.get(key), (int, float)) for key in ("min", "max")
    ):
        return dict(details)
    marked = {k: v for k, v in record.items() if k not in ("pass_threshold", "unstable")}
    if threshold is not None:
        marked["pass_threshold"] = threshold
        marked["unstable"] = float(record["min"]) < threshold <= float(record["max"])
    return {**details, "repeats": marked}


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
    from turneval.metrics._judged import JudgedMetric

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

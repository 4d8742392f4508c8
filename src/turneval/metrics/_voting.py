"""The arithmetic of repeated votes: refuse useless repeats, reduce N votes to one, re-mark them.

It sits below the judged metric, which reduces its votes with it; :mod:`turneval.metrics._votes`
(which sets a run's votes on its judged metrics, above them) documents the rule and re-exports
these names.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from turneval.errors import ConfigError
from turneval.metrics.base import Explained

__all__ = ["Voted", "check_repeats", "combine_votes", "rethreshold"]


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

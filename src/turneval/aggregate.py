"""Plain aggregation functions over scored values (failures are counted, never averaged in)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from turneval.judge.usage import Usage

__all__ = ["MetricSummary", "summarize"]


@dataclass(frozen=True, slots=True)
class MetricSummary:
    """Summary of one metric over a run; fields readable as attributes or keys.

    Attributes:
        name: The metric's name.
        mean: Mean of the scored values; None when no row was scored.
        std: Sample standard deviation (ddof=1); None when fewer than two rows were scored.
        count: Number of rows scored.
        failed: Number of rows where the metric failed.
        usage: Judge usage summed over the rows (None for rule-based metrics).
    """

    name: str
    mean: float | None
    std: float | None
    count: int
    failed: int
    usage: Usage | None = None

    def __getitem__(self, key: str) -> Any:
        """``summary["mean"]`` is ``summary.mean``."""
        if key not in self.__dataclass_fields__:
            raise KeyError(key)
        return getattr(self, key)

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict (usage as its counts)."""
        fields = asdict(self)
        fields["usage"] = None if self.usage is None else self.usage.to_dict()
        return fields


def summarize(
    name: str, values: Sequence[float], failed: int, usage: Usage | None = None
) -> MetricSummary:
    """Summarise the scored ``values`` of one metric, its failures and judge usage."""
    count = len(values)
    if not count:
        return MetricSummary(name, None, None, 0, failed, usage)
    array = np.asarray(values, dtype=float)
    std = float(array.std(ddof=1)) if count > 1 else None
    return MetricSummary(name, float(array.mean()), std, count, failed, usage)

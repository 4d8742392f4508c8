"""Typed result records: one metric on one sample."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from turneval.judge.usage import Usage

__all__ = ["MetricResult", "ratio"]


@dataclass(frozen=True, slots=True)
class MetricResult:
    """The detailed score of one metric on one sample.

    Attributes:
        name: The metric's name.
        value: The score, a finite float (in [0, 1] for every built-in but the 1-5 rubric judges).
        reason: How the score was reached, with its arithmetic (``precision=2/3=0.667 ...``).
        details: Structured evidence, e.g. which calls were matched.
        usage: Judge tokens and calls spent on this result (None for rule-based metrics).
    """

    name: str
    value: float
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    usage: Usage | None = None

    def __post_init__(self) -> None:
        """Reject non-finite values: a failure is recorded as an error, never as NaN."""
        if not math.isfinite(self.value):
            raise ValueError(f"metric {self.name!r} produced a non-finite value {self.value!r}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the four fields."""
        return {
            "name": self.name,
            "value": self.value,
            "reason": self.reason,
            "details": self.details,
        }


def ratio(label: str, numerator: int, denominator: int, value: float) -> str:
    """Format ``label=k/n=0.667`` as used in reasons."""
    return f"{label}={numerator}/{denominator}={value:.3f}"

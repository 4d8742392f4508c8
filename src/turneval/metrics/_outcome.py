"""What a metric's core computes: an :class:`Outcome` (the value now, the explanation on demand).

Defined here, below the metric base, and re-exported by :mod:`turneval.metrics.base`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from turneval.usage import Usage

__all__ = ["Explained", "Outcome"]


class Outcome(ABC):
    """What a metric's core computes: the value now, the explanation on demand."""

    __slots__ = ()

    value: float
    usage: Usage | None = None
    """What the models asked for this outcome used; None when no model was asked."""

    @abstractmethod
    def explain(self, details: bool = True) -> tuple[str, dict[str, Any]]:
        """Return ``(reason, details)``; with ``details=False`` the details may be left empty."""


@dataclass(slots=True)
class Explained(Outcome):
    """An outcome whose reason and details are already known."""

    value: float
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    usage: Usage | None = None

    def explain(self, details: bool = True) -> tuple[str, dict[str, Any]]:
        """Return the stored reason and details."""
        return self.reason, self.details if details else {}

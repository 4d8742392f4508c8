"""Token usage of judge calls: a leaf module (no turneval or LLM framework imports)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Usage"]


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens and calls spent by judges.

    Attributes:
        input_tokens: Prompt tokens the provider billed (from the model's usage metadata).
        output_tokens: Completion tokens the provider billed.
        calls: Requests sent to the model (retries included).
        cached_calls: Answers served by the judge cache instead of the model.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0
    cached_calls: int = 0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        """Sum two usages."""
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.calls + other.calls,
            self.cached_calls + other.cached_calls,
        )

    def cost(self, input_price: float, output_price: float) -> float:
        """Cost given prices per one million input and output tokens."""
        return (self.input_tokens * input_price + self.output_tokens * output_price) / 1e6

    def to_dict(self) -> dict[str, Any]:
        """The counts as a dict, with ``total_tokens``."""
        return {**asdict(self), "total_tokens": self.total_tokens}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Usage:
        """The usage :meth:`to_dict` wrote (``total_tokens`` is derived, so it is ignored).

        Raises:
            ValueError: when a count is not a non-negative integer.
        """
        counts: dict[str, int] = {}
        for name in ("input_tokens", "output_tokens", "calls", "cached_calls"):
            value = data.get(name, 0)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(
                    f"usage field {name!r} must be a non-negative integer, got {value!r}"
                )
            counts[name] = value
        return cls(**counts)

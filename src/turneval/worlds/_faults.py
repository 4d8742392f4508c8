"""Seeded fault injection: which call of which tool fails, and how."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["FaultKind", "Faults"]

FaultKind = Literal["error", "timeout", "rate_limit", "malformed", "latency"]
"""The kinds of injected fault (``latency`` delays a call that otherwise goes through)."""


class Faults(BaseModel):
    """What can go wrong with a tool's calls, each call drawn from the world's seed.

    Each call draws one number: with probability ``error_rate`` the tool answers with an
    error, ``timeout_rate`` a timeout error, ``rate_limit_rate`` a rate-limit (429) answer;
    none of these runs the tool, so the state is unchanged. With ``malformed_rate`` the tool
    runs (its state change happens) but its answer reaches the agent cut in half inside an
    unclosed JSON envelope, as a broken payload would. ``latency_s`` delays every call (a
    number, or a ``(low, high)`` range drawn per call). The rates add up to at most 1.

    Attributes:
        error_rate: Share of calls answered with a generic tool error.
        timeout_rate: Share of calls answered with a timeout error (at once: the wait is
            ``latency_s``'s, not ``timeout_s``).
        rate_limit_rate: Share of calls answered with a rate-limit error.
        malformed_rate: Share of calls whose answer is truncated.
        latency_s: Seconds every call waits, or a ``(low, high)`` range.
        timeout_s: The limit a timeout error names.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    error_rate: float = Field(default=0.0, ge=0.0, le=1.0)
    timeout_rate: float = Field(default=0.0, ge=0.0, le=1.0)
    rate_limit_rate: float = Field(default=0.0, ge=0.0, le=1.0)
    malformed_rate: float = Field(default=0.0, ge=0.0, le=1.0)
    latency_s: float | tuple[float, float] = 0.0
    timeout_s: float = Field(default=30.0, gt=0.0)

    @model_validator(mode="after")
    def _check(self) -> Faults:
        total = self.error_rate + self.timeout_rate + self.rate_limit_rate + self.malformed_rate
        if total > 1.0 + 1e-9:
            raise ValueError(f"the fault rates add up to {total:g}, more than 1")
        low, high = self.latency_s if isinstance(self.latency_s, tuple) else (self.latency_s,) * 2
        if low < 0 or high < low:
            raise ValueError(f"latency_s must be >= 0 (and low <= high), got {self.latency_s!r}")
        return self

    def draw(self, seed: int | str, tool: str, number: int) -> Draw:
        """The fault of call ``number`` (0-based) of ``tool`` under ``seed``: always the same."""
        digest = hashlib.sha256(f"{seed}|{tool}|{number}".encode()).digest()
        roll = int.from_bytes(digest[:8], "big") / 2**64  # uniform in [0, 1), well mixed
        if isinstance(self.latency_s, tuple):
            low, high = self.latency_s
            latency = low + (high - low) * int.from_bytes(digest[8:16], "big") / 2**64
        else:
            latency = self.latency_s
        kind: FaultKind | None = None
        edge = 0.0
        for name, rate in (
            ("error", self.error_rate),
            ("timeout", self.timeout_rate),
            ("rate_limit", self.rate_limit_rate),
            ("malformed", self.malformed_rate),
        ):
            edge += rate
            if roll < edge:
                kind = name  # type: ignore[assignment]
                break
        return Draw(kind, latency)


@dataclass(frozen=True)
class Draw:
    """One call's fate: the fault (None: it goes through) and its delay in seconds."""

    kind: FaultKind | None
    latency_s: float

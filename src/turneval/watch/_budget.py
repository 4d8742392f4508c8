"""The judge budget of ``turneval watch``: estimates before scoring, the real spend after.

A conversation is scored only when its estimated judge cost fits what is left of the budget's
period (:class:`Budget`); once scored, what the judge really spent takes the estimate's place.
Both are kept in the ledger (a claim's ``cost``, a batch's ``spend`` line), so a restart goes
on counting where it stopped, and the estimates learn from what was spent
(:class:`BudgetKeeping`, a base of :class:`~turneval.watch.Watcher`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from turneval.errors import ConfigError

from ._logs import Log

if TYPE_CHECKING:
    from turneval.options import RunOptions

__all__ = ["DEFAULT_OUTPUT_TOKENS", "Budget", "BudgetKeeping", "Spend"]

DEFAULT_OUTPUT_TOKENS = 400
"""Output tokens a judge request is expected to spend, before any was seen (budget estimates)."""


@dataclass(frozen=True)
class Budget:
    """A judge budget: ``amount`` of ``unit`` (``USD`` or ``tokens``) per ``period`` seconds."""

    amount: float
    unit: Literal["USD", "tokens"]
    period: float

    @classmethod
    def parse(cls, text: str) -> Budget:
        """``20USD/day``, ``100000tokens/hour`` (periods: minute, hour, day)."""
        import re

        found = re.fullmatch(r"\s*([0-9.]+)\s*(USD|\$|tokens?)\s*/\s*(minute|hour|day)\s*", text)
        if found is None:
            raise ConfigError(
                f"budget {text!r} is not AMOUNT UNIT/PERIOD (e.g. 20USD/day or 100000tokens/hour)"
            )
        unit: Literal["USD", "tokens"] = "tokens" if found[2].startswith("token") else "USD"
        period = {"minute": 60.0, "hour": 3600.0, "day": 86400.0}[found[3]]
        return cls(float(found[1]), unit, period)


@dataclass
class Spend:
    """The budget's period: when it started, and what is counted against it."""

    start: float = -1.0
    spent: float = 0.0
    at: float = 0.0  # the moment the decisions are made at


class BudgetKeeping:
    """The budget's accounts of a :class:`~turneval.watch.Watcher` (the state it shares)."""

    metrics: list[Any]
    options: RunOptions
    budget: Budget | None
    prices: Any
    lock: threading.RLock
    counts: dict[str, float]
    clock: Callable[[], float]
    _ledger: Log
    _spend: Spend
    _periods: dict[float, float]
    _seen_spend: dict[str, float]

    @property
    def period_spend(self) -> float:
        """What is counted against the budget in its current period (0 without a budget)."""
        if self.budget is None:
            return 0.0
        with self.lock:
            return self._period(self.clock()).spent

    def _count_spend(self, at: Any, amount: float) -> None:
        """Count ``amount`` against the budget period holding the moment ``at`` (the ledger's)."""
        if self.budget is None or at is None or not amount:
            return
        start = float(at) - float(at) % self.budget.period
        self._periods[start] = self._periods.get(start, 0.0) + float(amount)

    def _output_per_call(self) -> float:
        """Output tokens a judge request is counted for: the judge's cap, else what was seen."""
        llm = self.options.llm
        for name in ("max_tokens", "max_completion_tokens", "max_output_tokens"):
            cap = getattr(llm, name, None)
            if isinstance(cap, int) and cap > 0:
                return float(cap)
        seen = self._seen_spend
        return seen["output"] / seen["calls"] if seen["calls"] else float(DEFAULT_OUTPUT_TOKENS)

    def _cost(self, sample: Any) -> tuple[float, float]:
        """A conversation's estimated judge cost in the budget's unit, and its input estimate.

        Input tokens are the dry run's estimate (raised by the share the judge really spent
        over it, when more); output tokens are the judge's ``max_tokens`` per request, else
        the mean seen so far (``DEFAULT_OUTPUT_TOKENS`` before any).
        """
        from turneval.estimate import estimate

        assert self.budget is not None
        found = estimate([sample], self.metrics, llm=self.options.llm)
        seen = self._seen_spend
        ratio = max(1.0, seen["input"] / seen["estimated_input"]) if seen["estimated_input"] else 1
        estimated = float(found.total_prompt_tokens)
        tokens_in = estimated * ratio
        tokens_out = found.total_calls * self._output_per_call()
        if self.budget.unit == "tokens":
            return tokens_in + tokens_out, estimated
        price_in, price_out = self.prices.input_per_million, self.prices.output_per_million
        return (tokens_in * price_in + tokens_out * price_out) / 1e6, estimated

    def _period(self, at: float) -> Spend:
        """The budget period holding ``at``, with what is spent in it (a copy)."""
        assert self.budget is not None
        start = at - at % self.budget.period
        if start != self._spend.start:
            return Spend(start, self._periods.get(start, 0.0), at)
        return Spend(start, self._spend.spent, at)

    def _learn(self, line: dict[str, Any]) -> None:
        for name in self._seen_spend:
            self._seen_spend[name] += float(line.get(name) or 0)

    def _spent(self, batch: list[tuple[dict[str, Any], Any]], usage: Any) -> None:
        """Count what a scored batch really cost in place of its estimate (and keep it)."""
        assert self.budget is not None
        if self.budget.unit == "tokens":
            actual = float(usage.input_tokens + usage.output_tokens)
        else:
            actual = float(self.prices.cost(usage))
        reserved = sum(claim.get("cost", 0.0) for claim, _ in batch)
        at = next((claim["at"] for claim, _ in batch if "at" in claim), None)
        line = {
            "spend": actual,
            "reserved": reserved,
            "at": self.clock() if at is None else at,
            "estimated_input": sum(claim.get("estimated_input", 0.0) for claim, _ in batch),
            "input": usage.input_tokens,
            "output": usage.output_tokens,
            "calls": usage.calls,
            "indexes": [claim["index"] for claim, _ in batch],
        }
        with self.lock:
            self.counts["judge_spend"] += actual
            self._learn(line)
            self._count_spend(line["at"], actual - reserved)
            if self._spend.start == line["at"] - line["at"] % self.budget.period:
                self._spend.spent += actual - reserved
            try:
                self._ledger.append([line])
            except OSError:  # the estimate stays counted (a restart reads it from the claims)
                self.counts["errors"] += 1

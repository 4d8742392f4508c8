"""A hard budget for an optimisation: model calls, or money, never passed.

The guard sits on the models themselves (a LangChain callback that runs before each request is
sent): a request that would pass the budget is refused before it leaves, so the count at the
provider never exceeds it, retries and repairs included. Answers from the judge cache never
reach the model and cost nothing. Money is counted from each answer's token usage at the
given prices; before a request is sent, its prompt is estimated (characters / 4) and the
answer assumed to take ``output_tokens`` tokens, so a request that would probably pass the
money budget is refused too.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import BaseCallbackHandler

from turneval.errors import ConfigError, TurnevalError
from turneval.ratelimit import CHARS_PER_TOKEN
from turneval.usage import Usage

if TYPE_CHECKING:
    from uuid import UUID

    from turneval.results import Prices

__all__ = ["Budget", "BudgetExhaustedError", "BudgetGuard", "Spending"]


class BudgetExhaustedError(TurnevalError):
    """A model request was refused: it would have passed the optimisation's budget."""


@dataclass(frozen=True)
class Budget:
    """How much an optimisation may spend: model calls, money, or both.

    Attributes:
        calls: Most model requests sent (judge and reflection; cached answers are free).
        cost: Most money spent, at ``prices`` (needs them).
        prices: The models' prices (:class:`~turneval.results.Prices`).
        output_tokens: Tokens an answer is assumed to take before it comes (money budget).
    """

    calls: int | None = None
    cost: float | None = None
    prices: Prices | None = None
    output_tokens: int = 300

    def __post_init__(self) -> None:
        """Refuse a negative or unpriced budget."""
        if self.calls is not None and self.calls < 0:
            raise ConfigError(f"budget calls must be >= 0, got {self.calls}")
        if self.cost is not None:
            if self.cost < 0:
                raise ConfigError(f"budget cost must be >= 0, got {self.cost}")
            if self.prices is None:
                raise ConfigError("a budget in money needs the prices (Prices(input, output))")

    @classmethod
    def of(cls, value: Any) -> Budget:
        """A budget from an int (calls), a :class:`Budget`, or None (no limit)."""
        if value is None:
            return cls()
        if isinstance(value, Budget):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return cls(calls=value)
        raise ConfigError(
            f"budget must be a number of calls or a Budget(calls=..., cost=..., prices=...), "
            f"got {value!r}"
        )

    def __str__(self) -> str:
        """``200 calls``, ``$1.50``, both, or ``no limit``."""
        parts = []
        if self.calls is not None:
            parts.append(f"{self.calls} calls")
        if self.cost is not None:
            parts.append(f"{self.cost:g} in money")
        return " and ".join(parts) or "no limit"


@dataclass
class Spending:
    """What the guarded models spent: requests sent, tokens, refused requests.

    Attributes:
        calls: Requests sent to the models.
        usage: Their token usage (from the answers).
        refused: Requests refused by the budget (never sent).
    """

    calls: int = 0
    usage: Usage = field(default_factory=Usage)
    refused: int = 0


class BudgetGuard(BaseCallbackHandler):
    """A LangChain callback that refuses a request passing the budget, before it is sent.

    One guard is shared by every model of an optimisation (the judge and the reflection
    model), each with its own :class:`Spending`; ``limit`` is moved as the optimisation
    reserves its final measurement (see :meth:`reserve`).
    """

    raise_error = True
    run_inline = True

    def __init__(self, budget: Budget) -> None:
        """Guard ``budget``."""
        super().__init__()
        self.budget = budget
        self.spent: dict[str, Spending] = {}
        self._lock = threading.Lock()
        self._owner: dict[UUID, str] = {}
        self.reserved = 0  # calls kept back for the final measurement
        self.reserved_cost = 0.0
        self.releasing = False  # True: the reserve may be spent (the final measurement)

    def watch(self, llm: Any, role: str) -> Any:
        """A copy of the LangChain chat model ``llm`` counted under ``role``."""
        from turneval.judge._core import resolve_llm

        model = resolve_llm(llm)
        self.spent.setdefault(role, Spending())
        callbacks = [*(model.callbacks or []), _Role(self, role)]  # type: ignore[misc]
        return model.model_copy(update={"callbacks": callbacks})

    @property
    def calls(self) -> int:
        """Requests sent by every guarded model."""
        return sum(s.calls for s in self.spent.values())

    @property
    def usage(self) -> Usage:
        """Their usage, summed."""
        return sum((s.usage for s in self.spent.values()), Usage())

    def cost(self) -> float | None:
        """Money spent so far at the budget's prices (None without prices)."""
        prices = self.budget.prices
        return None if prices is None else float(prices.cost(self.usage))

    def remaining_calls(self) -> int | None:
        """Calls left before the search must stop (the reserve excluded until released)."""
        if self.budget.calls is None:
            return None
        reserve = 0 if self.releasing else self.reserved
        return max(0, self.budget.calls - reserve - self.calls)

    def reserve(self, calls: int, cost: float = 0.0) -> None:
        """Keep ``calls`` (and ``cost``) back for the final measurement."""
        self.reserved, self.reserved_cost = calls, cost

    def charge(self, role: str, usage: Usage) -> None:
        """Count requests sent elsewhere (the batch API): ``usage.calls`` and its tokens."""
        with self._lock:
            spending = self.spent.setdefault(role, Spending())
            spending.calls += usage.calls
            spending.usage = spending.usage + Usage(usage.input_tokens, usage.output_tokens)

    def _admit(self, role: str, prompt_chars: int) -> None:
        with self._lock:
            budget = self.budget
            spending = self.spent[role]
            if budget.calls is not None:
                reserve = 0 if self.releasing else self.reserved
                if self.calls + 1 > budget.calls - reserve:
                    spending.refused += 1
                    raise BudgetExhaustedError(
                        f"budget of {budget.calls} calls reached ({self.calls} sent"
                        + (f", {reserve} kept for the validation rows" if reserve else "")
                        + ")"
                    )
            if budget.cost is not None and budget.prices is not None:
                guess = Usage(round(prompt_chars / CHARS_PER_TOKEN), budget.output_tokens)
                reserve_cost = 0.0 if self.releasing else self.reserved_cost
                spent = float(budget.prices.cost(self.usage))
                if spent + float(budget.prices.cost(guess)) > budget.cost - reserve_cost:
                    spending.refused += 1
                    raise BudgetExhaustedError(
                        f"budget of {budget.cost:g} in money reached ({spent:.4f} spent)"
                    )
            spending.calls += 1

    def _answered(self, role: str, usage: Usage) -> None:
        with self._lock:
            self.spent[role].usage = self.spent[role].usage + usage


class _Role(BaseCallbackHandler):
    """The guard's callback on one model: its requests counted under ``role``."""

    raise_error = True
    run_inline = True

    def __init__(self, guard: BudgetGuard, role: str) -> None:
        super().__init__()
        self.guard = guard
        self.role = role

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[Any]], **kwargs: Any
    ) -> None:
        """Admit the request, or refuse it (:class:`BudgetExhaustedError`) before it is sent."""
        chars = sum(len(str(m.content)) for batch in messages for m in batch)
        self.guard._admit(self.role, chars)

    def on_llm_end(self, response: Any, **kwargs: Any) -> None:
        """Count the answer's tokens."""
        from turneval.judge._core import message_tokens

        usage = Usage()
        for generations in getattr(response, "generations", []) or []:
            for generation in generations:
                usage = usage + message_tokens(getattr(generation, "message", None))
        self.guard._answered(self.role, usage)

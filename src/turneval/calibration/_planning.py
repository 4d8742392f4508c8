"""What an optimisation would spend, before anything is spent (``turneval optimize --dry-run``)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from turneval.calibration._budget import Budget
from turneval.calibration._measuring import splits, task_of
from turneval.calibration._units import Task
from turneval.ratelimit import CHARS_PER_TOKEN

if TYPE_CHECKING:
    from turneval.results import Prices

__all__ = ["OptimizationPlan", "plan_optimization", "requests_of"]


@dataclass(frozen=True)
class OptimizationPlan:
    """What an optimisation would spend, before anything is spent (``--dry-run``).

    Attributes:
        optimisation_rows: Rows the search sees.
        validation_rows: Rows held out.
        requests_per_row: Judge requests of one row (mean).
        prompt_tokens_per_request: Estimated prompt tokens of one judge request (mean).
        start_calls: Judge calls scoring the starting judge on the optimisation rows.
        round_calls: Judge and reflection calls of one search round, at most.
        final_calls: Judge calls of the final measurement (kept back from the budget).
        rounds: Rounds the budget (or ``rounds``) allows.
        total_calls: All calls, at most (the budget caps them).
        cost: Their estimated cost at the prices (None without prices).
        batch_cost: The same through a batch API (``--engine batch``).
    """

    optimisation_rows: int
    validation_rows: int
    requests_per_row: float
    prompt_tokens_per_request: float
    start_calls: int
    round_calls: int
    final_calls: int
    rounds: int
    total_calls: int
    cost: float | None = None
    batch_cost: float | None = None

    def __str__(self) -> str:
        """The plan, for a terminal."""
        lines = [
            f"dry run: no model is called; {self.optimisation_rows} optimisation rows, "
            f"{self.validation_rows} validation rows, {self.requests_per_row:.1f} judge "
            f"requests per row (~{self.prompt_tokens_per_request:,.0f} prompt tokens each)",
            f"starting judge on the optimisation rows: {self.start_calls} calls",
            f"each search round: at most {self.round_calls} calls; {self.rounds} rounds",
            f"final measurement on the validation rows: {self.final_calls} calls (kept back)",
            f"expected calls: at most {self.total_calls} (a warm cache answers some for free)",
        ]
        if self.cost is not None:
            lines.append(
                f"expected cost: at most {self.cost:.4f} live, {self.batch_cost or 0.0:.4f} "
                "through a batch API"
            )
        return "\n".join(lines)


def requests_of(task: Task, rows: Sequence[int]) -> tuple[int, int]:
    """Judge requests of ``rows`` (indices into the task's rows) and their prompt characters."""
    count = chars = 0
    for r in rows:
        try:
            requests = task.metric.judge_requests(task.rows[r].sample)
        except Exception:  # a row the metric refuses costs nothing (it fails when scored)
            continue
        count += len(requests)
        chars += sum(len(q.system) + len(q.prompt) for q in requests)
    return count, chars


def plan_optimization(
    metric: Any,
    labels: Sequence[Any],
    *,
    validation: float = 0.3,
    seed: int = 0,
    rounds: int = 20,
    minibatch: int = 8,
    budget: Budget | int | None = None,
    prices: Prices | None = None,
    output_tokens: int = 300,
) -> OptimizationPlan:
    """The calls and cost :func:`optimize` would spend at most, with nothing spent.

    Args:
        metric: The judged metric.
        labels: The labeled rows, as :func:`optimize` takes them.
        validation: Share of rows held out.
        seed: Seed of the split.
        rounds: Search rounds at most.
        minibatch: Rows a round reflects on.
        budget: The budget (caps the calls).
        prices: Prices for the cost.
        output_tokens: Tokens an answer is assumed to take (for the cost).
    """
    task = task_of(metric, labels)
    optimisation, held, train, select = splits(task, validation, seed)
    requests, chars = requests_of(task, range(len(task.rows)))
    per_row = requests / len(task.rows)
    start = requests_of(task, optimisation)[0]
    batch = min(minibatch, len(train))
    per_round = round(per_row * (2 * batch + len(select))) + 1
    final = 3 * requests_of(task, held)[0] + requests_of(task, train)[0]
    limit = Budget.of(budget).calls
    allowed = rounds
    if limit is not None:
        allowed = max(0, min(rounds, (limit - start - final) // max(1, per_round)))
    total = start + allowed * per_round + final
    if limit is not None:
        total = min(total, limit)
    tokens = chars / max(1, requests) / CHARS_PER_TOKEN
    cost = batch_cost = None
    if prices is not None:
        one = (
            tokens * prices.input_per_million / 1e6
            + output_tokens * prices.output_per_million / 1e6
        )
        cost = total * one
        batch_cost = cost * (1 - prices.batch_discount)
    return OptimizationPlan(
        len(optimisation),
        len(held),
        per_row,
        tokens,
        start,
        per_round,
        final,
        allowed,
        total,
        cost,
        batch_cost,
    )

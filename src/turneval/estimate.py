"""Dry-run estimates: judge calls and prompt tokens of a run, before running it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from turneval.errors import ContextBudgetError
from turneval.judge import JudgeRequest, JudgeRun, judge_run
from turneval.metrics import Evaluator, JudgedMetric
from turneval.ratelimit import CHARS_PER_TOKEN
from turneval.results import Prices
from turneval.samples import Sample

__all__ = ["CHARS_PER_TOKEN", "Estimate", "estimate"]


@dataclass
class Estimate:
    """Judge calls and prompt tokens a run would spend, per metric and in total.

    Attributes:
        samples: Samples looked at.
        calls: Judge calls by metric (first attempts; retries and repairs are extra). A
            conversation's running summary is counted once, for the first metric that reads it
            (the run asks it once and shares it).
        prompt_tokens: Prompt tokens by metric: as the judge counts them before sending
            (tiktoken for OpenAI models, else its calibrated estimate; the verdict schema
            included, a running summary at its cap), or prompt text / ``CHARS_PER_TOKEN``
            when no judge model is known.
        contexts: Rows by metric and context policy (``full``, ``windowed``, ``compacted``).
        over_budget: Rows by metric that cannot fit the judge's context window (they would
            fail, naming the limit, before any request is sent).
        unknown: Metrics that call a model but are not judged metrics (no stated requests):
            those whose :meth:`~turneval.metrics.Evaluator.needs_judge` is true or that hold a
            model of their own.
    """

    samples: int = 0
    calls: dict[str, int] = field(default_factory=dict)
    prompt_tokens: dict[str, int] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)
    contexts: dict[str, dict[str, int]] = field(default_factory=dict)
    over_budget: dict[str, int] = field(default_factory=dict)

    @property
    def total_calls(self) -> int:
        """All judge calls."""
        return sum(self.calls.values())

    @property
    def total_prompt_tokens(self) -> int:
        """All prompt tokens."""
        return sum(self.prompt_tokens.values())

    def input_cost(self, prices: Prices) -> float:
        """The estimated cost of the prompt tokens."""
        return self.total_prompt_tokens * prices.input_per_million / 1e6

    def batch_input_cost(self, prices: Prices) -> float:
        """The estimated cost of the prompt tokens through a batch API (``--engine batch``)."""
        return self.input_cost(prices) * (1 - prices.batch_discount)

    def __str__(self) -> str:
        """A table of the estimate."""
        lines = [
            f"dry run over {self.samples} samples: no model is called",
            "metric  calls  prompt tokens (est.)",
        ]
        for name in self.calls:
            line = f"{name}  {self.calls[name]}  {self.prompt_tokens[name]:,}"
            seen = self.contexts.get(name, {})
            if set(seen) - {"full"}:
                line += "  (" + ", ".join(f"{k}: {v}" for k, v in sorted(seen.items())) + ")"
            if self.over_budget.get(name):
                line += f"  ({self.over_budget[name]} rows over the judge's context window)"
            lines.append(line)
        lines.append(f"total  {self.total_calls}  {self.total_prompt_tokens:,}")
        if self.unknown:
            lines.append(
                f"not estimated (they call a model but cannot state their prompts): {', '.join(self.unknown)}"
            )
        return "\n".join(lines)


def estimate(
    samples: Iterable[Sample], metrics: Sequence[Evaluator], *, llm: Any = None
) -> Estimate:
    """Count the judge calls and prompt tokens ``metrics`` would spend on ``samples``.

    Each judged metric states its requests with the same method a run uses
    (:meth:`~turneval.metrics.JudgedMetric.judge_requests`). ``llm`` is the run's default judge:
    metrics with an offline fallback (grounding) count LLM calls only when they would have one.
    """
    with judge_run(JudgeRun(llm=llm)):
        return _estimate(samples, metrics, llm)


def _estimate(samples: Iterable[Sample], metrics: Sequence[Evaluator], llm: Any) -> Estimate:
    result = Estimate()
    judged = [m for m in metrics if isinstance(m, JudgedMetric)]
    for metric in judged:
        result.calls[metric.name] = 0
        result.prompt_tokens[metric.name] = 0
    result.unknown = [
        m.name
        for m in metrics
        if not isinstance(m, JudgedMetric) and (m.needs_judge(llm) or m.judge_llm(None) is not None)
    ]
    for sample in samples:
        result.samples += 1
        shared: set[tuple[str, str, str]] = set()  # running summaries, asked once per row
        for metric in judged:
            if not isinstance(sample, metric.sample_types):
                continue
            try:
                requests = metric.judge_requests(sample)
            except ContextBudgetError:  # the row fails before any request: it costs nothing
                result.over_budget[metric.name] = result.over_budget.get(metric.name, 0) + 1
                continue
            except Exception:  # a sample the metric would reject costs nothing
                continue
            sent = [r for r in requests if not r.auxiliary or _first(r, shared)]
            result.calls[metric.name] += len(sent)
            result.prompt_tokens[metric.name] += sum(_tokens(r) for r in sent)
            policy = _policy(requests)
            if policy is not None:
                seen = result.contexts.setdefault(metric.name, {})
                seen[policy] = seen.get(policy, 0) + 1
    return result


def _first(request: JudgeRequest[Any], seen: set[tuple[str, str, str]]) -> bool:
    """Whether this summary request is the row's first of its kind (the run shares it)."""
    key = (request.system, request.prompt, request.schema.__name__)
    if key in seen:
        return False
    seen.add(key)
    return True


def _tokens(request: JudgeRequest[Any]) -> int:
    if request.context is not None:
        return request.context.prompt_tokens
    return round((len(request.system) + len(request.prompt)) / CHARS_PER_TOKEN)


def _policy(requests: Sequence[JudgeRequest[Any]]) -> str | None:
    policies = {r.context.policy for r in requests if r.context is not None and not r.auxiliary}
    if not policies:
        return None
    return next((p for p in ("compacted", "windowed") if p in policies), "full")

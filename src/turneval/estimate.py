"""Dry-run estimates: judge calls and prompt tokens of a run, before running it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from turneval.metrics import Metric
from turneval.metrics._judged import JudgedMetric
from turneval.results import Prices
from turneval.samples import Sample

__all__ = ["CHARS_PER_TOKEN", "Estimate", "estimate"]

CHARS_PER_TOKEN = 4.0
"""Prompt characters per token assumed by the estimate (English text with common tokenizers)."""


@dataclass
class Estimate:
    """Judge calls and prompt tokens a run would spend, per metric and in total.

    Attributes:
        samples: Samples looked at.
        calls: Judge calls by metric (first attempts; retries and repairs are extra).
        prompt_tokens: Estimated prompt tokens by metric (prompt text / ``CHARS_PER_TOKEN``;
            a structured-output schema adds a few hundred tokens per call).
        unknown: Metrics that call a model but cannot state their prompts.
    """

    samples: int = 0
    calls: dict[str, int] = field(default_factory=dict)
    prompt_tokens: dict[str, int] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)

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

    def __str__(self) -> str:
        """A table of the estimate."""
        lines = [
            f"dry run over {self.samples} samples: no model is called",
            "metric  calls  prompt tokens (est.)",
        ]
        lines += [
            f"{name}  {self.calls[name]}  {self.prompt_tokens[name]:,}" for name in self.calls
        ]
        lines.append(f"total  {self.total_calls}  {self.total_prompt_tokens:,}")
        if self.unknown:
            lines.append(
                f"not estimated (they call a model but cannot state their prompts): {', '.join(self.unknown)}"
            )
        return "\n".join(lines)


def estimate(samples: Iterable[Sample], metrics: Sequence[Metric]) -> Estimate:
    """Count the judge calls and prompt tokens ``metrics`` would spend on ``samples``."""
    result = Estimate()
    judged = [m for m in metrics if isinstance(m, JudgedMetric)]
    for metric in judged:
        result.calls[metric.name] = 0
        result.prompt_tokens[metric.name] = 0
    result.unknown = [
        m.name
        for m in metrics
        if not isinstance(m, JudgedMetric) and getattr(m, "llm", None) is not None
    ]
    for sample in samples:
        result.samples += 1
        for metric in judged:
            if not isinstance(sample, metric.sample_types):
                continue
            try:
                prompts = metric.prompts(sample)
            except NotImplementedError:
                if metric.name not in result.unknown:
                    result.unknown.append(metric.name)
                continue
            except Exception:  # a sample the metric would reject costs nothing
                continue
            result.calls[metric.name] += len(prompts)
            chars = sum(len(system) + len(user) for system, user in prompts)
            result.prompt_tokens[metric.name] += round(chars / CHARS_PER_TOKEN)
    return result

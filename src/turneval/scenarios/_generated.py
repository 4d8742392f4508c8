"""What a generation gives back: the scenarios and what was left out, or what it would cost.

Defined here and re-exported by :mod:`turneval.scenarios._engine` and the package.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path

from turneval.results import Prices
from turneval.scenarios._quality import Coverage, Discarded
from turneval.simulation import Scenario
from turneval.usage import Usage

__all__ = ["FailedRequest", "GenerationEstimate", "GenerationResult"]


@dataclass(frozen=True)
class FailedRequest:
    """A request that got no usable answer (its scenarios are missing; a rerun asks again).

    Attributes:
        label: What the request was about.
        error: ``"<ErrorType>: <message>"``.
    """

    label: str
    error: str


@dataclass
class GenerationResult:
    """What a generation produced: the scenarios kept, those left out and why, the coverage.

    Attributes:
        scenarios: The scenarios kept, with ids, in plan order; world scenarios hold their
            world (a JSONL file does not: :func:`~turneval.scenarios.load` attaches it).
        discarded: Scenarios left out: reference actions that failed on the world, near
            duplicates; each with its reason.
        failed: Requests with no usable answer (a rerun asks them again).
        skipped: Inputs the source left out (e.g. a trace that could not be converted).
        coverage: What the kept scenarios exercise.
        usage: The generator's usage in this run (requests answered before cost nothing).
        requests: Requests the plan holds.
        answered_before: Requests answered by the progress file (not asked again).
        source: The source's name.
        seed: The seed.
        model: The generator model's name.
    """

    scenarios: list[Scenario]
    discarded: list[Discarded] = field(default_factory=list)
    failed: list[FailedRequest] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    coverage: Coverage = field(default_factory=Coverage)
    usage: Usage = field(default_factory=Usage)
    requests: int = 0
    answered_before: int = 0
    source: str = ""
    seed: int = 0
    model: str | None = None

    def write_jsonl(self, path: str | PathLike[str]) -> Path:
        """Write the kept scenarios, one JSON object a line (``Scenario.from_jsonl`` reads it)."""
        from turneval.scenarios._files import write_scenarios

        return write_scenarios(self.scenarios, path)

    def to_html(self, path: str | PathLike[str]) -> Path:
        """Write the report: coverage tables, the scenarios, what was left out and why."""
        from turneval.scenarios._report import generation_html

        target = Path(path)
        target.write_text(generation_html(self), encoding="utf-8")
        return target

    def __str__(self) -> str:
        """Counts, then the coverage table."""
        replayed = sum(1 for d in self.discarded if d.stage == "replay")
        duplicates = sum(1 for d in self.discarded if d.stage == "duplicate")
        lines = [
            f"generated {len(self.scenarios)} scenarios from {self.source} (seed {self.seed}, "
            f"model {self.model}): {self.requests} requests, {self.answered_before} answered "
            f"before, {self.usage.calls} sent, {self.usage.cached_calls} from the cache",
            f"left out: {replayed} whose reference actions failed on the world, "
            f"{duplicates} near duplicates; {len(self.failed)} requests failed",
        ]
        lines += [f"  failed request {f.label}: {f.error}" for f in self.failed]
        lines += [f"  skipped input: {reason}" for reason in self.skipped]
        return "\n".join(lines) + "\n" + str(self.coverage)


@dataclass
class GenerationEstimate:
    """What a generation would ask and cost, before asking anything.

    Attributes:
        requests: Requests the plan holds.
        scenarios: Scenarios they ask for.
        prompt_tokens: Estimated prompt tokens of the requests still to ask (the estimate of
            :mod:`turneval.estimate`: prompt text / ``CHARS_PER_TOKEN``).
        output_tokens: Estimated output tokens of those requests
            (:data:`OUTPUT_TOKENS_PER_SCENARIO` per scenario).
        answered: Requests the progress file or the cache already answers (they cost nothing).
    """

    requests: int
    scenarios: int
    prompt_tokens: int
    output_tokens: int
    answered: int = 0

    @property
    def to_ask(self) -> int:
        """Requests that would be sent."""
        return self.requests - self.answered

    def cost(self, prices: Prices) -> float:
        """The estimated cost of the requests still to ask, at ``prices``."""
        usage = Usage(input_tokens=self.prompt_tokens, output_tokens=self.output_tokens)
        return prices.cost(usage)

    def __str__(self) -> str:
        """One paragraph for a terminal."""
        return (
            f"dry run: no model is called\n{self.requests} requests for {self.scenarios} "
            f"scenarios; {self.answered} already answered (progress file or cache), "
            f"{self.to_ask} to ask\nestimated tokens to spend: {self.prompt_tokens:,} prompt, "
            f"{self.output_tokens:,} output"
        )

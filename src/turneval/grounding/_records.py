"""The records of a grounding check (facts, claims, citations, the result) and its input limits."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from turneval.errors import ConfigError

__all__ = [
    "MAX_CANDIDATE_TOKENS",
    "MAX_FACTS",
    "MAX_FACT_CHARS",
    "CitedChunk",
    "Claim",
    "Fact",
    "GroundingResult",
    "as_facts",
    "check_limits",
    "check_thresholds",
]

MAX_FACTS = 200
"""Most facts one grounding check accepts (more is a ``ConfigError``)."""
MAX_FACT_CHARS = 10_000
"""Longest fact, in characters, one grounding check accepts."""
MAX_CANDIDATE_TOKENS = 4096
"""Longest answer candidate, in tokens (words and periods), one grounding check accepts."""


class Fact(BaseModel):
    """A piece of text to ground answers in, with free attributes (title, author, URL, ...)."""

    text: str
    attributes: dict[str, str] = Field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CitedChunk:
    """A fact cited by at least one claim."""

    fact_index: int
    text: str
    attributes: dict[str, str]


@dataclass(slots=True)
class Claim:
    """One sentence of the answer candidate.

    Attributes:
        text: The sentence.
        start: Its start offset (characters) in the candidate.
        end: Its end offset (exclusive).
        citation_indices: Facts supporting it (empty unless it is grounded).
        anti_citation_indices: Facts it contradicts (with anti-citations on).
        grounding_check_required: False for sentences that assert nothing.
        score: Its support in [0, 1] (None unless claim-level scores are on).
    """

    text: str
    start: int
    end: int
    citation_indices: list[int] = field(default_factory=list)
    anti_citation_indices: list[int] = field(default_factory=list)
    grounding_check_required: bool = True
    score: float | None = None


@dataclass(slots=True)
class GroundingResult:
    """The outcome of a grounding check."""

    support_score: float
    claims: list[Claim]
    cited_chunks: list[CitedChunk]
    contradiction_score: float | None = None
    helpfulness_score: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "support_score": self.support_score,
            "contradiction_score": self.contradiction_score,
            "helpfulness_score": self.helpfulness_score,
            "cited_chunks": [asdict(c) for c in self.cited_chunks],
            "claims": [asdict(c) for c in self.claims],
        }


def check_limits(answer: str, facts: Sequence[Fact]) -> None:
    """Refuse an input past a documented limit.

    Raises:
        ConfigError: more than :data:`MAX_FACTS` facts, a fact over :data:`MAX_FACT_CHARS`
            characters, or a candidate over :data:`MAX_CANDIDATE_TOKENS` tokens (which one).
    """
    if len(facts) > MAX_FACTS:
        raise ConfigError(f"check_grounding accepts at most {MAX_FACTS} facts, got {len(facts)}")
    for number, fact in enumerate(facts):
        if len(fact.text) > MAX_FACT_CHARS:
            raise ConfigError(
                f"fact {number} has {len(fact.text)} characters; the limit is {MAX_FACT_CHARS}"
            )
    tokens = len(re.findall(r"\w+|\.", answer))
    if tokens > MAX_CANDIDATE_TOKENS:
        raise ConfigError(
            f"the answer candidate has {tokens} tokens (words and periods); the limit is "
            f"{MAX_CANDIDATE_TOKENS}"
        )


def as_facts(facts: Sequence[Fact | str]) -> list[Fact]:
    """The facts as :class:`Fact` records (a plain string is a fact with no attributes)."""
    return [fact if isinstance(fact, Fact) else Fact(text=str(fact)) for fact in facts]


def check_thresholds(**thresholds: float) -> None:
    """Refuse a threshold outside [0, 1].

    Raises:
        ConfigError: naming the threshold and its value.
    """
    for name, value in thresholds.items():
        if not 0.0 <= value <= 1.0:
            raise ConfigError(f"{name} must be in [0, 1], got {value}")

"""The grounding check: :func:`check_grounding` and :func:`acheck_grounding`, either backend."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from turneval._sync import sync_form
from turneval.grounding._llm import grounding_request, grounding_result
from turneval.grounding._offline import offline_grounding
from turneval.grounding._records import Fact, GroundingResult, as_facts, check_thresholds
from turneval.judge import Judge

__all__ = ["acheck_grounding", "check_grounding"]


async def acheck_grounding(
    answer_candidate: str,
    facts: Sequence[Fact | str],
    *,
    citation_threshold: float = 0.6,
    enable_claim_level_score: bool = False,
    enable_anti_citations: bool = False,
    anti_citation_threshold: float = 0.8,
    prompt: str | None = None,
    llm: Any = None,
) -> GroundingResult:
    """Check how well ``answer_candidate`` is grounded in ``facts`` (see the module docs).

    ``llm=None`` uses the offline backend; a LangChain chat model judges all claims in one call.
    A helpfulness score needs both ``prompt`` and ``llm``.

    Raises:
        ConfigError: more than 200 facts, a fact over 10,000 characters, a candidate over 4,096
            tokens, or a threshold outside [0, 1].
    """
    if llm is None:
        return offline_grounding(
            answer_candidate,
            facts,
            citation_threshold=citation_threshold,
            enable_claim_level_score=enable_claim_level_score,
            enable_anti_citations=enable_anti_citations,
            anti_citation_threshold=anti_citation_threshold,
        )
    check_thresholds(
        citation_threshold=citation_threshold, anti_citation_threshold=anti_citation_threshold
    )
    fact_list = as_facts(facts)
    request = grounding_request(answer_candidate, fact_list, prompt)
    reply = await Judge(llm).ask(request.system, request.prompt, request.schema)
    return grounding_result(
        answer_candidate,
        fact_list,
        reply.parsed,
        citation_threshold=citation_threshold,
        enable_claim_level_score=enable_claim_level_score,
        enable_anti_citations=enable_anti_citations,
        prompt=prompt,
    )


check_grounding = sync_form(acheck_grounding)
"""Sync form of :func:`acheck_grounding` (same arguments)."""

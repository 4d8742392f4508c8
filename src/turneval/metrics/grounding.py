"""Grounding metrics: answers supported by retrieved contexts, or by the agent's own tool outputs."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from pydantic import Field

from turneval.grounding import Fact, GroundingResult, acheck_grounding
from turneval.messages import AIMessage, ToolMessage
from turneval.metrics.base import Explained, MultiTurnMetric, SingleTurnMetric, require
from turneval.samples import MultiTurnSample, SingleTurnSample

__all__ = ["Groundedness", "ToolOutputGroundedness"]


class _GroundingOptions(SingleTurnMetric):
    """Options shared by the grounding metrics (see :func:`turneval.grounding.check_grounding`).

    Attributes:
        citation_threshold: Support a claim needs to be grounded (and cite facts).
        enable_anti_citations: Also find contradicted claims.
        anti_citation_threshold: Frame overlap a contradiction needs.
        llm: None for the offline backend, or a LangChain chat model.
    """

    citation_threshold: float = Field(default=0.6, ge=0, le=1)
    enable_anti_citations: bool = False
    anti_citation_threshold: float = Field(default=0.8, ge=0, le=1)
    llm: Any = None

    async def _check(self, answer: str, facts: list[Fact]) -> GroundingResult:
        return await acheck_grounding(
            answer,
            facts,
            citation_threshold=self.citation_threshold,
            enable_claim_level_score=True,
            enable_anti_citations=self.enable_anti_citations,
            anti_citation_threshold=self.anti_citation_threshold,
            llm=self.llm,
        )


def _counts(result: GroundingResult) -> tuple[int, int]:
    required = [c for c in result.claims if c.grounding_check_required]
    return sum(1 for c in required if c.citation_indices), len(required)


class Groundedness(_GroundingOptions):
    """Support score of ``response`` against ``retrieved_contexts`` (one fact per context)."""

    name: str = "groundedness"

    async def _evaluate(self, sample: SingleTurnSample) -> Explained:
        response = require(self, sample, "response")
        contexts = require(self, sample, "retrieved_contexts")
        result = await self._check(response, [Fact(text=text) for text in contexts])
        grounded, required = _counts(result)
        reason = f"grounded claims={grounded}/{required}={result.support_score:.3f}"
        if result.contradiction_score is not None:
            reason += f", contradiction={result.contradiction_score:.3f}"
        return Explained(result.support_score, reason, result.to_dict())


class ToolOutputGroundedness(_GroundingOptions, MultiTurnMetric):
    """Support of the AI's answers by the tool outputs that came before each of them.

    Every AI message with text is checked against the ToolMessages earlier in the conversation;
    each tool output is a fact whose attributes name its tool call (``tool``, ``tool_call_id``,
    ``message_index``). The score is grounded claims over claims needing a check, across all
    answers (1.0 when no answer asserts anything).
    """

    name: str = "tool_output_groundedness"
    sample_types = (MultiTurnSample,)

    async def _evaluate(self, sample: MultiTurnSample) -> Explained:
        facts: list[Fact] = []
        calls: dict[str, str] = {}
        pending: list[str] = []  # names of calls not yet answered, in order
        answers: list[dict[str, Any]] = []
        grounded = required = 0
        for index, message in enumerate(sample.user_input):
            if isinstance(message, AIMessage):
                if message.content.strip():
                    result = await self._check(message.content, list(facts))
                    good, needed = _counts(result)
                    grounded, required = grounded + good, required + needed
                    answers.append(
                        {
                            "message_index": index,
                            "support_score": result.support_score,
                            "claims": [asdict(c) for c in result.claims],
                            "cited": [
                                {"fact_index": c.fact_index, **c.attributes}
                                for c in result.cited_chunks
                            ],
                        }
                    )
                for call in message.tool_calls or []:
                    if call.id:
                        calls[call.id] = call.name
                    pending.append(call.name)
            elif isinstance(message, ToolMessage):
                name = calls.get(message.tool_call_id or "") or (pending[0] if pending else "")
                if pending and name in pending:
                    pending.remove(name)
                facts.append(
                    Fact(
                        text=message.content,
                        attributes={
                            "tool": name,
                            "tool_call_id": message.tool_call_id or "",
                            "message_index": str(index),
                        },
                    )
                )
        value = grounded / required if required else 1.0
        reason = (
            f"grounded claims={grounded}/{required}={value:.3f} over {len(answers)} AI answer(s)"
        )
        return Explained(value, reason, {"answers": answers, "tool_outputs": len(facts)})

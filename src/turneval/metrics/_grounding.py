"""Grounding metrics: answers supported by retrieved contexts, or by the agent's own tool outputs.

Both are judged metrics with an offline fallback: with a judge (the metric's ``llm`` or the
``llm`` given to ``evaluate``) every answer is checked by the LLM backend through the judge
layer (limiter, cache, usage, retries); with none, the offline backend checks it.

The grounding engine (:mod:`turneval.grounding`, with numpy) is imported when a metric first
checks an answer, so that ``import turneval.metrics`` stays light.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from turneval.judge import JudgeReply, JudgeRequest
from turneval.judge._template import RequestContext
from turneval.judge.budget import Budget
from turneval.judge.context import segment_tokens
from turneval.messages import AIMessage, ToolMessage
from turneval.metrics._judged import JudgedMetric
from turneval.metrics.base import Explained, MultiTurnMetric, SampleT, SingleTurnMetric, require
from turneval.samples import MultiTurnSample, SingleTurnSample

if TYPE_CHECKING:
    from turneval.grounding import Fact, GroundingResult

__all__ = ["Groundedness", "ToolOutputGroundedness"]


@dataclass(frozen=True)
class _Answer:
    message_index: int
    text: str
    facts: tuple[Fact, ...]
    label: str = ""  # set when the facts were bounded: which tool outputs the judge saw


class _GroundingOptions(JudgedMetric[SampleT]):
    """Options shared by the grounding metrics (see :func:`turneval.grounding.check_grounding`).

    Attributes:
        citation_threshold: Support a claim needs to be grounded (and cite facts).
        enable_anti_citations: Also find contradicted claims.
        anti_citation_threshold: Frame overlap a contradiction needs (offline backend).
        llm: A LangChain chat model for the LLM backend; None uses ``evaluate``'s ``llm``, and
            the offline backend when there is none.
    """

    requires_llm: ClassVar[bool] = False

    citation_threshold: float = Field(default=0.6, ge=0, le=1)
    enable_anti_citations: bool = False
    anti_citation_threshold: float = Field(default=0.8, ge=0, le=1)

    @abstractmethod
    def _answers(self, sample: SampleT) -> list[_Answer]:
        """The answers to ground, each with the facts it may cite."""

    def requests(self, sample: SampleT) -> list[JudgeRequest[Any]]:
        """One LLM-backend question per answer; none when grounding offline."""
        from turneval.grounding import grounding_request

        answers = self._answers(sample)
        if self.default_llm() is None:
            return []
        requests = []
        for answer in answers:
            request = grounding_request(answer.text, answer.facts)
            if answer.label:  # the judge sees the most recent tool outputs only
                seen = RequestContext("windowed", 0)
                request = replace(request, label=answer.label, context=seen)
            requests.append(request)
        return requests

    def _results(
        self, sample: SampleT, replies: Sequence[JudgeReply[Any]]
    ) -> list[tuple[_Answer, GroundingResult]]:
        from turneval.grounding import grounding_result, offline_grounding

        answers = self._answers(sample)
        if not replies:
            return [
                (
                    a,
                    offline_grounding(
                        a.text,
                        a.facts,
                        citation_threshold=self.citation_threshold,
                        enable_claim_level_score=True,
                        enable_anti_citations=self.enable_anti_citations,
                        anti_citation_threshold=self.anti_citation_threshold,
                    ),
                )
                for a in answers
            ]
        return [
            (
                a,
                grounding_result(
                    a.text,
                    a.facts,
                    reply.parsed,
                    citation_threshold=self.citation_threshold,
                    enable_claim_level_score=True,
                    enable_anti_citations=self.enable_anti_citations,
                ),
            )
            for a, reply in zip(answers, replies, strict=True)
        ]


def _pieces(text: str) -> list[str]:
    """``text`` in pieces of at most the fact limit, cut after a line or a space if any."""
    from turneval.grounding import MAX_FACT_CHARS

    size = MAX_FACT_CHARS
    pieces = []
    while len(text) > size:
        cut = max(text.rfind("\n", 0, size), text.rfind(" ", 0, size)) + 1 or size
        pieces.append(text[:cut])
        text = text[cut:]
    return [*pieces, text]


def _counts(result: GroundingResult) -> tuple[int, int]:
    required = [c for c in result.claims if c.grounding_check_required]
    return sum(1 for c in required if c.citation_indices), len(required)


class Groundedness(_GroundingOptions[SingleTurnSample], SingleTurnMetric):
    """Support score of ``response`` against ``retrieved_contexts`` (one fact per context).

    A context past the fact length limit is checked in pieces; citations still name contexts.
    """

    name: str = "groundedness"

    def _answers(self, sample: SingleTurnSample) -> list[_Answer]:
        from turneval.grounding import Fact

        response = require(self, sample, "response")
        contexts = require(self, sample, "retrieved_contexts")
        pieces = (piece for text in contexts for piece in _pieces(text))  # long ones: several
        return [_Answer(0, response, tuple(Fact(text=piece) for piece in pieces))]

    def verdict(self, sample: SingleTurnSample, replies: Sequence[JudgeReply[Any]]) -> Explained:
        """The support score, with the claims and citations (indices of the contexts)."""
        from turneval.grounding import CitedChunk

        [(_, result)] = self._results(sample, replies)
        contexts = sample.retrieved_contexts or []
        owner = [number for number, text in enumerate(contexts) for _ in _pieces(text)]
        if len(owner) != len(contexts):  # a context past the fact limit was cut: cite contexts
            for claim in result.claims:
                claim.citation_indices = sorted({owner[i] for i in claim.citation_indices})
                claim.anti_citation_indices = sorted(
                    {owner[i] for i in claim.anti_citation_indices}
                )
            cited = sorted({owner[chunk.fact_index] for chunk in result.cited_chunks})
            result.cited_chunks = [CitedChunk(i, contexts[i], {}) for i in cited]
        grounded, required = _counts(result)
        reason = f"grounded claims={grounded}/{required}={result.support_score:.3f}"
        if result.contradiction_score is not None:
            reason += f", contradiction={result.contradiction_score:.3f}"
        return Explained(result.support_score, reason, result.to_dict())


def _cited(fact_index: int, attributes: dict[str, str]) -> dict[str, Any]:
    """A cited tool output: its fact and attributes, its message index a number as the answer's.

    Facts' attributes are text (as Vertex AI's); the details give indices as numbers.
    """
    cited: dict[str, Any] = {"fact_index": fact_index, **attributes}
    if "message_index" in cited:
        cited["message_index"] = int(cited["message_index"])
    return cited


def _bounded(answer: _Answer, budget: Budget, counts: dict[str, int]) -> _Answer:
    """``answer`` with the most recent tool outputs that fit the judge's context.

    At most :data:`~turneval.grounding.MAX_FACTS` of them; the older ones are not shown.
    """
    from turneval.grounding import MAX_FACTS

    claims = len(re.findall(r"[.!?](?:\s|$)", answer.text)) + 1
    room = budget.prompt_tokens(budget.answer_tokens(claims)) - 2 * budget.count(answer.text)
    room = min(room - 400, segment_tokens(budget))  # the recent outputs, as a window shows
    kept: list[Fact] = []
    used = 0
    for fact in reversed(answer.facts):
        if len(kept) == MAX_FACTS:
            break
        tokens = counts.get(fact.text)
        if tokens is None:
            tokens = counts[fact.text] = budget.count(fact.text) + 8
        if used + tokens > room:
            if tokens > room // 2:  # one huge output: the next older ones may still fit
                continue
            break
        kept.append(fact)
        used += tokens
    if len(kept) == len(answer.facts):
        return answer
    kept.reverse()
    label = (
        f"answer at message {answer.message_index}: the {len(kept)} most recent of "
        f"{len(answer.facts)} tool output pieces"
    )
    return _Answer(answer.message_index, answer.text, tuple(kept), label)


class ToolOutputGroundedness(_GroundingOptions[MultiTurnSample], MultiTurnMetric):
    """Support of the AI's answers by the tool outputs that came before each of them.

    Every AI message with text is checked against the ToolMessages earlier in the conversation;
    each tool output is a fact whose attributes name its tool call (``tool``, ``tool_call_id``,
    ``message_index``); an output past the fact length limit is cut into several such facts. The score is grounded claims over claims needing a check, across all
    answers (1.0 when no answer asserts anything).
    """

    name: str = "tool_output_groundedness"
    context_policy: ClassVar[str] = "windowed"

    def _answers(self, sample: MultiTurnSample) -> list[_Answer]:
        from turneval.grounding import Fact

        facts: list[Fact] = []
        calls: dict[str, str] = {}
        pending: list[str] = []  # names of calls not yet answered, in order
        answers: list[_Answer] = []
        for index, message in enumerate(sample.user_input):
            if isinstance(message, AIMessage):
                if message.content.strip():
                    answers.append(_Answer(index, message.content, tuple(facts)))
                for call in message.tool_calls or []:
                    if call.id:
                        calls[call.id] = call.name
                    pending.append(call.name)
            elif isinstance(message, ToolMessage):
                name = calls.get(message.tool_call_id or "") or (pending[0] if pending else "")
                if pending and name in pending:
                    pending.remove(name)
                attributes = {
                    "tool": name,
                    "tool_call_id": message.tool_call_id or "",
                    "message_index": str(index),
                }  # a long output is several facts (of the fact limit), each naming the call
                facts += [
                    Fact(text=piece, attributes=attributes) for piece in _pieces(message.content)
                ]
        budget = self.context_budget()
        if budget is None:
            return answers
        counts: dict[str, int] = {}  # each tool output piece is counted once
        return [_bounded(a, budget, counts) for a in answers]

    def verdict(self, sample: MultiTurnSample, replies: Sequence[JudgeReply[Any]]) -> Explained:
        """Grounded claims over claims needing a check, across every AI answer."""
        grounded = required = 0
        answers: list[dict[str, Any]] = []
        for answer, result in self._results(sample, replies):
            good, needed = _counts(result)
            grounded, required = grounded + good, required + needed
            answers.append(
                {
                    "message_index": answer.message_index,
                    "support_score": result.support_score,
                    "claims": [asdict(c) for c in result.claims],
                    "cited": [_cited(c.fact_index, c.attributes) for c in result.cited_chunks],
                }
            )
        tool_outputs = sum(isinstance(m, ToolMessage) for m in sample.user_input)
        value = grounded / required if required else 1.0
        reason = (
            f"grounded claims={grounded}/{required}={value:.3f} over {len(answers)} AI answer(s)"
        )
        return Explained(value, reason, {"answers": answers, "tool_outputs": tool_outputs})

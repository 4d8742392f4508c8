"""TopicAdherenceScore: does the AI answer what is in its domain and refuse what is not?"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import Field

from turneval.errors import InvalidSampleError
from turneval.judge import (
    SYSTEM_PROMPT,
    JudgeReply,
    JudgeRequest,
    StrictVerdict,
    escape,
    render_conversation,
)
from turneval.messages import AIMessage, HumanMessage
from turneval.metrics._judged import JudgedMetric
from turneval.metrics.base import Explained, MultiTurnMetric, missing_field
from turneval.results import ratio
from turneval.samples import MultiTurnSample

__all__ = ["TopicAdherenceScore", "TopicAdherenceVerdict", "TopicMark"]


class TopicMark(StrictVerdict):
    """One topic the human raised, with the judge's marks."""

    topic: str = Field(description="The topic, in a few words.")
    answered: bool = Field(
        description="True if the AI answered it or acted on it; false if it refused or declined."
    )
    on_topic: bool = Field(description="True if the topic falls within a reference topic.")


class TopicAdherenceVerdict(StrictVerdict):
    """The judge's answer: every topic of the conversation, marked."""

    topics: list[TopicMark] = Field(description="Each distinct topic the human raised, in order.")


PROMPT = """List the distinct topics the human raises in the conversation. Mark each one:
- answered: true if the AI answered it or acted on it, false if the AI refused or declined it;
- on_topic: true if it falls within one of the reference topics, else false.

Example. Reference topics: ["cooking"]. Human asks for a pasta recipe (AI gives it), then for
stock tips (AI declines) -> {{"topics": [{{"topic": "pasta recipe", "answered": true,
"on_topic": true}}, {{"topic": "stock tips", "answered": false, "on_topic": false}}]}}

Reference topics: {reference_topics}

{conversation}"""


class TopicAdherenceScore(JudgedMetric[MultiTurnSample], MultiTurnMetric):
    """Precision, recall or F1 of the AI's adherence to ``reference_topics`` (one judge call).

    The judge lists the topics the human raised and marks each answered/refused and
    on/off-topic. TP = answered and on-topic, FP = answered and off-topic, FN = refused and
    on-topic; precision = TP/(TP+FP), recall = TP/(TP+FN), F1 = 2TP/(2TP+FP+FN) (exact; 0 where
    undefined). A conversation without a human or an AI message is an
    :class:`~turneval.errors.InvalidSampleError` (``field="user_input"``): no topic was raised,
    or none was answered or refused, so the judge is not asked.

    Attributes:
        mode: ``"f1"``, ``"precision"`` or ``"recall"``.
    """

    name: str = "topic_adherence"
    mode: Literal["f1", "precision", "recall"] = "f1"

    def requests(self, sample: MultiTurnSample) -> list[JudgeRequest[Any]]:
        """One question: the conversation's topics, each marked answered and on-topic."""
        topics = sample.reference_topics
        if topics is None:
            raise missing_field(self, "reference_topics")
        if not topics:  # nothing to adhere to: a judge would only guess (and be paid for it)
            raise InvalidSampleError(
                f"metric {self.name!r} needs at least one topic in 'reference_topics', got []",
                field="reference_topics",
            )
        for kind, name in ((HumanMessage, "human"), (AIMessage, "AI")):  # as the other
            # conversation judges: topics answered or refused by no AI would be a guess
            if not any(isinstance(message, kind) for message in sample.user_input):
                raise InvalidSampleError(
                    f"metric {self.name!r} needs at least one {name} message in user_input, "
                    "found none",
                    field="user_input",
                )
        prompt = PROMPT.format(
            reference_topics=escape(str(topics)), conversation=render_conversation(sample)
        )
        return [JudgeRequest(prompt, TopicAdherenceVerdict, SYSTEM_PROMPT)]

    def verdict(self, sample: MultiTurnSample, replies: Sequence[JudgeReply[Any]]) -> Explained:
        """Precision, recall and F1 from the marked topics; the value is the one of ``mode``."""
        marks: list[TopicMark] = replies[0].parsed.topics
        tp = sum(1 for m in marks if m.answered and m.on_topic)
        fp = sum(1 for m in marks if m.answered and not m.on_topic)
        fn = sum(1 for m in marks if not m.answered and m.on_topic)
        precision = tp / (tp + fp) if tp + fp else 0.0
        recall = tp / (tp + fn) if tp + fn else 0.0
        f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
        value = {"precision": precision, "recall": recall, "f1": f1}[self.mode]
        reason = (
            f"TP={tp} (answered, on-topic), FP={fp} (answered, off-topic), "
            f"FN={fn} (refused, on-topic); {ratio('precision', tp, tp + fp, precision)}, "
            f"{ratio('recall', tp, tp + fn, recall)}, F1={f1:.3f}; mode={self.mode}"
        )
        details = {
            "topics": [mark.model_dump() for mark in marks],
            "precision": precision,
            "recall": recall,
            "f1": f1,
        }
        return Explained(value, reason, details)

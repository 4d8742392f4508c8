"""Agent goal accuracy: did the conversation reach the user's goal (binary, one judge call)?"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import Field

from turneval.judge import (
    SYSTEM_PROMPT,
    JudgeReply,
    JudgeRequest,
    StrictVerdict,
    escape,
    render_conversation,
)
from turneval.metrics._judged import JudgedMetric
from turneval.metrics.base import Explained, MultiTurnMetric, missing_field
from turneval.samples import MultiTurnSample

__all__ = [
    "AgentGoalAccuracyWithReference",
    "AgentGoalAccuracyWithoutReference",
    "GoalVerdict",
    "InferredGoalVerdict",
]


class GoalVerdict(StrictVerdict):
    """The judge's answer when the desired outcome is given."""

    end_state: str = Field(description="The final outcome the conversation actually reached.")
    reason: str = Field(description="Why the end state does or does not achieve the outcome.")
    achieved: bool = Field(description="True if the end state achieves the desired outcome.")


class InferredGoalVerdict(StrictVerdict):
    """The judge's answer when the goal must be inferred from the human turns."""

    user_goal: str = Field(description="What the human wanted to achieve, from their turns.")
    end_state: str = Field(description="The final outcome the conversation actually reached.")
    reason: str = Field(description="Why the end state does or does not achieve the goal.")
    achieved: bool = Field(description="True if the end state achieves the user's goal.")


WITH_REFERENCE = """Compare the end state reached in the conversation (what the AI and its \
tools actually did, not what it promised) with the desired outcome. achieved is true only if \
the end state achieves the desired outcome.

Desired outcome: {reference}

{conversation}"""

WITHOUT_REFERENCE = """Infer the user's goal from the human turns, then the end state reached \
in the conversation (what the AI and its tools actually did, not what it promised). achieved \
is true only if the end state achieves the goal.

{conversation}"""


def _outcome(verdict: GoalVerdict | InferredGoalVerdict) -> Explained:
    word = "achieved" if verdict.achieved else "not achieved"
    goal = f"goal: {verdict.user_goal}; " if isinstance(verdict, InferredGoalVerdict) else ""
    reason = (
        f"{word} ({int(verdict.achieved)}): {goal}end state: {verdict.end_state}; {verdict.reason}"
    )
    return Explained(float(verdict.achieved), reason, verdict.model_dump())


class AgentGoalAccuracyWithReference(JudgedMetric[MultiTurnSample], MultiTurnMetric):
    """1 if the conversation's end state achieves ``reference`` (the desired outcome), else 0."""

    yes_no: ClassVar[bool] = True
    name: str = "agent_goal_accuracy_with_reference"
    categorical: ClassVar[bool] = True  # achieved or not: repeated votes take the majority
    ragas_names: ClassVar[tuple[str, ...]] = ("agent_goal_accuracy",)

    def requests(self, sample: MultiTurnSample) -> list[JudgeRequest[Any]]:
        """One question: does the end state achieve the reference outcome?"""
        if sample.reference is None:
            raise missing_field(self, "reference")
        prompt = WITH_REFERENCE.format(
            reference=escape(sample.reference), conversation=render_conversation(sample)
        )
        return [JudgeRequest(prompt, GoalVerdict, SYSTEM_PROMPT)]

    def verdict(self, sample: MultiTurnSample, replies: Sequence[JudgeReply[Any]]) -> Explained:
        """1.0 if achieved, else 0.0, with the end state and the judge's reason."""
        return _outcome(replies[0].parsed)


class AgentGoalAccuracyWithoutReference(JudgedMetric[MultiTurnSample], MultiTurnMetric):
    """1 if the end state achieves the user's goal, inferred from the human turns, else 0."""

    yes_no: ClassVar[bool] = True
    name: str = "agent_goal_accuracy_without_reference"
    categorical: ClassVar[bool] = True  # achieved or not: repeated votes take the majority
    ragas_names: ClassVar[tuple[str, ...]] = ("agent_goal_accuracy",)

    def requests(self, sample: MultiTurnSample) -> list[JudgeRequest[Any]]:
        """One question: infer the goal, then judge the end state against it."""
        prompt = WITHOUT_REFERENCE.format(conversation=render_conversation(sample))
        return [JudgeRequest(prompt, InferredGoalVerdict, SYSTEM_PROMPT)]

    def verdict(self, sample: MultiTurnSample, replies: Sequence[JudgeReply[Any]]) -> Explained:
        """1.0 if achieved, else 0.0, with the inferred goal, end state and reason."""
        return _outcome(replies[0].parsed)

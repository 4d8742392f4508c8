"""Agent goal accuracy: did the conversation reach the user's goal (binary, one judge call)?"""

from __future__ import annotations

from pydantic import BaseModel, Field

from turneval.metrics._judged import SYSTEM_PROMPT, JudgedMetric, render_conversation
from turneval.metrics.base import Explained, MultiTurnMetric, missing_field
from turneval.samples import MultiTurnSample

__all__ = [
    "AgentGoalAccuracyWithReference",
    "AgentGoalAccuracyWithoutReference",
    "GoalVerdict",
    "InferredGoalVerdict",
]


class GoalVerdict(BaseModel):
    """The judge's answer when the desired outcome is given."""

    end_state: str = Field(description="The final outcome the conversation actually reached.")
    reason: str = Field(description="Why the end state does or does not achieve the outcome.")
    achieved: bool = Field(description="True if the end state achieves the desired outcome.")


class InferredGoalVerdict(BaseModel):
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


def _outcome(
    verdict: GoalVerdict | InferredGoalVerdict, raw: str, cached: bool
) -> tuple[str, dict[str, object]]:
    word = "achieved" if verdict.achieved else "not achieved"
    goal = f"goal: {verdict.user_goal}; " if isinstance(verdict, InferredGoalVerdict) else ""
    reason = (
        f"{word} ({int(verdict.achieved)}): {goal}end state: {verdict.end_state}; {verdict.reason}"
    )
    details: dict[str, object] = {**verdict.model_dump(), "judge": {"raw": raw, "cached": cached}}
    return reason, details


class AgentGoalAccuracyWithReference(JudgedMetric, MultiTurnMetric):
    """1 if the conversation's end state achieves ``reference`` (the desired outcome), else 0."""

    name: str = "agent_goal_accuracy_with_reference"

    def prompts(self, sample: MultiTurnSample) -> list[tuple[str, str]]:
        """The one prompt this metric sends."""
        if sample.reference is None:
            raise missing_field(self, "reference")
        prompt = WITH_REFERENCE.format(
            reference=sample.reference, conversation=render_conversation(sample)
        )
        return [(SYSTEM_PROMPT, prompt)]

    async def _evaluate(self, sample: MultiTurnSample) -> Explained:
        [(system, prompt)] = self.prompts(sample)
        reply = await self.judge().ask(system, prompt, GoalVerdict)
        reason, details = _outcome(reply.parsed, reply.raw, reply.cached)
        return Explained(float(reply.parsed.achieved), reason, details, reply.usage)


class AgentGoalAccuracyWithoutReference(JudgedMetric, MultiTurnMetric):
    """1 if the end state achieves the user's goal, inferred from the human turns, else 0."""

    name: str = "agent_goal_accuracy_without_reference"

    def prompts(self, sample: MultiTurnSample) -> list[tuple[str, str]]:
        """The one prompt this metric sends."""
        return [(SYSTEM_PROMPT, WITHOUT_REFERENCE.format(conversation=render_conversation(sample)))]

    async def _evaluate(self, sample: MultiTurnSample) -> Explained:
        [(system, prompt)] = self.prompts(sample)
        reply = await self.judge().ask(system, prompt, InferredGoalVerdict)
        reason, details = _outcome(reply.parsed, reply.raw, reply.cached)
        return Explained(float(reply.parsed.achieved), reason, details, reply.usage)

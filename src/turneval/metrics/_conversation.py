"""Agent behaviour, LLM-judged: trajectories and whole conversations, one judge call per sample.

Every verdict schema admits only valid verdicts (enums; per-turn verdicts per item: one
required property per judged AI message, ``message_<index>``, in order), and every verdict
carries the judge's reason. Messages are shown to the judge numbered by their index in
``user_input``, escaped, between ``<conversation>`` tags; per-turn verdicts name those indices.

Longer than 400 lines: six judged metrics that share one way of showing a conversation to the
judge and of asking for per-turn verdicts (``numbered_conversation``, ``per_turn_requests``,
``turn_verdicts``); each metric is a short class on that common part.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, ClassVar, Literal

from pydantic import Field, create_model, model_validator

from turneval.errors import InvalidSampleError
from turneval.judge import SYSTEM_PROMPT, JudgeReply, JudgeRequest, StrictVerdict, tagged
from turneval.judge._schema import enum_field, list_field
from turneval.judge._template import numbered_text
from turneval.judge.budget import ANSWER_TOKENS, TOKENS_PER_ITEM
from turneval.judge.context import windowed_requests
from turneval.messages import AIMessage, HumanMessage, SystemMessage
from turneval.metrics._judged import JudgedMetric
from turneval.metrics._tools import sample_tools
from turneval.metrics.base import Explained, Metric, MultiTurnMetric, missing_field
from turneval.results import ratio
from turneval.samples import MultiTurnSample

__all__ = [
    "CompletenessVerdict",
    "ConversationCompleteness",
    "FrustrationVerdict",
    "Intention",
    "KnowledgeRetention",
    "ReferenceTrajectoryVerdict",
    "RoleAdherence",
    "TrajectoryJudge",
    "TrajectoryVerdict",
    "TurnRelevancy",
    "UserFrustration",
    "ai_turns",
    "numbered_conversation",
    "per_turn_requests",
    "turn_verdicts",
]


# -- shared rendering and schemas ----------------------------------------------------------------


def numbered_conversation(sample: MultiTurnSample) -> str:
    """The conversation between ``<conversation>`` tags, each message as ``[index] ...``."""
    return "<conversation>\n" + numbered_text(sample) + "\n</conversation>"


def ai_turns(metric: Metric, sample: MultiTurnSample) -> list[int]:
    """Indices of the AI messages with text (the turns the per-turn judges rate).

    Raises:
        InvalidSampleError: the conversation has none.
    """
    turns = [
        index
        for index, message in enumerate(sample.user_input)
        if isinstance(message, AIMessage) and message.content.strip()
    ]
    if not turns:
        raise InvalidSampleError(
            f"metric {metric.name!r} needs at least one AI message with text in user_input, "
            "found none",
            field="user_input",
        )
    return turns


def _humans(metric: Metric, sample: MultiTurnSample) -> None:
    if not any(isinstance(m, HumanMessage) for m in sample.user_input):
        raise InvalidSampleError(
            f"metric {metric.name!r} needs at least one human message in user_input, found none",
            field="user_input",
        )


@lru_cache(maxsize=256)
def turn_verdicts(
    name: str, indices: tuple[int, ...], verdicts: tuple[str, ...], meaning: str
) -> type[StrictVerdict]:
    """A verdict model: ``turns``, one ``{reason, verdict}`` per AI turn, per item.

    The schema has one required property per AI message (``message_4``, ``message_6``, ...),
    in order, so a schema-following model rates each judged message exactly once; the parsed
    ``turns`` is a list in the messages' order.
    """
    item = create_model(
        f"{name}Turn",
        __base__=StrictVerdict,
        reason=(str, Field(description="Why this verdict, citing the messages.")),
        verdict=enum_field(verdicts, description=meaning),
    )
    return create_model(
        name,
        __base__=StrictVerdict,
        turns=list_field(
            item,
            description=f"One verdict per AI message {list(indices)}: message_<index>.",
            keys=[f"message_{index}" for index in indices],
        ),
    )


def _per_turn(
    replies: Sequence[JudgeReply[Any]], indices: Sequence[int], good: str
) -> tuple[float, list[dict[str, Any]], list[dict[str, Any]]]:
    """The share of ``good`` turns, every turn as ``{message_index, reason, verdict}``, the bad.

    The replies rate the turns in order: one reply for all of them, or one per window.
    """
    rated = [turn for reply in replies for turn in reply.parsed.turns]
    turns = [
        {"message_index": index, **turn.model_dump()}
        for index, turn in zip(indices, rated, strict=True)
    ]
    bad = [turn for turn in turns if turn["verdict"] != good]
    value = (len(turns) - len(bad)) / len(turns)
    return value, turns, bad


def _answer(judged: Sequence[int]) -> int:
    """Tokens to keep for an answer rating ``judged`` turns."""
    return ANSWER_TOKENS + TOKENS_PER_ITEM * len(judged)


def _turn_reason(
    label: str, good_count: int, total: int, value: float, bad: list[dict[str, Any]]
) -> str:
    reason = ratio(label, good_count, total, value)
    if bad:
        reason += "; " + "; ".join(
            f"user_input[{turn['message_index']}] {turn['verdict']}: {turn['reason']}"
            for turn in bad
        )
    return reason


def per_turn_requests(
    metric: JudgedMetric[MultiTurnSample],
    sample: MultiTurnSample,
    turns: Sequence[int],
    build: Callable[[Sequence[int]], JudgeRequest[Any]],
    *,
    context: int = 0,
) -> list[JudgeRequest[Any]]:
    """A per-turn judge's requests: one rating every turn, or windows.

    Windows are planned within the judge's context (see
    :func:`turneval.judge.context.windowed_requests`).
    """
    budget = metric.context_budget()
    if budget is None:
        return [build(turns)]
    return windowed_requests(sample, budget, turns, build, metric.prompt_prefix(), context=context)


# -- TrajectoryJudge ---------------------------------------------------------------------------


class TrajectoryVerdict(StrictVerdict):
    """Is the agent's trajectory reasonable for the user's request?"""

    reason: str = Field(description="Why the steps are or are not reasonable, citing them.")
    verdict: Literal["reasonable", "unreasonable"] = Field(
        description="reasonable if the steps are a sensible way to fulfil the user's request."
    )


class ReferenceTrajectoryVerdict(StrictVerdict):
    """Is the agent's trajectory equivalent to the reference trajectory?"""

    reason: str = Field(description="How the steps compare with the reference, citing both.")
    verdict: Literal["equivalent", "not_equivalent"] = Field(
        description="equivalent if the steps are reasonable and reach what the reference does."
    )


TRAJECTORY = """Judge the agent's trajectory: the sequence of its steps (tool calls, tool \
results, messages) in the conversation below. verdict is "reasonable" only if the steps are a \
sensible way to fulfil the user's request: the right tools with the right arguments, in a \
workable order, without needless, harmful or looping steps. Judge the steps, not the wording.
{tools}
{conversation}"""

TRAJECTORY_REFERENCE = """Judge the agent's trajectory: the sequence of its steps (tool calls, \
tool results, messages) in the conversation below, against the reference trajectory, the \
steps a correct agent takes. verdict is "equivalent" only if the agent's steps are reasonable \
for the user's request and reach what the reference steps reach: the same tools with \
equivalent arguments; order may differ only where it does not matter, and extra read-only \
lookups are acceptable.
{tools}
{conversation}

{reference}"""


def _tools_block(sample: MultiTurnSample) -> str:
    tools = sample_tools(sample)
    if not tools:
        return ""
    lines = []
    for tool in tools:
        line = tool.name + (f": {tool.description}" if tool.description else "")
        lines.append(line)
    return "\nTools available to the agent:\n" + tagged("tools", "\n".join(lines)) + "\n"


class TrajectoryJudge(JudgedMetric[MultiTurnSample], MultiTurnMetric):
    """1 if the judge finds the agent's steps reasonable for the request, else 0.

    With ``reference=True``: 1 if they are equivalent to ``reference_tool_calls``. The tools the agent had are shown when the sample lists them in ``metadata["tools"]``.

    Attributes:
        reference: Compare with the sample's ``reference_tool_calls`` (named
            ``"trajectory_judge_with_reference"`` unless ``name=`` is given).
    """

    yes_no: ClassVar[bool] = True
    name: str = "trajectory_judge"
    reference: bool = False

    @model_validator(mode="before")
    @classmethod
    def _reference_name(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("reference") and "name" not in data:
            return {**data, "name": "trajectory_judge_with_reference"}
        return data

    def requests(self, sample: MultiTurnSample) -> list[JudgeRequest[Any]]:
        """One question about the whole trajectory."""
        if not any(isinstance(m, AIMessage) for m in sample.user_input):
            raise InvalidSampleError(
                f"metric {self.name!r} needs at least one AI message in user_input, found none",
                field="user_input",
            )
        tools, conversation = _tools_block(sample), numbered_conversation(sample)
        if not self.reference:
            prompt = TRAJECTORY.format(tools=tools, conversation=conversation)
            return [JudgeRequest(prompt, TrajectoryVerdict, SYSTEM_PROMPT)]
        if sample.reference_tool_calls is None:
            raise missing_field(self, "reference_tool_calls")
        steps = "\n".join(call.pretty_repr() for call in sample.reference_tool_calls)
        prompt = TRAJECTORY_REFERENCE.format(
            tools=tools,
            conversation=conversation,
            reference=tagged("reference_trajectory", steps or "(no tool calls)"),
        )
        return [JudgeRequest(prompt, ReferenceTrajectoryVerdict, SYSTEM_PROMPT)]

    def verdict(self, sample: MultiTurnSample, replies: Sequence[JudgeReply[Any]]) -> Explained:
        """1.0 for reasonable / equivalent, else 0.0, with the judge's reason."""
        answer = replies[0].parsed
        value = float(answer.verdict in ("reasonable", "equivalent"))
        return Explained(
            value, f"{answer.verdict} ({value:.0f}): {answer.reason}", answer.model_dump()
        )


# -- KnowledgeRetention ----------------------------------------------------------------------------

KNOWLEDGE = """For each AI message with text listed below, decide whether it keeps what the \
user said earlier in the conversation (facts, preferences, constraints, answers the user \
gave). "retained": consistent with everything the user said before it (or nothing earlier \
is relevant); "forgot": it asks again for, or ignores, something the user already said; \
"contradicted": it states or acts on something that contradicts what the user said.

AI messages to judge: {turns}

{conversation}"""

_RETENTION = ("retained", "forgot", "contradicted")
_SEVERITY = {"retained": 0, "forgot": 1, "contradicted": 2}


class KnowledgeRetention(JudgedMetric[MultiTurnSample], MultiTurnMetric):
    """Share of AI turns that keep what the user said earlier (none forgotten or contradicted).

    One judge call rates every AI message with text ``retained``, ``forgot`` or
    ``contradicted``; the reason reports the worst turn (contradicted before forgot).
    """

    name: str = "knowledge_retention"
    context_policy: ClassVar[str] = "windowed"

    def requests(self, sample: MultiTurnSample) -> list[JudgeRequest[Any]]:
        """One question rating every AI turn (windows of turns when they do not fit)."""
        turns = ai_turns(self, sample)
        _humans(self, sample)

        def build(judged: Sequence[int]) -> JudgeRequest[Any]:
            schema = turn_verdicts(
                "RetentionVerdict",
                tuple(judged),
                _RETENTION,
                "retained, forgot (asks again / ignores what the user said) or contradicted.",
            )
            prompt = KNOWLEDGE.format(
                turns=list(judged), conversation=numbered_conversation(sample)
            )
            return JudgeRequest(prompt, schema, SYSTEM_PROMPT, answer_tokens=_answer(judged))

        return per_turn_requests(self, sample, turns, build)

    def verdict(self, sample: MultiTurnSample, replies: Sequence[JudgeReply[Any]]) -> Explained:
        """Share of retained turns / AI turns; the worst turn first in the reason."""
        value, turns, bad = _per_turn(replies, ai_turns(self, sample), "retained")
        bad.sort(key=lambda turn: -_SEVERITY[turn["verdict"]])
        reason = _turn_reason("retained", len(turns) - len(bad), len(turns), value, bad)
        worst = bad[0] if bad else None
        return Explained(value, reason, {"turns": turns, "worst": worst})


# -- RoleAdherence -----------------------------------------------------------------------------

ROLE = """The AI assistant was given this role or persona:
{role}

For each AI message with text listed below, decide whether it stays in that role: its \
identity, tone, knowledge limits and the things the role may and may not do. "in_role" or \
"out_of_role".

AI messages to judge: {turns}

{conversation}"""


class RoleAdherence(JudgedMetric[MultiTurnSample], MultiTurnMetric):
    """Share of AI turns that stay in the given role or persona.

    The role is ``role``, else the sample's ``metadata["role"]``, else its system message.

    Attributes:
        role: The role or persona the AI must keep (e.g. "a polite airline support agent who
            never gives legal advice").
    """

    name: str = "role_adherence"
    context_policy: ClassVar[str] = "windowed"
    role: str | None = Field(default=None, min_length=1)

    def _role(self, sample: MultiTurnSample) -> str:
        if self.role is not None:
            return self.role
        role = (sample.metadata or {}).get("role")
        if isinstance(role, str) and role.strip():
            return role
        first = sample.user_input[0]
        if isinstance(first, SystemMessage) and first.content.strip():
            return first.content
        raise InvalidSampleError(
            f"metric {self.name!r} needs a role: role=..., the sample's metadata['role'] or a "
            "system message, none of which is there",
            field="role",
        )

    def requests(self, sample: MultiTurnSample) -> list[JudgeRequest[Any]]:
        """One question rating every AI turn against the role (windows when they do not fit)."""
        turns = ai_turns(self, sample)
        role = tagged("role", self._role(sample))

        def build(judged: Sequence[int]) -> JudgeRequest[Any]:
            schema = turn_verdicts(
                "RoleVerdict", tuple(judged), ("in_role", "out_of_role"), "in_role or out_of_role."
            )
            prompt = ROLE.format(
                role=role, turns=list(judged), conversation=numbered_conversation(sample)
            )
            return JudgeRequest(prompt, schema, SYSTEM_PROMPT, answer_tokens=_answer(judged))

        return per_turn_requests(self, sample, turns, build)

    def verdict(self, sample: MultiTurnSample, replies: Sequence[JudgeReply[Any]]) -> Explained:
        """in-role turns / AI turns, the out-of-role ones in the reason."""
        value, turns, bad = _per_turn(replies, ai_turns(self, sample), "in_role")
        reason = _turn_reason("in_role", len(turns) - len(bad), len(turns), value, bad)
        return Explained(value, reason, {"turns": turns, "role": self._role(sample)})


# -- TurnRelevancy ------------------------------------------------------------------------------

RELEVANCY = """For each AI message with text listed below, decide whether it is relevant to \
its context: ONLY the messages in its window, given as [first..last] indices. "relevant": it \
responds to what was asked or said in that window, on topic and useful; "irrelevant": it \
ignores, misreads or drifts from it.

AI messages to judge, with their windows: {windows}

{conversation}"""


class TurnRelevancy(JudgedMetric[MultiTurnSample], MultiTurnMetric):
    """Share of AI turns relevant to the ``window`` messages before each; per-turn verdicts.

    Attributes:
        window: How many messages before an AI turn make its context (a sliding window).
    """

    name: str = "turn_relevancy"
    context_policy: ClassVar[str] = "windowed"
    window: int = Field(default=5, ge=1)

    def windows(self, sample: MultiTurnSample) -> dict[int, tuple[int, int]]:
        """``{ai_index: (first, last)}``: the messages each AI turn is judged against."""
        return {
            index: (max(0, index - self.window), index - 1)
            for index in ai_turns(self, sample)
            if index > 0
        }

    def requests(self, sample: MultiTurnSample) -> list[JudgeRequest[Any]]:
        """One question rating every AI turn against its window.

        Several when they do not fit the judge's context; each shows the turns' own windows.
        """
        windows = self.windows(sample)
        if not windows:
            raise InvalidSampleError(
                f"metric {self.name!r} needs an AI message with text after some context",
                field="user_input",
            )

        def build(judged: Sequence[int]) -> JudgeRequest[Any]:
            schema = turn_verdicts(
                "RelevancyVerdict",
                tuple(judged),
                ("relevant", "irrelevant"),
                "relevant or irrelevant.",
            )
            listed = ", ".join(f"[{i}] window [{windows[i][0]}..{windows[i][1]}]" for i in judged)
            prompt = RELEVANCY.format(windows=listed, conversation=numbered_conversation(sample))
            return JudgeRequest(prompt, schema, SYSTEM_PROMPT, answer_tokens=_answer(judged))

        return per_turn_requests(self, sample, list(windows), build, context=self.window)

    def verdict(self, sample: MultiTurnSample, replies: Sequence[JudgeReply[Any]]) -> Explained:
        """Share of relevant turns / AI turns; per-turn verdicts (with windows) in the details."""
        windows = self.windows(sample)
        value, turns, bad = _per_turn(replies, list(windows), "relevant")
        for turn in turns:
            turn["window"] = list(windows[turn["message_index"]])
        reason = _turn_reason("relevant", len(turns) - len(bad), len(turns), value, bad)
        return Explained(value, reason, {"turns": turns, "window": self.window})


# -- ConversationCompleteness -------------------------------------------------------------------


class Intention(StrictVerdict):
    """One thing the user wanted, and whether the conversation satisfied it."""

    intention: str = Field(description="What the user wanted, in a few words.")
    reason: str = Field(description="Where and how it was or was not satisfied.")
    verdict: Literal["satisfied", "unsatisfied"] = Field(
        description="satisfied if the AI fulfilled this intention by the end."
    )


class CompletenessVerdict(StrictVerdict):
    """Every user intention across the conversation, each satisfied or not."""

    intentions: list[Intention] = Field(
        description="Every distinct intention the user expressed, in order.", min_length=1
    )


COMPLETENESS = """List every distinct intention the user expressed across the conversation \
(requests, questions, tasks; a follow-up that changes an earlier request replaces it), then \
decide for each whether the AI satisfied it by the end of the conversation: "satisfied" or \
"unsatisfied" (refused, forgotten, half-done, or only promised).

{conversation}"""


class ConversationCompleteness(JudgedMetric[MultiTurnSample], MultiTurnMetric):
    """Share of the user's intentions, across the conversation, that the AI satisfied."""

    name: str = "conversation_completeness"

    def requests(self, sample: MultiTurnSample) -> list[JudgeRequest[Any]]:
        """One question: the intentions and whether each was satisfied."""
        _humans(self, sample)
        ai_turns(self, sample)
        prompt = COMPLETENESS.format(conversation=numbered_conversation(sample))
        return [JudgeRequest(prompt, CompletenessVerdict, SYSTEM_PROMPT)]

    def verdict(self, sample: MultiTurnSample, replies: Sequence[JudgeReply[Any]]) -> Explained:
        """Share of satisfied intentions / intentions, the unsatisfied ones in the reason."""
        intentions = replies[0].parsed.intentions
        missed = [i for i in intentions if i.verdict != "satisfied"]
        value = (len(intentions) - len(missed)) / len(intentions)
        reason = ratio("satisfied", len(intentions) - len(missed), len(intentions), value)
        if missed:
            reason += "; " + "; ".join(f"unsatisfied: {i.intention} ({i.reason})" for i in missed)
        return Explained(value, reason, {"intentions": [i.model_dump() for i in intentions]})


# -- UserFrustration ----------------------------------------------------------------------------


class FrustrationVerdict(StrictVerdict):
    """Did the user get frustrated, and was it resolved?"""

    reason: str = Field(description="Which messages show frustration (or none), and the outcome.")
    verdict: Literal["none", "resolved", "unresolved"] = Field(
        description="none: no frustration; resolved: frustration the AI then resolved; "
        "unresolved: frustration still there at the end."
    )


FRUSTRATION = """Read the user's messages: does the user show frustration (repeating \
themselves, complaining, irritation, giving up, asking for a human)? verdict is "none" if \
never; "resolved" if the user was frustrated but the AI then resolved it and the user ends \
satisfied; "unresolved" if the frustration is still there at the end.

{conversation}"""

_FRUSTRATION_VALUE = {"none": 1.0, "resolved": 0.5, "unresolved": 0.0}


class UserFrustration(JudgedMetric[MultiTurnSample], MultiTurnMetric):
    """1 when the user shows no frustration, 0.5 when it was resolved, 0 when unresolved."""

    scale_points: ClassVar[tuple[float, ...] | None] = tuple(sorted(_FRUSTRATION_VALUE.values()))
    name: str = "user_frustration"

    def requests(self, sample: MultiTurnSample) -> list[JudgeRequest[Any]]:
        """One question over the whole conversation."""
        _humans(self, sample)
        ai_turns(self, sample)
        prompt = FRUSTRATION.format(conversation=numbered_conversation(sample))
        return [JudgeRequest(prompt, FrustrationVerdict, SYSTEM_PROMPT)]

    def verdict(self, sample: MultiTurnSample, replies: Sequence[JudgeReply[Any]]) -> Explained:
        """Verdict none / resolved / unresolved as 1 / 0.5 / 0, with the judge's reason."""
        answer = replies[0].parsed
        value = _FRUSTRATION_VALUE[answer.verdict]
        return Explained(
            value, f"{answer.verdict} ({value:g}): {answer.reason}", answer.model_dump()
        )

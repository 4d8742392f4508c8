"""TraceJudge: a conversation judge that reads the conversation with tools (opt-in).

``TraceJudge(AgentGoalAccuracyWithoutReference())`` asks the wrapped judge's own questions,
with its own verdict schema and scoring, but shows no transcript: the judge lists, reads and
searches the messages (and, for conversations from traces or the store, their spans) with
tools, in a bounded loop (:mod:`turneval.judge.trace_judge`). Long conversations then cost
what the judge chooses to read; every round is counted and cached.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field, model_validator

from turneval.errors import ConfigError
from turneval.judge import JudgeReply
from turneval.judge._template import JudgeRequest, TranscriptView, showing
from turneval.judge.trace_judge import TRACE_NOTE, TraceTools, ask_with_tools
from turneval.metrics._judged import JudgedMetric
from turneval.metrics.base import Explained, MultiTurnMetric
from turneval.samples import MultiTurnSample
from turneval.usage import Usage

_VERDICT = "\u2063verdict\u2063"

__all__ = ["TraceJudge"]


def _check_metric(metric: Any) -> None:
    if not isinstance(metric, JudgedMetric):
        raise ConfigError(
            "TraceJudge needs a judged metric (e.g. AgentGoalAccuracyWithoutReference()), "
            f"got {type(metric).__name__}"
        )
    if MultiTurnSample not in metric.sample_types:
        raise ConfigError(
            f"TraceJudge reads conversations: metric {metric.name!r} does not judge "
            "multi-turn samples"
        )


class TraceJudge(JudgedMetric[MultiTurnSample], MultiTurnMetric):
    """A conversation judge that reads the conversation with tools instead of the transcript.

    The wrapped ``metric`` states its questions as usual, with a note in place of the
    transcript; each question is answered by a loop in which the judge calls ``list_turns``,
    ``list_spans``, ``read_turn`` and ``search``, then the verdict tool (the wrapped metric's
    verdict schema). The value, reason and details are the wrapped metric's;
    ``details["trace"]`` records each loop's rounds and tool calls. The judge model must
    support tool calling (``bind_tools``). The dry run counts one request per question (the
    loop's first round): a loop costs up to ``max_rounds`` + 1 requests.

    Attributes:
        metric: The conversation judge whose questions and verdicts are used.
        max_rounds: Rounds of tool calls per question; the next round asks for the verdict.
        max_tool_tokens: Tokens of tool results per question; past them the verdict is asked.
    """

    name: str = Field(default_factory=str)  # set to the wrapped metric's name + "_trace"
    metric: Any  # a JudgedMetric of conversations (checked below)
    max_rounds: int = Field(default=8, ge=1, le=64)
    max_tool_tokens: int = Field(default=20_000, ge=500)
    context_policy: ClassVar[str] = "windowed"  # the transcript is never sent

    @model_validator(mode="before")
    @classmethod
    def _default_name(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("name"):
            inner = data.get("metric")
            if isinstance(inner, JudgedMetric):
                return {**data, "name": f"{inner.name}_trace"}
        return data

    if not TYPE_CHECKING:  # at run time only: type checkers keep the fields' own signature

        def __init__(self, **data: Any) -> None:
            """Refuse a metric it cannot wrap with a ConfigError before pydantic sees it."""
            _check_metric(data.get("metric"))
            super().__init__(**data)

    def requests(self, sample: MultiTurnSample) -> list[JudgeRequest[Any]]:
        """The wrapped metric's questions, a note on the tools in place of the transcript."""
        last = len(sample.user_input) - 1
        note = TRACE_NOTE.format(messages=last + 1, last=last, verdict=_VERDICT)
        with showing(TranscriptView(sample, (("0-" + str(last), note),))):
            stated = self.metric.requests(sample)
        return [
            JudgeRequest(
                request.prompt.replace(_VERDICT, request.schema.__name__),
                request.schema,
                request.system,
                temperature=request.temperature,
                label=request.label,
                vote=request.vote,
                answer_tokens=request.answer_tokens,
            )
            for request in stated
            if not request.auxiliary
        ]

    async def _evaluate(self, sample: MultiTurnSample) -> Explained:
        tools = TraceTools(sample)
        replies: list[JudgeReply[Any]] = []
        loops = []
        for request in self.judge_requests(sample):
            judge = self.judge(
                temperature=request.temperature, logprobs=False, repeat=request.repeat
            )
            reply, loop = await ask_with_tools(
                judge,
                request.system,
                request.prompt,
                request.schema,
                tools,
                max_rounds=self.max_rounds,
                max_tool_tokens=min(self.max_tool_tokens, judge.budget.context_tokens // 2),
                answer_tokens=request.answer_tokens,
            )
            replies.append(reply)
            loops.append(
                {
                    "rounds": loop.rounds,
                    "tool_calls": loop.tool_calls,
                    "tool_tokens": loop.tool_tokens,
                    "forced": loop.forced,
                }
            )
        outcome: Explained = self.metric.verdict(sample, replies)
        if replies:
            outcome.usage = sum((reply.usage for reply in replies), Usage())
            outcome.details["judge"] = [{"raw": r.raw, "cached": r.cached} for r in replies]
        outcome.details["trace"] = loops
        return outcome

    def verdict(self, sample: MultiTurnSample, replies: Sequence[JudgeReply[Any]]) -> Explained:
        """The wrapped metric's verdict."""
        outcome: Explained = self.metric.verdict(sample, replies)
        return outcome

"""Per-item verdicts optimised on per-item labels: a user's per-turn JudgedMetric."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Literal

import pytest
from langchain_core.messages import BaseMessage
from pydantic import Field, create_model
from sklearn.metrics import cohen_kappa_score

from turneval import MultiTurnSample
from turneval.calibration import optimize
from turneval.judge import SYSTEM_PROMPT, JudgeReply, JudgeRequest, StrictVerdict, list_field
from turneval.messages import AIMessage, HumanMessage
from turneval.metrics import JudgedMetric, MultiTurnMetric
from turneval.metrics.base import Explained
from turneval.testing import ScriptedChatModel

RULE = "A reply that changes the subject is off_topic, however polite."


class TurnVerdict(StrictVerdict):
    reason: str = Field(description="Why.")
    verdict: Literal["on_topic", "off_topic"] = Field(description="on_topic or off_topic.")


def _schema(keys: tuple[str, ...]) -> Any:
    return create_model(
        "TurnVerdicts",
        __base__=StrictVerdict,
        turns=list_field(TurnVerdict, description="One per AI message.", keys=list(keys)),
    )


class OnTopic(JudgedMetric[MultiTurnSample], MultiTurnMetric):
    """A user's per-turn judge: is each AI reply on the topic of the conversation?"""

    name: str = "on_topic"

    def keys(self, sample: MultiTurnSample) -> tuple[str, ...]:
        return tuple(
            f"message_{i}" for i, m in enumerate(sample.user_input) if isinstance(m, AIMessage)
        )

    def requests(self, sample: MultiTurnSample) -> list[JudgeRequest[Any]]:
        lines = "\n".join(f"[{i}] {m.pretty_repr()}" for i, m in enumerate(sample.user_input))
        prompt = f"Rate each AI message: on_topic or off_topic.\n<conversation>\n{lines}\n</conversation>"
        return [JudgeRequest(prompt, _schema(self.keys(sample)), SYSTEM_PROMPT)]

    def verdict(self, sample: MultiTurnSample, replies: Sequence[JudgeReply[Any]]) -> Explained:
        turns = replies[0].parsed.turns
        good = sum(t.verdict == "on_topic" for t in turns)
        return Explained(good / len(turns), f"on_topic {good}/{len(turns)}")


REPLIES = {
    "answer": "Your order ships tomorrow.",
    "drift": "By the way, have you seen our new sofa range?",  # off topic: the rule fixes it
    "rude": "Figure it out yourself.",  # people say on_topic; the judge always says off_topic
}


def conversation(case: int, kinds: tuple[str, str]) -> MultiTurnSample:
    return MultiTurnSample(
        user_input=[
            HumanMessage(content=f"[case {case}] Where is my order?"),
            AIMessage(content=REPLIES[kinds[0]]),
            HumanMessage(content="And the invoice?"),
            AIMessage(content=REPLIES[kinds[1]]),
        ]
    )


def truth(kind: str) -> str:
    return "off_topic" if kind == "drift" else "on_topic"


def judged(kind: str, rule: bool) -> str:
    if kind == "rude":
        return "off_topic"
    return "off_topic" if kind == "drift" and rule else "on_topic"


def _judge(messages: list[BaseMessage]) -> str:
    system, prompt = str(messages[0].content), str(messages[-1].content)
    prompt = prompt.rsplit("# The case to judge", 1)[-1]
    answer = {}
    for index, text in re.findall(r"^\[(\d+)\] AI: (.*)$", prompt, flags=re.MULTILINE):
        kind = next(k for k, reply in REPLIES.items() if reply in text)
        answer[f"message_{index}"] = {"reason": kind, "verdict": judged(kind, RULE in system)}
    return json.dumps({"turns": answer})


def _reflect(messages: list[BaseMessage]) -> str:
    prompt = str(messages[-1].content)
    current = prompt.split("<instructions>\n", 1)[1].split("\n</instructions>", 1)[0]
    if REPLIES["drift"] in prompt and RULE not in current:
        current = (current + "\n" + RULE).strip()
    return json.dumps({"analysis": "drift", "instructions": current})


def test_per_item_labels_are_optimised_and_counted_per_item() -> None:
    pairs = [("answer", "answer"), ("answer", "drift"), ("drift", "answer"), ("answer", "rude")]
    labeled = []
    for case in range(48):
        kinds = pairs[case % len(pairs)]
        items = {"message_1": truth(kinds[0]), "message_3": truth(kinds[1])}
        labeled.append((conversation(case, kinds), items, "drift is off topic"))
    report = optimize(
        OnTopic(),
        labeled,
        llm=ScriptedChatModel(responses=[_judge]),
        reflection_llm=ScriptedChatModel(responses=[_reflect]),
        seed=4,
        rounds=6,
        resamples=300,
    )
    assert report.statistic == "kappa" and RULE in report.config.instructions
    assert report.config.scale is None  # categories, not a numeric scale
    human, before, after = [], [], []
    for ref in report.validation_rows:
        kinds = pairs[int(ref) % len(pairs)]
        for kind in kinds:  # message_1, message_3: sorted like the units
            human.append(truth(kind))
            before.append(judged(kind, False))
            after.append(judged(kind, True))
    assert report.before is not None and report.after is not None
    assert report.before.n == report.after.n == 2 * len(report.validation_rows)
    assert report.before.kappa == pytest.approx(cohen_kappa_score(human, before))
    assert report.after.kappa == pytest.approx(cohen_kappa_score(human, after))
    assert report.improved

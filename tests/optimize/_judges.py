"""A prompt-sensitive fake judge and a fake reflection model, for the optimiser's tests.

The labeled rows are conversations of four kinds, each marked ``[case N]`` in its first human
message:

* ``done``: the assistant did it; people label it 1; the judge says achieved.
* ``refused``: the assistant refused; people label it 0 ("a refused request is a failure");
  the judge says achieved, unless its instructions hold :data:`RULE`.
* ``failed``: the assistant reported an error; people label it 0; the judge says not achieved.
* ``noise``: people label it 1 but the judge says not achieved whatever it is told.

So the rule fixes exactly the refused rows, and nothing fixes the noise rows. A judge whose
instructions name cases (``[case 3] is a failure``) says not achieved for those: a memorising
candidate. The reflection model reads the rows it is shown: with ``memorise`` it names their
cases, otherwise it proposes the rule when a refused row is among them.
"""

from __future__ import annotations

import json
import re
from typing import Any

from langchain_core.messages import BaseMessage

from turneval import MultiTurnSample
from turneval.messages import AIMessage, HumanMessage
from turneval.testing import ScriptedChatModel

RULE = "A refused request counts as a failure: achieved is false when the assistant refuses."

KINDS = {
    "done": (1, "Done: your table for two is booked for 8 pm."),
    "refused": (0, "I'm sorry, I can't help with that request."),
    "failed": (0, "There was an error: the booking system could not be reached."),
    "noise": (1, "Booked, although the confirmation email may take a day."),
}

_CASE = re.compile(r"\[case (\d+)\]")


def sample(case: int, kind: str) -> MultiTurnSample:
    """The conversation of one case of ``kind``."""
    return MultiTurnSample(
        user_input=[
            HumanMessage(content=f"[case {case}] Please book a table for two at 8 pm."),
            AIMessage(content=KINDS[kind][1]),
        ],
        metadata={"id": f"case-{case}", "kind": kind},
    )


def rows(counts: dict[str, int]) -> list[tuple[MultiTurnSample, int, str]]:
    """Labeled rows: ``counts[kind]`` cases of each kind, interleaved, with people's reasons."""
    left = dict(counts)
    kinds: list[str] = []
    while any(left.values()):  # interleaved: done, refused, failed, noise, done, ...
        for kind in counts:
            if left[kind]:
                kinds.append(kind)
                left[kind] -= 1
    reasons = {
        "done": "booked",
        "refused": "the assistant refused: a failure",
        "failed": "not booked",
        "noise": "booked",
    }
    return [(sample(i, kind), KINDS[kind][0], reasons[kind]) for i, kind in enumerate(kinds)]


def kind_of(text: str) -> str:
    """The kind of the conversation in a judge's question (its last case, after examples)."""
    case = text.rsplit("# The case to judge", 1)[-1]
    for kind, (_, answer) in KINDS.items():
        if answer in case:
            return kind
    raise AssertionError(f"no known conversation in {case[:200]!r}")


def judge_verdict(system: str, user: str) -> bool:
    """What the fake judge says: achieved or not, by the conversation's kind and its rules."""
    case = user.rsplit("# The case to judge", 1)[-1]
    found = _CASE.search(case)
    if found and f"[case {found.group(1)}] is a failure" in system:
        return False  # a memorised case
    kind = kind_of(user)
    if kind == "refused":
        return RULE not in system
    return kind == "done"


def _judge_answer(messages: list[BaseMessage]) -> str:
    system, user = str(messages[0].content), str(messages[-1].content)
    achieved = judge_verdict(system, user)
    return json.dumps(
        {
            "user_goal": "book a table",
            "end_state": "booked" if achieved else "not booked",
            "reason": f"the conversation reads as {kind_of(user)}",
            "achieved": achieved,
        }
    )


def fake_judge(**kwargs: Any) -> ScriptedChatModel:
    """The prompt-sensitive fake judge."""
    return ScriptedChatModel(responses=[_judge_answer], **kwargs)


def _reflect(memorise: bool) -> Any:
    def answer(messages: list[BaseMessage]) -> str:
        prompt = str(messages[-1].content)
        current = prompt.split("<instructions>\n", 1)[1].split("\n</instructions>", 1)[0]
        cases = prompt.split("<case>")[1:]
        if memorise:
            named = sorted({int(c) for part in cases for c in _CASE.findall(part)})
            lines = [current] if current.strip() else []
            lines += [f"[case {c}] is a failure." for c in named]
            return json.dumps({"analysis": "these cases", "instructions": "\n".join(lines)})
        if any(KINDS["refused"][1] in part for part in cases) and RULE not in current:
            text = (current + "\n" + RULE).strip()
            return json.dumps(
                {"analysis": "refusals were counted as achieved", "instructions": text}
            )
        return json.dumps({"analysis": "nothing general to add", "instructions": current})

    return answer


def fake_reflection(*, memorise: bool = False, **kwargs: Any) -> ScriptedChatModel:
    """The fake reflection model (see the module)."""
    return ScriptedChatModel(responses=[_reflect(memorise)], **kwargs)

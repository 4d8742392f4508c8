"""Shared by the simulation tests: an echoing agent and a scripted user model."""

import json
from typing import Any

from langchain_core.messages import BaseMessage

from turneval import AIMessage


def echo(messages: list[Any]) -> list[Any]:
    """A callable agent: answers each turn with one AI message."""
    return [AIMessage(content=f"agent heard: {messages[-1].content}")]


def user_policy(done_after: int) -> Any:
    """A scripted user model: turn n says 'turn n', done once it has said ``done_after``."""

    def answer(messages: list[BaseMessage]) -> str:
        said = str(messages[-1].content).count("[you]")
        if said >= done_after:
            return json.dumps({"message": "thanks, bye", "done": True})
        return json.dumps({"message": f"turn {said + 1}", "done": False})

    return answer

"""Scripted generator models: they answer each request with drafts written by the test."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from turneval.testing import ScriptedChatModel

Draft = dict[str, Any]


def draft(goal: str, *, actions: Sequence[tuple[str, dict[str, Any]]] = (), **fields: Any) -> Draft:
    """A complete draft (every field its schema requires), with reference actions."""
    return {
        "goal": goal,
        "persona": fields.pop("persona", "a shop customer who writes short messages"),
        "persona_type": fields.pop("persona_type", "cooperative"),
        "difficulty": fields.pop("difficulty", "easy"),
        "user_facts": fields.pop("user_facts", []),
        "first_message": fields.pop("first_message", ""),
        "reference": fields.pop("reference", ""),
        "actions": [{"tool": name, "arguments": args} for name, args in actions],
        **fields,
    }


def asked_keys(messages: list[BaseMessage]) -> list[str]:
    """The ``scenario_i`` keys a request lists in its briefs, in order."""
    return re.findall(r"^- (scenario_\d+):", str(messages[-1].content), flags=re.MULTILINE)


def listing(drafts: Sequence[Draft]) -> Callable[[list[BaseMessage]], str]:
    """A policy answering each request with the next drafts, as many as it asks for."""
    queue = list(drafts)

    def answer(messages: list[BaseMessage]) -> str:
        keys = asked_keys(messages)
        chosen = [queue.pop(0) for _ in keys]
        return json.dumps({"scenarios": dict(zip(keys, chosen, strict=True))})

    return answer


def generator(drafts: Sequence[Draft]) -> ScriptedChatModel:
    """A scripted generator that hands out ``drafts`` in order, request by request."""
    return ScriptedChatModel(responses=[listing(drafts)])


def record(scenario: Any) -> dict[str, Any]:
    """A generated scenario's ``metadata["generated"]``."""
    metadata = scenario.metadata
    assert metadata is not None and isinstance(metadata.get("generated"), dict)
    found: dict[str, Any] = metadata["generated"]
    return found


def meta(sample: Any) -> dict[str, Any]:
    """A sample's metadata (there must be some)."""
    assert sample is not None and sample.metadata is not None
    found: dict[str, Any] = sample.metadata
    return found

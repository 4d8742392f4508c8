"""A row's context policy, as the report and the viewer show it (issue 47)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from langchain_core.messages import BaseMessage

from turneval import AIMessage, HumanMessage, MultiTurnSample, evaluate
from turneval.metrics import KnowledgeRetention
from turneval.report import context_summary, render_html

from ._fakes import ScriptedChatModel, text_of


def answer(messages: list[BaseMessage]) -> str:
    """A valid verdict for whichever request this is: a summary, or the turns it lists."""
    prompt = text_of(messages[-1])
    listed = re.search(r"AI messages to judge: \[([\d, ]+)\]", prompt)
    if listed is None:
        return json.dumps({"summary": "The user keeps asking about seats [0]."})
    turns = [int(n) for n in listed.group(1).split(",")]
    return json.dumps(
        {"turns": {f"message_{n}": {"reason": "kept", "verdict": "retained"} for n in turns}}
    )


def long_talk() -> MultiTurnSample:
    turns = []
    for i in range(120):
        turns += [
            HumanMessage(content=f"Question {i}: which seat do I prefer? " * 6),
            AIMessage(content=f"Answer {i}: the window seat, as you said. " * 6),
        ]
    return MultiTurnSample(user_input=turns)


def test_the_report_shows_what_the_judge_saw() -> None:
    model = ScriptedChatModel(responses=[answer])
    metric = KnowledgeRetention(llm=model, context_tokens=4096)
    result = evaluate([long_talk()], [metric], show_progress=False)
    scored = result.rows[0].results["knowledge_retention"]
    seen = scored.details["context"]
    assert seen["context"] == "windowed" and seen["summaries"] >= 1
    assert seen["counter"] == "estimate" and seen["context_tokens"] == 4096
    assert sum(seen["items_per_request"]) == 120 and scored.value == 1.0
    line = context_summary(scored.details)
    assert line is not None and line.startswith("context: windowed · ")
    assert f"{seen['requests']} request(s) + {seen['summaries']} summaries" in line
    assert "window 4,096 tokens (given), estimate" in line
    page = render_html(result)
    assert f'<div class="muted context">{line}</div>' in page
    assert context_summary({"other": 1}) is None and context_summary(None) is None


def test_the_viewer_shows_a_rows_context_policy(tmp_path: Path) -> None:
    pytest.importorskip("starlette")
    pytest.importorskip("sqlalchemy")
    from starlette.testclient import TestClient

    from turneval.store import RunStore
    from turneval.view import create_app

    model = ScriptedChatModel(responses=[answer])
    metric = KnowledgeRetention(llm=model, context_tokens=4096)
    with RunStore(str(tmp_path / "runs.db")) as store:
        result = evaluate([long_talk()], [metric], show_progress=False, store=store)
        line = context_summary(result.rows[0].results["knowledge_retention"].details)
        [run] = store.runs()
        page = TestClient(create_app(store)).get(f"/runs/{run.id}/rows/0").text
    assert line is not None
    assert f"<div class='context'>{line}</div>" in page

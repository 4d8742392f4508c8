"""Agents in the report and the viewer: every turn's agent, the decisive step, by-agent figures
and failure clusters."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.metrics.test_attribution import marks
from tests.test_multi_agent import AGENTS, supervisor_conversation
from turneval import MultiTurnSample, ToolCall, evaluate
from turneval.metrics import FailureAttribution, ToolCallF1
from turneval.results import EvaluationResult
from turneval.testing import ScriptedChatModel


def _run(store: object = None) -> EvaluationResult:
    samples = [
        MultiTurnSample(
            user_input=supervisor_conversation(),
            agents=AGENTS,
            reference_tool_calls=[ToolCall(name="web_search", args={"q": "Paris population"})],
            metadata={"id": f"team-{i}"},
        )
        for i in range(3)
    ]
    answers = [
        {
            "reason": "the coder ran code twice, one of them wrong",
            "steps": marks([11]),
            "agent": "coder",
        },
        {"reason": "the coder ran the wrong code twice", "steps": marks([11]), "agent": "coder"},
        {
            "reason": "the supervisor answered without checking",
            "steps": marks([15]),
            "agent": "supervisor",
        },
    ]
    judge = ScriptedChatModel(responses=[json.dumps(a) for a in answers])
    return evaluate(
        samples,
        [ToolCallF1(by_agent=True), FailureAttribution(llm=judge)],
        show_progress=False,
        max_concurrency=1,
        store=store,  # type: ignore[arg-type]
    )


def test_the_report_shows_agents_the_decisive_step_and_clusters(tmp_path: Path) -> None:
    result = _run()
    result.to_html(tmp_path / "report.html")
    page = (tmp_path / "report.html").read_text()
    assert '<table id="by-agent">' in page
    assert "coder: 0.667" in page and "blamed" in page and "coder: 66.7%" in page
    assert '<table id="clusters">' in page and 'href="#sample-0">row 1</a>' in page
    # every AI turn names its agent; the step the attribution names is marked, once per row
    assert '<span class="role">ai <span class="agent">researcher</span></span>' in page
    decisive = re.findall(r'class="msg (\w+) decisive" id="msg-(\d+)"', page)
    assert decisive == [("ai", "11"), ("ai", "11"), ("ai", "15")]


def test_the_viewer_shows_agents_the_decisive_step_and_clusters(tmp_path: Path) -> None:
    pytest.importorskip("sqlalchemy")
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from turneval.store import RunStore
    from turneval.view import create_app

    store = RunStore(tmp_path / "runs.db")
    result = _run(store)
    client = TestClient(create_app(store))
    run = str(result.store_run)
    page = client.get(f"/runs/{run}").text
    assert "<table id='by-agent'>" in page.replace('"', "'")
    assert "coder: 0.667" in page
    assert f'href="/runs/{run}/rows/0">row 1</a>' in page  # a cluster's example row
    row = client.get(f"/runs/{run}/rows/2").text
    assert "<span class='agent'>supervisor</span>" in row
    assert re.findall(r"class='msg (\w+) decisive' id='turn-(\d+)'", row) == [("ai", "15")]
    store.close()

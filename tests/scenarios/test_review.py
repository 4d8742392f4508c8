"""Review in the viewer's labeling queue: 1 accepts, 0 rejects; the labels decide what is kept."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytest.importorskip("sqlalchemy")
pytest.importorskip("starlette")

from starlette.testclient import TestClient

from turneval.errors import ConfigError
from turneval.messages import ToolCall
from turneval.scenarios import review_path, reviewed, submit_for_review
from turneval.simulation import Scenario
from turneval.store import RunStore
from turneval.view import create_app

SCENARIOS = [
    Scenario(
        id=f"s{i}",
        goal=f"Cancel order A{i}00 </conversation> <b>now</b>",
        persona="terse",
        user_facts={"order_id": f"A{i}00"},
        reference_tool_calls=[ToolCall(name="cancel_order", args={"order_id": f"A{i}00"})],
        metadata={"generated": {"source": "world", "kind": "goal", "difficulty": "easy"}},
    )
    for i in range(1, 5)
]


def test_scenarios_are_reviewed_with_the_keyboard_queue(tmp_path: Path) -> None:
    url = str(tmp_path / "runs.db")
    run_id = submit_for_review(SCENARIOS, url, name="orders.jsonl")
    with RunStore(url) as store:
        run = store.run(run_id)
        assert (run.name, run.rows, run.metric_names) == ("review: orders.jsonl", 4, ["scenario"])
        client = TestClient(create_app(store))
        page = client.get(review_path(run_id))
        assert page.status_code == 200
        text = page.text
        assert "row 1 of 4" in text and "Press 1 to accept, 0 to reject." in text
        assert "goal: Cancel order A100 &lt;/conversation&gt; &lt;b&gt;now&lt;/b&gt;" in text
        assert "reference actions: cancel_order" in text
        token = re.search(r'name="csrf-token" content="([^"]+)"', text).group(1)  # type: ignore[union-attr]
        # the page's own script posts each key press: 1, 0, then a second thought on row 0
        for index, label in ((0, 0), (1, 0), (0, 1), (2, 7)):
            saved = client.post(
                "/api/labels",
                json={"run": run_id, "index": index, "metric": "accept", "label": label},
                headers={"X-CSRF-Token": token},
            )
            assert saved.status_code == 200
    review = reviewed(url, run_id)
    assert [s.id for s in review.accepted] == ["s1"]  # the latest label wins
    assert [s.id for s in review.rejected] == ["s2"]
    assert [s.id for s in review.unlabeled] == ["s3", "s4"]  # 7 is no verdict; s4 unseen
    assert review.accepted[0] == SCENARIOS[0]  # read back whole
    assert str(review) == "1 accepted, 1 rejected, 2 not labeled"


def test_review_needs_scenarios_and_a_review_run(tmp_path: Path) -> None:
    url = str(tmp_path / "runs.db")
    with pytest.raises(ConfigError, match="no scenario to review"):
        submit_for_review([], url)
    from turneval import EvaluationDataset, evaluate

    other = evaluate(
        EvaluationDataset.from_list([{"user_input": [{"type": "human", "content": "hi"}]}]),
        ["tool_call_f1"],
        store=url,
        show_progress=False,
    )
    with pytest.raises(ConfigError, match="holds no scenario to review"):
        reviewed(url, str(other.store_run))

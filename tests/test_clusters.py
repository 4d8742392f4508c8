"""Failure clusters: seeded reasons with known groups come back as those groups."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turneval.cli import main
from turneval.clusters import cluster_failures, failed_rows, name_clusters, read_run
from turneval.errors import ConfigError
from turneval.results import EvaluationResult, MetricFailure, MetricResult, SampleResult
from turneval.testing import ScriptedChatModel

GROUPS = {
    "stale search": [
        "the researcher searched the web with the wrong date so the results were stale",
        "researcher used an outdated date in its web search query and got stale results",
        "the web search query had the wrong year and the search results were stale",
        "stale results: the search query used the wrong date range",
    ],
    "arithmetic": [
        "the math expert added the numbers incorrectly",
        "arithmetic error by the math expert when adding the totals",
        "the math expert made an addition mistake in the sum of the numbers",
    ],
    "wrong handoff": [
        "the supervisor handed off to the wrong agent instead of the coder",
        "the supervisor transferred the task to the wrong agent",
        "supervisor routed the request to the wrong agent, not the coder",
    ],
    "refund policy": [
        "refund issued without checking the refund policy window of thirty days",
        "the refunds agent ignored the refund policy and refunded an old order",
        "refunded outside the policy window, the refund policy was never checked",
    ],
}


def attributed(index: int, agent: str, reason: str, step: int) -> SampleResult:
    row = SampleResult(index, None)
    row.results["failure_attribution"] = MetricResult(
        "failure_attribution",
        0.5,
        f"{agent} at step {step} (user_input[{step}]): {reason}",
        {"attribution": {"agent": agent, "step": step, "mode": "all_at_once"}},
    )
    return row


@settings(max_examples=25, deadline=None)  # the first example imports scikit-learn
@given(
    st.randoms(use_true_random=False),
    st.sets(st.sampled_from(list(GROUPS)), min_size=2, max_size=4),
    st.sampled_from(["tfidf", "fuzzy"]),
)
def test_seeded_reasons_come_back_as_their_groups(
    rng: random.Random, chosen: set[str], method: str
) -> None:
    items = [(group, text) for group in sorted(chosen) for text in GROUPS[group]]
    rng.shuffle(items)
    rows = [
        attributed(i, rng.choice(["researcher", "coder", "supervisor"]), text, rng.randint(1, 40))
        for i, (_, text) in enumerate(items)
    ]
    clusters = cluster_failures(rows, method=method)  # type: ignore[arg-type]
    found = sorted(sorted(row.index for row in cluster.rows) for cluster in clusters)
    expected = sorted(
        sorted(i for i, (group, _) in enumerate(items) if group == name) for name in chosen
    )
    assert found == expected
    sizes = [cluster.size for cluster in clusters]
    assert sizes == sorted(sizes, reverse=True)
    assert sum(cluster.share for cluster in clusters) == pytest.approx(1.0)


def test_failed_rows_are_low_scores_errors_and_attributions() -> None:
    good, low, broken, blamed = (SampleResult(i, None) for i in range(4))
    for row, value in ((good, 0.9), (low, 0.2), (broken, 1.0)):
        row.results["tool_call_f1"] = MetricResult("tool_call_f1", value, f"F1={value}")
    broken.failures["goal"] = MetricFailure("goal", 2, "JudgeCallError", "timed out")
    blamed.results["failure_attribution"] = MetricResult(
        "failure_attribution",
        0.0,
        "coder at step 4 (user_input[4]): bad code",
        {"attribution": {"agent": "coder", "step": 4}},
    )
    rows = [good, low, broken, blamed]
    found = failed_rows(rows)
    assert [(r.index, r.metrics, r.agent, r.step) for r in found] == [
        (1, ("tool_call_f1",), None, None),
        (2, ("goal",), None, None),
        (3, ("failure_attribution",), "coder", 4),
    ]
    assert found[1].reason == "goal: JudgeCallError: timed out"
    assert [r.index for r in failed_rows(rows, fail_under={"tool_call_f1": 0.95})] == [0, 1, 2, 3]
    assert [r.index for r in failed_rows(rows, metrics=["goal"])] == [2, 3]
    assert cluster_failures([good]) == []
    # rows without attribution are grouped by how they failed: metrics, agents, errors
    assert [r.signature for r in found] == ["tool_call_f1", "goal: JudgeCallError", None]


def test_rows_without_attribution_group_by_the_metrics_and_agents_they_failed() -> None:
    rows = []
    for index, weak in enumerate(["coder", "planner", "coder", None, "coder"]):
        row = SampleResult(index, None)
        per_agent = {"planner": 1.0, "coder": 1.0} | ({weak: 0.0} if weak else {})
        value = sum(per_agent.values()) / 2
        row.results["tool_permission"] = MetricResult(
            "tool_permission", value, f"mean {value}", {"by_agent": per_agent}
        )
        rows.append(row)
    clusters = cluster_failures(rows, fail_under=1.0)
    assert [(c.label, [r.index for r in c.rows]) for c in clusters] == [
        ("tool_permission (coder)", [0, 2, 4]),
        ("tool_permission (planner)", [1]),
    ]


def _run(tmp_path: Path) -> Path:
    rows = []
    for i, (group, text) in enumerate((g, t) for g, texts in GROUPS.items() for t in texts):
        rows.append(attributed(i, "coder" if group == "arithmetic" else "researcher", text, i + 1))
    ok = SampleResult(len(rows), None)
    ok.results["failure_attribution"] = MetricResult("failure_attribution", 1.0, "fine")
    rows.append(ok)
    folder = tmp_path / "run"
    folder.mkdir()
    EvaluationResult(rows, ["failure_attribution"]).to_jsonl(folder / "results.jsonl")
    return folder


def test_the_command_prints_clusters_largest_first_with_examples(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _run(tmp_path)
    assert (
        main(["clusters", str(folder), "--examples", "2", "--output", str(tmp_path / "c.json")])
        == 0
    )
    out = capsys.readouterr().out
    assert out.startswith("4 cluster(s) of 13 failed row(s), of 14 rows")
    assert "1. " in out and "4 row(s), 31%" in out and "blamed: coder 3" in out
    assert out.count("   - row ") == 2 * 4  # two examples each
    written = json.loads((tmp_path / "c.json").read_text())
    assert [c["size"] for c in written] == [4, 3, 3, 3]
    assert written[0]["examples"][0]["step"] == 1
    # the results file alone works too, and an unknown run says what it expected
    assert main(["clusters", str(folder / "results.jsonl"), "--method", "fuzzy"]) == 0
    with pytest.raises(ConfigError, match="expected a run folder"):
        read_run(tmp_path / "nowhere")
    assert main(["clusters", str(tmp_path / "nowhere")]) == 2


def test_a_judge_names_each_cluster(tmp_path: Path) -> None:
    clusters = cluster_failures(read_run(_run(tmp_path)).rows)
    model = ScriptedChatModel(
        responses=[json.dumps({"reason": "they share it", "name": "  Common   cause "})]
    )
    named = name_clusters(clusters, model)
    assert [c.name for c in named] == ["Common cause"] * 4
    assert model.calls == 4
    prompt = str(model.prompts[0][-1].content)
    assert "<reasons>" in prompt and "Agents blamed:" in prompt

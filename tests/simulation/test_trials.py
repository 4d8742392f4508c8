"""Trials: pass^k and pass@k, EvalTask over scenarios, the cache per trial, run options."""

import json
import math
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage as LcAI
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

from turneval import EvalTask, InvalidSampleError
from turneval.aggregate import pass_at_k, pass_hat_k
from turneval.errors import ConfigError
from turneval.judge import SQLiteCache
from turneval.metrics import CustomMetric
from turneval.results import EvaluationResult
from turneval.simulation import (
    Scenario,
    ScriptedUser,
    SimulatedUser,
    asimulate,
)
from turneval.testing import ScriptedChatModel

from .._builders import messages_of, metadata_of
from ._helpers import echo, user_policy


def test_pass_hat_k_and_pass_at_k_by_hand() -> None:
    outcomes = [[True, True, False], [True, False, False], [True, True, True]]
    # pass^2: C(2,2)/C(3,2) = 1/3, C(1,2)/3 = 0, C(3,2)/3 = 1 -> mean 4/9
    assert pass_hat_k(outcomes, 2) == pytest.approx(4 / 9)
    # pass@2: 1 - C(1,2)/3 = 1, 1 - C(2,2)/3 = 2/3, 1 - C(0,2)/3 = 1 -> mean 8/9
    assert pass_at_k(outcomes, 2) == pytest.approx(8 / 9)
    # k = 1 is the success rate: (2/3 + 1/3 + 1) / 3 = 2/3
    assert pass_hat_k(outcomes, 1) == pass_at_k(outcomes, 1) == pytest.approx(2 / 3)
    # Exact to the last digit: in floats, pass@1 = 1 - 9/10 was 0.09999999999999998.
    assert pass_at_k([[True] + [False] * 9], 1) == pass_hat_k([[True] + [False] * 9], 1) == 0.1
    assert pass_at_k([[True, False, False]], 1) == 1 / 3
    assert pass_hat_k(outcomes, 3) == pytest.approx(1 / 3)  # only the all-success scenario
    assert pass_at_k(outcomes, 3) == pytest.approx(1.0)
    assert pass_hat_k([[True]], 2) is None  # too few trials
    with pytest.raises(ValueError, match="k must be >= 1"):
        pass_at_k(outcomes, 0)


def test_eval_task_trials_summary_reports_pass_k_with_thresholds(tmp_path: Path) -> None:
    scores = {("a", 0): 1.0, ("a", 1): 1.0, ("a", 2): 0.5, ("b", 0): 0.9, ("b", 1): 0.4}
    scores.update({("b", 2): 0.2, ("c", 0): 1.0, ("c", 1): 1.0, ("c", 2): 1.0})

    def judged(instance: dict[str, Any]) -> float:
        meta = instance["metadata"]
        return scores[(meta["scenario_id"], meta["trial"])]

    metrics = [CustomMetric(name="strict", metric_function=judged)]
    metrics.append(CustomMetric(name="lenient", metric_function=judged))
    scenarios = [Scenario(id=name, goal="g") for name in "abc"]
    task = EvalTask(scenarios, metrics, show_progress=False)
    result = task.evaluate(
        runnable=echo, user=ScriptedUser(["hi"]), trials=3, success_thresholds={"lenient": 0.5}
    )
    assert len(result) == 9
    metas = [metadata_of(r.sample) for r in result.rows]
    assert [(m["scenario_id"], m["trial"]) for m in metas][:4] == [
        ("a", 0),
        ("a", 1),
        ("a", 2),
        ("b", 0),
    ]
    strict = result.summary()["strict"].extra or {}
    # strict (>= 1.0): a 2/3, b 0/3, c 3/3 -- the outcomes of the test above, in another form
    assert strict["pass^2"] == pytest.approx(4 / 9)  # (1/3 + 0 + 1) / 3
    assert strict["pass@2"] == pytest.approx((1 + 0 + 1) / 3)
    assert strict["pass^3"] == pytest.approx(1 / 3)
    assert strict["success_rate"] == pytest.approx(5 / 9)
    lenient = result.summary()["lenient"].extra or {}
    # lenient (>= 0.5): a 3/3, b 1/3, c 3/3
    assert lenient["pass^3"] == pytest.approx(2 / 3)
    assert lenient["pass^2"] == pytest.approx((1 + 0 + 1) / 3)
    assert lenient["pass@2"] == pytest.approx((1 + (1 - math.comb(2, 2) / 3) + 1) / 3)
    assert result.success_threshold("strict") == 1.0
    html_path = tmp_path / "r.html"
    result.to_html(html_path)
    page = html_path.read_text()
    assert '<table id="trials">' in page and 'href="#sample-4"' in page
    assert page.count('class="trial') >= 9
    assert "pass^2 0.444 · pass@2 0.667" in page  # strict's figures, in the summary table
    # A saved run gives the same figures back (thresholds are the reader's to set again).
    saved = tmp_path / "run.jsonl"
    result.to_jsonl(saved)
    back = EvaluationResult.from_jsonl(saved)
    back.success_thresholds = {"lenient": 0.5}
    for name in ("strict", "lenient"):
        assert back.trial_outcomes(name) == result.trial_outcomes(name)
        assert back.summary()[name].extra == result.summary()[name].extra
    back.to_html(tmp_path / "back.html")
    assert '<table id="trials">' in (tmp_path / "back.html").read_text()
    again = tmp_path / "again.jsonl"
    back.to_jsonl(again)
    assert [json.loads(line)["trial"] for line in again.read_text().splitlines()] == [
        json.loads(line)["trial"] for line in saved.read_text().splitlines()
    ]
    with pytest.raises(ConfigError, match="need scenarios"):
        EvalTask([], metrics).evaluate(runnable=echo, user=ScriptedUser(["hi"]))
    heard: list[Any] = []

    def counting(messages: list[Any]) -> list[Any]:
        heard.append(messages)
        return echo(messages)

    wrong: list[tuple[Any, str]] = [
        ({"lenent": 0.5}, "names 'lenent', which is not a metric of this run"),
        ({"lenient": "high"}, r"success_thresholds\['lenient'\] must be a number, got 'high'"),
    ]
    for bad, message in wrong:
        with pytest.raises(ConfigError, match=message):
            task.evaluate(runnable=counting, user=ScriptedUser(["hi"]), success_thresholds=bad)
    assert heard == []  # refused before any conversation
    with pytest.raises(ConfigError, match="scenarios need a user"):
        task.evaluate(runnable=echo)


async def test_each_trial_has_its_own_cache_entry_and_a_rerun_makes_no_user_call(
    tmp_path: Path,
) -> None:
    cache = SQLiteCache(tmp_path / "cache.sqlite")
    scenarios = [Scenario(id="a", goal="g"), Scenario(id="b", goal="h", max_turns=2)]
    first_model = ScriptedChatModel(responses=[user_policy(2)])
    first = await asimulate(echo, scenarios, user=SimulatedUser(first_model), trials=2, cache=cache)
    # a: 3 calls per trial (2 turns + done); b: 2 calls per trial (max_turns=2). Trial 1 is
    # never answered from trial 0's entries, although its prompts are identical.
    assert first_model.calls == 2 * 3 + 2 * 2
    assert len(cache) == 10
    second_model = ScriptedChatModel(responses=[user_policy(2)])
    second = await asimulate(
        echo, scenarios, user=SimulatedUser(second_model), trials=2, cache=cache
    )
    assert second_model.calls == 0
    assert [s.user_input for s in second] == [s.user_input for s in first]
    assert [metadata_of(s)["stop_reason"] for s in second] == [
        metadata_of(s)["stop_reason"] for s in first
    ]
    assert metadata_of(second[0])["user_usage"]["cached_calls"] == 3
    cache.close()


async def test_run_configuration_and_invalid_agent_conversations() -> None:
    user = ScriptedUser(["hi"])
    cases: list[tuple[dict[str, Any], str]] = [
        ({"trials": 0}, "trials and max_steps must be >= 1"),
        ({"max_concurrency": 0}, "max_concurrency: Input should be greater than or equal to 1"),
        ({"agent_timeout": 0}, "agent_timeout: Input should be greater than 0"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ConfigError, match=message):
            await asimulate(echo, [{"goal": "g"}], user=user, **kwargs)
    with pytest.raises(ConfigError, match="no scenario given"):
        await asimulate(echo, [], user=user)
    with pytest.raises(ConfigError, match="needs an agent"):
        await asimulate(None, [{"goal": "g"}], user=user)
    with pytest.raises(InvalidSampleError, match="expected a Scenario or a dict"):
        await asimulate(echo, ["goal"], user=user)  # type: ignore[list-item]

    def orphan_tool_result(messages: list[Any]) -> list[Any]:
        from turneval import ToolMessage

        return [ToolMessage(content="result", tool_call_id="nowhere")]

    data = await asimulate(orphan_tool_result, [{"goal": "g"}], user=user)
    meta = data[0].metadata or {}
    assert meta["stop_reason"] == "agent_error"
    assert meta["error"].startswith("AgentRunError: the agent's conversation is not valid")
    assert [m.type for m in messages_of(data[0])] == ["human", "tool"]


def test_eval_task_config_reaches_the_agent_in_every_conversation() -> None:
    seen: list[dict[str, Any]] = []

    def agent(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        seen.append(
            {
                "user_id": config["configurable"].get("user_id"),
                "thread_id": config["configurable"].get("thread_id"),
                "recursion_limit": config.get("recursion_limit"),
                "metadata": {k: config["metadata"].get(k) for k in ("team", "trial")},
            }
        )
        return {"messages": [LcAI(content="ok")]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_edge(START, "agent")
    graph = builder.compile(checkpointer=InMemorySaver())
    config: dict[str, Any] = {
        "configurable": {"user_id": "u42"},
        "recursion_limit": 7,
        "metadata": {"team": "support"},
    }
    metric = CustomMetric(name="one", metric_function=lambda instance: 1.0)
    task = EvalTask([Scenario(id="a", goal="g")], [metric], config=config)
    task.evaluate(runnable=graph, user=ScriptedUser(["hi", "bye"]), trials=2)
    assert len(seen) == 4  # two turns in each of two trials
    assert {s["user_id"] for s in seen} == {"u42"} and {s["recursion_limit"] for s in seen} == {7}
    trials = sorted((s["metadata"]["trial"], s["thread_id"]) for s in seen)  # trials interleave
    assert [trial for trial, _ in trials] == [0, 0, 1, 1]
    assert {s["metadata"]["team"] for s in seen} == {"support"}
    assert trials[0][1] == trials[1][1] != trials[2][1] == trials[3][1]  # a thread per trial
    with pytest.raises(ConfigError, match="config_fn takes a sample"):
        EvalTask([Scenario(id="a", goal="g")], [metric], config_fn=lambda s: {}).evaluate(
            runnable=graph, user=ScriptedUser(["hi"])
        )
    with pytest.raises(ConfigError, match="multi_turn=False replays only"):
        EvalTask([Scenario(id="a", goal="g")], [metric], multi_turn=False).evaluate(
            runnable=graph, user=ScriptedUser(["hi"])
        )

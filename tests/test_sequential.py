"""Sequential trials: a scenario's trials stop once settled, and the reported figures stay exact."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from turneval import AIMessage, EvalTask, EvaluationResult, MultiTurnSample, SampleResult
from turneval.aggregate import pass_at_k, pass_hat_k
from turneval.errors import ConfigError
from turneval.metrics import CustomMetric
from turneval.sequential import StopEarly
from turneval.simulation import Scenario, ScriptedUser, simulate
from turneval.stats import plan


def echo(messages: list[Any]) -> list[Any]:
    return [AIMessage(content=f"agent heard: {messages[-1].content}")]


def run_until_settled(rule: StopEarly, outcomes: list[bool]) -> list[bool]:
    """The trials a run with ``rule`` makes: each in turn, none once settled."""
    ran: list[bool] = []
    for outcome in outcomes:
        ran.append(outcome)
        if rule.settled(ran, len(outcomes)):
            break
    return ran


@pytest.mark.parametrize("pass_rate", [1.0, 0.6, 0.2])
def test_a_stopped_scenarios_verdict_is_the_full_runs_on_10000_simulated_scenarios(
    pass_rate: float,
) -> None:
    """Exact bounds: the error rate of the stopped verdict is 0 (at or under any alpha)."""
    k, rule = 5, StopEarly(pass_rate=pass_rate)
    rng = np.random.default_rng(21)
    chance = rng.beta(2, 1, size=10_000)  # scenarios from easy to hard
    grid = (rng.random((10_000, k)) < chance[:, None]).tolist()
    needed = rule.needed(k)
    stopped = [run_until_settled(rule, trials) for trials in grid]
    full_verdicts = [sum(trials) >= needed for trials in grid]
    stopped_verdicts = [sum(trials) >= needed for trials in stopped]
    errors = sum(a != b for a, b in zip(full_verdicts, stopped_verdicts, strict=True))
    assert errors / 10_000 <= 0.05 and errors == 0
    saved = sum(k - len(trials) for trials in stopped)
    assert saved > 0.2 * 10_000 * k / 2  # the point of it: many conversations not run
    if needed == k:  # the share of passing scenarios is pass^k, exactly the full run's
        assert np.mean(stopped_verdicts) == pytest.approx(pass_hat_k(grid, k))
    if needed == 1:
        assert np.mean(stopped_verdicts) == pytest.approx(pass_at_k(grid, k))


def test_the_stopped_trials_own_success_rate_is_biased_so_it_is_not_reported() -> None:
    """Why the summary leaves out the success rate: stopping at a failure skews it."""
    rule, k = StopEarly(), 5
    rng = np.random.default_rng(4)
    grid = (rng.random((10_000, k)) < 0.7).tolist()
    stopped = [run_until_settled(rule, trials) for trials in grid]
    naive = np.mean([np.mean(trials) for trials in stopped])
    assert abs(naive - 0.7) > 0.1  # per-scenario mean of a stopped sequence: far from 0.7


def test_stop_early_rejects_a_bad_pass_rate() -> None:
    with pytest.raises(ConfigError, match="pass_rate"):
        StopEarly(pass_rate=0)
    with pytest.raises(ConfigError, match="pass_rate"):
        StopEarly(pass_rate=1.5)


SCORES = {("a", 0): 1.0, ("a", 1): 1.0, ("a", 2): 0.5, ("b", 0): 0.9, ("b", 1): 1.0}
SCORES.update({("b", 2): 1.0, ("c", 0): 1.0, ("c", 1): 1.0, ("c", 2): 1.0})


def test_eval_task_stops_a_failed_scenario_and_keeps_pass_k_exact() -> None:
    scored: list[tuple[str, int]] = []

    def judged(instance: dict[str, Any]) -> float:
        key = (instance["metadata"]["scenario_id"], instance["metadata"]["trial"])
        scored.append(key)
        return SCORES[key]

    task = EvalTask(
        [Scenario(id=name, goal="g") for name in "abc"],
        [CustomMetric(name="strict", metric_function=judged)],
        show_progress=False,
    )
    seen: list[int] = []

    def on_row(row: SampleResult) -> None:
        seen.append(row.index)

    full = task.evaluate(runnable=echo, user=ScriptedUser(["hi"]), trials=3)
    scored.clear()
    result = task.evaluate(
        runnable=echo, user=ScriptedUser(["hi"]), trials=3, stop_early=True, on_row=on_row
    )
    # b failed its first trial: pass^3 is settled at 0, its two other trials never ran
    assert sorted(scored) == [("a", 0), ("a", 1), ("a", 2), ("b", 0), ("c", 0), ("c", 1), ("c", 2)]
    assert [row.index for row in result.rows] == [0, 1, 2, 3, 6, 7, 8]
    assert sorted(seen) == [0, 1, 2, 3, 6, 7, 8]
    stops = result.early_stops
    assert stops is not None and (stops.saved, stops.ran, stops.skipped) == (2, 7, {"b": 2})
    assert str(stops).startswith("stop_early: 2 of 9 conversations not run (22%)")
    sample = result.rows[3].sample
    assert isinstance(sample, MultiTurnSample) and (sample.metadata or {})["skipped_trials"] == 2
    extra = result.summary()["strict"].extra or {}
    full_extra = full.summary()["strict"].extra or {}
    assert extra["pass^3"] == full_extra["pass^3"] == pytest.approx(1 / 3)  # only c passes
    assert extra["scenario_pass_rate"] == pytest.approx(1 / 3)
    assert extra["trials_saved"] == 2.0 and extra["flaky_scenarios"] == 1.0  # a: 2 of 3
    assert "pass^2" not in extra and "success_rate" not in extra  # they would be biased


def test_simulate_stops_on_its_own_success_test() -> None:
    calls: list[str] = []

    def agent(messages: list[Any]) -> list[Any]:
        calls.append(str(messages[-1].content))
        return [AIMessage(content="no")]

    scenarios = [Scenario(id="x", goal="g"), Scenario(id="y", goal="g")]
    with pytest.raises(ConfigError, match="success"):
        simulate(agent, scenarios, user=ScriptedUser(["hi"]), trials=4, stop_early=StopEarly())

    def said_yes(sample: MultiTurnSample) -> bool:
        return "yes" in str(sample.user_input[-1].content)

    data = simulate(
        agent,
        scenarios,
        user=ScriptedUser(["hi"]),
        trials=4,
        stop_early=StopEarly(success=said_yes),
    )
    assert len(data) == 2 and len(calls) == 2  # each scenario failed at once: 6 runs saved
    assert [(s.metadata or {}).get("skipped_trials") for s in data.samples] == [3, 3]


def test_a_run_that_stopped_early_reads_back_with_its_stops_and_summary(tmp_path: Path) -> None:
    task = EvalTask(
        [Scenario(id=name, goal="g") for name in "abc"],
        [CustomMetric(name="strict", metric_function=lambda i: SCORES[_key(i)])],
        show_progress=False,
    )
    result = task.evaluate(runnable=echo, user=ScriptedUser(["hi"]), trials=3, stop_early=True)
    path = tmp_path / "results.jsonl"
    result.to_jsonl(path)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(r["scenario_id"], r["trials_of"], r["skipped_trials"]) for r in rows][2:5] == [
        ("a", 3, 0),
        ("b", 3, 2),
        ("c", 3, 0),
    ]
    back = EvaluationResult.from_jsonl(path)
    assert back.early_stops == result.early_stops
    assert back.summary()["strict"].extra == result.summary()["strict"].extra
    assert (back.summary()["strict"].extra or {})["pass^3"] == pytest.approx(1 / 3)
    # plan counts the stopped scenario with its settled pass^3 (0), as the full run would
    trials = plan(back, mde=0.1).metrics["strict"].trials
    assert trials is not None and (trials.k, trials.scenarios) == (3, 3)
    assert trials.pass_hat_k == pytest.approx(1 / 3)
    assert plan(result, mde=0.1).metrics["strict"].trials == trials


def _key(instance: dict[str, Any]) -> tuple[str, int]:
    return instance["metadata"]["scenario_id"], instance["metadata"]["trial"]

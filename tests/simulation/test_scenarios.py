"""Scenarios: read from dicts, JSONL, YAML and frames, checked before any model call."""

from pathlib import Path

import pytest

from turneval import EvalTask, InvalidSampleError
from turneval.errors import ConfigError
from turneval.metrics import CustomMetric
from turneval.simulation import (
    Scenario,
    ScriptedUser,
    SimulatedUser,
    simulate,
)
from turneval.testing import ScriptedChatModel

from .._builders import metadata_of
from ._helpers import echo, user_policy


def test_bad_scenarios_are_rejected_before_any_model_call(tmp_path: Path) -> None:
    model = ScriptedChatModel(responses=[user_policy(1)])
    user = SimulatedUser(model)
    with pytest.raises(InvalidSampleError, match=r"scenario 1: goal: ") as info:
        simulate(echo, [{"goal": "x"}, {"persona": "p"}], user=user)
    assert info.value.field == "goal"
    with pytest.raises(InvalidSampleError, match=r"scenario 0 \(id 'late'\): max_turns") as info:
        simulate(echo, [{"id": "late", "goal": "x", "max_turns": 0}], user=user)
    assert info.value.field == "max_turns"
    with pytest.raises(InvalidSampleError, match="blank"):
        simulate(echo, [Scenario.model_construct(goal="  ", max_turns=2)], user=user)
    with pytest.raises(InvalidSampleError, match=r"repeated: \['a'\]"):
        simulate(echo, [{"id": "a", "goal": "x"}, {"id": "a", "goal": "y"}], user=user)
    with pytest.raises(ConfigError, match="user must be"):
        simulate(echo, [{"goal": "x"}], user=model)  # type: ignore[arg-type]
    assert model.calls == 0

    lines = tmp_path / "s.jsonl"
    lines.write_text('{"goal": "refund", "id": 7}\n\n{"goal": "x", "max_turns": "many"}\n')
    with pytest.raises(InvalidSampleError, match=r"line 3: max_turns"):
        Scenario.from_jsonl(lines)
    lines.write_text('{"goal": "refund", "id": 7}\n{oops\n')
    with pytest.raises(InvalidSampleError, match="line 2 is not valid JSON"):
        Scenario.from_jsonl(lines)
    lines.write_text('{"goal": "refund", "id": 7}\n')
    assert Scenario.from_jsonl(lines)[0].id == "7"
    yaml_file = tmp_path / "s.yaml"
    yaml_file.write_text("scenarios:\n  - goal: cancel order\n    user_facts: {order: A1}\n")
    assert Scenario.from_yaml(yaml_file)[0].user_facts == {"order": "A1"}
    yaml_file.write_text("- goal: ok\n- persona: no goal\n")
    with pytest.raises(InvalidSampleError, match="item 1: goal"):
        Scenario.from_yaml(yaml_file)
    yaml_file.write_text("goal: not a list\n")
    with pytest.raises(InvalidSampleError, match="expected a list"):
        Scenario.from_yaml(yaml_file)
    import pandas as pd

    frame = pd.DataFrame([{"goal": "a", "persona": None}, {"goal": "b", "persona": "terse"}])
    assert [s.persona for s in Scenario.from_pandas(frame)] == [None, "terse"]


def test_eval_task_takes_scenarios_or_samples_from_any_iterable() -> None:
    from turneval import HumanMessage, MultiTurnSample

    sample = MultiTurnSample(user_input=[HumanMessage(content="hi")], reference_tool_calls=[])
    assert len(EvalTask((s for s in [sample]), ["tool_call_f1"]).dataset) == 1
    task = EvalTask((s for s in [Scenario(goal="g")]), ["tool_call_f1"])
    assert task.scenarios == [Scenario(id="0", goal="g")] and len(task.dataset) == 0
    with pytest.raises(InvalidSampleError, match=r"scenario 1: expected a Scenario or a dict"):
        EvalTask([Scenario(goal="g"), sample], ["tool_call_f1"])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="need scenarios"):
        EvalTask([sample], ["tool_call_f1"]).evaluate(runnable=echo, trials=2)


def test_eval_task_takes_scenario_dicts_as_simulate_does() -> None:
    metric = CustomMetric(name="turns", metric_function=lambda i: float(len(i["user_input"])))
    task = EvalTask([{"id": "d", "goal": "say hi"}], [metric])
    assert task.scenarios == [Scenario(id="d", goal="say hi")]
    row = task.evaluate(runnable=echo, user=ScriptedUser(["hi"])).rows[0]
    assert row.results["turns"].value == 2.0 and metadata_of(row.sample)["scenario_id"] == "d"
    with pytest.raises(InvalidSampleError, match="from_list"):  # sample dicts are not scenarios
        EvalTask([{"user_input": "q", "response": "a"}], [metric])

"""The judge configuration file, and every judged metric loading it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turneval.errors import ConfigError
from turneval.judge import JudgeConfig, JudgeExample
from turneval.judge._config import INSTRUCTIONS_HEADING
from turneval.metrics import AgentGoalAccuracyWithoutReference, JudgedMetric, builtin_metrics

from ._judges import sample


def test_every_built_in_judged_metric_states_its_requests_through_the_template() -> None:
    # judge_requests applies the configuration; a metric overriding it could drop it
    judged = [
        cls
        for cls in builtin_metrics().values()
        if isinstance(cls, type) and issubclass(cls, JudgedMetric)
    ]
    assert len(judged) > 20
    for cls in judged:
        assert cls.judge_requests is JudgedMetric.judge_requests, cls.__name__
        assert "judge_config" in cls.model_fields, cls.__name__


texts = st.text(st.characters(codec="utf-8"), max_size=40)


@settings(max_examples=40, deadline=None)
@given(
    instructions=texts,
    examples=st.lists(st.tuples(texts, texts), max_size=3),
    report=st.dictionaries(st.sampled_from(["before", "after"]), st.floats(0, 1)),
)
def test_a_config_round_trips_and_its_digest_is_what_it_asks(
    instructions: str, examples: list[tuple[str, str]], report: dict[str, float]
) -> None:
    config = JudgeConfig(
        metric="m",
        instructions=instructions,
        examples=tuple(JudgeExample(i, o) for i, o in examples),
        report=report or None,
    )
    again = JudgeConfig.from_json(config.to_json())
    assert again == config and again.digest == config.digest
    # the digest is what changes the prompts: the report or the model never do
    assert config.model_copy(update={"report": None, "model": "x"}).digest == config.digest
    metric = AgentGoalAccuracyWithoutReference(judge_config=config)
    plain = AgentGoalAccuracyWithoutReference()
    (request,), (base,) = (
        metric.judge_requests(sample(1, "done")),
        plain.judge_requests(sample(1, "done")),
    )
    if instructions.strip():
        assert request.system == f"{base.system}\n\n{INSTRUCTIONS_HEADING}\n{instructions.strip()}"
    else:
        assert request.system == base.system
    assert request.prompt.endswith(base.prompt)
    assert (request.prompt == base.prompt) == (not examples)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "not JSON"),
        ('{"instructions": "x"}', "not a judge configuration"),
        ('{"format": "turneval.judge_config", "version": 2}', "version 2"),
        ('{"format": "turneval.judge_config", "version": 1, "instructions": 3}', "instructions"),
        ('{"format": "turneval.judge_config", "version": 1, "colour": "red"}', "colour"),
    ],
)
def test_a_bad_file_is_refused_naming_it(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "judge.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as caught:
        JudgeConfig.load(path)
    assert str(path) in str(caught.value)
    with pytest.raises(ConfigError, match="no such file"):
        JudgeConfig.load(tmp_path / "missing.json")


def test_a_metric_takes_the_path_or_the_stored_dict(tmp_path: Path) -> None:
    config = JudgeConfig(metric="m", instructions="Be strict.")
    path = config.save(tmp_path / "judge.json")
    assert AgentGoalAccuracyWithoutReference(judge_config=path).judge_config == config
    stored = json.loads(path.read_text())
    assert AgentGoalAccuracyWithoutReference(judge_config=stored).judge_config == config

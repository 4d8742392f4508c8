"""``compare`` refuses two runs whose metrics of one name are configured differently, unless
told ``--allow-config-change``: in Python, on the command line and in the viewer."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from turneval import ConfigError, evaluate
from turneval.cli import main
from turneval.compare import check_metric_configs, compare, compare_files
from turneval.metrics import Explained, MultiTurnMetric, ToolCallF1
from turneval.samples import MultiTurnSample

from .._builders import call, conversation

RULES = {"*": {"request_id": "ignore"}}


def _samples() -> list[Any]:
    # request_id differs in the second sample: ignoring it changes that row's score
    return [
        conversation(
            [call("book", city="Paris", request_id="1")],
            reference=[call("book", city="Paris", request_id="1")],
        ),
        conversation(
            [call("book", city="Rome", request_id="7")],
            reference=[call("book", city="Rome", request_id="2")],
        ),
    ]


class CallsAtLeast(MultiTurnMetric):
    """A user's metric: 1 when the conversation has at least ``count`` tool calls."""

    name: str = "test_calls_at_least"
    count: int = 1

    async def _evaluate(self, sample: MultiTurnSample) -> Explained:
        return Explained(float(len(sample.tool_calls) >= self.count))


def test_a_users_metric_is_checked_by_its_fields_too() -> None:
    one = evaluate(_samples(), [CallsAtLeast()], show_progress=False)
    two = evaluate(_samples(), [CallsAtLeast(count=2)], show_progress=False)
    with pytest.raises(ConfigError, match=r"^metric test_calls_at_least \(count 1 -> 2\) is"):
        compare(one, two)


def _record(**config: Any) -> dict[str, Any]:
    return {"name": "judge", "class": "my.Judge", "config": {"criteria": "polite", **config}}


def test_metrics_of_one_name_configured_differently_are_refused_in_python() -> None:
    plain = evaluate(_samples(), [ToolCallF1()], show_progress=False)
    ruled = evaluate(_samples(), [ToolCallF1(arg_rules=RULES)], show_progress=False)
    assert plain.scores("tool_call_f1") == [1.0, 0.0]  # a real change of what is measured
    assert ruled.scores("tool_call_f1") == [1.0, 1.0]
    with pytest.raises(ConfigError) as refused:
        compare(plain, ruled)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(
        'metric tool_call_f1 (arg_rules (unset) -> {"*": {"request_id": {"kind": '
    )
    assert "configured differently in the two runs" in message
    assert "--allow-config-change (allow_config_change=True)" in message
    allowed = compare(plain, ruled, allow_config_change=True).metrics["tool_call_f1"]
    assert allowed.difference == 0.5 and allowed.improvements == [1]
    again = evaluate(_samples(), [ToolCallF1()], show_progress=False)
    assert compare(plain, again).metrics["tool_call_f1"].difference == 0.0  # same config: fine


def test_fields_that_change_no_score_do_not_count_and_every_changed_field_is_named() -> None:
    base = [_record(pass_threshold=0.5, timeout=60, max_retries=4, llm="gpt-4o-mini")]
    same = [_record(pass_threshold=0.9, timeout=5, max_retries=0, llm="gpt-4o")]
    check_metric_configs(base, same)  # thresholds, timeouts, retries and the judge model
    check_metric_configs(base, [{**same[0], "name": "other", "config": {}}])  # not shared
    changed = [_record(criteria="kind", rubric={"1": "rude", "2": "kind"})]
    with pytest.raises(ConfigError) as refused:
        check_metric_configs(base, changed)
    assert str(refused.value).startswith(
        'metric judge (criteria "polite" -> "kind"; rubric (unset) -> {"1": "rude", "2": "kind"}) '
        "is configured differently in the two runs"
    )
    other_class = [{**base[0], "class": "my.OtherJudge"}]
    with pytest.raises(ConfigError, match=r'metric judge \(class "my.Judge" -> "my.OtherJudge"\)'):
        check_metric_configs(base, other_class)
    with pytest.raises(ConfigError, match=r"^metrics judge \(.*\), f1 \(.*\) are configured"):
        check_metric_configs(
            [*base, {"name": "f1", "class": "F1", "config": {"k": 1}}],
            [*changed, {"name": "f1", "class": "F1", "config": {"k": 2}}],
        )


def _cli_run(tmp_path: Path, name: str, metric: str) -> Path:
    data = tmp_path / "data.jsonl"
    if not data.exists():
        data.write_text("".join(s.model_dump_json(exclude_none=True) + "\n" for s in _samples()))
    out = tmp_path / name
    command = ["evaluate", str(data), "--metric", metric, "--out", str(out), "--workers", "1"]
    assert main([*command, "--quiet"]) == 0
    return out


def test_the_cli_refuses_a_config_change_in_one_line_unless_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = _cli_run(tmp_path, "plain", "tool_call_f1")
    ruled = _cli_run(tmp_path, "ruled", f"tool_call_f1:arg_rules={json.dumps(RULES)}")
    capsys.readouterr()
    assert main(["compare", str(plain), str(ruled)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    assert error.startswith("turneval: error: metric tool_call_f1 (arg_rules (unset) -> {")
    # a results.jsonl or summary.json in the run folder is checked the same way
    assert main(["compare", str(plain / "results.jsonl"), str(ruled / "summary.json")]) == 2
    assert "configured differently" in capsys.readouterr().err
    # so is a lone summary.json (means only) beside its run.json; told to, it compares
    means = tmp_path / "means"
    means.mkdir()
    for name in ("summary.json", "run.json"):
        (means / name).write_text((ruled / name).read_text())
    assert main(["compare", str(plain), str(means / "summary.json")]) == 2
    assert "configured differently" in capsys.readouterr().err
    assert main(["compare", str(plain), str(means / "summary.json"), "--allow-config-change"]) == 0
    allowed = capsys.readouterr().out
    assert "| tool_call_f1 | 0.5000 | 1.0000 | +0.5000 |" in allowed
    assert "note: compared although configured differently: tool_call_f1 (arg_rules" in allowed
    # a run folder without run.json (written before it existed) still compares, unchecked
    (ruled / "run.json").unlink()
    unchecked = compare_files(plain, ruled)
    assert unchecked.metrics["tool_call_f1"].difference == 0.5
    assert unchecked.config_notes == [f"metric configurations not checked: no run.json for {ruled}"]
    assert f"note: metric configurations not checked: no run.json for {ruled}" in str(unchecked)
    # a run.json that is no run record is named
    (ruled / "run.json").write_text("[1, 2]")
    with pytest.raises(ConfigError, match=r"ruled/run.json: not a run record \(no \"metrics\""):
        compare_files(plain, ruled)
    assert compare_files(plain, ruled, allow_config_change=True).metrics["tool_call_f1"].pairs == 2


def test_the_viewer_shows_the_refusal_and_a_way_to_compare_anyway(tmp_path: Path) -> None:
    pytest.importorskip("sqlalchemy")
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from turneval.store import RunStore
    from turneval.view import create_app

    with RunStore(str(tmp_path / "runs.db")) as store:
        plain = evaluate(_samples(), [ToolCallF1()], show_progress=False, store=store).store_run
        ruled = evaluate(
            _samples(), [ToolCallF1(arg_rules=RULES)], show_progress=False, store=store
        ).store_run
        client = TestClient(create_app(store))
        refused = client.get(f"/compare?a={plain}&b={ruled}")
        allowed = client.get(f"/compare?a={plain}&b={ruled}&allow_config_change=1")
        same = client.get(f"/compare?a={plain}&b={plain}")
    assert refused.status_code == 409
    assert "metric tool_call_f1 (arg_rules (unset) -&gt; {&quot;*&quot;" in refused.text
    assert "<table id='metrics'>" not in refused.text
    assert f"href='/compare?a={plain}&amp;b={ruled}&amp;allow_config_change=1'" in refused.text
    assert allowed.status_code == 200 and "<table id='metrics'>" in allowed.text
    assert same.status_code == 200 and "configured differently" not in same.text


def test_empty_settings_are_unset_settings() -> None:
    # no rules, an empty table of rules and a wildcard with no rule all score alike
    empty: tuple[Any, ...] = (None, {}, {"*": {}})
    records = [
        {"name": "tool_call_f1", "class": "ToolCallF1", "config": {"arg_rules": rules}}
        for rules in empty
    ]
    for other in records[1:]:
        check_metric_configs([records[0]], [other])
    ruled = {"name": "tool_call_f1", "class": "ToolCallF1", "config": {"arg_rules": RULES}}
    with pytest.raises(ConfigError, match=r"arg_rules \(unset\) -> "):
        check_metric_configs([records[1]], [ruled])

"""Alerts: rules over windows of scored rows, firing as a log line, an OTLP event, a webhook."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from google.protobuf.json_format import MessageToDict
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

from turneval import ConfigError, MetricFailure, MetricResult, SampleResult
from turneval.cli import main
from turneval.metrics import StepBudget
from turneval.watch import (
    AlertRule,
    Alerts,
    LogSink,
    ScoreHistograms,
    Watcher,
    WebhookSink,
    alert_rules,
)
from turneval.watch._metrics import exposition

from ._helpers import conversation


@pytest.fixture
def webhook() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A webhook receiver on 127.0.0.1 keeping the JSON it is sent."""
    received: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            assert self.headers["Content-Type"] == "application/json"
            received.append(json.loads(body))
            self.send_response(204)
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", received
    server.shutdown()
    server.server_close()


def row(index: int, **values: float | None) -> SampleResult:
    scored = SampleResult(index, None)
    for name, value in values.items():
        if value is None:
            scored.failures[name] = MetricFailure(name, index, "JudgeCallError", "down")
        else:
            scored.results[name] = MetricResult(name, value)
    return scored


# -- rules -------------------------------------------------------------------------------------


def test_rules_parse_and_bad_ones_are_named() -> None:
    rule = AlertRule.parse("goal_accuracy < 0.8 over 1h")
    assert (rule.metric, rule.statistic, rule.op, rule.threshold, rule.window_s, rule.min_rows) == (
        "goal_accuracy", "mean", "<", 0.8, 3600.0, 1,
    )  # fmt: skip
    rule = AlertRule.parse("p95(turn_latency) >= 2.5 over 1h30m min 20 rows")
    assert (rule.statistic, rule.window_s, rule.min_rows) == ("p95", 5400.0, 20)
    assert rule.name == "TurnevalTurnLatencyP95AtLeast2_5Over1h30m"
    for bad, why in (
        ("goal_accuracy below 0.8 over 1h", "is not"),
        ("goal_accuracy < 0.8", "is not"),
        ("p42(goal_accuracy) < 0.8 over 1h", "unknown statistic 'p42'"),
        ("goal_accuracy < 0.8 over 0s", "above 0"),
    ):
        with pytest.raises(ConfigError, match=why):
            AlertRule.parse(bad)


@settings(max_examples=60, deadline=None)
@given(
    metric=st.from_regex(r"[a-z][a-z_]{0,20}", fullmatch=True),
    statistic=st.sampled_from(["", "mean", "p50", "p90", "p95", "p99", "max", "min", "sum"]),
    op=st.sampled_from(["<", "<=", ">", ">="]),
    number=st.floats(-1e6, 1e6, allow_nan=False).map(lambda x: round(x, 4)),
    parts=st.lists(
        st.tuples(st.integers(1, 99), st.sampled_from(["s", "m", "h", "d"])), min_size=1, max_size=3
    ),
    rows=st.one_of(st.none(), st.integers(1, 500)),
)
def test_every_rule_of_the_documented_form_reads_back(
    metric: str,
    statistic: str,
    op: str,
    number: float,
    parts: list[tuple[int, str]],
    rows: int | None,
) -> None:
    window = "".join(f"{n}{u}" for n, u in parts)
    target = f"{statistic}({metric})" if statistic else metric
    text = f"{target} {op} {number!r} over {window}" + (f" min {rows} rows" if rows else "")
    rule = AlertRule.parse(text)
    seconds = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    assert (rule.metric, rule.statistic or "mean", rule.op, rule.threshold) == (
        metric, statistic or "mean", op, number,
    )  # fmt: skip
    assert rule.window_s == sum(n * seconds[u] for n, u in parts)
    assert rule.min_rows == (rows or 1)


# -- a stream with a known drop, through a webhook on 127.0.0.1 ---------------------------------


def test_an_alert_fires_once_on_a_known_drop_and_one_that_must_not_stays_quiet(
    webhook: tuple[str, list[dict[str, Any]]],
) -> None:
    url, received = webhook
    sink = WebhookSink(url)
    alerts = Alerts(
        ["goal_accuracy < 0.8 over 1h", "goal_accuracy < 0.5 over 1h"], [LogSink(), sink]
    )
    # one row a minute: 60 at 1.0, then 60 at 0.6. The 1h window holds the last 60 rows; with
    # k rows of the drop in it, its mean is (60 - k + 0.6 k) / 60 = 1 - 0.4 k / 60, below 0.8
    # once k > 30: at the 31st row of the drop. Its lowest is 0.6: never below 0.5.
    start = 1_700_000_000.0
    values = [1.0] * 60 + [0.6] * 60
    fired_at = []
    for minute, value in enumerate(values):
        for event in alerts.observe([row(minute, goal_accuracy=value)], start + 60 * minute):
            fired_at.append((minute, event.state))
    alerts.close()
    assert fired_at == [(60 + 30, "firing")]
    assert sink.delivered == 1 and sink.failed == 0
    (sent,) = received
    assert sent["alert"] == "goal_accuracy < 0.8 over 1h" and sent["state"] == "firing"
    assert sent["rows"] == 60 and sent["failed"] == 0
    assert sent["value"] == pytest.approx(1 - 0.4 * 31 / 60)
    assert sent["message"] == (
        "ALERT firing: goal_accuracy < 0.8 over 1h: mean 0.7933 over the last 1h "
        "(60 rows scored, 0 failed)"
    )
    assert alerts.firing == {
        "goal_accuracy < 0.8 over 1h": True,
        "goal_accuracy < 0.5 over 1h": False,
    }


def test_latency_and_cost_alerts_resolve_and_count_failed_rows_apart(
    caplog: pytest.LogCaptureFixture,
) -> None:
    alerts = Alerts(
        ["p95(turn_latency) > 2 over 10m min 3 rows", "sum(conversation_cost) > 0.05 over 1h"]
    )
    at = 1_700_000_000.0
    with caplog.at_level(logging.INFO, logger="turneval.alerts"):
        # 2 rows: below min 3, nothing decided
        assert alerts.observe([row(0, turn_latency=5.0), row(1, turn_latency=5.0)], at) == []
        # 1.0, 1.5, 3.0 and a failed row: p95 at h = 0.95 * 2 = 1.9: 1.5 + 0.9 * 1.5 = 2.85
        events = alerts.observe(
            [row(2, turn_latency=1.0, conversation_cost=0.02), row(3, turn_latency=None)],
            at + 700,  # the first two rows are out of the 10 min window
        )
        assert events == []  # 1 row in 10 min: too few
        (fired,) = alerts.observe(
            [row(4, turn_latency=1.5, conversation_cost=0.02), row(5, turn_latency=3.0)],
            at + 710,
        )
        assert fired.state == "firing" and fired.value == pytest.approx(2.85)
        assert (fired.rows, fired.failed) == (3, 1)
        (cost,) = alerts.observe([row(6, turn_latency=0.5, conversation_cost=0.02)], at + 720)
        assert cost.rule.metric == "conversation_cost" and cost.value == pytest.approx(0.06)
        # 11 min after the firing rows they are out of the window: it holds 0.5 (at + 720)
        # and 0.4, 0.3, 0.2: p95 at h = 0.95 * 3 = 2.85: 0.4 + 0.85 * 0.1 = 0.485: resolved
        later = [row(7 + i, turn_latency=v) for i, v in enumerate((0.4, 0.3, 0.2))]
        (resolved,) = alerts.observe(later, at + 1311)
        assert resolved.state == "resolved" and resolved.value == pytest.approx(0.485)
        assert resolved.rows == 4
    lines = [r.getMessage() for r in caplog.records if r.name == "turneval.alerts"]
    assert lines[0].startswith("ALERT firing: p95(turn_latency) > 2 over 10m min 3 rows: p95 2.85")
    assert lines[-1].startswith("alert resolved: p95(turn_latency) > 2 over 10m min 3 rows")


# -- through turneval watch: OTLP in, alert out (log line, OTLP event, webhook) -----------------


@pytest.fixture
def collector() -> Iterator[tuple[str, list[ExportLogsServiceRequest]]]:
    received: list[ExportLogsServiceRequest] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append(ExportLogsServiceRequest.FromString(body))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", received
    server.shutdown()
    server.server_close()


def test_watch_fires_an_alert_on_its_scored_rows(
    tmp_path: Path,
    webhook: tuple[str, list[dict[str, Any]]],
    collector: tuple[str, list[ExportLogsServiceRequest]],
) -> None:
    hook, sent = webhook
    otlp, received = collector
    alerts = Alerts(["step_budget < 0.8 over 1h"], [LogSink(), WebhookSink(hook)])
    watcher = Watcher([StepBudget(max_steps=2)], tmp_path, idle=0, export_to=otlp, alerts=alerts)
    watcher.clock = lambda: 1_700_000_000.0
    with watcher:
        for spans in (conversation(1), conversation(1)):  # 1 step each: 1.0
            watcher.accept(MessageToDict(encode_spans(spans)))
        assert watcher.tick() == 2
        assert alerts.firing == {"step_budget < 0.8 over 1h": False}
        for spans in (conversation(4), conversation(4), conversation(4)):  # 2 / 4 = 0.5 each
            watcher.accept(MessageToDict(encode_spans(spans)))
        assert watcher.tick() == 3
        text, _ = exposition(watcher)
    # mean over the window: (2 x 1.0 + 3 x 0.5) / 5 = 0.7
    (event,) = alerts.events
    assert (event.state, event.rows) == ("firing", 5) and event.value == pytest.approx(0.7)
    assert [s["state"] for s in sent] == ["firing"]
    records = [
        record
        for request in received
        for resource in request.resource_logs
        for scope in resource.scope_logs
        for record in scope.log_records
        if record.event_name == "turneval.alert"
    ]
    (record,) = records
    attributes = {kv.key: MessageToDict(kv.value) for kv in record.attributes}
    assert attributes["turneval.alert.alert"] == {"stringValue": "step_budget < 0.8 over 1h"}
    assert attributes["turneval.alert.rows"] == {"intValue": "5"}
    assert record.body.string_value.startswith("ALERT firing: step_budget < 0.8 over 1h: mean 0.7")
    # the scores' histogram on /metrics: two at 1.0, three at 0.5
    exposed = text.decode()
    assert 'turneval_watch_score_bucket{le="0.5",metric="step_budget"} 3.0' in exposed
    assert 'turneval_watch_score_bucket{le="1",metric="step_budget"} 5.0' in exposed
    assert 'turneval_watch_score_sum{metric="step_budget"} 3.5' in exposed


def test_a_rule_on_a_metric_the_watch_does_not_compute_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'goal_accuracy', which is not among the metrics"):
        Watcher([StepBudget()], tmp_path, alerts=Alerts(["goal_accuracy < 0.8 over 1h"]))


def test_histogram_buckets_by_hand() -> None:
    scores = ScoreHistograms(buckets=(0.5, 1.0, 10.0, float("inf")))
    scores.observe([row(0, m=0.2), row(1, m=0.5), row(2, m=0.7), row(3, m=50.0), row(4, m=None)])
    (family,) = scores.families()
    buckets = {s.labels["le"]: s.value for s in family.samples if s.name.endswith("_bucket")}
    assert buckets == {"0.5": 2, "1": 3, "10": 3, "+Inf": 4}  # cumulative; the failure not seen
    assert [s.value for s in family.samples if s.name.endswith("_sum")] == [51.4]


# -- the Prometheus rule file ---------------------------------------------------------------------


RULES = [
    "goal_accuracy < 0.8 over 1h",
    "goal_accuracy < 0.5 over 1h",
    "p95(turn_latency) > 3 over 15m min 10 rows",
]


def _promtool() -> str | None:
    found = shutil.which("promtool")
    if found is None and os.environ.get("CI") == "true":
        pytest.fail("CI needs promtool (apt-get install prometheus; make prometheus)")
    return found


def test_the_rule_file_parses_and_promtool_checks_and_tests_it(tmp_path: Path) -> None:
    rules = [AlertRule.parse(text) for text in RULES]
    path = tmp_path / "turneval-rules.yml"
    path.write_text(alert_rules(rules))
    document = yaml.safe_load(path.read_text())
    (group,) = document["groups"]
    assert [r["alert"] for r in group["rules"]] == [
        "TurnevalGoalAccuracyMeanBelow0_8Over1h",
        "TurnevalGoalAccuracyMeanBelow0_5Over1h",
        "TurnevalTurnLatencyP95Above3Over15m",
    ]
    assert group["rules"][0]["expr"] == (
        '(sum(increase(turneval_watch_score_sum{metric="goal_accuracy"}[1h])) / '
        'sum(increase(turneval_watch_score_count{metric="goal_accuracy"}[1h]))) < 0.8 and '
        'sum(increase(turneval_watch_score_count{metric="goal_accuracy"}[1h])) >= 1'
    )
    assert group["rules"][2]["expr"].startswith(
        "(histogram_quantile(0.95, sum by (le) (increase(turneval_watch_score_bucket"
        '{metric="turn_latency"}[15m])))) > 3.0 and '
    )
    promtool = _promtool()
    if promtool is None:
        pytest.skip("promtool is not installed (make prometheus); the YAML was checked above")
    checked = subprocess.run(
        [promtool, "check", "rules", str(path)], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 3 rules found" in checked.stdout
    # promtool's own unit test of the rules: ten rows a minute, a mean of 0.9 for an hour,
    # then 0.6. At 50m the hour's mean is 0.9; at 110m it is (10 x 9 + 50 x 6) / 600 = 0.65:
    # below 0.8, not below 0.5.
    summary = "turneval: goal_accuracy < 0.8 over 1h"
    test = {
        "rule_files": [path.name],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {
                        "series": 'turneval_watch_score_count{metric="goal_accuracy"}',
                        "values": "0+10x120",
                    },
                    {
                        "series": 'turneval_watch_score_sum{metric="goal_accuracy"}',
                        "values": "0+9x60 546+6x59",
                    },
                ],
                "alert_rule_test": [
                    {"eval_time": "50m", "alertname": rules[0].name, "exp_alerts": []},
                    {
                        "eval_time": "110m",
                        "alertname": rules[0].name,
                        "exp_alerts": [
                            {
                                "exp_labels": {"source": "turneval", "metric": "goal_accuracy"},
                                "exp_annotations": group["rules"][0]["annotations"],
                            }
                        ],
                    },
                    {"eval_time": "110m", "alertname": rules[1].name, "exp_alerts": []},
                ],
            }
        ],
    }
    assert group["rules"][0]["annotations"]["summary"] == summary
    (tmp_path / "test.yml").write_text(yaml.safe_dump(test, sort_keys=False))
    tested = subprocess.run(
        [promtool, "test", "rules", "test.yml"], capture_output=True, text=True, cwd=tmp_path
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_the_cli_writes_the_rule_file_and_refuses_max(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "rules.yml"
    args = [
        "watch",
        "--metric",
        "agent_goal_accuracy_without_reference",
        "--out",
        str(tmp_path / "w"),
    ]
    alert = ["--alert", "agent_goal_accuracy_without_reference < 0.8 over 1h"]
    assert main([*args, *alert, "--write-alert-rules", str(target)]) == 0
    assert "wrote 1 alert rule to" in capsys.readouterr().out
    assert yaml.safe_load(target.read_text())["groups"][0]["rules"][0]["alert"].startswith(
        "TurnevalAgentGoalAccuracyWithoutReferenceMeanBelow"
    )
    maximum = ["--alert", "max(agent_goal_accuracy_without_reference) < 0.8 over 1h"]
    assert main([*args, *maximum, "--write-alert-rules", str(target)]) == 2
    assert "max has no Prometheus form" in capsys.readouterr().err
    assert main([*args, "--alert", "tool_call_f1 < 0.8 over 1h"]) == 2
    assert "'tool_call_f1', which is not among the metrics" in capsys.readouterr().err

"""Sampling by a hash of the conversation id, attribute filters, and the judge budget."""

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan

from turneval.errors import ConfigError
from turneval.metrics import StepBudget
from turneval.watch import Budget, Watcher

from ._helpers import conversation, results, trace_id


def _export(watcher: Watcher, spans: list[ReadableSpan]) -> None:
    watcher.accept(MessageToDict(encode_spans(spans)))


def _ledger(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "ledger.jsonl").read_text().splitlines()]


def _in_sample(conversation_id: str, rate: float) -> bool:
    """The documented rule: SHA-256 of the id, first 8 bytes big-endian, over 2**64."""
    digest = hashlib.sha256(conversation_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < rate


def test_the_sample_is_the_hash_rule_at_the_rate_and_the_same_everywhere(tmp_path: Path) -> None:
    traces = [conversation(1) for _ in range(120)]
    chosen = []
    for folder in ("a", "b"):  # two receivers (or a restart) choose the same conversations
        watcher = Watcher([StepBudget(max_steps=1)], tmp_path / folder, idle=0, sample=0.25)
        for spans in traces:
            _export(watcher, spans)
        watcher.tick()
        watcher.close()
        chosen.append({row["id"] for row in results(tmp_path / folder)})
        assert watcher.skipped["sampled_out"] == 120 - len(chosen[-1])
        assert watcher.counts["conversations_sampled"] == len(chosen[-1])
    expected = {trace_id(s) for s in traces if _in_sample(trace_id(s), 0.25)}
    assert chosen[0] == chosen[1] == expected
    assert 15 <= len(expected) <= 45  # 120 x 0.25 = 30, within 3 standard deviations (4.7)


def test_a_session_is_sampled_whole(tmp_path: Path) -> None:
    sessions = [f"session-{k}" for k in range(30)]
    with Watcher(
        [StepBudget(max_steps=1)], tmp_path, idle=0, sample=0.5, group_by="session"
    ) as watcher:
        for session in sessions:  # two traces (turns) per session
            _export(watcher, conversation(1, session=session))
            _export(watcher, conversation(1, session=session))
        watcher.tick()
    rows = {row["id"]: row for row in results(tmp_path)}
    assert set(rows) == {s for s in sessions if _in_sample(s, 0.5)}
    assert {row["step_budget"] for row in rows.values()} == {0.5}  # both traces: 2 model steps


def test_filters_on_resource_and_span_attributes(tmp_path: Path) -> None:
    shop, checkout = conversation(1, service="shop"), conversation(2, service="checkout")
    with Watcher(
        [StepBudget(max_steps=1)],
        tmp_path,
        idle=0,
        filters=[("service.name", "checkout"), ("gen_ai.operation.name", "chat")],
    ) as watcher:
        _export(watcher, shop)
        _export(watcher, checkout)
        watcher.tick()
    assert [row["id"] for row in results(tmp_path)] == [trace_id(checkout)]
    assert [(c["id"], c.get("skipped")) for c in _ledger(tmp_path)] == [
        (f"trace:{trace_id(checkout)}", None),
        (f"trace:{trace_id(shop)}", "filtered"),
    ]


def test_budget_text() -> None:
    assert Budget.parse("20USD/day") == Budget(20.0, "USD", 86400.0)
    assert Budget.parse("100000tokens/hour") == Budget(100000.0, "tokens", 3600.0)
    with pytest.raises(ConfigError, match="not AMOUNT UNIT/PERIOD"):
        Budget.parse("20 euros a week")
    with pytest.raises(ConfigError, match="needs the judge prices"):
        Watcher([], "unused", budget=Budget.parse("1USD/day"))


def test_memory_stays_bounded_by_the_queue_and_late_spans_of_recent_conversations_drop(
    tmp_path: Path,
) -> None:
    from turneval.watch._scoring import DONE_KEPT

    traces = [conversation(1) for _ in range(30)]  # two spans each
    with Watcher([StepBudget(max_steps=1)], tmp_path, idle=0, max_queue=2) as watcher:
        for spans in traces:
            _export(watcher, spans)
            assert watcher.queued == 2
            watcher.tick()
            assert watcher.queued == 0
        assert len(watcher._done) == DONE_KEPT * 2  # the 20 newest decided traces
        _export(watcher, traces[-1])  # a late copy of a recent one: dropped
        _export(watcher, traces[0])  # of one long forgotten: a new conversation
        assert watcher.counts["spans_late"] == 2
        assert watcher.queued == 2

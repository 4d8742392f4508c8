"""The judge budget: input and output tokens at their prices, its period's spend kept across
restarts, and the spend the judge reports never past the budget."""

import json
import math
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan

from turneval.estimate import estimate
from turneval.metrics import ConversationCompleteness
from turneval.pipeline import RunOptions
from turneval.results import Prices
from turneval.traces import from_otel_spans
from turneval.watch import Budget, Watcher

from ._helpers import conversation, results

MAX_TOKENS = 400  # the judge's output cap: what a request is counted for, before it is sent


def _export(watcher: Watcher, spans: list[ReadableSpan]) -> None:
    watcher.accept(MessageToDict(encode_spans(spans)))


def _judge(
    stub: Any, traces: list[list[ReadableSpan]], completion: int = MAX_TOKENS, under: bool = False
) -> tuple[Any, int, int]:
    """A judge on the stub, with the first conversation's estimated calls and the prompt
    tokens the stub reports per call: the estimate's per call, rounded up (the judge spends a
    little more than estimated: learned) or, ``under``, the least over ``traces`` rounded down.
    The stub reports ``completion`` output tokens per call."""
    from langchain_openai import ChatOpenAI

    from tests._openai_stub import Reply

    judge = ChatOpenAI(model="gpt-4o-mini", base_url=stub.url, api_key="k", max_tokens=MAX_TOKENS)
    found = [
        estimate([from_otel_spans(spans).samples[0]], [ConversationCompleteness()], llm=judge)
        for spans in traces
    ]
    calls = found[0].total_calls
    assert calls > 0 and found[0].total_prompt_tokens > 0
    if under:
        per_call = min(f.total_prompt_tokens // f.total_calls for f in found)
    else:
        per_call = math.ceil(found[0].total_prompt_tokens / calls)
    stub.reset(
        default=Reply(from_schema=True, prompt_tokens=per_call, completion_tokens=completion)
    )
    return judge, calls, per_call


def _ledger(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / "ledger.jsonl").read_text().splitlines()]


def test_a_restart_goes_on_counting_the_periods_spend(tmp_path: Path, openai_stub: Any) -> None:
    traces = [conversation(2) for _ in range(8)]
    judge, calls, per_call = _judge(openai_stub, traces[:1])
    actual = calls * (per_call + MAX_TOKENS)  # what one conversation really costs, in tokens
    budget = Budget(2.5 * actual, "tokens", 3600.0)  # room for two conversations an hour
    now = [7200.0 + 10]

    def watcher() -> Watcher:
        made = Watcher(
            [ConversationCompleteness()],
            tmp_path,
            idle=0,
            options=RunOptions(llm=judge),
            budget=budget,
        )
        made.clock = lambda: now[0]
        return made

    first = watcher()
    for spans in traces[:3]:
        _export(first, spans)
    assert first.tick() == 2
    assert first.skipped["budget"] == 1
    assert first.counts["judge_spend"] == 2 * actual  # as the judge reported it
    first.close()
    second = watcher()  # restarted in the same hour: the hour's spend is read back
    assert second.period_spend == 2 * actual
    for spans in traces[3:5]:
        _export(second, spans)
    assert second.tick() == 0  # 2 + 1 conversations would be past 2.5
    assert second.skipped["budget"] == 1 + 2
    now[0] += 3600.0  # the next hour: scoring resumes
    for spans in traces[5:]:
        _export(second, spans)
    assert second.tick() == 2
    second.close()
    assert len(results(tmp_path)) == 4
    spends = [line for line in _ledger(tmp_path) if "spend" in line]
    assert [line["spend"] for line in spends] == [2 * actual, 2 * actual]
    skipped = [line["detail"] for line in _ledger(tmp_path) if line.get("skipped") == "budget"]
    assert skipped[0].endswith(f"of {2.5 * actual:g} spent in this period")
    provenance = json.loads((tmp_path / "run.json").read_text())  # what scored the rows
    assert provenance["judge"]["model"] == "gpt-4o-mini"
    assert [m["name"] for m in provenance["metrics"]] == ["conversation_completeness"]


def test_a_usd_budget_counts_output_tokens_at_their_price(tmp_path: Path, openai_stub: Any) -> None:
    traces = [conversation(2) for _ in range(8)]
    judge, calls, per_call = _judge(openai_stub, traces[:1])
    prices = Prices(0.15, 0.60)  # per million; output costs four times input
    actual = calls * (per_call * 0.15 + MAX_TOKENS * 0.60) / 1e6
    budget = Budget(3.5 * actual, "USD", 86400.0)  # room for three conversations a day
    watcher = Watcher(
        [ConversationCompleteness()],
        tmp_path,
        idle=0,
        options=RunOptions(llm=judge),
        budget=budget,
        prices=prices,
    )
    for spans in traces:  # one at a time, as they complete
        _export(watcher, spans)
        watcher.tick()
    watcher.close()
    assert len(results(tmp_path)) == 3
    assert watcher.skipped["budget"] == 5
    spent = watcher.counts["judge_spend_usd"]  # the cost of what the judge reported
    assert math.isclose(spent, 3 * actual)
    assert spent <= budget.amount


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    turns=st.lists(st.integers(1, 3), min_size=1, max_size=7),
    together=st.integers(1, 4),
    room=st.floats(0.5, 4.0),
    completion=st.integers(1, MAX_TOKENS),
    output_price=st.sampled_from([0.6, 4.0, 10.0]),
)
def test_the_spend_the_judge_reports_never_passes_a_usd_budget(
    tmp_path_factory: pytest.TempPathFactory,
    openai_stub: Any,
    turns: list[int],
    together: int,
    room: float,
    completion: int,
    output_price: float,
) -> None:
    """With the judge's output capped and its input as estimated (or less), for any mix of
    conversation sizes, completed ``together`` at a time, what the judge reports costs no
    more than the budget, and a conversation is skipped only when its estimate did not fit."""
    traces = [conversation(n) for n in turns]
    judge, calls, per_call = _judge(openai_stub, traces, completion, under=True)
    prices = Prices(0.15, output_price)
    first = calls * (per_call * 0.15 + MAX_TOKENS * output_price) / 1e6
    budget = Budget(room * first, "USD", 86400.0)
    folder = tmp_path_factory.mktemp("budget")
    watcher = Watcher(
        [ConversationCompleteness()],
        folder,
        idle=0,
        options=RunOptions(llm=judge),
        budget=budget,
        prices=prices,
    )
    for start in range(0, len(traces), together):
        for spans in traces[start : start + together]:
            _export(watcher, spans)
        watcher.tick()
    watcher.close()
    assert watcher.counts.get("judge_spend_usd", 0.0) <= budget.amount * (1 + 1e-9)
    for line in _ledger(folder):
        if line.get("skipped") == "budget":
            estimated, spent = line["detail"].split("; ")
            # it did not fit (the figures are printed to 6 digits)
            assert float(estimated.split()[1]) + float(spent.split()[0]) > budget.amount * 0.9999

"""Conformance: every schema-valid answer of the generator becomes scenarios, no request wasted.

The OpenAI-compatible stub answers each request with a random JSON instance of the schema it
carries (seeded by the request), over HTTP, to a real ``ChatOpenAI`` in strict mode. For every
source: no answer is rejected (no repair round, no failed request), each source costs exactly
the requests its plan states (what the dry run counts), every request's schema is strict and
per item, and every answer gives exactly the scenarios its request asked for.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_openai import ChatOpenAI

from turneval import ToolCall, evaluate
from turneval.metrics import ToolCallF1
from turneval.scenarios import (
    ScenarioSource,
    estimate_generation,
    from_conversations,
    from_failures,
    from_tools,
    from_world,
    generate,
    perturb,
)
from turneval.simulation import Scenario
from turneval.simulation.domains import files_world, orders_scenarios, orders_world

from .._openai_stub import OpenAIStub, Reply
from ..judge.test_conformance import check_requests, conversation
from ._helpers import record

SEEDS = 6

OPENAI_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "book_table",
            "description": "Book a table.",
            "parameters": {
                "type": "object",
                "properties": {"people": {"type": "integer"}, "time": {"type": "string"}},
                "required": ["people", "time"],
            },
        },
    },
    {"type": "function", "function": {"name": "cancel_booking", "description": "Cancel."}},
    {"type": "function", "function": {"name": "menu", "parameters": {"type": "object"}}},
]


@pytest.fixture
def strict_llm(openai_stub: OpenAIStub) -> ChatOpenAI:
    openai_stub.reset(default=Reply(from_schema=True), schema_seed=47)
    return ChatOpenAI(model="generator", base_url=openai_stub.url, api_key="k", max_retries=0)


def run(source: ScenarioSource, llm: ChatOpenAI, stub: OpenAIStub, **options: Any) -> Any:
    """Generate, then check: no rejection, exactly the planned requests, strict schemas."""
    stub.reset(default=Reply(from_schema=True), schema_seed=stub.schema_seed)
    planned = estimate_generation(source, llm=llm, **options)
    result = generate(source, llm=llm, dedup_threshold=None, show_progress=False, **options)
    assert result.failed == []
    assert result.requests == planned.requests
    assert result.usage.calls == planned.requests  # one each: no retry, no repair round
    check_requests(stub, planned.requests)
    # every scenario asked for came back: kept, or left out by the world with its reason
    assert len(result.scenarios) + len(result.discarded) == planned.scenarios
    return result


def test_tools_source_gives_exactly_n_scenarios(
    strict_llm: ChatOpenAI, openai_stub: OpenAIStub
) -> None:
    for seed in range(SEEDS):
        openai_stub.reset(default=Reply(from_schema=True), schema_seed=seed)
        result = run(
            from_tools(OPENAI_TOOLS), strict_llm, openai_stub, n=7, seed=seed, batch_size=3
        )
        assert len(result.scenarios) == 7 and result.requests == 3  # 3 + 3 + 1
        for scenario in result.scenarios:
            assert scenario.goal.strip()
            assert set(record(scenario)["tools"]) <= {
                "book_table",
                "cancel_booking",
                "menu",
            }


@pytest.mark.parametrize("make", [orders_world, files_world])
def test_world_source_keeps_or_discards_every_draft(
    make: Any, strict_llm: ChatOpenAI, openai_stub: OpenAIStub
) -> None:
    kept = discarded = 0
    for seed in range(SEEDS):
        openai_stub.reset(default=Reply(from_schema=True), schema_seed=seed)
        result = run(from_world(make()), strict_llm, openai_stub, n=6, seed=seed, batch_size=4)
        for scenario in result.scenarios:
            assert "expected_end_state" in record(scenario)
        for item in result.discarded:
            assert item.stage == "replay" and "failed on the world" in item.reason
        kept += len(result.scenarios)
        discarded += len(result.discarded)
    assert kept and discarded  # random actions: some succeed (or are empty), some fail


def test_distillation_of_conversations_of_every_shape(
    strict_llm: ChatOpenAI, openai_stub: OpenAIStub
) -> None:
    samples = [conversation(seed) for seed in range(13)]
    result = run(from_conversations(samples), strict_llm, openai_stub, seed=3)
    assert len(result.scenarios) == 13


def test_near_misses_of_failed_rows(strict_llm: ChatOpenAI, openai_stub: OpenAIStub) -> None:
    samples = [conversation(seed) for seed in range(12)]
    wrong = [ToolCall(name="book", args={"q": "nothing like it"})]
    samples = [
        s.model_copy(update={"reference_tool_calls": wrong}) if i % 2 else s
        for i, s in enumerate(samples)
    ]
    scored = evaluate(samples, [ToolCallF1()], show_progress=False)
    source = from_failures(scored, thresholds=0.99, cluster_threshold=0.95)
    assert source.groups  # some rows failed
    result = run(source, strict_llm, openai_stub, seed=5)
    kinds = {record(s)["kind"] for s in result.scenarios}
    assert kinds <= {"harder_persona", "changed_constraint", "tool_fault"}


def test_near_misses_on_a_world(strict_llm: ChatOpenAI, openai_stub: OpenAIStub) -> None:
    from turneval.simulation import ScriptedUser, simulate

    world = orders_world()
    scenarios = orders_scenarios(world)
    data = simulate(lambda m: [], scenarios, user=ScriptedUser([]), show_progress=False)
    scored = evaluate(data, [ToolCallF1()], show_progress=False)
    source = from_failures(scored, scenarios=scenarios, world=world)
    result = run(source, strict_llm, openai_stub, seed=2)
    faults = [s for s in result.scenarios if record(s)["kind"] == "tool_fault"]
    assert faults and all(record(s)["fault"]["tool"] in world.tools for s in faults)


def test_perturbations(strict_llm: ChatOpenAI, openai_stub: OpenAIStub) -> None:
    scenarios = orders_scenarios()
    result = run(perturb(scenarios), strict_llm, openai_stub, seed=1)
    assert result.requests == len(scenarios)
    plain = [Scenario(id=str(i), goal=f"goal {i}") for i in range(4)]
    result = run(perturb(plain, kinds=["paraphrase"]), strict_llm, openai_stub, n=3, seed=1)
    assert len(result.scenarios) == 3

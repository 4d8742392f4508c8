"""Generation as a judged job: progress file and cache (a rerun pays for nothing twice), the
dry run's count, failed requests recorded, the record on every scenario, the batch engine."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from langchain_openai import ChatOpenAI

from turneval import EvaluationDataset, HumanMessage, MultiTurnSample
from turneval.errors import ConfigError
from turneval.judge import Judge, SQLiteCache
from turneval.results import EvaluationResult, Prices
from turneval.scenarios import (
    ConversationsSource,
    FailuresSource,
    PerturbSource,
    ToolsSource,
    WorldSource,
    as_source,
    estimate_generation,
    from_tools,
    generate,
    open_batch,
    submit_batch,
)
from turneval.simulation import Scenario
from turneval.simulation.domains import orders_world
from turneval.testing import ScriptedChatModel

from .._batch_stub import BatchStub
from ._helpers import draft, listing, record

TOOLS = [{"name": "search", "description": "Search."}, {"name": "book", "description": "Book."}]


def tool_drafts(count: int, prefix: str = "goal") -> list[dict[str, Any]]:
    topics = [
        "flights to Rome",
        "a hotel in Oslo",
        "a car in Lisbon",
        "trains to Paris",
        "a museum pass",
        "ferry tickets",
        "a cooking class",
        "concert seats",
    ]
    return [
        {
            **draft(f"{prefix} {i}: find and book {topics[i % len(topics)]}"),
            "tools": ["search", "book"],
        }
        for i in range(count)
    ]


def counting(drafts: list[dict[str, Any]], fail_on: set[int] = frozenset()) -> ScriptedChatModel:  # type: ignore[assignment]
    """A generator whose request number k (0-based) in ``fail_on`` raises a non-transient error."""
    answer = listing(drafts)
    seen = {"n": 0}

    def respond(messages: list[BaseMessage]) -> str:
        number = seen["n"]
        seen["n"] += 1
        if number in fail_on:
            raise ValueError("the provider refused this request")
        return answer(messages)

    return ScriptedChatModel(responses=[respond])


def test_every_scenario_records_source_seed_and_model_and_ids_are_unique() -> None:
    existing = [Scenario(id="tools-7-001", goal="something else entirely, nothing alike")]
    result = generate(
        from_tools(TOOLS), llm=counting(tool_drafts(4)), n=4, seed=7, existing=existing
    )
    assert [s.id for s in result.scenarios] == [
        "tools-7-001-2",
        "tools-7-002",
        "tools-7-003",
        "tools-7-004",
    ]
    for scenario in result.scenarios:
        found = record(scenario)
        assert (found["source"], found["seed"], found["model"]) == (
            "tools",
            7,
            "ScriptedChatModel",
        )
        assert found["kind"] == "goal" and found["tools"] == ["book", "search"]
        assert set(found["brief"]) == {"tools", "difficulty", "persona_type"}


def test_a_failed_request_is_recorded_and_a_rerun_asks_only_it(tmp_path: Path) -> None:
    progress = tmp_path / "progress.jsonl"
    first = counting(tool_drafts(6), fail_on={1})
    result = generate(
        from_tools(TOOLS), llm=first, n=6, batch_size=2, progress=progress, max_llm_concurrency=1
    )
    assert first.calls == 3 and len(result.scenarios) == 4
    (failed,) = result.failed
    assert failed.label == "scenarios 3-4" and "the provider refused this request" in failed.error
    assert len(progress.read_text().splitlines()) == 2
    again = counting(tool_drafts(2, prefix="again"))
    rerun = generate(from_tools(TOOLS), llm=again, n=6, batch_size=2, progress=progress)
    assert again.calls == 1  # only the request that failed
    assert rerun.answered_before == 2 and rerun.failed == [] and len(rerun.scenarios) == 6
    assert [s.goal.split(":")[0] for s in rerun.scenarios] == [
        "goal 0",
        "goal 1",
        "again 0",
        "again 1",
        "goal 2",
        "goal 3",
    ]
    # a third run pays nothing at all
    third = counting([])
    assert (
        len(generate(from_tools(TOOLS), llm=third, n=6, batch_size=2, progress=progress).scenarios)
        == 6
    )
    assert third.calls == 0


def test_a_line_cut_by_a_crash_is_asked_again(tmp_path: Path) -> None:
    progress = tmp_path / "progress.jsonl"
    generate(from_tools(TOOLS), llm=counting(tool_drafts(4)), n=4, batch_size=2, progress=progress)
    lines = progress.read_text().splitlines()
    progress.write_text(lines[0] + "\n" + lines[1][: len(lines[1]) // 2])  # killed mid-write
    model = counting(tool_drafts(2, prefix="again"))
    result = generate(from_tools(TOOLS), llm=model, n=4, batch_size=2, progress=progress)
    assert model.calls == 1 and result.answered_before == 1 and len(result.scenarios) == 4


def test_the_cache_answers_a_second_run(tmp_path: Path) -> None:
    cache = tmp_path / "cache.sqlite"
    model = counting(tool_drafts(8))
    first = generate(from_tools(TOOLS), llm=model, n=4, batch_size=2, cache=cache)
    second = generate(from_tools(TOOLS), llm=model, n=4, batch_size=2, cache=cache)
    assert model.calls == 2 and second.usage.calls == 0 and second.usage.cached_calls == 2
    assert [s.goal for s in second.scenarios] == [s.goal for s in first.scenarios]
    # another seed is another set of requests
    generate(from_tools(TOOLS), llm=model, n=4, batch_size=2, cache=cache, seed=1)
    assert model.calls == 4


def test_the_dry_run_counts_what_the_run_sends(tmp_path: Path) -> None:
    source = from_tools(TOOLS)
    found = estimate_generation(source, llm=counting([]), n=7, batch_size=3)
    assert (found.requests, found.scenarios, found.answered, found.to_ask) == (3, 7, 0, 3)
    assert found.output_tokens == 7 * 250 and found.prompt_tokens > 0
    cost = found.cost(Prices(input_per_million=2.0, output_per_million=8.0))
    assert cost == pytest.approx((found.prompt_tokens * 2.0 + 1750 * 8.0) / 1e6)
    model = counting(tool_drafts(7))
    progress = tmp_path / "progress.jsonl"
    generate(source, llm=model, n=7, batch_size=3, progress=progress)
    # the run sent the planned requests, each once: the dry run's count is of these
    planned = {ask.request.prompt: ask.request for ask in source.plan(n=7, seed=0, batch_size=3)}
    sent = [(str(system.content), str(question.content)) for system, question in model.prompts]
    assert model.calls == found.requests == len(planned)
    assert sorted(question for _, question in sent) == sorted(planned)
    # its prompt tokens are what the judge counts before sending: system, question and the
    # verdict schema (sent as structured output), for the prompts the model received
    judge = Judge(model)
    counted = 0
    for prompt, (system, question) in zip(model.prompts, sent, strict=True):
        assert system == planned[question].system
        counted += judge.prompt_tokens(prompt, planned[question].schema)
    assert found.prompt_tokens == counted
    after = estimate_generation(source, llm=model, n=7, batch_size=3, progress=progress)
    assert (after.answered, after.to_ask, after.prompt_tokens, after.output_tokens) == (3, 0, 0, 0)
    assert "3 requests for 7 scenarios; 3 already answered" in str(after)


def test_sources_are_chosen_from_what_is_given() -> None:
    assert isinstance(as_source(orders_world()), WorldSource)
    assert isinstance(as_source(TOOLS), ToolsSource)
    assert isinstance(as_source([Scenario(goal="g")]), PerturbSource)
    sample = MultiTurnSample(user_input=[HumanMessage(content="hi")])
    assert isinstance(as_source([sample]), ConversationsSource)
    assert isinstance(as_source(EvaluationDataset([sample])), ConversationsSource)
    with pytest.raises(ConfigError, match="no failed row"):
        as_source(EvaluationResult([], [])).plan(n=None, seed=0, batch_size=5)
    assert isinstance(as_source(EvaluationResult([], [])), FailuresSource)
    with pytest.raises(ConfigError, match="needs llm="):
        generate(TOOLS, llm=None)
    with pytest.raises(ConfigError, match="n must be a whole number"):
        generate(TOOLS, llm=counting([]), n=0)
    with pytest.raises(ConfigError, match="batch_size must be at least 1"):
        generate(TOOLS, llm=counting([]), batch_size=0)


@pytest.fixture(scope="module")
def batch_stub() -> Iterator[BatchStub]:
    server = BatchStub()
    yield server
    server.close()


def test_the_batch_engine_fills_the_cache_a_live_run_reads(
    batch_stub: BatchStub, tmp_path: Path
) -> None:
    batch_stub.reset()
    llm = ChatOpenAI(model="gpt-4o-mini", base_url=batch_stub.url, api_key="k", max_retries=0)
    options: dict[str, Any] = {"n": 5, "seed": 3, "batch_size": 2}
    run = submit_batch(from_tools(TOOLS), llm=llm, out=tmp_path / "batch", **options)
    assert batch_stub.sync_requests == 0 and len(batch_stub.submitted) == 3
    status = run.wait(progress=False, poll_interval=0)
    assert status.done and status.answered == 3
    reopened = open_batch(from_tools(TOOLS), llm=llm, out=tmp_path / "batch", **options)
    assert reopened.status().answered == 3
    from_batch = generate(
        from_tools(TOOLS), llm=llm, cache=run.cache_path, dedup_threshold=None, **options
    )
    assert batch_stub.sync_requests == 0 and from_batch.usage.cached_calls == 3
    live = generate(from_tools(TOOLS), llm=llm, dedup_threshold=None, **options)
    assert batch_stub.sync_requests == 3  # the same seeded answers, asked one by one
    assert [s.goal for s in from_batch.scenarios] == [s.goal for s in live.scenarios]
    assert len(live.scenarios) == 5
    SQLiteCache(run.cache_path).close()


def test_progress_lines_are_json_with_key_and_answer(tmp_path: Path) -> None:
    progress = tmp_path / "p.jsonl"
    generate(from_tools(TOOLS), llm=counting(tool_drafts(2)), n=2, progress=progress)
    (line,) = progress.read_text().splitlines()
    entry = json.loads(line)
    assert set(entry) == {"key", "answer"} and len(entry["key"]) == 64
    fields = ["goal", "persona", "persona_type", "difficulty", "user_facts", "first_message"]
    assert list(entry["answer"]["scenarios"][0]) == [*fields, "reference", "tools"]

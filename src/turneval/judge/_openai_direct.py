"""The direct path for ``ChatOpenAI`` judges: the same request, a fraction of the client CPU.

A structured judge call through LangChain costs several milliseconds of CPU on top of the HTTP
exchange: the callback manager and run tree, the OpenAI SDK's recursive transformation of the
request parameters (it walks every message), its structured-output ``parse`` helper, and a
thread hop to build the result. With hundreds of requests in flight that CPU, not the
provider, bounds a run. For a plain ``ChatOpenAI`` the judge therefore sends the very body
LangChain would send (built by the model itself: messages, sampling parameters, ``seed``,
``model_kwargs``, ``extra_body``, the strict JSON schema of the verdict) through the model's
own OpenAI client (its base URL, key, headers and HTTP client, which stay private to each
run's event loop), and reads the answer with the model's own result builder (usage, refusals,
tool calls). Errors are the OpenAI SDK's (status, headers and ``Retry-After`` intact), so the
judge's retries, backoff, timeouts, cache, usage accounting and cancellation are unchanged.

The direct path is only taken when nothing LangChain would add is asked for: no callbacks or
tracing, no LangChain cache or rate limiter on the model, no streaming, the Chat Completions
API (not the Responses API), one choice. Otherwise the judge uses the structured-output
runnable, as any other model. ``TURNEVAL_DIRECT_OPENAI=0`` in the environment turns the direct
path off (read when a judge first asks for a verdict schema).
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from langchain_core.messages import BaseMessage
    from pydantic import BaseModel

__all__ = ["DirectOpenAI", "direct_openai"]

# The headers OpenAI's client adds on LangChain's path (its parse helper, a raw response).
_PARSE_HEADERS = {
    "X-Stainless-Helper-Method": "chat.completions.parse",
    "X-Stainless-Raw-Response": "true",
}
_CLIENT_OPTIONS = {"extra_headers": "headers", "extra_query": "params", "extra_body": "extra_json"}


class DirectOpenAI:
    """A ``ChatOpenAI`` asked for one verdict schema, answering like ``include_raw=True``.

    ``await ainvoke(messages)`` returns ``{"raw": AIMessage, "parsed": verdict or None,
    "parsing_error": None}``; an answer that is not a valid verdict raises pydantic's
    ``ValidationError``, as OpenAI's ``parse`` helper does.

    Args:
        llm: The judge's ``ChatOpenAI`` (its copy with provider retries off).
        schema: The verdict's pydantic model.
        fallback: Builds the structured-output runnable used when the context asks for
            callbacks or tracing (on the first such call: most runs never need it).
    """

    def __init__(self, llm: Any, schema: type[BaseModel], fallback: Callable[[], Any]) -> None:
        """Build the response format once (the strict JSON schema OpenAI's ``parse`` sends)."""
        from openai.lib._parsing._completions import type_to_response_format_param

        self.llm = llm
        self._build_fallback = fallback
        self._fallback: Any = None
        self.schema = schema
        self.response_format: dict[str, Any] = dict(type_to_response_format_param(schema))  # type: ignore[arg-type]

    @property
    def fallback(self) -> Any:
        """LangChain's structured-output runnable for this model and schema (built once)."""
        if self._fallback is None:
            self._fallback = self._build_fallback()
        return self._fallback

    async def ainvoke(self, messages: list[BaseMessage]) -> Any:
        """One request: the body LangChain would send, through the model's own client."""
        if _context_wants_callbacks(self.llm):
            return await self.fallback.ainvoke(messages)
        import httpx

        payload = self.llm._get_request_payload(messages, response_format=self.response_format)
        payload["stream"] = False  # as OpenAI's parse helper sends it
        options = {
            option: payload.pop(key) for key, option in _CLIENT_OPTIONS.items() if key in payload
        }
        options["headers"] = {**_PARSE_HEADERS, **(options.get("headers") or {})}
        response = await self.llm.root_async_client.post(
            "/chat/completions", body=payload, cast_to=httpx.Response, options=options
        )
        http = getattr(response, "http_response", response)  # the raw-response wrapper's
        body = json.loads(await http.aread())
        generation = self.llm._create_chat_result(body).generations[0]
        message = generation.message  # with finish reason and logprobs, as LangChain merges them
        message.response_metadata = {
            **(generation.generation_info or {}),
            **message.response_metadata,
        }
        content = message.content if isinstance(message.content, str) else ""
        parsed = None
        if content and not message.additional_kwargs.get("refusal"):
            parsed = self.schema.model_validate_json(content)  # as OpenAI's ``parse`` does
        return {"raw": message, "parsed": parsed, "parsing_error": None}


def direct_openai(
    llm: Any, schema: type[BaseModel], fallback: Callable[[], Any]
) -> DirectOpenAI | None:
    """A :class:`DirectOpenAI` for ``llm`` when its requests can be sent directly, else None."""
    try:
        from langchain_core.globals import get_llm_cache
        from langchain_openai import ChatOpenAI
        from openai.lib._parsing._completions import type_to_response_format_param  # noqa: F401
    except ImportError:  # pragma: no cover - langchain-openai is a runtime dependency
        return None
    if os.environ.get("TURNEVAL_DIRECT_OPENAI", "1").strip().lower() in ("0", "false", "no"):
        return None
    if type(llm) is not ChatOpenAI or getattr(llm, "root_async_client", None) is None:
        return None
    plain = (
        not llm.callbacks
        and not llm.verbose
        and llm.cache in (None, False)
        and (llm.cache is False or get_llm_cache() is None)
        and llm.rate_limiter is None
        and not llm.streaming
        and not llm.include_response_headers
        and llm.n in (None, 1)
    )
    if not plain or llm._use_responses_api({**llm._default_params, "response_format": {}}):
        return None
    return DirectOpenAI(llm, schema, fallback)


def _context_wants_callbacks(llm: Any) -> bool:
    """Some callback handler would see this call: tracing, a configure hook, the caller's."""
    from langchain_core.callbacks.manager import AsyncCallbackManager
    from langchain_core.runnables.config import var_child_runnable_config

    config = var_child_runnable_config.get() or {}
    manager = AsyncCallbackManager.configure(
        inheritable_callbacks=config.get("callbacks"),
        local_callbacks=llm.callbacks,
        verbose=bool(llm.verbose),
    )
    return bool(manager.handlers)

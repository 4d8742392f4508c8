"""The chat model a judge asks: a copy with the client's own retries off, and its identity.

The identity (class, parameters, the server it is reached at) is what a cache key says of the
model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # LangChain is imported when a judge is used, not with turneval
    from langchain_core.language_models import BaseChatModel

__all__ = ["HTTP_GRACE", "identity_of", "without_provider_retries"]

HTTP_GRACE = 2.0
"""Seconds the HTTP client waits past the judge's timeout before it closes the connection."""


def without_provider_retries(
    llm: BaseChatModel,
    temperature: float | None = None,
    logprobs: bool = False,
    http_timeout: float | None = None,
) -> BaseChatModel:
    """A copy of ``llm`` with the client's own retries off and temperature 0 when unset.

    ``temperature`` overrides the temperature where the model has one (sampling several
    verdicts); ``logprobs`` asks for token log-probabilities where the model supports them.
    ``http_timeout`` lowers the OpenAI client's own timeout to at most that many seconds, so
    a request the judge gave up on has its connection closed soon after (and its concurrency
    slot freed), not after the SDK's default of 10 minutes.
    """
    update: dict[str, Any] = {}
    fields = type(llm).model_fields
    if getattr(llm, "max_retries", None):
        update["max_retries"] = 0
    if "temperature" in fields and temperature is not None:
        update["temperature"] = temperature
    elif "temperature" in fields and getattr(llm, "temperature", 0) is None:
        update["temperature"] = 0.0
    if logprobs and "logprobs" in fields:
        update["logprobs"] = True
    if not update and not hasattr(llm, "root_async_client"):
        return llm
    copy = llm.model_copy(update=update)
    # langchain-openai builds its OpenAI clients once, with max_retries baked in.
    for root, resource in (("root_client", "client"), ("root_async_client", "async_client")):
        client = getattr(copy, root, None)
        if client is not None and hasattr(client, "with_options"):
            options: dict[str, Any] = {"max_retries": 0}
            if http_timeout is not None and not _timeout_within(client, http_timeout):
                options["timeout"] = http_timeout
            rebuilt = client.with_options(**options)
            object.__setattr__(copy, root, rebuilt)
            object.__setattr__(copy, resource, rebuilt.chat.completions)
    return copy


def _timeout_within(client: Any, seconds: float) -> bool:
    """Whether an OpenAI client's own timeout is already a number at most ``seconds``."""
    current = getattr(client, "timeout", None)
    read = getattr(current, "read", current)  # an httpx.Timeout, or a number
    return isinstance(read, (int, float)) and 0 < read <= seconds


# Fields that change a model's answer but that LangChain leaves out of ``_identifying_params``:
# sampling parameters, and which server or deployment answers (the same model name on another
# server is another judge).
_ANSWER_FIELDS = (
    "temperature",
    "top_p",
    "top_k",
    "seed",
    "max_tokens",
    "max_completion_tokens",
    "frequency_penalty",
    "presence_penalty",
    "stop",
    "n",
    "logprobs",
    "top_logprobs",
    "reasoning_effort",
    "model_kwargs",
    "extra_body",
    "openai_api_base",
    "base_url",
    "api_base",
    "endpoint",
    "azure_endpoint",
    "deployment_name",
    "openai_api_version",
    "provider",
    "project",
    "location",
    "region_name",
)


def identity_of(llm: BaseChatModel) -> dict[str, Any]:
    params: dict[str, Any]
    try:
        params = dict(llm._identifying_params)
    except Exception:  # pragma: no cover - models without identifying params
        params = {}
    fields = type(llm).model_fields
    for name in _ANSWER_FIELDS:
        if name in fields:
            params.setdefault(name, getattr(llm, name, None))
    return {"class": f"{type(llm).__module__}.{type(llm).__qualname__}", "params": params}

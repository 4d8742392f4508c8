"""The judge: one LangChain chat model asked for a pydantic verdict, reliably.

* Structured output through ``with_structured_output(schema, include_raw=True)`` where the model
  supports it; otherwise JSON in text, parsed and validated. A parse/validation failure is shown
  to the model and retried (bounded); still failing raises :class:`JudgeOutputError` with the
  raw output kept. Never a silent 0.
* Transient errors (429 honouring ``Retry-After``, 5xx, timeouts, connection errors) are retried
  with exponential backoff and jitter; others raise :class:`JudgeCallError` at once. The
  provider client's own retries are switched off so they never stack with ours.
* ``Retry-After`` is honoured up to ``max_retry_after`` (default 60 s); a longer wait fails the
  call clearly instead of stalling the run.
* Every request waits for the run's shared limiter (one for all judges, metrics and samples);
  its ``timeout`` starts once it holds a slot (time queued does not count), and a timed-out
  request keeps its slot until its connection is really released (the server answered, or the
  HTTP client's own timeout closed it), so the server never sees more requests in flight than
  the limit (``drain_timeout`` trades that guarantee for a bounded wait). ``usage.calls`` counts requests
  sent, retries included.
* Token usage comes from the model's ``usage_metadata``; with a :class:`SQLiteCache`, identical
  requests are answered from disk.
"""

from __future__ import annotations

import contextvars
import functools
import hashlib
import json
import random
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import anyio
from pydantic import BaseModel, ValidationError

from turneval.errors import ConfigError, ContextBudgetError, JudgeCallError, JudgeOutputError
from turneval.judge._openai_direct import direct_openai
from turneval.judge.budget import ANSWER_TOKENS, Budget, TokenCounter, budget_for
from turneval.judge.cache import SQLiteCache
from turneval.judge.clients import client_scope, loop_bound, sending
from turneval.provider_errors import classify
from turneval.ratelimit import RateLimiter, estimate_tokens
from turneval.usage import Usage

if TYPE_CHECKING:  # LangChain is imported when a judge is used, not with turneval
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import BaseMessage

__all__ = [
    "DEFERRED_REQUESTS",
    "Judge",
    "JudgeReply",
    "JudgeRun",
    "LangchainLLMWrapper",
    "current_run",
    "describe_parse_error",
    "judge_run",
    "message_text",
    "message_tokens",
    "parse_json_reply",
    "resolve_llm",
    "structured_arguments",
    "with_feedback",
]

T = TypeVar("T", bound=BaseModel)


class LangchainLLMWrapper:
    """ragas-compatible wrapper: ``LangchainLLMWrapper(ChatOpenAI(...))``.

    turneval metrics take the LangChain chat model itself too; the wrapper only carries it.
    """

    def __init__(self, langchain_llm: BaseChatModel) -> None:
        """Wrap ``langchain_llm``."""
        from langchain_core.language_models import BaseChatModel

        if not isinstance(langchain_llm, BaseChatModel):
            raise ConfigError(
                f"LangchainLLMWrapper needs a LangChain BaseChatModel, got "
                f"{type(langchain_llm).__name__}"
            )
        self.langchain_llm = langchain_llm

    def __repr__(self) -> str:
        """Show the wrapped model."""
        return f"LangchainLLMWrapper({self.langchain_llm!r})"


def resolve_llm(llm: Any) -> BaseChatModel:
    """The chat model behind ``llm`` (a BaseChatModel or a LangchainLLMWrapper)."""
    from langchain_core.language_models import BaseChatModel

    if isinstance(llm, LangchainLLMWrapper):
        return llm.langchain_llm
    if isinstance(llm, BaseChatModel):
        return llm
    raise ConfigError(
        "llm must be a LangChain chat model (e.g. ChatOpenAI(model=...)) or a "
        f"LangchainLLMWrapper, got {type(llm).__name__}"
    )


@dataclass
class JudgeRun:
    """What judges share during one run: the default model, limiter, cache and usage.

    With a ``rate_limiter``, requests wait for it (quota and adaptive window) instead of the
    fixed ``max_concurrency`` limiter.
    """

    llm: Any = None
    max_concurrency: int = 8
    cache: SQLiteCache | None = None
    usage: Usage = field(default_factory=Usage)
    _limiter: anyio.CapacityLimiter | None = None
    rate_limiter: RateLimiter | None = None
    shared: dict[str, Any] = field(default_factory=dict)
    """Answers shared by the run's metrics while it lasts (a conversation's running summary,
    asked once however many metrics and windows read it), by cache key."""

    @property
    def limiter(self) -> anyio.CapacityLimiter:
        """The limiter all judge requests of the run wait for (created in the run's loop)."""
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.max_concurrency)
        return self._limiter


DEFERRED_REQUESTS: contextvars.ContextVar[
    Callable[[Judge, str, list[BaseMessage], Any], None] | None
] = contextvars.ContextVar("turneval_batch_defer", default=None)
"""Set by the batch engine while it looks for requests no metric stated up front: a request
the cache does not answer is handed to it (with its cache key and messages) instead of sent."""

_RUN: contextvars.ContextVar[JudgeRun | None] = contextvars.ContextVar(
    "turneval_judge_run", default=None
)


def current_run() -> JudgeRun | None:
    """The judge run in effect, if any."""
    return _RUN.get()


@contextmanager
def judge_run(run: JudgeRun) -> Iterator[JudgeRun]:
    """Make ``run`` the shared judge context for the code inside (``evaluate`` does this)."""
    token = _RUN.set(run)
    try:
        yield run
    finally:
        _RUN.reset(token)


@dataclass(frozen=True, slots=True)
class JudgeReply(Generic[T]):
    """A validated verdict with its raw text and usage."""

    parsed: T
    raw: str
    usage: Usage
    cached: bool = False
    message: Any = None  # the model's last raw message (None from the cache)
    prompt_tokens: int | None = None  # the prompt's tokens as the judge counted them


@dataclass
class _Tally:
    usage: Usage = field(default_factory=Usage)
    message: Any = None


_HTTP_GRACE = 2.0
"""Seconds the HTTP client waits past the judge's timeout before it closes the connection."""

_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)

_JSON_INSTRUCTIONS = (
    "Answer with one JSON object only, no prose and no code fence, matching this JSON schema:\n"
)


def _without_provider_retries(
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


def _identity(llm: BaseChatModel) -> dict[str, Any]:
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


def message_tokens(message: Any) -> Usage:
    """The tokens billed for ``message`` (its request is counted when sent)."""
    metadata = getattr(message, "usage_metadata", None) or {}
    return Usage(
        int(metadata.get("input_tokens", 0) or 0), int(metadata.get("output_tokens", 0) or 0)
    )


def message_text(message: Any) -> str:
    """The text of a chat model's reply (its content, or the text parts of a list of blocks)."""
    content = getattr(message, "content", message)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part if isinstance(part, str) else str(part.get("text", "")) for part in content
        )
    return str(content)


def parse_json_reply(text: str, schema: type[T]) -> T:
    """Parse ``text`` (JSON, possibly in a code fence or with prose around it) into ``schema``."""
    match = _JSON_OBJECT.search(text)
    if match is None:
        raise ValueError("no JSON object found in the answer")
    return schema.model_validate_json(match.group(0))


class Judge:
    """Asks one chat model for verdicts of a given pydantic schema.

    Args:
        llm: A LangChain chat model or a :class:`LangchainLLMWrapper`.
        max_retries: Retries of transient errors per verdict.
        timeout: Seconds allowed for one request.
        max_parse_retries: Extra attempts after an unparseable or invalid answer.
        backoff: Base delay in seconds of the exponential backoff (doubling, with jitter).
        max_backoff: Cap of one backoff delay.
        temperature: Sampling temperature where the model has one (default: 0 if unset).
        logprobs: Ask for token log-probabilities where the model supports them.
        max_retry_after: Longest ``Retry-After`` (seconds) honoured; a server asking for more
            fails the call at once with :class:`JudgeCallError` instead of stalling the run.
        drain_timeout: After a request timed out (or its caller was cancelled), seconds its
            limiter slot stays held at most while the server may still be working on it.
            Default None: until its connection is really released (the server answered, or
            the HTTP client's own timeout closed it), so timed-out requests never push the
            server past the concurrency limit. An OpenAI client's timeout is lowered to
            ``timeout`` + 2 s for this, so a hanging server holds a slot about 2 s past the
            judge's timeout, not the SDK's default 10 minutes. A number
            bounds the wait; past it the request is abandoned and its slot freed, and a
            server that keeps working on abandoned requests may then see more than the limit.
        context_tokens: The model's context window in tokens (default: the model's entry in
            :data:`~turneval.judge.budget.MODEL_LIMITS`, else 128,000).
        max_output_tokens: The longest answer the model writes (default: from the same table).
        token_counter: Counts a text's tokens (a :class:`~turneval.judge.budget.TokenCounter`
            or a function); default tiktoken for OpenAI models, else a calibrated estimate.
            A request whose prompt and answer cannot fit the context is never sent: it raises
            :class:`~turneval.errors.ContextBudgetError`.
    """

    def __init__(
        self,
        llm: Any,
        *,
        max_retries: int = 4,
        timeout: float = 60.0,
        max_parse_retries: int = 2,
        backoff: float = 1.0,
        max_backoff: float = 30.0,
        temperature: float | None = None,
        logprobs: bool = False,
        max_retry_after: float = 60.0,
        drain_timeout: float | None = None,
        context_tokens: int | None = None,
        max_output_tokens: int | None = None,
        token_counter: TokenCounter | Callable[[str], int] | None = None,
    ) -> None:
        """Prepare the judge (the model is copied with its own retries off)."""
        if max_retries < 0 or max_parse_retries < 0 or timeout <= 0 or backoff < 0:
            raise ConfigError("retries must be >= 0, timeout > 0 and backoff >= 0")
        if max_retry_after < 0 or (drain_timeout is not None and drain_timeout < 0):
            raise ConfigError("max_retry_after and drain_timeout must be >= 0")
        self.max_retry_after = max_retry_after
        self.drain_timeout = drain_timeout
        # Copied with its own retries off and an HTTP client private to each run's event loop.
        self.llm = loop_bound(
            _without_provider_retries(
                resolve_llm(llm), temperature, logprobs, http_timeout=timeout + _HTTP_GRACE
            )
        )
        self.identity = _identity(self.llm)
        self.max_retries = max_retries
        self.timeout = timeout
        self.max_parse_retries = max_parse_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._structured: dict[type[BaseModel], Any] = {}  # built once per verdict schema
        self._supports_structured = True
        self._limits = (context_tokens, max_output_tokens, token_counter)
        self._budget: Budget | None = None
        if context_tokens is not None or max_output_tokens is not None:
            _ = self.budget  # a bad limit fails here, not at the first request

    @property
    def budget(self) -> Budget:
        """The judge's context budget: its model's limits and token counter (built once)."""
        if self._budget is None:
            context, output, counter = self._limits
            self._budget = budget_for(
                self.llm,
                context_tokens=context,
                max_output_tokens=output,
                token_counter=counter,
            )
        return self._budget

    def prompt_tokens(self, messages: Sequence[BaseMessage], schema: type[BaseModel]) -> int:
        """Prompt tokens of ``messages`` (with the verdict schema when sent as structured output)."""
        sent = _json_schema(schema) if self._supports_structured else None
        return self.budget.count_messages([message_text(m) for m in messages], sent)

    def check_fits(
        self, messages: Sequence[BaseMessage], schema: type[BaseModel], answer_tokens: int
    ) -> int | None:
        """Raise :class:`ContextBudgetError` unless the request fits; its tokens when counted.

        A prompt whose UTF-8 bytes alone fit is not counted (a token is at least a byte).
        """
        budget = self.budget
        texts = [message_text(m) for m in messages]
        room = budget.context_tokens - answer_tokens
        cheap = sum(len(text.encode()) for text in texts) + 4 * len(texts) + 3
        if self._supports_structured:
            cheap += len(json.dumps(_json_schema(schema)).encode())
        if cheap <= room:
            return None
        tokens = self.prompt_tokens(messages, schema)
        budget.check(tokens, answer_tokens, "the judge request")
        return tokens

    def _runnable(self, schema: type[BaseModel]) -> Any:
        if not self._supports_structured:
            return None
        runnable = self._structured.get(schema)
        if runnable is None:
            # The direct path builds LangChain's runnable only if a call needs it (callbacks).
            runnable = direct_openai(
                self.llm, schema, partial(self.llm.with_structured_output, schema, include_raw=True)
            )
            if runnable is None:
                try:
                    runnable = self.llm.with_structured_output(schema, include_raw=True)
                except NotImplementedError:
                    self._supports_structured = False
                    return None
            self._structured[schema] = runnable
        return runnable

    def prompt(self, system: str, user: str, schema: type[BaseModel]) -> list[BaseMessage]:
        """The messages :meth:`ask` sends first (for estimates): system, then the question."""
        if self._runnable(schema) is None:
            schema_text = json.dumps(schema.model_json_schema(), ensure_ascii=False)
            user = f"{user}\n\n{_JSON_INSTRUCTIONS}{schema_text}"
        from langchain_core.messages import HumanMessage, SystemMessage

        return [SystemMessage(content=system), HumanMessage(content=user)]

    def cache_key(
        self,
        messages: Sequence[BaseMessage],
        schema: type[BaseModel],
        extra: Mapping[str, Any] | None = None,
        *,
        vote: int = 0,
    ) -> str:
        """Key of a request: everything that changes the answer.

        That is the model's class, name and sampling parameters, the server it is reached at
        (base URL, endpoint or deployment), the messages, the output schema and, for repeated
        sampling of one prompt (self-consistency), the vote's index. ``extra`` adds what else
        must tell two identical requests apart (e.g. the trial of a simulated user), so that
        they are not answered from each other's cache entry.
        """
        payload: dict[str, Any] = {
            "model": self.identity,
            "messages": [[m.type, message_text(m)] for m in messages],
            "schema": _json_schema(schema),
            "structured": self._supports_structured,
        }
        if extra:
            payload["extra"] = dict(extra)
        if vote:
            payload["vote"] = vote
        text = json.dumps(payload, sort_keys=True, default=str, ensure_ascii=True)
        return hashlib.sha256(text.encode()).hexdigest()

    async def ask(
        self,
        system: str,
        user: str,
        schema: type[T],
        *,
        cache_extra: Mapping[str, Any] | None = None,
        vote: int = 0,
        answer_tokens: int | None = None,
        prompt_tokens: int | None = None,
    ) -> JudgeReply[T]:
        """Ask for a verdict of type ``schema``.

        Args:
            system: The system prompt.
            user: The question.
            schema: The verdict's pydantic model.
            cache_extra: What else tells this request apart in the cache (see :meth:`cache_key`).
            vote: Index of this answer when one prompt is asked several times (self-consistency
                votes): each vote is its own cache entry, so a cache never turns k independent
                answers into k copies of the first.
            answer_tokens: Tokens to keep free for the answer (default
                :data:`~turneval.judge.budget.ANSWER_TOKENS`, at most ``max_output_tokens``).
            prompt_tokens: The prompt's tokens when already counted (a planned request, or a
                bound on them): the guard uses them instead of counting again.

        Raises:
            JudgeCallError: the model could not be reached (after retries of transient errors).
            JudgeOutputError: the answers could not be parsed or validated.
            ContextBudgetError: the request cannot fit the model's context; it was not sent.
        """
        run = current_run()
        runnable = self._runnable(schema)
        messages = self.prompt(system, user, schema)
        cache = run.cache if run is not None else None
        key = self.cache_key(messages, schema, cache_extra, vote=vote) if cache is not None else ""
        stale = False
        if cache is not None:
            hit = await anyio.to_thread.run_sync(cache.get, key)
            cached = _cached_verdict(hit, schema)
            if cached is not None:
                usage = Usage(cached_calls=1)
                self._record(run, usage)
                return JudgeReply(cached, str(hit["raw"]), usage, True)  # type: ignore[index]
            stale = hit is not None  # an entry that is no valid verdict is asked again
        answer = self._answer_tokens(answer_tokens)
        if prompt_tokens is None or prompt_tokens + answer > self.budget.context_tokens:
            self.check_fits(messages, schema, answer)  # never sent (nor deferred) if too big
        if cache is not None:
            defer = DEFERRED_REQUESTS.get()
            if defer is not None:  # the batch engine asks it in its next round (and raises)
                defer(self, key, messages, schema)
        tally = _Tally()
        try:
            async with client_scope():  # the run's, or one for this call alone
                parsed, raw = await self._parse_loop(runnable, messages, schema, run, tally, answer)
        finally:
            self._record(run, tally.usage)
        if cache is not None:
            value = {"raw": raw, "parsed": parsed.model_dump(mode="json")}
            await anyio.to_thread.run_sync(partial(cache.set, key, value, replace=stale))
        return JudgeReply(parsed, raw, tally.usage, message=tally.message)

    async def tool_round(
        self,
        messages: list[BaseMessage],
        tools: Sequence[Any],
        *,
        tool_choice: str = "any",
        answer_tokens: int | None = None,
        cache_extra: Mapping[str, Any] | None = None,
    ) -> tuple[Any, Usage, bool]:
        """One round of a tool-calling judge: the model's message (tool calls or text).

        The model is bound to ``tools`` (``bind_tools``, made to call one with
        ``tool_choice``); the round goes through the same limiter, retries, timeout, context
        guard and cache as :meth:`ask` (its cache key is the messages and the tools).
        Returns the model's ``AIMessage``, the round's usage and whether it came from the
        cache.

        Raises:
            JudgeCallError: the model could not be reached (after retries of transient errors).
            ContextBudgetError: the round cannot fit the model's context; it was not sent.
        """
        from langchain_core.messages import AIMessage

        run = current_run()
        cache = run.cache if run is not None else None
        extra = {"tools": [_tool_spec(tool) for tool in tools], "tool_choice": tool_choice}
        if cache_extra:
            extra.update(cache_extra)
        key = self.cache_key(messages, _ToolRound, extra) if cache is not None else ""
        if cache is not None:
            hit = _cached_verdict(await anyio.to_thread.run_sync(cache.get, key), _ToolRound)
            if hit is not None:
                usage = Usage(cached_calls=1)
                self._record(run, usage)
                return AIMessage(content=hit.content, tool_calls=hit.tool_calls), usage, True
        budget = self.budget
        answer = self._answer_tokens(answer_tokens)
        tools_text = json.dumps(extra["tools"])
        needed = self.budget.count_messages([message_text(m) for m in messages]) + budget.count(
            tools_text
        )
        budget.check(needed, answer, "the tool-calling judge round")
        bound = _Bound(self.llm.bind_tools(list(tools), tool_choice=tool_choice))
        tally = _Tally()
        try:
            async with client_scope():
                reply = await self._request(bound, messages, run, tally)
        finally:
            self._record(run, tally.usage)
        message = reply["raw"]
        if cache is not None:
            calls = [
                {"name": c["name"], "args": c.get("args", {}), "id": c.get("id") or f"call_{i}"}
                for i, c in enumerate(getattr(message, "tool_calls", None) or [])
            ]
            value = {
                "raw": message_text(message),
                "parsed": {"content": message_text(message), "tool_calls": calls},
            }
            await anyio.to_thread.run_sync(partial(cache.set, key, value))
        return message, tally.usage, False

    def _answer_tokens(self, answer_tokens: int | None) -> int:
        budget = self.budget
        if budget.reserved_output is not None:
            return budget.reserved_output
        wanted = ANSWER_TOKENS if answer_tokens is None else answer_tokens
        return min(wanted, budget.max_output_tokens)

    async def _parse_loop(
        self,
        runnable: Any,
        messages: list[BaseMessage],
        schema: type[T],
        run: JudgeRun | None,
        tally: _Tally,
        answer_tokens: int = ANSWER_TOKENS,
    ) -> tuple[T, str]:
        """Request, parse and validate; show the model its error and retry (bounded).

        A repair round that would no longer fit the context is not sent: the last problem is
        raised as :class:`JudgeOutputError`.
        """
        raw = ""
        detail = "no answer"
        tries = 0
        for attempt in range(self.max_parse_retries + 1):
            if attempt:
                try:
                    self.check_fits(messages, schema, answer_tokens)
                except ContextBudgetError:
                    detail += " (no repair round: it would not fit the context window)"
                    break
            tries += 1
            try:
                reply = await self._request(runnable, messages, run, tally)
            except _OutputProblem as problem:  # the client parsed (and rejected) the answer
                raw, detail = problem.raw, problem.detail
                messages = with_feedback(messages, raw, detail)
                continue
            raw_message = reply["raw"] if runnable is not None else reply
            text = message_text(raw_message)
            arguments = structured_arguments(raw_message) if runnable is not None else None
            raw = text or arguments or ""  # a tool-calling answer's raw output is its arguments
            tally.message = raw_message
            try:
                if runnable is not None and reply.get("parsed") is not None:
                    return schema.model_validate(reply["parsed"]), raw
                return parse_json_reply(arguments or text, schema), raw
            except (ValueError, ValidationError) as error:
                detail = describe_parse_error(error)
                messages = with_feedback(messages, raw, detail)
        raise JudgeOutputError(
            f"judge output could not be parsed after {tries} attempt(s): {detail}",
            raw_output=raw,
        )

    @staticmethod
    def _record(run: JudgeRun | None, usage: Usage) -> None:
        if run is not None:
            run.usage = run.usage + usage

    async def _request(
        self, runnable: Any, messages: list[BaseMessage], run: JudgeRun | None, tally: _Tally
    ) -> Any:
        """One model request, retried on transient errors; its usage goes to ``tally``."""
        from langchain_core.exceptions import OutputParserException

        for attempt in range(self.max_retries + 1):
            try:
                if run is not None and run.rate_limiter is not None:
                    reply = await self._send_limited(run.rate_limiter, runnable, messages, tally)
                elif run is not None:
                    async with run.limiter:  # the timeout starts once a slot is held
                        reply = await self._send(runnable, messages, tally)
                else:
                    reply = await self._send(runnable, messages, tally, held=False)
            except (ValidationError, OutputParserException) as error:
                # Clients that parse inside the request (OpenAI's json_schema) raise here.
                raise _OutputProblem(_raw_from(error), describe_parse_error(error)) from error
            except Exception as error:
                kind = classify(error)
                if not kind.transient or attempt == self.max_retries:
                    what = "timed out" if isinstance(error, TimeoutError) else "failed"
                    raise JudgeCallError(
                        f"judge call {what} after {attempt + 1} attempt(s): "
                        f"{type(error).__name__}: {error}"
                    ) from error
                delay = kind.retry_after
                if delay is not None and delay > self.max_retry_after:
                    raise JudgeCallError(
                        f"judge call failed after {attempt + 1} attempt(s): the server asked to "
                        f"retry after {delay:g} s, more than max_retry_after="
                        f"{self.max_retry_after:g} s (HTTP {kind.status}: {error})"
                    ) from error
                if delay is None:
                    delay = min(self.max_backoff, self.backoff * 2**attempt)
                    delay *= 0.5 + random.random() / 2  # jitter
                await anyio.sleep(delay)
                continue
            return reply
        raise AssertionError("unreachable")  # pragma: no cover

    async def _send_limited(
        self, limiter: RateLimiter, runnable: Any, messages: list[BaseMessage], tally: _Tally
    ) -> Any:
        """:meth:`_send` inside the run's rate limiter: quota, adaptive window, usage settled."""
        async with limiter.slot(estimate_tokens(message_text(m) for m in messages)) as slot:
            before = tally.usage.total_tokens
            try:
                return await self._send(runnable, messages, tally)
            finally:  # the provider's reported tokens correct the estimate
                slot.tokens = tally.usage.total_tokens - before

    async def _send(
        self, runnable: Any, messages: list[BaseMessage], tally: _Tally, *, held: bool = True
    ) -> Any:
        """Send one request and wait for it, at most ``timeout`` seconds from now.

        The request counts as a call once sent. When it times out, the server may still be
        working on it (and bill it): a caller holding a limiter slot (``held``) keeps it until
        the request has really ended (its connection released), or ``drain_timeout`` more
        seconds have passed when one is set, before the request is abandoned and
        :class:`TimeoutError` raised; tokens of a late answer are still counted. The same holds
        when the caller is cancelled from outside (e.g. the sample's timeout): the request is
        shielded and drained before the cancellation goes on. Without a slot (no run), there
        is no limit to keep and the request is abandoned at once.
        """
        tally.usage = tally.usage + Usage(calls=1)
        outcome: dict[str, Any] = {}
        ended = anyio.Event()
        request = anyio.CancelScope(shield=True)  # only this method abandons the request

        async def call() -> None:
            with request:
                try:
                    async with sending(self.llm):  # built and written in one go
                        outcome["reply"] = await self._invoke(runnable, messages)
                except Exception as error:
                    outcome["error"] = error
                finally:
                    ended.set()

        async def drain() -> None:
            bound = self.drain_timeout if held else 0.0
            with anyio.CancelScope(shield=True), anyio.move_on_after(bound):
                await ended.wait()
            request.cancel()

        async with anyio.create_task_group() as group:
            group.start_soon(call)
            try:
                with anyio.move_on_after(self.timeout):
                    await ended.wait()
            except anyio.get_cancelled_exc_class():
                await drain()  # cancelled from outside: the slot is held until the request ends
                raise
            timed_out = not ended.is_set()
            if timed_out:
                await drain()
        if "reply" in outcome:
            tally.usage = tally.usage + message_tokens(
                outcome["reply"]["raw"] if runnable is not None else outcome["reply"]
            )
        if timed_out:
            raise TimeoutError(f"no answer within {self.timeout:g} s of sending the request")
        if "error" in outcome:
            raise outcome["error"]
        return outcome["reply"]

    async def _invoke(self, runnable: Any, messages: list[BaseMessage]) -> Any:
        if runnable is not None:
            return await runnable.ainvoke(messages)
        return await self.llm.ainvoke(messages)


@functools.lru_cache(maxsize=256)
def _json_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """``schema``'s JSON schema, built once per verdict class (part of every cache key)."""
    return schema.model_json_schema()


def _cached_verdict(hit: dict[str, Any] | None, schema: type[T]) -> T | None:
    """The verdict stored in ``hit``, or None when it is missing or no valid ``schema``."""
    if hit is None or not isinstance(hit.get("raw"), str):
        return None
    try:
        return schema.model_validate(hit["parsed"])
    except (KeyError, ValidationError):
        return None


class _ToolRound(BaseModel):
    """A tool-calling round as the cache keeps it: the model's text and tool calls."""

    content: str
    tool_calls: list[dict[str, Any]]


class _Bound:
    """A model bound to tools, answering like a structured runnable (``{"raw": message}``)."""

    def __init__(self, bound: Any) -> None:
        self.bound = bound

    async def ainvoke(self, messages: list[BaseMessage]) -> dict[str, Any]:
        return {"raw": await self.bound.ainvoke(messages), "parsed": None}


def _tool_spec(tool: Any) -> Any:
    """A tool as the cache key names it (its OpenAI function spec)."""
    if isinstance(tool, dict):
        return tool
    from langchain_core.utils.function_calling import convert_to_openai_tool

    return convert_to_openai_tool(tool)


class _OutputProblem(Exception):
    def __init__(self, raw: str, detail: str) -> None:
        super().__init__(detail)
        self.raw = raw
        self.detail = detail


def _raw_from(error: Exception) -> str:
    output = getattr(error, "llm_output", None)
    if isinstance(output, str):
        return output
    if isinstance(error, ValidationError):
        for item in error.errors(include_url=False):
            if isinstance(item.get("input"), str):
                return str(item["input"])
    return ""


def with_feedback(messages: list[BaseMessage], raw: str, detail: str) -> list[BaseMessage]:
    """The conversation so far, the model's unusable answer, and what was wrong with it."""
    from langchain_core.messages import AIMessage, HumanMessage

    return [
        *messages,
        AIMessage(content=raw or "(empty answer)"),
        HumanMessage(
            content=f"That answer could not be used: {detail}. Answer again with only a JSON "
            "object that matches the schema."
        ),
    ]


def describe_parse_error(error: Exception) -> str:
    """A parse error as the model should read it: each invalid field and why."""
    if isinstance(error, ValidationError):
        return "; ".join(
            f"{'.'.join(str(part) for part in item['loc']) or 'answer'}: {item['msg']}"
            for item in error.errors(include_url=False)
        )
    return str(error) or type(error).__name__


def structured_arguments(message: Any) -> str | None:
    """The JSON arguments of a tool-calling structured answer, when the model used a tool."""
    calls = getattr(message, "tool_calls", None) or []
    if calls:
        return json.dumps(calls[0].get("args", {}))
    return None

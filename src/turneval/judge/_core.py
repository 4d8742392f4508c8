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

This module holds :class:`Judge` (prompts, the context guard, the cache, the parse-and-repair
loop); what it builds on sits in private modules beside it and is re-exported here: the run
the judges share (``_run``), the model's copy and identity (``_model``), the replies' parsing
(``_replies``) and the sending of requests (``_sending``). It stays over 400 lines because
:class:`Judge` is one class whose methods share its model copy, runnables and budget.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
from pydantic import BaseModel, ValidationError

from turneval.errors import ConfigError, ContextBudgetError, JudgeOutputError
from turneval.judge._clients import client_scope, loop_bound
from turneval.judge._model import HTTP_GRACE, identity_of, without_provider_retries
from turneval.judge._openai_direct import direct_openai
from turneval.judge._replies import (
    JSON_INSTRUCTIONS,
    Bound,
    JudgeReply,
    OutputProblem,
    ToolRound,
    cached_verdict,
    describe_parse_error,
    json_schema,
    message_text,
    message_tokens,
    parse_json_reply,
    structured_arguments,
    tool_spec,
    with_feedback,
)
from turneval.judge._run import (
    DEFERRED_REQUESTS,
    JudgeRun,
    LangchainLLMWrapper,
    current_run,
    judge_run,
    resolve_llm,
)
from turneval.judge._sending import Sender, Tally
from turneval.judge.budget import ANSWER_TOKENS, Budget, TokenCounter, budget_for
from turneval.usage import Usage

if TYPE_CHECKING:  # LangChain is imported when a judge is used, not with turneval
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


class Judge(Sender):
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
            without_provider_retries(
                resolve_llm(llm), temperature, logprobs, http_timeout=timeout + HTTP_GRACE
            )
        )
        self.identity = identity_of(self.llm)
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
        sent = json_schema(schema) if self._supports_structured else None
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
            cheap += len(json.dumps(json_schema(schema)).encode())
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
            user = f"{user}\n\n{JSON_INSTRUCTIONS}{schema_text}"
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
            "schema": json_schema(schema),
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
            cached = cached_verdict(hit, schema)
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
        tally = Tally()
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
        extra = {"tools": [tool_spec(tool) for tool in tools], "tool_choice": tool_choice}
        if cache_extra:
            extra.update(cache_extra)
        key = self.cache_key(messages, ToolRound, extra) if cache is not None else ""
        if cache is not None:
            hit = cached_verdict(await anyio.to_thread.run_sync(cache.get, key), ToolRound)
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
        bound = Bound(self.llm.bind_tools(list(tools), tool_choice=tool_choice))
        tally = Tally()
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
        tally: Tally,
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
            except OutputProblem as problem:  # the client parsed (and rejected) the answer
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

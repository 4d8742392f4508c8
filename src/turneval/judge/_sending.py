"""How a judge's request is sent: the run's limiter, retries of transient errors, the timeout.

:class:`Sender` is the part of :class:`~turneval.judge._core.Judge` that talks to the model: it
waits for a slot of the run's limiter (or its rate limiter), sends, retries transient errors
with backoff (honouring ``Retry-After``), and holds a timed-out request's slot until its
connection is released (see :meth:`Sender._send`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import ValidationError

from turneval._provider_errors import classify
from turneval.errors import JudgeCallError
from turneval.judge._clients import sending
from turneval.judge._replies import (
    OutputProblem,
    describe_parse_error,
    message_text,
    message_tokens,
    raw_from,
)
from turneval.ratelimit import RateLimiter, estimate_tokens
from turneval.usage import Usage

if TYPE_CHECKING:  # LangChain is imported when a judge is used, not with turneval
    from langchain_core.messages import BaseMessage

    from turneval.judge._run import JudgeRun

__all__ = ["Sender", "Tally"]


@dataclass
class Tally:
    """What one question to the judge used, over its requests, and the model's last message."""

    usage: Usage = field(default_factory=Usage)
    message: Any = None


class Sender:
    """A judge's requests to its model, within the run's limits (mixed into the judge)."""

    llm: Any  # the judge's model, bound to the run's loop (clients.loop_bound)
    max_retries: int
    timeout: float
    backoff: float
    max_backoff: float
    max_retry_after: float
    drain_timeout: float | None

    async def _request(
        self, runnable: Any, messages: list[BaseMessage], run: JudgeRun | None, tally: Tally
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
                raise OutputProblem(raw_from(error), describe_parse_error(error)) from error
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
        self, limiter: RateLimiter, runnable: Any, messages: list[BaseMessage], tally: Tally
    ) -> Any:
        """:meth:`_send` inside the run's rate limiter: quota, adaptive window, usage settled."""
        async with limiter.slot(estimate_tokens(message_text(m) for m in messages)) as slot:
            before = tally.usage.total_tokens
            try:
                return await self._send(runnable, messages, tally)
            finally:  # the provider's reported tokens correct the estimate
                slot.tokens = tally.usage.total_tokens - before

    async def _send(
        self, runnable: Any, messages: list[BaseMessage], tally: Tally, *, held: bool = True
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

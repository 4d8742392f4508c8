"""A judged metric's requests beyond the metric: shared answers, planned tokens, the record.

What :class:`~turneval.metrics._judged.JudgedMetric` does around each request: a running
summary asked once per run whoever reads it (:func:`shared_answer`), the tokens a request was
planned with, a request sent as stated checked against the context (:func:`planned_whole`),
the row's ``details["context"]`` (:func:`context_record`) and the seed of a repeated vote.
"""

from __future__ import annotations

from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, replace
from dataclasses import field as dataclass_field
from typing import Any

import anyio

from turneval.errors import ContextBudgetError
from turneval.judge import Judge, JudgeReply, current_run, resolve_llm
from turneval.judge._template import JudgeRequest, RequestContext
from turneval.judge.budget import Budget
from turneval.judge.context import request_tokens
from turneval.usage import Usage

__all__ = [
    "context_record",
    "planned_tokens",
    "planned_whole",
    "reply_summary",
    "seed_of",
    "shared_answer",
]


@dataclass
class _Pending:
    """An answer one metric is asking for, which the run's others wait for."""

    done: anyio.Event = dataclass_field(default_factory=anyio.Event)
    reply: JudgeReply[Any] | None = None


async def shared_answer(
    judge: Judge,
    request: JudgeRequest[Any],
    prompt: str,
    ask: Coroutine[Any, Any, JudgeReply[Any]],
    limiter: anyio.CapacityLimiter | None,
) -> JudgeReply[Any]:
    """``ask``, once per run for identical requests: the others get its answer, uncharged.

    Metrics of a run state the very same summary requests of a conversation; the first to
    ask sends it, the others wait and read its answer (``cached``, with no call counted). If
    it fails, the next one asks again.
    """
    run = current_run()
    if run is None:
        if limiter is None:
            return await ask
        async with limiter:
            return await ask
    messages = judge.prompt(request.system, prompt, request.schema)
    key = "summary:" + judge.cache_key(messages, request.schema, request.cache_extra)
    while True:
        pending = run.shared.get(key)
        if pending is None:
            break
        await pending.done.wait()
        if pending.reply is not None:
            ask.close()
            return replace(pending.reply, usage=Usage(cached_calls=1), cached=True)
    mine = run.shared[key] = _Pending()
    try:
        mine.reply = await ask
        return mine.reply
    except BaseException:
        del run.shared[key]
        raise
    finally:
        mine.done.set()


def planned_tokens(request: JudgeRequest[Any], prompt: str) -> int | None:
    """The planned tokens of ``prompt``, None when it was not planned as it is.

    With a summary filled in (at or under its cap), the planned count is a bound.
    """
    if request.context is None:
        return None
    if prompt != request.prompt and request.after is None:
        return None
    return request.context.prompt_tokens


def reply_summary(replies: Sequence[JudgeReply[Any] | None], request: JudgeRequest[Any]) -> str:
    """The running summary ``request`` reads: the answer of its ``after`` request."""
    assert request.after is not None
    summary = replies[request.after]
    assert summary is not None
    return str(summary.parsed.summary)


def context_record(
    requests: Sequence[JudgeRequest[Any]],
    replies: Sequence[JudgeReply[Any]],
    budget: Budget | None,
) -> dict[str, Any] | None:
    """What the judge saw of a row (``details["context"]``): the policy, tokens, items.

    ``context`` is ``full``, ``windowed`` or ``compacted``; ``requests`` counts the metric's
    own requests and ``summaries`` the running summary's; ``prompt_tokens`` is every prompt's
    tokens (as sent, the summaries as written), ``largest_prompt`` the largest;
    ``items_per_request`` the items each per-item request rated.
    """
    planned = [request.context for request in requests]
    if budget is None or any(context is None for context in planned):
        return None
    own = [r for r in requests if not r.auxiliary]
    policies = {r.context.policy for r in own if r.context is not None}
    policy = next((p for p in ("compacted", "windowed") if p in policies), "full")
    sizes = [
        reply.prompt_tokens if reply.prompt_tokens is not None else request.context.prompt_tokens
        for request, reply in zip(requests, replies, strict=True)
        if request.context is not None
    ]
    record: dict[str, Any] = {
        "context": policy,
        "requests": len(own),
        "summaries": len(requests) - len(own),
        "prompt_tokens": sum(sizes),
        "largest_prompt": max(sizes, default=0),
    }
    items = [r.context.items for r in own if r.context is not None and r.context.items]
    if items:
        record["items_per_request"] = items
    record.update(budget.record())
    return record


def planned_whole(budget: Budget, request: JudgeRequest[Any], prefix: str) -> JudgeRequest[Any]:
    """A request sent as stated (no policy reshaped it): planned, or the row fails.

    Its policy stays the one the metric gave (a bounded input), else ``"full"``.
    """
    tokens = request_tokens(budget, request, prefix)
    context = request.context
    answer = (
        budget.answer_tokens()
        if request.answer_tokens is None
        else min(request.answer_tokens, budget.max_output_tokens)
    )
    if tokens > budget.prompt_tokens(answer):
        raise ContextBudgetError(
            f"the judge request{f' ({request.label})' if request.label else ''} needs "
            f"{tokens:,} prompt tokens + {answer:,} for the answer, more than the judge's "
            f"context window of {budget.context_tokens:,} tokens ({budget.describe()}); "
            "no request was sent",
            context_tokens=budget.context_tokens,
            needed_tokens=tokens + answer,
        )
    policy = context.policy if context is not None else "full"
    items = context.items if context is not None else None
    return replace(request, context=RequestContext(policy, tokens, items))


def seed_of(llm: Any) -> int | None:
    """The model's ``seed`` where it has one set (ChatOpenAI(seed=...)), else None."""
    model = resolve_llm(llm)
    seed = getattr(model, "seed", None) if "seed" in type(model).model_fields else None
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None

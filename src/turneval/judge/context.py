"""Context policies: what a judge sees of a conversation that does not fit its context window.

Every judged request is planned within the judge's :class:`~turneval.judge.budget.Budget`:

* **full**: the whole conversation fits (prompt and the answer's reserve): it is sent as is.
* **compacted** (whole-conversation judges: goal accuracy, completeness, topic adherence,
  trajectory, frustration, rubric judges of a conversation): long messages (tool outputs
  first) are cut in the middle with a marker saying how much was cut, a tool output equal to
  an earlier one is referenced instead of repeated, and when that is not enough the oldest
  turns are replaced by a running summary.
* **windowed** (per-item judges: turn relevancy, knowledge retention, role adherence, per-turn
  rubric ratings): the items are split into several requests; each shows the turns it judges,
  the segment of turns before them and the running summary of everything earlier.

The running summary is a chain of judge requests over fixed segments of the conversation
(:class:`Layout`): summary *j* reads summary *j - 1* and segment *j*. Its segmentation depends
only on the conversation and the judge's budget, so every metric asking the same judge states
the very same summary requests: they are cached judge requests, written once per conversation
and reused by every window and metric (the cache answers the second). Each request of the
chain is bounded, as is each window: total judge tokens grow linearly with the conversation.

A row that cannot fit even so (one judged turn alone longer than the window) fails with
:class:`~turneval.errors.ContextBudgetError` naming the limit, before any request is paid.

This module plans the requests (compacted, windowed); the summary chain they share (its
layout, requests and slot) is the private ``_summary`` module, whose names it re-exports.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pydantic import BaseModel

from turneval.errors import ContextBudgetError
from turneval.judge._summary import (
    MIN_CUT,
    SAME_OUTPUT,
    SEGMENT_TOKENS,
    SUMMARY_SLOT,
    Layout,
    SummaryVerdict,
    cut_middle,
    fill_summary,
    layout_for,
    message_tokens,
    segment_tokens,
    summary_tokens,
    verdict_schema,
)
from turneval.judge._summary import SUMMARY_PROMPT as SUMMARY_PROMPT  # its old import path
from turneval.judge._summary import SUMMARY_SYSTEM as SUMMARY_SYSTEM
from turneval.judge._template import JudgeRequest, RequestContext, TranscriptView, showing
from turneval.judge.budget import Budget
from turneval.messages import ToolMessage
from turneval.samples import MultiTurnSample

__all__ = [
    "Layout",
    "SEGMENT_TOKENS",
    "SUMMARY_SLOT",
    "SummaryVerdict",
    "compacted_requests",
    "cut_middle",
    "fill_summary",
    "layout_for",
    "message_tokens",
    "request_tokens",
    "segment_tokens",
    "summary_tokens",
    "windowed_requests",
]


def request_tokens(budget: Budget, request: JudgeRequest[Any], prefix: str = "") -> int:
    """Prompt tokens of ``request`` with ``prefix`` before its question.

    A summary slot is counted at the summary's cap.
    """
    prompt = prefix + request.prompt
    model: type[BaseModel] = request.schema
    tokens = budget.count_messages([request.system, prompt], verdict_schema(model))
    if SUMMARY_SLOT in prompt:
        tokens += prompt.count(SUMMARY_SLOT) * (summary_tokens(budget) - budget.count(SUMMARY_SLOT))
    return tokens


def _answer(budget: Budget, request: JudgeRequest[Any]) -> int:
    if request.answer_tokens is not None:
        return min(request.answer_tokens, budget.max_output_tokens)
    return budget.answer_tokens()


def _fits(budget: Budget, request: JudgeRequest[Any], tokens: int) -> bool:
    return tokens <= budget.prompt_tokens(_answer(budget, request))


def _planned(
    budget: Budget, requests: Sequence[JudgeRequest[Any]], prefix: str, policy: str
) -> tuple[list[JudgeRequest[Any]], list[int], bool]:
    """The requests with their planned context; whether all fit."""
    planned, sizes, fit = [], [], True
    for request in requests:
        tokens = request_tokens(budget, request, prefix)
        sizes.append(tokens)
        fit = fit and _fits(budget, request, tokens)
        items = request.context.items if request.context is not None else None
        planned.append(replace(request, context=RequestContext(policy, tokens, items)))
    return planned, sizes, fit


def _too_big(budget: Budget, what: str, tokens: int, answer: int) -> ContextBudgetError:
    return ContextBudgetError(
        f"{what} needs {tokens:,} prompt tokens + {answer:,} for the answer, more than the "
        f"judge's context window of {budget.context_tokens:,} tokens ({budget.describe()}); no "
        "request was sent",
        context_tokens=budget.context_tokens,
        needed_tokens=tokens + answer,
    )


def _water_level(tokens: Sequence[int], room: int) -> int | None:
    """The largest cap c with sum(min(t, c)) <= room (None when even ``MIN_CUT`` is too much)."""
    if sum(tokens) <= room:
        return max(tokens, default=0)
    low, high = MIN_CUT, max(tokens)
    if sum(min(t, low) for t in tokens) > room:
        return None
    while low < high:
        middle = (low + high + 1) // 2
        if sum(min(t, middle) for t in tokens) <= room:
            low = middle
        else:
            high = middle - 1
    return low


def compacted_requests(
    sample: MultiTurnSample,
    budget: Budget,
    build: Callable[[], list[JudgeRequest[Any]]],
    prefix: str = "",
) -> list[JudgeRequest[Any]]:
    """A whole-conversation judge's requests within ``budget``: full, else compacted.

    ``build`` states the metric's requests for ``sample`` as the renderers show it (it is
    called under a :class:`TranscriptView` of the compacted conversation). Returns the summary
    chain's requests (if any) followed by the metric's, each with its planned context.

    Raises:
        ContextBudgetError: not even the compacted conversation fits.
    """
    with showing(TranscriptView(sample, ())):
        empty = build()
    if not empty:  # requests that follow the turns shown (one per step): none without turns
        full = build()
        if not full:
            return []
        planned, sizes, fit = _planned(budget, full, prefix, "full")
        if fit:
            return planned
        answer = max(_answer(budget, r) for r in full)
        raise _too_big(budget, "the conversation", max(sizes), answer)
    header = max(request_tokens(budget, r, prefix) for r in empty)
    answer = max(_answer(budget, r) for r in empty)
    transcript = sum(message_tokens(sample, budget))
    if header + transcript <= 1.1 * budget.prompt_tokens(answer):  # it may fit: count it all
        planned, sizes, fit = _planned(budget, build(), prefix, "full")
        if fit:
            return planned
    sizes = [header + transcript]
    room = budget.prompt_tokens(answer) - header - 8
    layout = layout_for(sample, budget, header)
    messages = len(sample.user_input)
    # Shown messages are cut to at least `floor` tokens; the oldest are summarised first.
    floor = max(MIN_CUT, min(layout.segment // 2, room // 8))
    capped = [min(t + 6, floor) for t in layout.full_tokens]
    suffix = [0] * (messages + 1)
    for index in range(messages - 1, -1, -1):
        suffix[index] = suffix[index + 1] + capped[index]
    start = next(
        (
            upto
            for upto in range(layout.segments)
            if suffix[layout.boundaries[upto]] + (layout.summary_tokens + 16 if upto else 0) <= room
        ),
        layout.segments - 1,
    )
    for upto in range(start, min(start + 3, layout.segments)):
        first = layout.boundaries[upto]
        shown = range(first, messages)
        space = room - (layout.summary_tokens + 16 if upto else 0)
        level = _water_level([layout.full_tokens[i] + 6 for i in shown], space)
        if level is None:
            continue
        lines: dict[int, str] = {}
        for index in shown:
            line = layout.full[index]
            if layout.lines[index].startswith(SAME_OUTPUT):
                earlier = int(layout.lines[index][len(SAME_OUTPUT) :].rstrip("]"))
                if earlier >= first:  # the earlier output is shown: refer to it
                    lines[index] = layout.lines[index]
                    continue
            if layout.full_tokens[index] + 6 > level:
                message = sample.user_input[index]
                kind = "tool output" if isinstance(message, ToolMessage) else "message"
                line = cut_middle(line, max(MIN_CUT, level - 6), budget.count, kind)
            lines[index] = line
        view = layout.view(upto, first, messages - 1, lines=lines)
        with showing(view):
            requests = build()
        chain = layout.summary_requests(upto)
        if upto:
            requests = [replace(r, after=upto - 1) for r in requests]
        out, sizes, fit = _planned(budget, requests, prefix, "compacted")
        if fit:
            return [*chain, *out]
    largest = max(sizes)
    raise _too_big(budget, "the compacted conversation (summary and last turns)", largest, answer)


@dataclass(frozen=True)
class _Window:
    items: tuple[int, ...]
    upto: int
    first: int
    last: int


def windowed_requests(
    sample: MultiTurnSample,
    budget: Budget,
    items: Sequence[int],
    build: Callable[[Sequence[int]], JudgeRequest[Any]],
    prefix: str = "",
    *,
    context: int = 0,
    one_per_request: bool = False,
) -> list[JudgeRequest[Any]]:
    """A per-item judge's requests within ``budget``: one for all items, else windows.

    ``items`` are message indices (in order); ``build(items)`` states the request rating those
    items, on ``sample`` as the renderers show it. Each window rates consecutive items of one
    segment (at most :meth:`Budget.max_items`), shows the previous segment and its own up to
    its last item, after the running summary of everything before. ``context`` is how many
    messages before an item its judge reads (the window then starts that far back, up to two
    segments). With ``one_per_request`` every item is its own request (a rating of one turn
    after the conversation so far): all of the conversation before it while the conversation
    is at most two segments long, else windows. Returns the summary chain's requests followed
    by one request per window, in item order.

    Raises:
        ContextBudgetError: an item alone (with its window) cannot fit.
    """
    most = 1 if one_per_request else budget.max_items()
    with showing(TranscriptView(sample, ())):
        probe = build(items[:most])
    header = request_tokens(budget, probe, prefix)
    layout = layout_for(sample, budget, header)
    if one_per_request:
        whole = sum(layout.full_tokens) <= 2 * layout.segment
    else:
        whole = len(items) <= most
    if whole:
        groups = [[item] for item in items] if one_per_request else [list(items)]
        planned, _, fit = _planned(budget, [build(group) for group in groups], prefix, "full")
        if fit:
            return [
                replace(request, context=_with_items(request, len(group)))
                for request, group in zip(planned, groups, strict=True)
            ]
    windows = _windows(layout, items, most, context)
    chain = layout.summary_requests(max((w.upto for w in windows), default=0))
    out: list[JudgeRequest[Any]] = []
    pending = list(windows)
    while pending:
        window = pending.pop(0)
        view = layout.view(window.upto, window.first, window.last, whole=window.items)
        with showing(view):
            request = build(window.items)
        if window.upto:
            request = replace(request, after=window.upto - 1)
        stated, sizes, fit = _planned(budget, [request], prefix, "windowed")
        one, tokens = stated[0], sizes[0]
        if not fit:
            if len(window.items) > 1:  # fewer items per request
                half = len(window.items) // 2
                pending[:0] = [
                    replace(window, items=window.items[:half], last=window.items[half - 1]),
                    replace(window, items=window.items[half:]),
                ]
                continue
            raise _too_big(
                budget,
                f"message {window.items[0]} (an item to judge) with its window",
                tokens,
                _answer(budget, request),
            )
        out.append(replace(one, context=_with_items(one, len(window.items))))
    return [*chain, *out]


def _with_items(request: JudgeRequest[Any], items: int) -> RequestContext:
    context = request.context
    assert context is not None
    return RequestContext(context.policy, context.prompt_tokens, items)


def _windows(layout: Layout, items: Sequence[int], most: int, context: int) -> list[_Window]:
    """Consecutive items of one segment, at most ``most`` a window."""
    groups: list[list[int]] = []
    for item in items:
        segment = layout.segment_of(item)
        if groups and layout.segment_of(groups[-1][0]) == segment and len(groups[-1]) < most:
            groups[-1].append(item)
        else:
            groups.append([item])
    windows = []
    for group in groups:
        k = layout.segment_of(group[0])
        upto = max(0, k - 1)
        first = layout.boundaries[upto]
        reach = max(0, group[0] - context)
        while upto and first > reach:  # reach back to the item's own earlier messages
            earlier = layout.boundaries[upto - 1]
            if sum(layout.tokens[earlier : group[-1] + 1]) > 2 * layout.segment:
                break  # no further than two segments: the rest is in the summary
            upto -= 1
            first = earlier
        windows.append(_Window(tuple(group), upto, first, group[-1]))
    return windows

r"""The judged-metric template: a metric states its questions and reads the answers.

A judged metric implements two methods and nothing else about the judge::

    class Politeness(JudgedMetric[SingleTurnSample], SingleTurnMetric):
        name: str = "politeness"

        def requests(self, sample):
            response = require(self, sample, "response")
            return [JudgeRequest(prompt="Is the response polite?\n" + tagged("response", response),
                                 schema=YesNo, system=SYSTEM_PROMPT)]

        def verdict(self, sample, replies):
            answer = replies[0].parsed
            return Explained(float(answer.rating == "yes"), f"{answer.rating}: {answer.rationale}")

The base asks every request concurrently (under the run's shared limiter), sums their usage
into the result, attaches each raw answer and whether it came from the cache to
``details["judge"]``, and puts the metric's worked ``examples`` before every question. The
dry-run estimate calls the same :meth:`JudgedMetric.judge_requests`, so estimate and run share
one source.

What it does around each request (shared summaries, planned tokens, the context record) is in
``_judge_calls``, the preset tables' classes in ``_presets``, the votes' arithmetic in
``_voting``. It stays over 400 lines: :class:`JudgedMetric` is one class, whose fields (the
judge's options, repeats, examples) and methods (plan, ask, vote) are read together.
"""

from __future__ import annotations

import weakref
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

import anyio
from pydantic import Field, field_validator, model_validator

from turneval.errors import ConfigError
from turneval.judge import Judge, JudgeReply, current_run, resolve_llm
from turneval.judge._config import JudgeConfigField
from turneval.judge._template import (
    JudgeExample,
    JudgeRequest,
    render_conversation,
    render_examples,
    tagged,
)
from turneval.judge.budget import Budget
from turneval.judge.context import (
    SUMMARY_SLOT,
    compacted_requests,
    fill_summary,
    summary_tokens,
)
from turneval.metrics._judge_calls import (
    context_record,
    planned_tokens,
    planned_whole,
    reply_summary,
    seed_of,
    shared_answer,
)
from turneval.metrics._presets import preset_class
from turneval.metrics._voting import check_repeats, combine_votes
from turneval.metrics.base import Explained, Metric, SampleT
from turneval.samples import MultiTurnSample
from turneval.usage import Usage

__all__ = ["JudgedMetric", "preset_class", "sample_inputs"]

MAX_CONCURRENT_REQUESTS = 8
"""Requests of one sample in flight at once when no run (and its shared limiter) is active."""

_SINGLE_TURN_TAGS = (
    ("instruction", "user_input"),
    ("context", "retrieved_contexts"),
    ("reference", "reference"),
    ("response", "response"),
)


def sample_inputs(sample: Any) -> str:
    """A sample's inputs as a judge sees them, tagged and escaped (for worked examples).

    A conversation is rendered as in :func:`render_conversation` (with its ``reference``, if
    any); a single-turn sample shows its instruction, context, reference and response.
    """
    if isinstance(sample, MultiTurnSample):
        text = render_conversation(sample)
        if sample.reference is not None:
            text += "\n" + tagged("reference", sample.reference)
        return text
    parts = []
    for tag, field in _SINGLE_TURN_TAGS:
        value = getattr(sample, field, None)
        if value is not None:
            parts.append(tagged(tag, "\n\n".join(value) if isinstance(value, list) else value))
    return "\n".join(parts)


class JudgedMetric(Metric[SampleT], ABC):
    """A metric that asks an LLM judge: implement :meth:`requests` and :meth:`verdict`.

    Generic over its samples as :class:`~turneval.metrics.base.Metric` is: subclass
    ``JudgedMetric[SingleTurnSample]`` (with ``SingleTurnMetric`` for ragas' entry points),
    ``JudgedMetric[MultiTurnSample]`` (with ``MultiTurnMetric``) or ``JudgedMetric[Sample]``
    (with ``SingleTurnScoring`` and ``MultiTurnScoring``); ``requests`` and ``verdict`` then
    take that sample type.

    Attributes:
        llm: A LangChain chat model (e.g. ``ChatOpenAI(model="gpt-4o")``) or a
            ``LangchainLLMWrapper``; None uses the ``llm`` given to ``evaluate``.
        timeout: Seconds allowed for one judge request, from when it is sent (time queued for
            the run's concurrency limit does not count).
        max_retries: Retries of transient judge errors (429, 5xx, timeouts, connection errors).
        examples: Worked examples shown before every question (few-shot; e.g. human-labelled
            rows from :meth:`example`). They are part of the prompt, hence of the cache key.
        max_retry_after: Longest ``Retry-After`` in seconds honoured; a server asking for more
            fails the call at once (``JudgeCallError``) instead of stalling the run.
        repeats: Votes per row: every request is asked this many times and the value is the
            mean of the votes (the majority for ``categorical`` metrics); ``details["repeats"]``
            keeps every vote and their spread. Requests per row are ``repeats`` times one
            vote's. Below 1 raises :class:`~turneval.errors.ConfigError`.
        repeat_temperature: Sampling temperature of the votes when ``repeats`` > 1 (requests
            that set their own keep it); a model with a ``seed`` also gets ``seed + k`` for
            vote k. It must be above 0 (at 0 every vote would be the same answer).
        judge_config: A :class:`~turneval.judge.JudgeConfig` (or its file's path) made by
            ``turneval optimize``: its instructions are added to every request's system
            message and its examples shown after ``examples``. Part of the prompt, hence of
            the cache key, and recorded in run.json with the metric's configuration.
        pass_threshold: The value at or above which a row passes (front ends set it from
            ``--fail-under``, ``success_thresholds`` or ``assert_scores``' thresholds); with
            ``repeats`` > 1, a row whose votes fall on both sides of it is ``unstable``.
        context_tokens: The judge model's context window in tokens (default: its entry in
            :data:`~turneval.judge.budget.MODEL_LIMITS`); requests are planned within it.
        max_output_tokens: The longest answer the judge model writes (default: from the
            same table).
    """

    context_policy: ClassVar[str] = "compacted"
    """What the judge sees of a conversation too long for its context (see
    :mod:`turneval.judge.context`): ``"compacted"`` (whole-conversation judges; also the
    default of custom judges that render the conversation) or ``"windowed"`` (per-item judges,
    which plan their windows in :meth:`requests`)."""

    uses_llm: ClassVar[bool] = True
    requires_llm: ClassVar[bool] = True
    """False for metrics that fall back to an offline method when no judge is given."""

    llm: Any = None
    timeout: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=4, ge=0)
    examples: tuple[JudgeExample, ...] = ()
    max_retry_after: float = Field(default=60.0, ge=0)
    repeats: int = 1
    repeat_temperature: float = 0.7
    pass_threshold: float | None = None
    context_tokens: int | None = Field(default=None, ge=1024)
    max_output_tokens: int | None = Field(default=None, ge=1)
    judge_config: JudgeConfigField = None

    if not TYPE_CHECKING:  # at run time only: type checkers keep the fields' own signature

        def __init__(self, **data: Any) -> None:
            """Refuse bad ``repeats`` with a ConfigError before pydantic sees them."""
            default = type(self).model_fields["name"].default
            check_repeats(
                str(data.get("name", default if isinstance(default, str) else "judged metric")),
                data.get("repeats", 1),
                data.get("repeat_temperature", 0.7),
            )
            super().__init__(**data)

    @model_validator(mode="after")
    def _check_votes(self) -> JudgedMetric[SampleT]:
        # model_validate and assignments (reported by pydantic as a ValidationError)
        check_repeats(self.name, self.repeats, self.repeat_temperature)
        return self

    @field_validator("llm")
    @classmethod
    def _check_llm(cls, value: Any) -> Any:
        if value is not None:
            resolve_llm(value)
        return value

    @cached_property
    def _judges(
        self,
    ) -> dict[tuple[int, float | None, bool, int], tuple[weakref.ref[Any], Judge]]:
        # Cleared by Metric.__setattr__ when the configuration changes.
        return {}

    # -- what a judged metric implements --------------------------------------------------------

    @abstractmethod
    def requests(self, sample: SampleT) -> list[JudgeRequest[Any]]:
        """The questions to ask about ``sample`` (may be empty).

        Raise :class:`~turneval.errors.InvalidSampleError` for a sample lacking a field.
        """

    @abstractmethod
    def verdict(self, sample: SampleT, replies: Sequence[JudgeReply[Any]]) -> Explained:
        """The result from the judge's answers, one per request, in the requests' order.

        Usage and ``details["judge"]`` are filled in by the base.
        """

    # -- the template ---------------------------------------------------------------------------

    def example(self, sample: Any, verdict: str) -> JudgeExample:
        """A worked example of ``sample`` with the ``verdict`` a careful judge gives."""
        return JudgeExample(input=sample_inputs(sample), output=verdict)

    def _policy(self, sample: SampleT) -> str:
        """The context policy for ``sample`` (the class's ``context_policy`` by default)."""
        return self.context_policy

    def context_budget(self) -> Budget | None:
        """The judge's context budget (None when no judge model is known yet)."""
        if self.default_llm() is None:
            return None
        return self.judge().budget

    def prompt_prefix(self) -> str:
        """What goes before every question: the worked examples, then the configuration's."""
        config = self.judge_config
        return render_examples(self.examples + (() if config is None else config.examples))

    def _configured(self, sample: SampleT) -> list[JudgeRequest[Any]]:
        """:meth:`requests` with the judge configuration's instructions in each system prompt.

        Not in the shared running summaries: one summary serves every metric.
        """
        requests = self.requests(sample)
        config = self.judge_config
        if config is None:
            return requests
        own = config.apply([r for r in requests if not r.auxiliary])
        applied = iter(own)
        return [r if r.auxiliary else next(applied) for r in requests]

    def judge_requests(self, sample: SampleT) -> list[JudgeRequest[Any]]:
        """:meth:`requests` planned within the judge's context, worked examples first.

        This is exactly what a run sends (the dry-run estimate counts it). A conversation
        that does not fit is compacted (``context_policy = "compacted"``) or was windowed by
        :meth:`requests` (``"windowed"``); the running summary's requests (``auxiliary``)
        come first. A request that still cannot fit raises
        :class:`~turneval.errors.ContextBudgetError` before any is sent. With ``repeats`` >
        1, every other request once per repeat (repeat k after repeat k - 1), at
        ``repeat_temperature`` unless a request sets its own.
        """
        block = self.prompt_prefix()
        budget = self.context_budget()
        if budget is None:
            requests = self._configured(sample)
        elif self._policy(sample) == "compacted" and isinstance(sample, MultiTurnSample):
            requests = compacted_requests(sample, budget, lambda: self._configured(sample), block)
        else:
            requests = [  # what no policy planned is sent whole, if it fits
                r
                if r.context is not None and r.context.prompt_tokens
                else planned_whole(budget, r, block)
                for r in self._configured(sample)
            ]
        if block:
            requests = [
                request if request.auxiliary else replace(request, prompt=block + request.prompt)
                for request in requests
            ]
        if self.repeats == 1:
            return requests
        shared = [request for request in requests if request.auxiliary]  # asked once
        own = [request for request in requests if not request.auxiliary]
        return shared + [
            replace(
                request,
                repeat=repeat,
                temperature=self.repeat_temperature
                if request.temperature is None
                else request.temperature,
            )
            for repeat in range(self.repeats)
            for request in own
        ]

    def prompts(self, sample: SampleT) -> list[tuple[str, str]]:
        """The ``(system, user)`` prompts a run sends for ``sample``."""
        return [(r.system, r.prompt) for r in self.judge_requests(sample)]

    async def _ask_one(
        self,
        request: JudgeRequest[Any],
        replies: Sequence[JudgeReply[Any] | None],
        limiter: anyio.CapacityLimiter | None,
    ) -> JudgeReply[Any]:
        judge = self.judge(
            temperature=request.temperature, logprobs=request.logprobs, repeat=request.repeat
        )
        prompt = request.prompt
        if request.after is not None:  # the running summary this prompt reads
            summary = replies[request.after]
            assert summary is not None
            prompt = fill_summary(prompt, summary.parsed.summary, judge.budget)
        ask = judge.ask(
            request.system,
            prompt,
            request.schema,
            vote=request.vote,
            cache_extra=request.cache_extra,
            answer_tokens=request.answer_tokens,
            prompt_tokens=planned_tokens(request, prompt),
        )
        if request.auxiliary:  # a running summary: asked once per run, whoever reads it
            reply = await shared_answer(judge, request, prompt, ask, limiter)
        elif limiter is None:
            reply = await ask
        else:
            async with limiter:
                reply = await ask
        if request.context is not None:  # the tokens sent, the summary as written
            tokens = request.context.prompt_tokens
            if request.after is not None:
                budget = judge.budget
                filled = fill_summary(SUMMARY_SLOT, reply_summary(replies, request), budget)
                tokens += budget.count(filled) - summary_tokens(budget)
            reply = replace(reply, prompt_tokens=tokens)
        return reply

    async def ask(self, requests: Sequence[JudgeRequest[Any]]) -> list[JudgeReply[Any]]:
        """Ask every request concurrently; answers in the requests' order.

        A request reading a running summary (``after``) waits for that summary's answer. In a
        run, each request waits for the run's shared limiter; outside one (``metric.score``)
        at most :data:`MAX_CONCURRENT_REQUESTS` of a sample's requests are in flight. The first
        failing request (in request order) raises its own error, e.g.
        :class:`~turneval.errors.JudgeOutputError`; the requests still running are cancelled.
        """
        replies: list[JudgeReply[Any] | None] = [None] * len(requests)
        if len(requests) == 1:
            return [await self._ask_one(requests[0], replies, None)]
        errors: dict[int, Exception] = {}
        done = [anyio.Event() for _ in requests]
        limiter = None if current_run() else anyio.CapacityLimiter(MAX_CONCURRENT_REQUESTS)

        async def one(index: int, request: JudgeRequest[Any], scope: anyio.CancelScope) -> None:
            try:
                if request.after is not None:
                    await done[request.after].wait()
                replies[index] = await self._ask_one(request, replies, limiter)
                done[index].set()
            except Exception as error:  # re-raised below, unwrapped from the task group
                errors[index] = error
                scope.cancel()

        async with anyio.create_task_group() as group:
            for index, request in enumerate(requests):
                group.start_soon(one, index, request, group.cancel_scope)
        if errors:
            raise errors[min(errors)]
        return [reply for reply in replies if reply is not None]

    async def _evaluate(self, sample: SampleT) -> Explained:
        requests = self.judge_requests(sample)
        replies = await self.ask(requests)
        verdicts = [r for q, r in zip(requests, replies, strict=True) if not q.auxiliary]
        outcome = self._voted_verdict(sample, verdicts)
        if replies:
            outcome.usage = sum((reply.usage for reply in replies), Usage())
            outcome.details["judge"] = [
                {"label": request.label, "raw": reply.raw, "cached": reply.cached}
                if request.label
                else {"raw": reply.raw, "cached": reply.cached}
                for request, reply in zip(requests, replies, strict=True)
            ]
            seen = context_record(requests, replies, self.context_budget())
            if seen is not None:
                outcome.details["context"] = seen
        return outcome

    def _voted_verdict(self, sample: SampleT, replies: Sequence[JudgeReply[Any]]) -> Explained:
        """:meth:`verdict` once per repeat, reduced to one outcome (see ``repeats``)."""
        if self.repeats == 1 or not replies:
            return self.verdict(sample, replies)
        size = len(replies) // self.repeats
        votes = [
            self.verdict(sample, replies[k * size : (k + 1) * size]) for k in range(self.repeats)
        ]
        return combine_votes(votes, majority=self.categorical, pass_threshold=self.pass_threshold)

    @property
    def votes_per_row(self) -> int:
        """This metric's ``repeats``."""
        return self.repeats

    @property
    def vote_threshold(self) -> float | None:
        """This metric's ``pass_threshold``."""
        return self.pass_threshold

    def needs_judge(self, default_llm: Any = None) -> bool:
        """True when it has no offline method (``requires_llm``) or has a model to ask.

        Args:
            default_llm: The run's default judge; None when the run has none.
        """
        return self.requires_llm or self.judge_llm(default_llm) is not None

    def judge_llm(self, default_llm: Any = None) -> Any:
        """This metric's ``llm``, else ``default_llm`` (None when neither is set).

        Args:
            default_llm: The run's default judge; None when the run has none.
        """
        return self.llm if self.llm is not None else default_llm

    def default_llm(self) -> Any:
        """This metric's ``llm``, else the run's default model, else None."""
        if self.llm is not None:
            return self.llm
        run = current_run()
        return run.llm if run is not None else None

    def judge(
        self, *, temperature: float | None = None, logprobs: bool = False, repeat: int = 0
    ) -> Judge:
        """The judge for this metric's ``llm``, or the run's default model.

        Judges are reused per model object, checked through a weak reference: a new model at a
        freed model's address never gets that model's judge. For ``repeat`` k > 0 of a model
        with a ``seed``, the judge's model has ``seed + k`` (a fixed seed would repeat the
        first vote's answer).
        """
        llm = self.default_llm()
        if llm is None:
            raise ConfigError(
                f"metric {self.name!r} needs an LLM judge: pass llm=... to the metric or to "
                "evaluate(..., llm=...)"
            )
        seed = seed_of(llm) if repeat else None
        key = (id(llm), temperature, logprobs, 0 if seed is None else repeat)
        judges = self._judges
        entry = judges.get(key)
        if entry is None or entry[0]() is not llm:
            model = llm
            if seed is not None:
                model = resolve_llm(llm).model_copy(update={"seed": seed + repeat})
            judge = Judge(
                model,
                timeout=self.timeout,
                max_retries=self.max_retries,
                max_retry_after=self.max_retry_after,
                temperature=temperature,
                logprobs=logprobs,
                context_tokens=self.context_tokens,
                max_output_tokens=self.max_output_tokens,
            )

            def forget(ref: weakref.ref[Any]) -> None:  # the model is gone: drop its judge
                if key in judges and judges[key][0] is ref:
                    del judges[key]

            entry = judges[key] = (weakref.ref(llm, forget), judge)
        return entry[1]

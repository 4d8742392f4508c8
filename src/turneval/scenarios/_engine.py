"""Generation as a judged job: one request per :class:`~turneval.scenarios.Ask`, run like any other.

A source's requests become one carrier sample each, asked by one judged metric
(:class:`GenerationJob`, a :class:`~turneval.metrics.JudgedMetric` whose ``requests()`` are the
plan's), so generation goes through everything a judged run has: the run's limiter and
rate limit, retries of transient errors, bounded repairs of unusable answers, the judge cache,
usage; the dry-run estimate (:func:`estimate_generation`) counts the same requests, and the
batch engine (:func:`submit_batch`) sends them to a provider's batch API, whose answers land
in the cache under the keys a live run reads. A progress file keeps every answer as it comes,
so a rerun (after a crash, or with more scenarios) never pays for one twice, with or without
a cache. A request that fails is recorded with its reason; the others go on.

What a generation returns (``_generated``), its progress file (``_progress``) and the replay of
world scenarios (``_replay``) are private modules beside this one, re-exported here. It stays
over 400 lines: the plan, the judged job and the five front ends that run it (generate, its
estimate, the batch API) share one plan, and :class:`GenerationJob` keeps this module as its
class path (batch runs record it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from turneval._sync import sync_form
from turneval.errors import ConfigError, InvalidSampleError
from turneval.judge import JudgeReply, JudgeRequest, SQLiteCache, resolve_llm
from turneval.manifest import judge_model
from turneval.messages import HumanMessage
from turneval.metrics import Explained, JudgedMetric, MultiTurnMetric
from turneval.ratelimit import RateLimit, RateLimiter
from turneval.samples import MultiTurnSample
from turneval.scenarios._generated import FailedRequest, GenerationEstimate, GenerationResult
from turneval.scenarios._progress import progress_recorder, read_progress
from turneval.scenarios._quality import (
    DEFAULT_DEDUP_THRESHOLD,
    Discarded,
    coverage,
    deduplicate,
)
from turneval.scenarios._replay import named, replay_on_world
from turneval.scenarios._sources import Ask, ScenarioSource, from_tools, from_world
from turneval.simulation import Scenario
from turneval.usage import Usage
from turneval.worlds import ToolWorld

if TYPE_CHECKING:
    from turneval.batch import BatchRun

__all__ = [
    "DEFAULT_TEMPERATURE",
    "FailedRequest",
    "GenerationEstimate",
    "GenerationJob",
    "GenerationResult",
    "OUTPUT_TOKENS_PER_SCENARIO",
    "REPLAY_TIMEOUT",
    "REQUEST_TIMEOUT",
    "agenerate",
    "as_source",
    "estimate_generation",
    "generate",
    "open_batch",
    "submit_batch",
]

DEFAULT_TEMPERATURE = 0.7
"""The generator's sampling temperature unless told otherwise (varied, still on topic)."""

OUTPUT_TOKENS_PER_SCENARIO = 250
"""Output tokens a generated scenario costs, roughly (the dry run's output estimate)."""

REPLAY_TIMEOUT = 30.0
"""Seconds a scenario's reference actions may take on the world before it is discarded."""

REQUEST_TIMEOUT = 120.0
"""Seconds one generation request may take (answers are long: several scenarios each)."""


class GenerationJob(JudgedMetric[MultiTurnSample], MultiTurnMetric):
    """A generation job as a judged metric: one carrier sample per planned request.

    Each carrier sample names its request (``metadata["ask"]``: the request's cache key);
    :meth:`requests` returns it and :meth:`verdict` keeps the parsed answer in
    ``details["answer"]``. Built by the engine; shown here because the batch engine and the
    estimate take it as any judged metric.

    Attributes:
        asks: The planned requests, by key.
    """

    asks: dict[str, Any] = Field(default_factory=dict)

    def requests(self, sample: MultiTurnSample) -> list[JudgeRequest[Any]]:
        """The planned request this carrier sample stands for."""
        key = (sample.metadata or {}).get("ask")
        if key not in self.asks:
            raise InvalidSampleError(
                f"carrier sample names no planned request ({key!r})", field="metadata.ask"
            )
        request: JudgeRequest[Any] = self.asks[key]
        return [request]

    def verdict(self, sample: MultiTurnSample, replies: Sequence[JudgeReply[Any]]) -> Explained:
        """The answer, kept as JSON in ``details["answer"]``."""
        answer = replies[0].parsed.model_dump(mode="json")
        return Explained(1.0, "answered", {"answer": answer})


def as_source(source: Any) -> ScenarioSource:
    """A :class:`~turneval.scenarios.ScenarioSource` from what ``generate`` was given.

    A source is used as it is; a :class:`~turneval.worlds.ToolWorld` is :func:`from_world`;
    :class:`~turneval.simulation.Scenario` objects are perturbed (:func:`perturb`); an
    :class:`~turneval.results.EvaluationResult` gives near misses of its failed rows
    (:func:`from_failures`); samples or a dataset are distilled (:func:`from_conversations`);
    anything else is read as tools (:func:`from_tools`).
    """
    from turneval.dataset import EvaluationDataset
    from turneval.results import EvaluationResult
    from turneval.scenarios._distill import from_conversations
    from turneval.scenarios._failures import from_failures
    from turneval.scenarios._perturbations import perturb

    if isinstance(source, ScenarioSource):
        return source
    if isinstance(source, ToolWorld):
        return from_world(source)
    if isinstance(source, EvaluationResult):
        return from_failures(source)
    if isinstance(source, EvaluationDataset):
        return from_conversations(source)
    if isinstance(source, Sequence) and source and not isinstance(source, (str, bytes)):
        if all(isinstance(item, Scenario) for item in source):
            return perturb(source)
        if all(isinstance(item, MultiTurnSample) for item in source):
            return from_conversations(source)
    return from_tools(source)


def _model(llm: Any, seed: int) -> Any:
    """The generator model, with ``seed`` where it takes one and has none set."""
    model = resolve_llm(llm)
    if "seed" in type(model).model_fields and getattr(model, "seed", None) is None:
        model = model.model_copy(update={"seed": seed})
    return model


@dataclass
class _Plan:
    source: ScenarioSource
    asks: list[Ask]
    keys: list[str]
    job: GenerationJob
    model: Any

    def carriers(self, keys: Sequence[str]) -> list[MultiTurnSample]:
        wanted = set(keys)
        return [
            MultiTurnSample(
                user_input=[HumanMessage(content=ask.label)],
                metadata={"ask": key, "id": key[:16]},
            )
            for ask, key in zip(self.asks, self.keys, strict=True)
            if key in wanted
        ]


def _plan(
    source: Any,
    llm: Any,
    *,
    n: int | None,
    seed: int,
    batch_size: int,
    temperature: float | None,
    timeout: float = REQUEST_TIMEOUT,
    max_retries: int = 4,
) -> _Plan:
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"seed must be a whole number, got {seed!r}")
    if llm is None:
        raise ConfigError("generating scenarios needs llm=: the model that writes them")
    chosen = as_source(source)
    model = _model(llm, seed)
    asks = chosen.plan(n=n, seed=seed, batch_size=batch_size)
    asks = [
        Ask(ask.label, _with_temperature(ask.request, temperature), ask.slots, ask.context)
        for ask in asks
    ]
    job = GenerationJob(
        name="scenario_generation", llm=model, timeout=timeout, max_retries=max_retries
    )
    keys: list[str] = []
    unique: list[Ask] = []
    first: dict[str, str] = {}
    for ask in asks:
        request = ask.request
        judge = job.judge(temperature=request.temperature, logprobs=request.logprobs)
        messages = judge.prompt(request.system, request.prompt, request.schema)
        key = judge.cache_key(messages, request.schema, request.cache_extra)
        if key in first:  # two identical inputs (the same conversation twice): asked once
            chosen.skipped.append(f"{ask.label}: the same request as {first[key]} (asked once)")
            continue
        first[key] = ask.label
        keys.append(key)
        unique.append(ask)
    job = job.model_copy(update={"asks": dict(zip(keys, (a.request for a in unique), strict=True))})
    return _Plan(chosen, unique, keys, job, model)


def _with_temperature(request: JudgeRequest[Any], temperature: float | None) -> JudgeRequest[Any]:
    if request.temperature is not None or temperature is None:
        return request
    return replace(request, temperature=temperature)


def _checked_answers(plan: _Plan, stored: Mapping[str, Any]) -> dict[str, Any]:
    """Stored answers that still fit their request's schema (others are asked again)."""
    answers = {}
    for ask, key in zip(plan.asks, plan.keys, strict=True):
        if key not in stored:
            continue
        try:
            answers[key] = ask.request.schema.model_validate(stored[key]).model_dump(mode="json")
        except Exception:
            continue
    return answers


async def agenerate(
    source: Any,
    *,
    llm: Any,
    n: int | None = None,
    seed: int = 0,
    batch_size: int = 5,
    temperature: float | None = DEFAULT_TEMPERATURE,
    dedup_threshold: float | None = DEFAULT_DEDUP_THRESHOLD,
    existing: Sequence[Scenario] = (),
    cache: SQLiteCache | str | PathLike[str] | None = None,
    progress: str | PathLike[str] | None = None,
    max_llm_concurrency: int = 8,
    rate_limit: RateLimit | RateLimiter | None = None,
    show_progress: bool | None = None,
    request_timeout: float = REQUEST_TIMEOUT,
    max_retries: int = 4,
    replay_timeout: float = REPLAY_TIMEOUT,
) -> GenerationResult:
    """Generate scenarios from ``source``: plan, ask, build, replay, deduplicate, count.

    Args:
        source: A :class:`~turneval.scenarios.ScenarioSource` (:func:`from_tools`,
            :func:`from_world`, :func:`from_conversations`, :func:`from_traces`,
            :func:`from_failures`, :func:`perturb`), or what :func:`as_source` reads.
        llm: The generator: a LangChain chat model (or a ``LangchainLLMWrapper``). A model
            with a ``seed`` parameter gets ``seed`` unless it has one.
        n: Scenarios to generate (sources from tools: default 10); for sources with inputs,
            the most to generate (default: all the inputs give).
        seed: Drives the plan (which tools, personas, inputs, variants) and the model's seed;
            recorded on every scenario.
        batch_size: Scenarios asked for in one request, at most (sources from tools).
        temperature: The generator's sampling temperature (None: the judge layer's default,
            0 where unset).
        dedup_threshold: Goals at least this similar are near duplicates (the first is
            kept); None keeps them all.
        existing: Scenarios you already have: new ones too close to them are left out, and
            their ids are not reused.
        cache: A judge cache (:class:`~turneval.llms.SQLiteCache` or its path): identical
            requests are answered from it.
        progress: A progress file (JSONL): every answer is appended as it comes, and a rerun
            asks only the requests it does not hold.
        max_llm_concurrency: Requests in flight at once.
        rate_limit: The provider's quota (:class:`~turneval.ratelimit.RateLimit`).
        show_progress: A progress bar (None: only on a terminal).
        request_timeout: Seconds allowed for one request.
        max_retries: Retries of a transient error (429, 5xx, timeouts).
        replay_timeout: Seconds a scenario's reference actions may take on the world.

    Raises:
        ConfigError: a bad argument, or a source that cannot be read (before any request).
    """
    plan = _plan(
        source,
        llm,
        n=n,
        seed=seed,
        batch_size=batch_size,
        temperature=temperature,
        timeout=request_timeout,
        max_retries=max_retries,
    )
    progress_path = None if progress is None else Path(progress)
    answers = _checked_answers(plan, read_progress(progress_path))
    before = len(answers)
    todo = [key for key in plan.keys if key not in answers]
    failed: list[FailedRequest] = []
    usage = Usage()
    if todo:
        from turneval.runner import aevaluate

        name = plan.job.name
        result = await aevaluate(
            plan.carriers(todo),
            [plan.job],
            cache=cache,
            max_concurrency=max(max_llm_concurrency, 1),
            max_llm_concurrency=max_llm_concurrency,
            show_progress=show_progress,
            on_row=progress_recorder(progress_path, name),
            rate_limit=rate_limit,
        )
        usage = result.usage
        labels = {key: ask.label for ask, key in zip(plan.asks, plan.keys, strict=True)}
        for row in result.rows:
            key = str((row.sample.metadata or {})["ask"]) if row.sample is not None else ""
            if name in row.results:
                answers[key] = row.results[name].details["answer"]
            elif name in row.failures:
                failure = row.failures[name]
                failed.append(
                    FailedRequest(labels[key], f"{failure.error_type}: {failure.message}")
                )
    return await _finish(
        plan,
        answers,
        failed,
        usage=usage,
        before=before,
        seed=seed,
        dedup_threshold=dedup_threshold,
        existing=existing,
        replay_timeout=replay_timeout,
    )


async def _finish(
    plan: _Plan,
    answers: Mapping[str, Any],
    failed: list[FailedRequest],
    *,
    usage: Usage,
    before: int,
    seed: int,
    dedup_threshold: float | None,
    existing: Sequence[Scenario],
    replay_timeout: float,
) -> GenerationResult:
    """Build every answer's scenarios, replay them on the world, deduplicate, name, count."""
    source, model = plan.source, judge_model(plan.model)
    built: list[Scenario] = []
    for ask, key in zip(plan.asks, plan.keys, strict=True):
        if key not in answers:
            continue
        try:
            made = source.build(ask, answers[key])
        except Exception as exc:  # one unreadable answer costs its own scenarios only
            failed.append(FailedRequest(ask.label, f"{type(exc).__name__}: {exc}"))
            continue
        for scenario in made:
            metadata = dict(scenario.metadata or {})
            metadata["generated"] = {**metadata.get("generated", {}), "seed": seed, "model": model}
            built.append(scenario.model_copy(update={"metadata": metadata}))
    discarded: list[Discarded] = []
    kept: list[Scenario] = []
    for scenario in built:
        record = (scenario.metadata or {}).get("generated", {})
        if source.world is None or not record.get("replay"):
            kept.append(scenario)
            continue
        replayed, reason = await replay_on_world(source.world, scenario, replay_timeout)
        if replayed is None:
            discarded.append(Discarded(scenario, "replay", str(reason)))
        else:
            kept.append(replayed)
    kept, duplicates = deduplicate(kept, threshold=dedup_threshold, existing=existing)
    taken = {str(s.id) for s in existing if s.id is not None}
    kept = named(kept, f"{source.name}-{seed}", taken)
    return GenerationResult(
        scenarios=kept,
        discarded=discarded + duplicates,
        failed=failed,
        skipped=list(source.skipped),
        coverage=coverage(kept, tools=source.tool_names()),
        usage=usage,
        requests=len(plan.asks),
        answered_before=before,
        source=source.name,
        seed=seed,
        model=model,
    )


generate = sync_form(agenerate)
"""Sync form of :func:`agenerate` (same arguments): plan, ask, build, replay, deduplicate."""


def estimate_generation(
    source: Any,
    *,
    llm: Any,
    n: int | None = None,
    seed: int = 0,
    batch_size: int = 5,
    temperature: float | None = DEFAULT_TEMPERATURE,
    cache: SQLiteCache | str | PathLike[str] | None = None,
    progress: str | PathLike[str] | None = None,
) -> GenerationEstimate:
    """Count what :func:`generate` would ask with these arguments (no model is called).

    The requests are the run's own (:func:`turneval.estimate.estimate` over the same judged
    job); those a progress file or the cache answers are counted apart.
    """
    from turneval.estimate import estimate

    plan = _plan(source, llm, n=n, seed=seed, batch_size=batch_size, temperature=temperature)
    answered = set(
        _checked_answers(plan, read_progress(None if progress is None else Path(progress)))
    )
    if cache is not None:
        opened = cache if isinstance(cache, SQLiteCache) else SQLiteCache(cache)
        answered |= {key for key in plan.keys if opened.get(key) is not None}
    todo = [key for key in plan.keys if key not in answered]
    counted = estimate(plan.carriers(todo), [plan.job], llm=plan.model)
    slots = {key: len(ask.slots) for ask, key in zip(plan.asks, plan.keys, strict=True)}
    return GenerationEstimate(
        requests=len(plan.asks),
        scenarios=sum(slots.values()),
        prompt_tokens=counted.total_prompt_tokens,
        output_tokens=sum(slots[key] for key in todo) * OUTPUT_TOKENS_PER_SCENARIO,
        answered=len(answered),
    )


def submit_batch(
    source: Any,
    *,
    llm: Any,
    out: str | PathLike[str],
    n: int | None = None,
    seed: int = 0,
    batch_size: int = 5,
    temperature: float | None = DEFAULT_TEMPERATURE,
    cache: SQLiteCache | str | PathLike[str] | None = None,
    max_attempts: int = 3,
) -> BatchRun:
    """Send a generation's requests through the provider's batch API (at its batch price).

    The returned :class:`~turneval.batch.BatchRun` is followed as any (``wait()``,
    ``status()``; ``turneval batch status OUT``); its answers go to its cache (``out/cache.sqlite``
    unless ``cache`` is given) under the keys a live run uses, so once it is done
    ``generate(..., cache=run.cache_path)`` with the same arguments sends nothing.
    """
    from turneval.batch import submit

    plan = _plan(source, llm, n=n, seed=seed, batch_size=batch_size, temperature=temperature)
    return submit(
        plan.carriers(plan.keys),
        [plan.job],
        llm=plan.model,
        out=out,
        cache=cache,
        max_attempts=max_attempts,
    )


def open_batch(
    source: Any,
    *,
    llm: Any,
    out: str | PathLike[str],
    n: int | None = None,
    seed: int = 0,
    batch_size: int = 5,
    temperature: float | None = DEFAULT_TEMPERATURE,
) -> BatchRun:
    """Reopen the batch run :func:`submit_batch` made with these arguments in ``out``."""
    from turneval.batch import BatchRun

    plan = _plan(source, llm, n=n, seed=seed, batch_size=batch_size, temperature=temperature)
    return BatchRun.open(out, llm=plan.model, metrics=[plan.job])

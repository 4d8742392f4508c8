"""Candidates: a judge's instructions and examples as texts, scored on labeled rows.

A candidate is two texts: ``instructions`` (added to the judge's system message) and
``examples`` (a JSON list of labeled rows shown as worked examples). :class:`CandidateScorer`
scores a candidate on labeled rows through the judge cache (and, with the batch engine, the
provider's batch API first), remembering every row it scored.
"""

from __future__ import annotations

import json
import tempfile
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio.to_thread

from turneval.calibration._budget import BudgetGuard
from turneval.calibration._scales import verdict_text
from turneval.calibration._units import LabeledRow, Task, Value
from turneval.judge import JudgeConfig

if TYPE_CHECKING:
    from turneval.judge import SQLiteCache

__all__ = [
    "EXAMPLES",
    "INSTRUCTIONS",
    "CandidateScorer",
    "RowOutcome",
    "candidate_config",
    "label_text",
]

INSTRUCTIONS = "instructions"
EXAMPLES = "examples"


@dataclass(frozen=True)
class RowOutcome:
    """A candidate judge on one labeled row.

    Attributes:
        row: The row (index into the task's rows).
        verdicts: The judge's verdict per unit (None: it failed).
        score: Mean closeness of its units to the labels (GEPA's score of the row).
        explanation: The judge's reason (its failure's message when it failed).
    """

    row: int
    verdicts: dict[str | None, Value | None]
    score: float
    explanation: str


def candidate_config(
    task: Task, base: JudgeConfig | None, candidate: Mapping[str, str]
) -> JudgeConfig:
    """The judge configuration of a candidate: the base's, with its instructions and examples."""
    start = base or JudgeConfig(metric=task.metric.name)
    shown = [int(i) for i in json.loads(candidate.get(EXAMPLES, "[]") or "[]")]
    examples = tuple(
        task.metric.example(task.rows[i].sample, label_text(task, task.rows[i])) for i in shown
    )
    return start.model_copy(
        update={
            "instructions": candidate.get(INSTRUCTIONS, start.instructions),
            "examples": (*start.examples, *examples),
        }
    )


def label_text(task: Task, row: LabeledRow) -> str:
    """A labeled row's verdict, as a worked example states it."""
    if row.value is not None:
        return verdict_text(task.metric, row.value, row.reason)
    text = "; ".join(f"{item}: {value}" for item, value in sorted(row.items.items()))
    return f"{text}: {row.reason}" if row.reason else text


class CandidateScorer:
    """Scores candidates on labeled rows (in the caller's event loop), through the cache.

    Args:
        task: The metric and its labeled rows.
        llm: The judge model (guarded by the budget).
        cache: The judge cache every request goes through.
        base: The metric's judge configuration (None: its own prompts).
        max_concurrency: Samples scored at once.
        engine: ``"live"`` or ``"batch"`` (requests the cache lacks are first sent through
            the provider's batch API, into the cache).
        guard: The budget guard (the batch engine's requests are charged to it).
        batch_dir: Where batch runs are kept (a new temporary folder by default).
        poll_interval: Seconds between polls of a batch run.
    """

    def __init__(
        self,
        task: Task,
        llm: Any,
        cache: SQLiteCache,
        *,
        base: JudgeConfig | None = None,
        max_concurrency: int = 8,
        engine: str = "live",
        guard: BudgetGuard | None = None,
        batch_dir: Path | None = None,
        poll_interval: float = 30.0,
    ) -> None:
        """Keep what scoring needs."""
        self.poll_interval = poll_interval
        self.task = task
        self.llm = llm
        self.cache = cache
        self.base = base
        self.max_concurrency = max_concurrency
        self.engine = engine
        self.guard = guard
        self.batch_dir = batch_dir
        self.outcomes: dict[str, dict[int, RowOutcome]] = defaultdict(dict)
        self.batches = 0
        self.cached = 0  # judge answers the cache gave

    @staticmethod
    def key(candidate: Mapping[str, str]) -> str:
        """A candidate's key in :attr:`outcomes`."""
        return json.dumps(dict(candidate), sort_keys=True)

    def metric(self, candidate: Mapping[str, str]) -> Any:
        """The metric judging with ``candidate``."""
        config = candidate_config(self.task, self.base, candidate)
        return self.task.metric.model_copy(update={"judge_config": config, "llm": self.llm})

    async def score(self, candidate: Mapping[str, str], rows: Sequence[int]) -> list[RowOutcome]:
        """Score ``candidate`` on ``rows`` (rows scored before are not asked again)."""
        from turneval.runner import aevaluate

        known = self.outcomes[self.key(candidate)]
        missing = [r for r in dict.fromkeys(rows) if r not in known]
        if missing:
            metric = self.metric(candidate)
            samples = [self.task.rows[r].sample for r in missing]
            if self.engine == "batch":
                await self._prefetch(metric, samples)
            result = await aevaluate(
                samples,
                [metric],
                cache=self.cache,
                max_concurrency=self.max_concurrency,
                show_progress=False,
            )
            self.cached += result.usage.cached_calls
            for r, row in zip(missing, result.rows, strict=True):
                scored = row.results.get(metric.name)
                failure = row.failures.get(metric.name)
                verdicts = self.task.verdicts(r, scored)
                labels = dict(self.task.rows[r].units())
                score = sum(self.task.closeness(labels[k], v) for k, v in verdicts.items())
                explanation = (
                    (scored.reason or "") if scored is not None else f"judge failed: {failure}"
                )
                known[r] = RowOutcome(r, verdicts, score / max(1, len(verdicts)), explanation)
        return [known[r] for r in rows]

    def uncached(self, metric: Any, samples: Sequence[Any]) -> int:
        """Requests of ``metric`` on ``samples`` the cache does not answer yet."""
        count = 0
        for sample in samples:
            try:
                requests = metric.judge_requests(sample)
            except Exception:  # a sample the metric refuses costs nothing
                continue
            for request in requests:
                judge = metric.judge(
                    temperature=request.temperature,
                    logprobs=request.logprobs,
                    repeat=request.repeat,
                )
                messages = judge.prompt(request.system, request.prompt, request.schema)
                key = judge.cache_key(
                    messages, request.schema, request.cache_extra, vote=request.vote
                )
                if self.cache.get(key) is None:
                    count += 1
        return count

    async def _prefetch(self, metric: Any, samples: list[Any]) -> None:
        """Send the requests the cache lacks through the batch API (when the budget allows)."""
        needed = self.uncached(metric, samples)
        if not needed:
            return
        remaining = None if self.guard is None else self.guard.remaining_calls()
        if remaining is not None and needed > remaining:
            return  # the live path asks what the budget allows, one request at a time
        folder = self.batch_dir or Path(tempfile.mkdtemp(prefix="turneval-optimize-"))
        self.batch_dir = folder
        self.batches += 1
        out = folder / f"batch-{self.batches:04d}"

        def run() -> Any:
            from turneval.batch import submit

            batch = submit(samples, [metric], llm=self.llm, out=out, cache=self.cache.path)
            try:
                return batch.wait(progress=False, poll_interval=self.poll_interval)
            finally:
                batch.close()

        status = await anyio.to_thread.run_sync(run)
        if self.guard is not None:
            self.guard.charge("judge", status.usage)

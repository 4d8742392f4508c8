"""Planning a batch run: every judge request its metrics state up front, keyed as the judge's.

A request is keyed by the judge's own cache key, so identical requests are asked once and a
live run with the same cache finds the batches' answers. A metric that asks beyond what it
states (a verdict depending on an earlier one) is found in later rounds
(``_rounds.Rounds._discover``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage
    from pydantic import BaseModel

    from turneval.judge._core import Judge
    from turneval.metrics.base import Evaluator
    from turneval.samples import Sample

__all__ = ["Counts", "Planned", "may_ask_unstated", "plan_requests"]


@dataclass
class Planned:
    """One judge request of the run: the judge that asks it, its schema and its messages."""

    judge: Judge
    schema: type[BaseModel]
    messages: list[BaseMessage]
    metric: str | None = None  # the metric that states it (None: found by a scoring pass)


@dataclass
class Counts:
    """What planning found: requests stated (identical ones each time), cells refused."""

    stated: int = 0
    refused: int = 0


def may_ask_unstated(metrics: Sequence[Evaluator]) -> bool:
    """Whether a metric may ask the judge beyond the requests it states up front.

    A judged metric that keeps the template's ``_evaluate`` and ``ask`` asks exactly its
    ``judge_requests``; a rule-based metric asks nothing. Any other metric that uses an LLM
    (a verdict depending on an earlier one, a hand-written judge call) may.
    """
    from turneval.metrics import JudgedMetric

    def stated(metric: Any) -> bool:
        kind = type(metric)
        return isinstance(metric, JudgedMetric) and (
            kind._evaluate is JudgedMetric._evaluate and kind.ask is JudgedMetric.ask
        )

    return any(m.uses_llm and not stated(m) for m in metrics)


def plan_requests(
    samples: Sequence[Sample], metrics: Sequence[Any], llm: Any, counts: Counts | None = None
) -> dict[str, Planned]:
    """Every judge request of the run, keyed by its cache key (the judge's own).

    ``counts`` gets the requests stated (identical ones each time, as ``--dry-run`` counts
    them) and the cells whose metric refused the row.
    """
    from turneval.judge import JudgeRun, judge_run
    from turneval.metrics import JudgedMetric

    plan: dict[str, Planned] = {}
    counts = counts if counts is not None else Counts()
    judged = [m for m in metrics if isinstance(m, JudgedMetric)]
    with judge_run(JudgeRun(llm=llm)):
        for sample in samples:
            for metric in judged:
                if not isinstance(sample, metric.sample_types):
                    continue
                try:
                    requests = metric.judge_requests(sample)
                except Exception:  # the row fails at collect time, with its reason
                    counts.refused += 1
                    continue
                counts.stated += len(requests)
                for request in requests:
                    if request.after is not None:  # reads a summary not yet written: a
                        continue  # later round asks it (issue 47's running summary)
                    judge = metric.judge(
                        temperature=request.temperature,
                        logprobs=request.logprobs,
                        repeat=request.repeat,
                    )
                    messages = judge.prompt(request.system, request.prompt, request.schema)
                    key = judge.cache_key(
                        messages, request.schema, request.cache_extra, vote=request.vote
                    )
                    plan.setdefault(key, Planned(judge, request.schema, messages, metric.name))
    return plan

"""Who&When: does a judge find the agent and the step people blamed for a failure?

Who&When (Zhang et al., "Which Agent Causes Task Failures and When? On Automated Failure
Attribution of LLM Multi-Agent Systems", ICML 2025; MIT, github.com/mingyin1/
Agents_Failure_Attribution) holds failed multi-agent logs, each labelled by people with the
agent responsible for the failure, the decisive error step and the reason. turneval vendors the
Algorithm-Generated subset (126 logs of CaptainAgent teams on GAIA and AssistantBench
questions; ``turneval/data/who_and_when``).

:func:`to_sample` turns a log into a conversation: each entry of its history, in order, an
:class:`~turneval.messages.AIMessage` named by its agent, so that the log's step ``k`` is
``user_input[k]``. The ``reference`` says the task and (by default) its correct answer, as the
paper's prompts do "with ground truth". :func:`score` compares
:class:`~turneval.metrics.FailureAttribution`'s rows with the labels: agent-level accuracy (the
agent named is the labelled one) and step-level accuracy (the step is), each with a 95% Wilson
interval, beside the paper's figures for GPT-4o (:data:`PUBLISHED`). Scoring is exact: the
paper's script counts a match when the label is a substring of the answer.
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from os import PathLike
from pathlib import Path
from typing import Any

from turneval.errors import ConfigError
from turneval.messages import AIMessage
from turneval.results import EvaluationResult
from turneval.samples import AgentSpec, MultiTurnSample

__all__ = [
    "HEADLINE",
    "PUBLISHED",
    "RANDOM_BASELINE",
    "AttributionAccuracy",
    "WhoAndWhenCase",
    "load_cases",
    "score",
    "to_sample",
    "wilson_interval",
]

PUBLISHED: Mapping[tuple[str, bool], tuple[float, float]] = {
    ("all_at_once", True): (54.33, 12.50),
    ("step_by_step", True): (35.20, 25.51),
    ("binary_search", True): (44.13, 23.98),
    ("all_at_once", False): (51.12, 13.53),
    ("step_by_step", False): (26.02, 15.31),
    ("binary_search", False): (30.11, 16.59),
}
"""The paper's agent- and step-level accuracy (%) on the Algorithm-Generated subset, GPT-4o
judging, by ``(mode, with ground truth)`` (Table 1)."""

RANDOM_BASELINE: tuple[float, float] = (29.10, 19.06)
"""The paper's random baseline on the Algorithm-Generated subset (agent, step; %)."""

HEADLINE: tuple[float, float] = (53.5, 14.2)
"""The abstract's best figures over all of Who&When (agent, step; %)."""

_VENDORED = "algorithm_generated.jsonl.gz"


@dataclass(frozen=True, slots=True)
class WhoAndWhenCase:
    """One labelled failure log.

    Attributes:
        id: Its name (``alg-17`` for the Algorithm-Generated log ``17.json``).
        question: The task the agents failed.
        ground_truth: The task's correct answer.
        history: The log: ``{"name" (the agent), "role", "content"}`` entries, in order.
        mistake_agent: The agent people held responsible.
        mistake_step: The decisive error's step: an index into ``history``.
        mistake_reason: Why, in people's words.
    """

    id: str
    question: str
    ground_truth: str
    history: tuple[Mapping[str, Any], ...]
    mistake_agent: str
    mistake_step: int
    mistake_reason: str


def _case(record: Mapping[str, Any], where: str, prefix: str) -> WhoAndWhenCase:
    try:
        history = record["history"]
        agent_key = "name" if all("name" in entry for entry in history) else "role"
        return WhoAndWhenCase(
            id=f"{prefix}-{str(record.get('file', where)).removesuffix('.json')}",
            question=str(record["question"]),
            ground_truth=str(record.get("ground_truth", "")),
            history=tuple(
                {
                    "name": str(entry[agent_key]),
                    "role": str(entry.get("role", "")),
                    "content": str(entry.get("content") or ""),
                }
                for entry in history
            ),
            mistake_agent=str(record["mistake_agent"]),
            mistake_step=int(record["mistake_step"]),
            mistake_reason=str(record.get("mistake_reason", "")),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: not a Who&When log ({type(exc).__name__}: {exc})") from exc


def load_cases(path: str | PathLike[str] | None = None) -> list[WhoAndWhenCase]:
    """The labelled logs: the vendored Algorithm-Generated subset, or those at ``path``.

    ``path`` may be a folder of the repository's ``N.json`` files (``Who&When/Hand-Crafted``,
    whose agents are named by ``role``), or a JSON-lines file (gzip or not) of such records.

    Raises:
        ConfigError: ``path`` holds no log, or a record that is not one (naming it).
    """
    if path is None:
        data = resources.files("turneval").joinpath(f"data/who_and_when/{_VENDORED}").read_bytes()
        lines = gzip.decompress(data).decode("utf-8").splitlines()
        return [_case(json.loads(line), f"line {n}", "alg") for n, line in enumerate(lines, 1)]
    source = Path(path)
    if source.is_dir():
        files = sorted(
            source.glob("*.json"), key=lambda p: (int(p.stem) if p.stem.isdigit() else 0, p.name)
        )
        prefix = source.name.lower().split("-")[0] or "log"
        cases = [
            _case({**json.loads(f.read_text("utf-8")), "file": f.name}, str(f), prefix)
            for f in files
        ]
    else:
        raw = source.read_bytes()
        text = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode("utf-8")
        cases = [
            _case(json.loads(line), f"{source}, line {n}", "log")
            for n, line in enumerate(text.splitlines(), 1)
            if line.strip()
        ]
    if not cases:
        raise ConfigError(f"{path}: no Who&When log found")
    return cases


def to_sample(case: WhoAndWhenCase, *, ground_truth: bool = True) -> MultiTurnSample:
    """The log as a conversation: entry ``k`` of its history is ``user_input[k]``.

    Every entry is an AI message named by its agent (the agents' team, tool runs included:
    CaptainAgent's ``Computer_terminal`` is one of them); ``agents`` lists them; the
    ``reference`` holds the task and, with ``ground_truth``, its correct answer. The labels
    are in ``metadata`` (``mistake_agent``, ``mistake_step``, ``mistake_reason``), with the
    case's ``id``.
    """
    messages = [AIMessage(content=entry["content"], name=entry["name"]) for entry in case.history]
    names = list(dict.fromkeys(entry["name"] for entry in case.history))
    reference = f"The task: {case.question}"
    if ground_truth:
        reference += f"\nIts correct answer: {case.ground_truth}"
    return MultiTurnSample(
        user_input=messages,
        reference=reference,
        agents=[AgentSpec(name=name) for name in names],
        metadata={
            "id": case.id,
            "mistake_agent": case.mistake_agent,
            "mistake_step": case.mistake_step,
            "mistake_reason": case.mistake_reason,
        },
    )


def wilson_interval(
    successes: int, trials: int, z: float = 1.959963984540054
) -> tuple[float, float]:
    """The Wilson score interval of a proportion (95% by default); ``(0, 1)`` for no trial."""
    if trials == 0:
        return 0.0, 1.0
    share = successes / trials
    denominator = 1 + z * z / trials
    centre = (share + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(share * (1 - share) / trials + z * z / (4 * trials * trials))
    half /= denominator
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class AttributionAccuracy:
    """How often the judge named the labelled agent and step.

    Attributes:
        cases: Logs judged.
        agent_hits: Logs whose agent the judge named right.
        step_hits: Logs whose step the judge named right.
        failed: Logs the judge gave no attribution for (counted wrong, as in the paper).
        agent_interval: The 95% Wilson interval of the agent-level accuracy.
        step_interval: The 95% Wilson interval of the step-level accuracy.
        mode: The attribution mode.
        ground_truth: Whether the judge was shown the correct answer.
    """

    cases: int
    agent_hits: int
    step_hits: int
    failed: int
    agent_interval: tuple[float, float]
    step_interval: tuple[float, float]
    mode: str = "all_at_once"
    ground_truth: bool = True

    @property
    def agent_accuracy(self) -> float:
        """Share of logs whose agent was named right."""
        return self.agent_hits / self.cases if self.cases else 0.0

    @property
    def step_accuracy(self) -> float:
        """Share of logs whose decisive step was named right."""
        return self.step_hits / self.cases if self.cases else 0.0

    def __str__(self) -> str:
        """A table of the figures beside the paper's."""
        published = PUBLISHED.get((self.mode, self.ground_truth))
        truth = "with" if self.ground_truth else "without"

        def cell(hits: int, share: float, interval: tuple[float, float]) -> str:
            low, high = interval
            return f"{share:6.1%} ({hits}/{self.cases}; 95% CI {low:.1%}-{high:.1%})"

        lines = [
            f"Who&When, {self.cases} logs, {self.mode}, {truth} ground truth"
            + (f"; {self.failed} not attributed (counted wrong)" if self.failed else ""),
            f"{'':<24}{'agent-level':<36}step-level",
            f"{'this judge':<24}{cell(self.agent_hits, self.agent_accuracy, self.agent_interval):<36}"
            f"{cell(self.step_hits, self.step_accuracy, self.step_interval)}",
        ]
        if published is not None:
            lines.append(f"{'paper (GPT-4o)':<24}{published[0]:5.1f}%{'':<30}{published[1]:5.1f}%")
        lines.append(
            f"{'paper (random)':<24}{RANDOM_BASELINE[0]:5.1f}%{'':<30}{RANDOM_BASELINE[1]:5.1f}%"
        )
        lines.append(
            "(paper: Zhang et al. 2025, Table 1, Algorithm-Generated subset; its best method "
            f"over all of Who&When: {HEADLINE[0]}% agent, {HEADLINE[1]}% step)"
        )
        return "\n".join(lines)


def score(
    result: EvaluationResult,
    cases: Sequence[WhoAndWhenCase],
    *,
    metric: str = "failure_attribution",
    mode: str = "all_at_once",
    ground_truth: bool = True,
) -> AttributionAccuracy:
    """Agent- and step-level accuracy of a run of ``metric`` over ``cases`` (row ``i`` is case ``i``).

    A row's attribution is ``details["attribution"]`` (``agent``, ``step``); a row without one
    (the judge failed) counts wrong.

    Raises:
        ConfigError: the run has not one row per case.
    """
    if len(result.rows) != len(cases):
        raise ConfigError(f"the run has {len(result.rows)} rows for {len(cases)} Who&When logs")
    agent_hits = step_hits = failed = 0
    for row, case in zip(result.rows, cases, strict=True):
        found = row.results.get(metric)
        attribution = found.details.get("attribution") if found is not None else None
        if not isinstance(attribution, dict):
            failed += 1
            continue
        agent_hits += attribution.get("agent") == case.mistake_agent
        step_hits += attribution.get("step") == case.mistake_step
    n = len(cases)
    return AttributionAccuracy(
        n,
        agent_hits,
        step_hits,
        failed,
        wilson_interval(agent_hits, n),
        wilson_interval(step_hits, n),
        mode,
        ground_truth,
    )

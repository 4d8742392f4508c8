"""Review generated scenarios before they are used: the viewer's labeling queue, as it is.

:func:`submit_for_review` keeps the scenarios in a run store as a run of their own (one row
per scenario: its opening message as the conversation, its card as the row's ``scenario``
result, the whole scenario in the details); ``turneval view`` then shows them in its labeling
queue (:func:`review_path`), where a reviewer presses **1** to accept a scenario and **0** to
reject it (the label is saved under the metric ``accept``; the next scenario follows).
:func:`reviewed` reads the labels back: the accepted scenarios, the rejected, the unlabeled.

The review run lists ``accept`` among its metrics (no row has a value of it: only labels)
with the yes/no scale ``[0, 1]`` declared in its record, so the viewer takes the two keys and
refuses any other label (HTTP 400 naming ``0 (no) or 1 (yes)``), as for a yes/no judge.

Nothing in the viewer is specific to scenarios: this module only writes a run and reads
labels through :class:`~turneval.store.RunStore`'s public methods.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from os import PathLike
from typing import Any

from turneval.errors import ConfigError
from turneval.messages import HumanMessage
from turneval.results import MetricResult, SampleResult
from turneval.samples import MultiTurnSample
from turneval.scenarios._files import scenario_record
from turneval.scenarios._quality import scenario_tools
from turneval.simulation import Scenario

__all__ = [
    "ACCEPT",
    "CARD",
    "REJECT",
    "REVIEW_METRIC",
    "Review",
    "review_path",
    "reviewed",
    "submit_for_review",
]

REVIEW_METRIC = "accept"
"""The metric review labels are saved under."""

CARD = "scenario"
"""The name of each review row's result: the scenario's card (reason) and record (details)."""

ACCEPT = 1
"""The label (key) that accepts a scenario."""

REJECT = 0
"""The label (key) that rejects a scenario."""

_NO_OPENING = "(no opening message: the simulated user writes it)"


@dataclass(frozen=True)
class _Column:
    name: str


@dataclass
class Review:
    """The scenarios of a review run, by their latest label.

    Attributes:
        accepted: Labeled :data:`ACCEPT` (1).
        rejected: Labeled :data:`REJECT` (0).
        unlabeled: Not labeled yet, or labeled with another key.
    """

    accepted: list[Scenario] = field(default_factory=list)
    rejected: list[Scenario] = field(default_factory=list)
    unlabeled: list[Scenario] = field(default_factory=list)

    def __str__(self) -> str:
        """``7 accepted, 2 rejected, 1 not labeled``."""
        return (
            f"{len(self.accepted)} accepted, {len(self.rejected)} rejected, "
            f"{len(self.unlabeled)} not labeled"
        )


def _store(store: Any) -> Any:
    from turneval.store import RunStore

    if isinstance(store, RunStore):
        return store
    if isinstance(store, (str, PathLike)) or store is None:
        return RunStore(store)
    raise ConfigError(f"store must be a RunStore, a URL or a path, got {type(store).__name__}")


def _card(scenario: Scenario) -> str:
    record = (scenario.metadata or {}).get("generated") or {}
    parts = [f"goal: {scenario.goal}"]
    if scenario.persona:
        parts.append(f"persona: {scenario.persona}")
    if scenario.user_facts:
        parts.append("facts: " + "; ".join(f"{k}={v}" for k, v in scenario.user_facts.items()))
    if scenario.reference:
        parts.append(f"expected outcome: {scenario.reference}")
    if scenario.reference_tool_calls:
        parts.append(
            "reference actions: "
            + ", ".join(f"{c.name}({c.args})" for c in scenario.reference_tool_calls)
        )
    tools = scenario_tools(scenario)
    parts.append(
        f"kind {record.get('kind')}, source {record.get('source')}, difficulty "
        f"{record.get('difficulty')}, tools {', '.join(tools) or 'none'}"
    )
    return "\n".join(parts) + "\nPress 1 to accept, 0 to reject."


def submit_for_review(
    scenarios: Sequence[Scenario], store: Any = None, *, name: str = "generated scenarios"
) -> str:
    """Keep ``scenarios`` in a run store for review; returns the review run's id.

    Args:
        scenarios: The scenarios (with ids: the review reads them back by row).
        store: A :class:`~turneval.store.RunStore`, its URL or path (default: the default
            store, ``.turneval/runs.db``).
        name: The review run's name (shown in ``turneval view``).
    """
    if not scenarios:
        raise ConfigError("no scenario to review")
    opened = _store(store)
    made_by = f"{__name__}.submit_for_review"
    recorder = opened.start_run(
        name=f"review: {name}",
        metrics=[_Column(CARD), _Column(REVIEW_METRIC)],
        configs=[
            {"name": CARD, "class": made_by, "config": {}},
            # labels only, on a yes/no scale the viewer reads from the record
            {"name": REVIEW_METRIC, "class": made_by, "config": {}, "scale": [REJECT, ACCEPT]},
        ],
    )
    with recorder:
        for index, scenario in enumerate(scenarios):
            record = scenario_record(scenario)
            sample = MultiTurnSample(
                user_input=[HumanMessage(content=scenario.first_message or _NO_OPENING)],
                metadata={"id": scenario.id, "scenario": record},
            )
            card = MetricResult(CARD, 1.0, _card(scenario), {"scenario": record})
            recorder.add(SampleResult(index, sample, results={CARD: card}))
        recorder.finish(None)
    return str(recorder.run_id)


def review_path(run_id: str) -> str:
    """The viewer's page that reviews a run's scenarios (label ``accept``, one after another)."""
    return f"/runs/{run_id}/label?metric={REVIEW_METRIC}&mode=all"


def _verdict(label: Any) -> bool | None:
    if isinstance(label, bool):
        return label
    if isinstance(label, (int, float)):
        return True if label == ACCEPT else False if label == REJECT else None
    text = str(label).strip().casefold()
    if text in ("1", "accept", "accepted", "yes", "pass"):
        return True
    if text in ("0", "reject", "rejected", "no", "fail"):
        return False
    return None


def reviewed(store: Any, run_id: str) -> Review:
    """The scenarios of review run ``run_id`` by their latest ``accept`` label.

    Raises:
        ConfigError: the run is unknown, or it holds no scenarios to review.
    """
    opened = _store(store)
    run = opened.run(run_id)
    samples = opened.samples(run.id, range(run.rows))
    latest: dict[int, Any] = {}
    for label in opened.labels(run_id=run.id, metric=REVIEW_METRIC):
        if label.row_index is not None:
            latest[label.row_index] = label.label
    review = Review()
    for index in range(run.rows):
        data = samples.get(index) or {}
        record = (data.get("metadata") or {}).get("scenario")
        if not isinstance(record, dict):
            raise ConfigError(f"run {run.id[:12]} row {index} holds no scenario to review")
        scenario = Scenario.from_list([record])[0]
        verdict = _verdict(latest[index]) if index in latest else None
        bucket = (
            review.unlabeled
            if verdict is None
            else (review.accepted if verdict else review.rejected)
        )
        bucket.append(scenario)
    return review

"""Declared capabilities: whether a metric needs a judge is one method every front end asks.

``Evaluator.needs_judge(default_llm)`` and ``Evaluator.judge_llm(default_llm)`` replace the
``getattr(metric, "requires_llm" / "llm")`` probes: a metric of the user's that overrides them is
obeyed by the runner's check, the streamed run's check and the estimate alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import pytest

from turneval import ConfigError, SingleTurnSample, evaluate
from turneval.engines import Local
from turneval.estimate import estimate
from turneval.metrics import (
    AgentGoalAccuracyWithReference,
    CustomMetric,
    Explained,
    Groundedness,
    SingleTurnMetric,
    ToolCallF1,
)
from turneval.metrics.assessments import OverallAssessment
from turneval.stream import evaluate_jsonl
from turneval.testing import ScriptedChatModel

SAMPLE = SingleTurnSample(user_input="Where is my order?", response="It ships today.")


class AsksWhenTold(SingleTurnMetric):
    """Asks a model (a hand-written call) only when ``asks`` is set: it declares so."""

    name: str = "capability_probe_asks_when_told"
    asks: bool = True

    def needs_judge(self, default_llm: Any = None) -> bool:
        return self.asks

    async def _evaluate(self, sample: SingleTurnSample) -> Explained:
        return Explained(1.0, "asked nobody")


class OfflineFallback(SingleTurnMetric):
    """May ask a model (``uses_llm``) but scores offline when the run gives none."""

    name: str = "capability_probe_offline_fallback"
    uses_llm: ClassVar[bool] = True

    def needs_judge(self, default_llm: Any = None) -> bool:
        return default_llm is not None

    async def _evaluate(self, sample: SingleTurnSample) -> Explained:
        return Explained(0.5, "offline")


def test_what_each_kind_of_evaluator_needs() -> None:
    model, own = ScriptedChatModel(responses=[]), ScriptedChatModel(responses=[])
    rule = ToolCallF1()  # asks no model, whatever the run has
    assert (rule.needs_judge(None), rule.needs_judge(model), rule.judge_llm(model)) == (
        False,
        False,
        None,
    )
    judged = AgentGoalAccuracyWithReference()  # has no offline method: needs one, always
    assert judged.needs_judge(None) and judged.needs_judge(model)
    assert judged.judge_llm(None) is None and judged.judge_llm(model) is model
    assert AgentGoalAccuracyWithReference(llm=own).judge_llm(model) is own  # its own first
    grounding = Groundedness()  # grounds offline without a model, asks one when there is one
    assert not grounding.needs_judge(None) and grounding.needs_judge(model)
    assert Groundedness(llm=own).needs_judge(None)
    row = OverallAssessment()  # derived from the row's other results: asks nobody
    custom = CustomMetric("custom_probe", lambda instance: 1.0)
    for evaluator in (row, custom):
        assert not evaluator.needs_judge(model) and evaluator.judge_llm(model) is None


def test_a_metric_that_declares_it_needs_a_judge_fails_the_run_without_one() -> None:
    with pytest.raises(ConfigError, match="capability_probe_asks_when_told.*needs an LLM judge"):
        evaluate([SAMPLE], [AsksWhenTold()])
    result = evaluate([SAMPLE], [AsksWhenTold(asks=False)])
    assert result.rows[0].results["capability_probe_asks_when_told"].value == 1.0


def test_a_metric_with_an_offline_method_runs_without_a_judge(tmp_path: Path) -> None:
    result = evaluate([SAMPLE], [OfflineFallback()])  # uses_llm, yet needs no judge here
    assert result.rows[0].results["capability_probe_offline_fallback"].value == 0.5
    data = tmp_path / "in.jsonl"
    data.write_text(SAMPLE.model_dump_json(exclude_none=True) + "\n")
    streamed = evaluate_jsonl(data, [OfflineFallback()], tmp_path / "out", engine=Local(workers=1))
    assert streamed.summaries["capability_probe_offline_fallback"].mean == 0.5
    with pytest.raises(ConfigError, match="capability_probe_asks_when_told"):
        evaluate_jsonl(data, [AsksWhenTold()], tmp_path / "out2", engine=Local(workers=1))


def test_the_estimate_lists_a_metric_that_asks_a_model_it_cannot_count() -> None:
    model = ScriptedChatModel(responses=[])
    assert estimate([SAMPLE], [OfflineFallback()]).unknown == []  # offline: nothing to count
    found = estimate([SAMPLE], [OfflineFallback(), ToolCallF1()], llm=model)
    assert found.unknown == ["capability_probe_offline_fallback"]


class SelfVoting(SingleTurnMetric):
    """Votes three times by itself against a pass bar: it declares so."""

    name: str = "capability_probe_self_voting"

    @property
    def votes_per_row(self) -> int:
        return 3

    @property
    def vote_threshold(self) -> float | None:
        return 0.5

    async def _evaluate(self, sample: SingleTurnSample) -> Explained:
        return Explained(1.0)


def test_votes_are_declared_not_probed() -> None:
    from turneval.metrics import Fluency
    from turneval.pipeline import has_summary_extras

    # a streamed run keeps the results of a metric that votes against a bar (unstable share)
    assert has_summary_extras(SelfVoting())
    assert not has_summary_extras(ToolCallF1())
    judged = Fluency(repeats=3, pass_threshold=0.6)
    assert (judged.votes_per_row, judged.vote_threshold) == (3, 0.6)
    assert has_summary_extras(judged) and not has_summary_extras(Fluency(repeats=3))
    assert (ToolCallF1().votes_per_row, ToolCallF1().vote_threshold) == (1, None)


class Stars(SingleTurnMetric):
    """A judge of the user's on 1 to 3 stars: its scale and how a score reads are declared."""

    name: str = "capability_probe_stars"
    uses_llm: ClassVar[bool] = True

    @property
    def scale_values(self) -> tuple[float, ...] | None:
        return (1.0, 2.0, 3.0)

    def label_text(self, value: float) -> str:
        return f"{value:g} star{'s' if value != 1 else ''}"

    async def _evaluate(self, sample: SingleTurnSample) -> Explained:
        return Explained(2.0)


def test_calibration_reads_the_declared_scale_and_label_text() -> None:
    from turneval.calibration import agreement, verdict_text
    from turneval.metrics import Fluency, PairwiseSummarizationQuality, Safety

    assert verdict_text(Stars(), 3.0, "clear") == "3 stars: clear"
    assert verdict_text(AgentGoalAccuracyWithReference(), 1.0) == "1 (yes)"
    assert verdict_text(Safety(), 1.0) == "score 1 (safe)"  # a rubric's meaning
    assert verdict_text(PairwiseSummarizationQuality(), 0.5).startswith("TIE")
    assert Fluency().scale_values == (1.0, 2.0, 3.0, 4.0, 5.0)
    assert ToolCallF1().scale_values is None
    result = evaluate([SAMPLE, SAMPLE], [Stars()], llm=ScriptedChatModel(responses=[]))
    with pytest.raises(
        ConfigError, match="label 7 is outside the scale of 'capability_probe_stars'"
    ):
        agreement(result, [2.0, 7.0], Stars())


def test_the_tool_a_metric_is_about_is_declared() -> None:
    from turneval.metrics import TrajectorySingleToolUse

    assert TrajectorySingleToolUse(tool_name="lookup").subject_tool == "lookup"
    assert ToolCallF1().subject_tool is None and Stars().subject_tool is None

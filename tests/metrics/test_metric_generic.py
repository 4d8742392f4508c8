"""``Metric[S]``: a metric is typed by its samples, and has only the entry points it can serve."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from turneval.errors import InvalidSampleError
from turneval.messages import AIMessage, HumanMessage
from turneval.metrics import (
    Evaluator,
    Explained,
    Metric,
    MultiTurnMetric,
    MultiTurnScoring,
    OverallAssessment,
    RowEvaluator,
    SingleTurnMetric,
    SingleTurnScoring,
    ToolOutputGroundedness,
    builtin_metrics,
    registered_metrics,
)
from turneval.metrics.base import SampleT
from turneval.samples import MultiTurnSample, Sample, SingleTurnSample

ROOT = Path(__file__).resolve().parents[2]
CHAT = MultiTurnSample(user_input=[HumanMessage(content="hi"), AIMessage(content="hello")])
PAIR = SingleTurnSample(user_input="q", response="four words long here")


class TurnCount(MultiTurnMetric):
    """A user's conversation metric: the number of messages."""

    name: str = "test_generic_turn_count"

    async def _evaluate(self, sample: MultiTurnSample) -> Explained:
        return Explained(float(len(sample.user_input)), f"{len(sample.user_input)} messages")


class WordCount(MultiTurnScoring, SingleTurnScoring, Metric[Sample]):
    """A user's metric of both sample kinds: words of the response or of the AI turns."""

    name: str = "test_generic_word_count"

    async def _evaluate(self, sample: Sample) -> Explained:
        if isinstance(sample, SingleTurnSample):
            text = sample.response or ""
        else:
            text = " ".join(m.content for m in sample.user_input if m.type == "ai")
        return Explained(float(len(text.split())))


class _Lengthy(Metric[SampleT]):
    """A user's own generic base, parametrised below."""

    limit: int = 3


class ChatLength(_Lengthy[MultiTurnSample]):
    """Binds the generic base's parameter: scores conversations only."""

    name: str = "test_generic_chat_length"

    async def _evaluate(self, sample: MultiTurnSample) -> Explained:
        return Explained(float(len(sample.user_input) <= self.limit))


async def test_a_user_metric_of_one_kind_has_that_kind_s_entry_points_only() -> None:
    metric = TurnCount()
    assert TurnCount.sample_types == (MultiTurnSample,)
    assert await metric.multi_turn_ascore(CHAT) == 2.0
    assert (await metric.ascore(CHAT)).reason == "2 messages"
    assert await metric.multi_turn_ascore(CHAT, timeout=30.0) == 2.0
    assert not hasattr(metric, "single_turn_ascore")
    assert not hasattr(metric, "single_turn_score")
    with pytest.raises(InvalidSampleError, match="scores MultiTurnSample, got SingleTurnSample"):
        await metric.multi_turn_ascore(PAIR)  # type: ignore[arg-type]
    with pytest.raises(
        InvalidSampleError,
        match=r"'test_generic_turn_count' scores "
        r"MultiTurnSample, got SingleTurnSample",
    ):
        await metric.ascore(PAIR)  # type: ignore[arg-type]


def test_a_user_metric_of_both_kinds_gets_both_families() -> None:
    metric = WordCount()
    assert WordCount.sample_types == (SingleTurnSample, MultiTurnSample)
    assert metric.single_turn_score(PAIR) == 4.0
    assert metric.multi_turn_score(CHAT) == 1.0  # "hello"
    assert metric.score(CHAT).value == 1.0
    assert registered_metrics()["test_generic_word_count"] is WordCount


def test_a_parametrised_user_base_fixes_the_sample_types() -> None:
    assert ChatLength.sample_types == (MultiTurnSample,)
    assert ChatLength().score(CHAT).value == 1.0
    with pytest.raises(InvalidSampleError, match="scores MultiTurnSample, got SingleTurnSample"):
        ChatLength().score(PAIR)  # type: ignore[arg-type]


def test_parametrised_classes_never_register() -> None:
    made = [Metric[MultiTurnSample], Metric[SingleTurnSample], _Lengthy[SingleTurnSample]]
    registry = registered_metrics()
    assert not set(made) & set(registry.values())
    assert all("[" not in cls.__name__ for cls in registry.values())
    assert registry["test_generic_chat_length"] is ChatLength


def test_an_explicit_narrower_choice_is_kept_by_subclasses() -> None:
    class OnlyChats(MultiTurnScoring, Metric[Sample]):
        sample_types = (MultiTurnSample,)
        name: str = "test_generic_only_chats"

        async def _evaluate(self, sample: Sample) -> Explained:
            return Explained(1.0)

    class Renamed(OnlyChats):
        name: str = "test_generic_renamed"

    assert Renamed.sample_types == (MultiTurnSample,)
    assert not hasattr(Renamed(), "single_turn_ascore")


def test_an_entry_point_the_metric_cannot_serve_fails_at_class_definition() -> None:
    with pytest.raises(TypeError, match="has single_turn_ascore but scores only MultiTurnSample"):

        class _Mismatch(SingleTurnScoring, Metric[MultiTurnSample]):
            name: str = "test_generic_mismatch"

            async def _evaluate(self, sample: MultiTurnSample) -> Explained:
                return Explained(0.0)

    with pytest.raises(TypeError, match="has SingleTurnSample, which its type parameter"):

        class _Outside(MultiTurnMetric):
            sample_types = (SingleTurnSample,)
            name: str = "test_generic_outside"

            async def _evaluate(self, sample: MultiTurnSample) -> Explained:
                return Explained(0.0)


def test_no_built_in_metric_has_an_entry_point_that_can_only_raise() -> None:
    for name, cls in builtin_metrics().items():
        families = ((MultiTurnScoring, MultiTurnSample), (SingleTurnScoring, SingleTurnSample))
        for family, kind in families:
            serves = issubclass(kind, cls.sample_types) and not issubclass(cls, RowEvaluator)
            assert issubclass(cls, family) == serves, name
    # The two that had one: a conversation-only grounding metric and a row evaluator, whose
    # ascore/score could only raise ConfigError on a lone sample (it derives from a row).
    assert not hasattr(ToolOutputGroundedness(), "single_turn_ascore")
    assert not issubclass(OverallAssessment, SingleTurnMetric)
    assessment = OverallAssessment()
    assert isinstance(assessment, Evaluator) and not isinstance(assessment, Metric)
    for method in ("ascore", "score", "_evaluate", "single_turn_ascore", "multi_turn_ascore"):
        assert not hasattr(assessment, method), method
    # Every registered class is one of the two kinds a run knows how to compute.
    for name, cls in registered_metrics().items():
        assert issubclass(cls, Metric) != issubclass(cls, RowEvaluator), name


def test_an_evaluator_must_be_a_metric_or_a_row_evaluator() -> None:
    with pytest.raises(TypeError, match="Neither subclasses Evaluator directly: subclass Metric"):

        class Neither(Evaluator[SingleTurnSample]):
            name: str = "test_generic_neither"

    assert "test_generic_neither" not in registered_metrics()


def test_mypy_checks_a_user_metric_s_sample_type(tmp_path: Path) -> None:
    snippet = tmp_path / "user_metric.py"
    snippet.write_text(
        textwrap.dedent(
            """\
            from turneval.metrics import Explained, Metric, MultiTurnMetric, SingleTurnMetric
            from turneval.samples import MultiTurnSample, Sample, SingleTurnSample


            class Turns(MultiTurnMetric):
                name: str = "turns"

                async def _evaluate(self, sample: MultiTurnSample) -> Explained:
                    return Explained(float(len(sample.user_input)))


            class Confused(SingleTurnMetric):
                name: str = "confused"

                async def _evaluate(self, sample: MultiTurnSample) -> Explained:
                    return Explained(0.0)


            async def use(chat: MultiTurnSample, pair: SingleTurnSample) -> None:
                await Turns().ascore(chat)
                await Turns().multi_turn_ascore(chat)
                await Turns().ascore(pair)
                await Turns().single_turn_ascore(pair)
                anything: list[Metric] = [Turns(), Confused()]
                either: Metric[MultiTurnSample] = Turns()
                wider: Metric[Sample] = Turns()
            """
        )
    )
    # One mypy run, in its own process (mypy raises the recursion limit and tunes the garbage
    # collector of the process it runs in), on the repository's cache: warm after
    # `make typecheck`, so the run is quick.
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            str(snippet),
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
            "--no-error-summary",
            "--hide-error-context",
            "--no-pretty",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
        check=False,
    )
    out, err, status = run.stdout, run.stderr, run.returncode
    errors = sorted(
        (int(line.split(":")[1]), line.rsplit("[", 1)[1].rstrip("]"))
        for line in out.splitlines()
        if ": error: " in line
    )
    assert status == 1, err
    assert errors == [
        (15, "override"),  # Confused._evaluate takes a conversation
        (22, "arg-type"),  # a pair given to a conversation metric
        (23, "attr-defined"),  # no single_turn_ascore on a conversation metric
        (26, "assignment"),  # a conversation metric is no Metric[Sample]
    ], out

"""The metric base: one async core per metric, typed by its samples, ragas' entry points around it.

A metric is a small pydantic model whose fields are its configuration (unknown keywords fail at
construction), generic over the samples it scores: ``Metric[MultiTurnSample]``,
``Metric[SingleTurnSample]`` or ``Metric[Sample]``. It implements
``async _evaluate(sample) -> Outcome``; this module is the only place that wraps that core:
:meth:`Metric.ascore` returns the detailed :class:`MetricResult`, ``multi_turn_ascore`` and
``single_turn_ascore`` (from :class:`MultiTurnScoring` and :class:`SingleTurnScoring`, mixed in
for the samples a metric scores) the bare float (ragas' signature), and the sync forms are
one-line runners of those.

The outcome types, the registry and ragas' entry points are private modules beside this one,
re-exported here. It stays over 400 lines: :class:`Evaluator` declares every capability a run
reads of a metric, and its class hook (sample types from the type parameter, the entry points
checked, registration) must see :class:`Metric` and :class:`RowEvaluator`, defined here.
"""

from __future__ import annotations

import types
import typing
import weakref
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar, Generic, get_args, get_origin

import anyio
from pydantic import BaseModel, ConfigDict
from typing_extensions import TypeVar

from turneval._sync import run_sync
from turneval.errors import InvalidSampleError
from turneval.metrics._outcome import Explained, Outcome
from turneval.metrics._ragas_entry import FAMILIES, MultiTurnScoring, SingleTurnScoring
from turneval.metrics._registry import (
    REGISTRY,
    builtin_metrics,
    load_builtins,
    registered_metrics,
    resolve_metric_name,
)
from turneval.results import MetricResult
from turneval.samples import MultiTurnSample, Sample, SingleTurnSample

if TYPE_CHECKING:
    from collections.abc import Callable

    from turneval.messages import ToolCall

    PlainExplainer = Callable[[list[ToolCall], list[ToolCall]], tuple[float, str] | None]

__all__ = [
    "Evaluator",
    "Explained",
    "Metric",
    "MultiTurnMetric",
    "MultiTurnScoring",
    "Outcome",
    "RowEvaluator",
    "SampleT",
    "SingleTurnMetric",
    "SingleTurnScoring",
    "builtin_metrics",
    "missing_field",
    "registered_metrics",
    "require",
    "resolve_metric_name",
    "run_sync",
]

T = TypeVar("T")

SampleT = TypeVar("SampleT", bound=Sample, default=Any, contravariant=True)
"""The type parameter of :class:`Metric`: the samples a metric scores (bare ``Metric``: any)."""

_UNIONS = (typing.Union, types.UnionType)


_KINDS: tuple[type[Evaluator], ...] = ()  # (Metric, RowEvaluator), set once both are defined


def missing_field(metric: Evaluator, field_name: str) -> InvalidSampleError:
    """The error for a sample that lacks ``field_name``, naming the metric and the field."""
    return InvalidSampleError(
        f"metric {metric.name!r} needs the sample field {field_name!r}, which is missing",
        field=field_name,
    )


def require(metric: Evaluator, sample: Sample, field_name: str) -> Any:
    """Return ``sample.<field_name>``, raising :class:`InvalidSampleError` when it is ``None``."""
    value = getattr(sample, field_name, None)
    if value is None:
        raise missing_field(metric, field_name)
    return value


class Evaluator(BaseModel, ABC, Generic[SampleT]):
    """Base of everything a run lists as a metric: a named, validated configuration.

    A run's columns come from two kinds of evaluator, the only two ways to subclass it (a
    direct subclass raises ``TypeError``): a :class:`Metric`, which scores a sample on its own
    (``ascore``), and a :class:`RowEvaluator`, which the run computes from a row's other
    results (``derive``). What both share lives here: the ``name``, the configuration
    (pydantic fields: unknown keywords fail at construction, assignments are validated), the
    sample types the type parameter fixes, registration by name and the run-level figures
    (:meth:`summary_extras`). Run options take ``Sequence[Evaluator]``; a bare ``Evaluator``
    is ``Evaluator[Any]``.

    Attributes:
        name: The evaluator's name: its column in results and its name for
            ``evaluate(metrics=[...])``.
        sample_types: The sample classes it accepts; derived from the type parameter unless a
            class sets it (to a narrower choice).
        uses_llm: Whether it may ask a model (judged metrics), so the runner schedules it
            concurrently with the row's other judges. Whether a given run asks one is
            :meth:`needs_judge`.
        ragas_names: ragas' default names for this metric, where they differ
            (``result["bleu_score"]``).
    """

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, arbitrary_types_allowed=True, defer_build=True
    )

    name: str
    sample_types: ClassVar[tuple[type[Any], ...]] = (SingleTurnSample, MultiTurnSample)
    uses_llm: ClassVar[bool] = False
    ragas_names: ClassVar[tuple[str, ...]] = ()
    categorical: ClassVar[bool] = False
    """True when the value is a category coded as a number (yes/no as 1/0, a pairwise choice):
    repeated votes then take the majority (ties: the lowest value) instead of the mean."""
    yes_no: ClassVar[bool] = False
    """True for a yes/no judge: its scores are 0 (no) and 1 (yes), and human labels of it must
    be too (``turneval calibrate`` refuses any other, naming the line)."""
    higher_is_better: ClassVar[bool] = True
    """The metric's direction: True when a higher value is better (every score), False for a
    cost to keep down (latency, money, tokens: the operational metrics). Comparisons read it:
    a rise of such a metric is its regression (``compare --fail-on-regression``), its rows
    pass at or *below* a pass threshold, and reports show its values without a verdict
    colour."""
    scale_points: ClassVar[tuple[float, ...] | None] = None
    """The values of a metric with a discrete scale other than a rubric, yes/no or pairwise
    choice (``user_frustration``: 0, 0.5, 1), low to high; None for a share or another value
    of [0, 1]. Human labels of it must be on it (``turneval calibrate`` refuses any other,
    naming the line)."""

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        """Fix the class's sample types, check its entry points, register it by name.

        ``sample_types`` comes from the type parameter when neither the class nor a base
        below :class:`Evaluator` sets it; ragas' entry points must serve a sample type the
        class accepts (else ``TypeError`` at class definition); a concrete class with a
        default ``name`` is registered (see :func:`registered_metrics`). Parametrised classes
        such as ``Metric[MultiTurnSample]`` are never registered.
        """
        super().__pydantic_init_subclass__(**kwargs)
        _fix_sample_types(cls)
        if cls.__pydantic_generic_metadata__["origin"] is not None:
            return  # Metric[X], JudgedMetric[X]: a parametrisation, not a metric of its own
        if _KINDS and not issubclass(cls, _KINDS):
            raise TypeError(
                f"{cls.__name__} subclasses Evaluator directly: subclass Metric (scored from a "
                "sample with ascore) or RowEvaluator (derived from a row's other results)"
            )
        default = cls.model_fields["name"].default if "name" in cls.model_fields else None
        if isinstance(default, str) and default and not getattr(cls, "__abstractmethods__", ()):
            if not cls.__module__.startswith("turneval."):
                load_builtins()  # a built-in keeps its name against a user's class
            REGISTRY.setdefault(default, cls)

    @classmethod
    def buildable_by_name(cls) -> bool:
        """Whether the class can be built with no arguments (every field has a default)."""
        return not any(info.is_required() for info in cls.model_fields.values())

    def __setattr__(self, name: str, value: Any) -> None:
        """Validate the assignment, then drop values derived from the old configuration.

        Metrics keep derived state (e.g. a resolved comparator) in ``functools.cached_property``
        attributes, which live in the instance ``__dict__`` beside the fields.

        ``metric.llm = model`` on a metric that asks no model (``ToolCallAccuracy``, ...) is
        accepted and changes nothing, as in ragas, whose LangGraph tutorial sets it on every
        metric; a judged metric's ``llm`` is a field, and becomes its judge.
        """
        if name == "llm" and name not in type(self).model_fields:
            return
        super().__setattr__(name, value)
        fields = type(self).model_fields
        for key in [key for key in self.__dict__ if key not in fields]:
            del self.__dict__[key]

    def needs_judge(self, default_llm: Any = None) -> bool:
        """Whether a run whose default judge is ``default_llm`` asks a model for this evaluator.

        Every front end asks this one method before a run (``evaluate``, ``evaluate_jsonl``,
        the CLI, ``turneval watch``, ``evaluate_on_ray``): an evaluator that needs a judge and
        has none (:meth:`judge_llm` is None) fails the run before its first sample, naming the
        metric; a streamed run that asks a judge scores in one process (the judge's limiter
        and cache are per process).

        The default is ``uses_llm``: an evaluator that declares it asks a model needs one,
        whatever the run's default. A judged metric needs one when it has no offline method
        (``requires_llm``) or when it has a model to ask (its own ``llm``, else
        ``default_llm``): the grounding metrics ground offline without one. Override it for an
        evaluator of your own that asks a model only sometimes.

        Args:
            default_llm: The run's default judge (``evaluate(..., llm=...)``, the CLI's
                ``--judge-model``); None when the run has none.
        """
        return self.uses_llm

    def judge_llm(self, default_llm: Any = None) -> Any:
        """The chat model this evaluator asks in a run whose default judge is ``default_llm``.

        Its own model (an ``llm`` field that is set), else ``default_llm`` when it may ask a
        model (``uses_llm``); None when it asks none or has none.

        Args:
            default_llm: The run's default judge; None when the run has none.
        """
        own = self.__dict__.get("llm") if "llm" in type(self).model_fields else None
        if own is not None:
            return own
        return default_llm if self.uses_llm else None

    @property
    def scale_values(self) -> tuple[float, ...] | None:
        """The values a score takes, low to high, when they are discrete; None otherwise.

        0 and 1 for a yes/no judge, ``scale_points`` when set, a rubric's scores, 0, 0.5 and 1
        for a pairwise choice. Human labels must lie on it (``turneval calibrate``,
        :func:`~turneval.calibration.agreement` and :func:`~turneval.calibration.align`
        refuse any other, naming the label); None accepts any value.
        """
        if self.yes_no:
            return (0.0, 1.0)
        if self.scale_points:
            return tuple(sorted(float(point) for point in self.scale_points))
        return None

    def label_text(self, value: float) -> str:
        """How a score reads as a verdict (a human label shown to a judge as a worked example).

        ``1 (yes)`` and ``0 (no)`` for 0 and 1, the number otherwise; a rubric judge adds the
        score's meaning, a pairwise judge names its choice.
        """
        if value in (0.0, 1.0):
            return f"{value:g} ({'yes' if value else 'no'})"
        return f"{value:g}"

    @property
    def subject_tool(self) -> str | None:
        """The one tool this evaluator is about, shown beside its name in reports; None for most.

        ``trajectory_single_tool_use`` is about its ``tool_name``.
        """
        return None

    @property
    def votes_per_row(self) -> int:
        """Times every question of a row is asked (the value combines the votes); 1 by default.

        A judged metric's ``repeats``. A streamed run keeps the results of a metric that votes
        more than once against a :attr:`vote_threshold`, for the share of unstable rows.
        """
        return 1

    @property
    def vote_threshold(self) -> float | None:
        """The value at or above which a row passes, which repeated votes are checked against.

        A judged metric's ``pass_threshold`` (a row whose votes fall on both sides of it is
        ``unstable``); None by default and for evaluators that do not vote.
        """
        return None

    def _plain_explainer(self) -> PlainExplainer | None:
        """The value-and-reason function from predicted and reference calls alone, or None.

        The streamed run's fast path (details and timeout off) writes a row of metrics that
        all have one without result objects; it must give exactly
        ``ascore(sample, details=False)``'s value and reason. None by default: the call-matching
        and trajectory metrics under their default equality have one.
        """
        return None

    @property
    def keeps_results(self) -> bool:
        """Whether the run's summary reads this evaluator's results, beyond their values.

        A streamed run keeps such an evaluator's results for its summary. True when the class
        overrides :meth:`summary_extras`, or for a metric scored ``by_agent`` (its per-agent
        figures come from the results' details).
        """
        return type(self).summary_extras is not Evaluator.summary_extras

    def summary_extras(self, results: Sequence[MetricResult]) -> dict[str, float]:
        """Run-level figures of this metric beside its mean, std and CI (default: none).

        The run's one summariser calls it with this metric's scored results (failed rows left
        out), in memory (``EvaluationResult.summary()``) and streamed (``evaluate_jsonl``, whose
        summary.json then has them too); the figures land in the summary's ``extra``. With
        ``details=False`` the results carry no ``details``: figures that need them are left out.
        """
        return {}

    @property
    def scale(self) -> tuple[float, float]:
        """The lowest and highest value this metric can give (``(0.0, 1.0)`` for most)."""
        return (0.0, 1.0)

    def _check_type(self, sample: object) -> None:
        if not isinstance(sample, self.sample_types):
            expected = " or ".join(kind.__name__ for kind in self.sample_types)
            raise InvalidSampleError(
                f"metric {self.name!r} scores {expected}, got {type(sample).__name__}",
                field="sample",
            )


_DERIVED: weakref.WeakSet[type[Evaluator]] = weakref.WeakSet()
"""Classes whose ``sample_types`` came from their type parameter (not set by a class)."""


def _parameter(cls: type[Evaluator]) -> Any:
    """What ``cls`` binds :class:`Metric`'s type parameter to; None when it leaves it open.

    Follows the pydantic parametrisations in the MRO (``JudgedMetric[SingleTurnSample]``
    binds JudgedMetric's parameter, which ``JudgedMetric(Metric[S])`` passes to Metric).
    """
    bound: dict[Any, Any] = {}
    for klass in cls.__mro__:
        metadata = getattr(klass, "__pydantic_generic_metadata__", None)
        if metadata is None or metadata["origin"] is None:
            continue
        parameters = metadata["origin"].__pydantic_generic_metadata__["parameters"]
        for parameter, argument in zip(parameters, metadata["args"], strict=False):
            if argument is not parameter:
                bound.setdefault(parameter, argument)
    value: Any = SampleT
    for _ in range(len(bound) + 1):
        if not isinstance(value, TypeVar) or value not in bound:
            break
        value = bound[value]
    return None if isinstance(value, TypeVar) or value is Any else value


def _fix_sample_types(cls: type[Evaluator]) -> None:
    """Set ``cls.sample_types`` from its type parameter; check it and the entry points."""
    parameter = _parameter(cls)
    declared: tuple[type[Any], ...] | None = None
    if parameter is not None:
        members = get_args(parameter) if get_origin(parameter) in _UNIONS else (parameter,)
        declared = tuple(kind for kind in members if isinstance(kind, type))
    explicit = next(
        (
            klass
            for klass in cls.__mro__
            if "sample_types" in klass.__dict__ and klass is not Evaluator and klass not in _DERIVED
        ),
        None,
    )
    if explicit is None and declared:
        cls.sample_types = declared
        _DERIVED.add(cls)
    elif explicit is not None and declared:
        outside = [k for k in cls.sample_types if not issubclass(k, declared)]
        if outside:
            raise TypeError(
                f"{cls.__name__}.sample_types has {outside[0].__name__}, which its type "
                f"parameter ({' | '.join(k.__name__ for k in declared)}) does not admit"
            )
    for family, kind, method in FAMILIES:
        if issubclass(cls, family) and not issubclass(kind, cls.sample_types):
            raise TypeError(
                f"{cls.__name__} has {method} but scores only "
                f"{' or '.join(k.__name__ for k in cls.sample_types)}: mix in "
                f"{family.__name__} only with a sample type that includes {kind.__name__}"
            )


class Metric(Evaluator[SampleT], ABC):
    """Base of every metric that scores a sample on its own: one async core, typed.

    ``Metric[MultiTurnSample]`` scores conversations, ``Metric[SingleTurnSample]`` prompt and
    response pairs, ``Metric[Sample]`` both; a bare ``Metric`` is ``Metric[Any]``. A subclass
    sets ``name`` (a field with a default, so it can be overridden) and implements
    :meth:`_evaluate` for its sample type; the type parameter also fixes, at runtime, the
    sample types :meth:`ascore` accepts (``sample_types``), so a wrong sample raises
    :class:`InvalidSampleError` before the core runs. The type parameter is contravariant: a
    ``Metric[Sample]`` is a ``Metric[MultiTurnSample]`` too. Configuration, registration and
    run-level figures come from :class:`Evaluator`.

    ragas' entry points (``multi_turn_ascore``, ``single_turn_ascore`` and their sync forms)
    come from :class:`MultiTurnScoring` and :class:`SingleTurnScoring`, which a metric mixes in
    for the samples it scores (:class:`MultiTurnMetric` and :class:`SingleTurnMetric` are the
    two one-kind bases with them), so a metric never has an entry point that can only raise.
    """

    @abstractmethod
    async def _evaluate(self, sample: SampleT) -> Outcome:
        """Score one sample; raise :class:`InvalidSampleError` for unusable input."""

    async def _value(self, sample: SampleT, timeout: float | None) -> float:
        """Score ``sample`` and return the bare value (``timeout`` in seconds)."""
        if not isinstance(sample, self.sample_types):
            self._check_type(sample)
        if timeout is None:
            return (await self._evaluate(sample)).value
        with anyio.fail_after(timeout):
            return (await self._evaluate(sample)).value

    async def ascore(self, sample: SampleT, *, details: bool = True) -> MetricResult:
        """Score ``sample`` with its reason and (unless ``details=False``) its details.

        Raises:
            InvalidSampleError: ``sample`` is not one of ``sample_types``, or lacks a field the
                metric needs (the error names the metric and the field).
        """
        self._check_type(sample)
        outcome = await self._evaluate(sample)
        reason, evidence = outcome.explain(details)
        return MetricResult(self.name, float(outcome.value), reason, evidence, outcome.usage)

    def score(self, sample: SampleT, *, details: bool = True) -> MetricResult:
        """Sync form of :meth:`ascore` (raises ``SyncInAsyncContextError`` inside a loop)."""
        return run_sync(partial(self.ascore, details=details), sample)


class MultiTurnMetric(MultiTurnScoring, Metric[MultiTurnSample], ABC):
    """A metric of conversations: ``Metric[MultiTurnSample]`` with ragas' multi-turn names.

    The base ragas users know (``from ragas.metrics.base import MultiTurnMetric``); implement
    ``async _evaluate(self, sample: MultiTurnSample) -> Outcome``. A metric of both sample
    kinds is ``Metric[Sample]`` with both :class:`MultiTurnScoring` and
    :class:`SingleTurnScoring`.
    """


class SingleTurnMetric(SingleTurnScoring, Metric[SingleTurnSample], ABC):
    """A metric of prompt/response pairs: ``Metric[SingleTurnSample]`` with ragas' names.

    Implement ``async _evaluate(self, sample: SingleTurnSample) -> Outcome``; it has
    ``single_turn_ascore``/``single_turn_score`` (ragas) besides ``ascore``/``score``.
    """


class RowEvaluator(Evaluator[SampleT], ABC):
    """A metric computed from a row's other results, after them (it calls no model itself).

    The run pipeline picks these out by type (``isinstance(metric, RowEvaluator)``): it scores
    the row's other metrics first, then calls :meth:`derive` with their results, their errors
    and the run's metric objects, so an evaluator selects what it reads by type, not by name.
    Implement :meth:`derive` only. A row evaluator is an :class:`Evaluator` but not a
    :class:`Metric`: it has no ``ascore``, ``score`` or ragas entry points, since it has
    nothing to derive from outside a run.
    """

    @abstractmethod
    def derive(
        self,
        sample: SampleT,
        results: Mapping[str, MetricResult],
        errors: Mapping[str, str],
        metrics: Sequence[Evaluator],
    ) -> MetricResult:
        """This metric's result for one row.

        Args:
            sample: The row's sample.
            results: The row's results by metric name.
            errors: The row's failed metrics' errors by metric name.
            metrics: The run's metric objects, in the order given.
        """

    def check_run(self, metrics: Sequence[Evaluator]) -> None:
        """Raise ConfigError before a run whose ``metrics`` it cannot derive from.

        ``metrics`` are the run's metric objects, this one included; the default accepts any.
        """


_KINDS = (Metric, RowEvaluator)

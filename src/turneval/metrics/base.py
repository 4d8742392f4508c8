"""The metric base: one async core per metric, the ragas-compatible entry points around it.

A metric is a small pydantic model whose fields are its configuration (unknown keywords fail at
construction). It implements ``async _evaluate(sample) -> Outcome``; this module is the only place
that wraps that core: :meth:`Metric.ascore` returns the detailed :class:`MetricResult`,
``multi_turn_ascore``/``single_turn_ascore`` the bare float (ragas' signature), and the sync
forms are one-line runners of those.
"""

from __future__ import annotations

import asyncio
import atexit
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import anyio
from pydantic import BaseModel, ConfigDict

from turneval.errors import InvalidSampleError, SyncInAsyncContextError
from turneval.judge.usage import Usage
from turneval.results import MetricResult
from turneval.samples import MultiTurnSample, Sample, SingleTurnSample

__all__ = [
    "Explained",
    "Metric",
    "MultiTurnMetric",
    "Outcome",
    "RowEvaluator",
    "SingleTurnMetric",
    "missing_field",
    "require",
    "run_sync",
]

T = TypeVar("T")


class Outcome(ABC):
    """What a metric's core computes: the value now, the explanation on demand."""

    __slots__ = ()

    value: float

    @abstractmethod
    def explain(self, details: bool = True) -> tuple[str, dict[str, Any]]:
        """Return ``(reason, details)``; with ``details=False`` the details may be left empty."""


@dataclass(slots=True)
class Explained(Outcome):
    """An outcome whose reason and details are already known."""

    value: float
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    usage: Usage | None = None

    def explain(self, details: bool = True) -> tuple[str, dict[str, Any]]:
        """Return the stored reason and details."""
        return self.reason, self.details if details else {}


class _Loop:
    """The process's long-lived event loop for sync calls, running in a daemon thread.

    Every sync wrapper runs its coroutine here, so objects bound to an event loop (HTTP
    clients of judges and agents) stay usable from one sync call to the next.
    """

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()
        self.pid = 0

    def get(self) -> asyncio.AbstractEventLoop:
        with self.lock:
            if self.loop is None or self.pid != os.getpid() or self.loop.is_closed():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="turneval-sync-loop", daemon=True
                )
                thread.start()
                self.loop, self.thread, self.pid = loop, thread, os.getpid()
            return self.loop

    def close(self) -> None:
        with self.lock:
            loop, thread, self.loop, self.thread = self.loop, self.thread, None, None
            if loop is None or thread is None or self.pid != os.getpid():
                return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        if not thread.is_alive():
            loop.close()


_SYNC_LOOP = _Loop()
atexit.register(_SYNC_LOOP.close)


def run_sync(function: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run an async function to completion from sync code, on the process's sync-call loop.

    The coroutine runs in one long-lived event loop (a daemon thread) shared by every sync call
    of the process, with the caller's context variables; an interrupt cancels it.

    Raises:
        SyncInAsyncContextError: when called inside a running event loop.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        target = getattr(function, "func", function)  # a functools.partial names its function
        raise SyncInAsyncContextError(
            "a sync turneval call was made inside a running event loop; await "
            f"{getattr(target, '__qualname__', target)!s}(...) instead"
        )

    async def call() -> T:
        return await function(*args)

    future = asyncio.run_coroutine_threadsafe(call(), _SYNC_LOOP.get())
    try:
        return future.result()
    except BaseException:
        future.cancel()  # e.g. KeyboardInterrupt: stop the coroutine too
        raise


def missing_field(metric: Metric, field_name: str) -> InvalidSampleError:
    """The error for a sample that lacks ``field_name``, naming the metric and the field."""
    return InvalidSampleError(
        f"metric {metric.name!r} needs the sample field {field_name!r}, which is missing",
        field=field_name,
    )


def require(metric: Metric, sample: Sample, field_name: str) -> Any:
    """Return ``sample.<field_name>``, raising :class:`InvalidSampleError` when it is ``None``."""
    value = getattr(sample, field_name, None)
    if value is None:
        raise missing_field(metric, field_name)
    return value


class Metric(BaseModel, ABC):
    """Base of every metric: configuration as validated fields, one async core.

    Subclasses set ``name`` (a field with a default, so it can be overridden), declare which
    sample types they accept in ``sample_types`` and implement :meth:`_evaluate`.
    """

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, arbitrary_types_allowed=True
    )

    name: str
    sample_types: ClassVar[tuple[type[Any], ...]] = (SingleTurnSample, MultiTurnSample)
    uses_llm: ClassVar[bool] = False
    derived: ClassVar[bool] = False  # computed by the runner from the row's other results
    ragas_names: ClassVar[tuple[str, ...]] = ()
    """ragas' default names for this metric, where they differ (``result["bleu_score"]``)."""

    def __setattr__(self, name: str, value: Any) -> None:
        """Validate the assignment, then drop values derived from the old configuration.

        Metrics keep derived state (e.g. a resolved comparator) in ``functools.cached_property``
        attributes, which live in the instance ``__dict__`` beside the fields.
        """
        super().__setattr__(name, value)
        fields = type(self).model_fields
        for key in [key for key in self.__dict__ if key not in fields]:
            del self.__dict__[key]

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

    @abstractmethod
    async def _evaluate(self, sample: Any) -> Outcome:
        """Score one sample; raise :class:`InvalidSampleError` for unusable input."""

    def _check_type(self, sample: object) -> None:
        if not isinstance(sample, self.sample_types):
            expected = " or ".join(kind.__name__ for kind in self.sample_types)
            raise InvalidSampleError(
                f"metric {self.name!r} scores {expected}, got {type(sample).__name__}",
                field="sample",
            )

    async def _value(self, sample: Any, timeout: float | None) -> float:
        """Score ``sample`` and return the bare value (``timeout`` in seconds)."""
        if not isinstance(sample, self.sample_types):
            self._check_type(sample)
        if timeout is None:
            return (await self._evaluate(sample)).value
        with anyio.fail_after(timeout):
            return (await self._evaluate(sample)).value

    async def ascore(self, sample: Sample, *, details: bool = True) -> MetricResult:
        """Score ``sample`` with its reason and (unless ``details=False``) its details."""
        self._check_type(sample)
        outcome = await self._evaluate(sample)
        reason, evidence = outcome.explain(details)
        usage = getattr(outcome, "usage", None)
        return MetricResult(self.name, float(outcome.value), reason, evidence, usage)

    def score(self, sample: Sample) -> MetricResult:
        """Sync form of :meth:`ascore`."""
        return run_sync(self.ascore, sample)


class MultiTurnMetric(Metric, ABC):
    """A metric of conversations (:class:`MultiTurnSample`)."""

    sample_types: ClassVar[tuple[type[Any], ...]] = (MultiTurnSample,)

    async def multi_turn_ascore(
        self, sample: MultiTurnSample, callbacks: Any = None, timeout: float | None = None
    ) -> float:
        """Score a conversation; ragas' signature (``callbacks`` is accepted and unused)."""
        return await self._value(sample, timeout)

    def multi_turn_score(
        self, sample: MultiTurnSample, callbacks: Any = None, timeout: float | None = None
    ) -> float:
        """Sync form of :meth:`multi_turn_ascore`."""
        return run_sync(self.multi_turn_ascore, sample, callbacks, timeout)


class SingleTurnMetric(Metric, ABC):
    """A metric of single prompt/response pairs (:class:`SingleTurnSample`)."""

    sample_types: ClassVar[tuple[type[Any], ...]] = (SingleTurnSample,)

    async def single_turn_ascore(
        self, sample: SingleTurnSample, callbacks: Any = None, timeout: float | None = None
    ) -> float:
        """Score a single-turn sample; ragas' signature (``callbacks`` is accepted and unused)."""
        return await self._value(sample, timeout)

    def single_turn_score(
        self, sample: SingleTurnSample, callbacks: Any = None, timeout: float | None = None
    ) -> float:
        """Sync form of :meth:`single_turn_ascore`."""
        return run_sync(self.single_turn_ascore, sample, callbacks, timeout)


class RowEvaluator(Metric, ABC):
    """A metric computed from a row's other results, after them (it calls no model itself).

    The run pipeline picks these out by type (``isinstance(metric, RowEvaluator)``): it scores
    the row's other metrics first, then calls :meth:`derive` with their results, their errors
    and the run's metric objects, so an evaluator selects what it reads by type, not by name.
    """

    derived: ClassVar[bool] = True

    @abstractmethod
    def derive(
        self,
        sample: Any,
        results: Mapping[str, MetricResult],
        errors: Mapping[str, str],
        metrics: Sequence[Metric],
    ) -> MetricResult:
        """This metric's result for one row.

        Args:
            sample: The row's sample.
            results: The row's results by metric name.
            errors: The row's failed metrics' errors by metric name.
            metrics: The run's metric objects, in the order given.
        """

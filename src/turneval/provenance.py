"""What produced a sample, as typed fields: the source steps' record, read in one place.

A run's source step knows what produced each conversation: a sample as given, an agent that
replayed it (``EvalTask``), a simulated user (``simulate``), a trace of a run elsewhere
(``turneval.traces``). In memory it hands the pipeline a :class:`Provenance` (an
:class:`~turneval.results.AgentRun`, a :class:`~turneval.results.Trial`, a
:data:`~turneval.results.Source`), which lands on the row as ``row.source``, ``row.agent``
and ``row.trial``. A sample saved to a file carries it in its metadata instead, as the
source step wrote it: :func:`sample_provenance` is the one reader of those keys, so no
generic layer (pipeline, results, aggregate, stream, report, compare) decodes metadata.

* A trace (``metadata["source"] == "otel"``, written by :mod:`turneval.traces`): source
  ``"traces"``; the agent run from ``latency_in_seconds``, ``status``/``error``,
  ``input_tokens``/``output_tokens`` and the AI messages; a trace that could not be converted
  (``conversion_error``) fails every metric of its row with that error.
* A simulated conversation (``metadata["scenario_id"]``, written by
  :mod:`turneval.simulation`): source ``"simulation"`` and its trial (``trial``,
  ``stop_reason``).

What the source steps measured of a conversation's operation is kept the same way, for the
operational metrics (:mod:`turneval.metrics.operations`) to read wherever the sample goes
(a file, a worker, ``turneval watch``): ``metadata["turn_timings"]``, each user turn's
:class:`~turneval.results.TurnTiming` (``EvalTask``, ``simulate`` and traces write it, through
:func:`with_turn_timings`; read by :func:`turn_timings`), and a simulated user's model and
tokens (``user_model``, ``user_usage``; read by :func:`user_simulator_usage`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from turneval._rows import AgentRun, Source, Trial, TurnTiming
from turneval.errors import InvalidSampleError
from turneval.usage import Usage

__all__ = [
    "DATASET",
    "Provenance",
    "sample_provenance",
    "turn_timings",
    "user_simulator_usage",
    "with_turn_timings",
]

_TIMINGS = "turn_timings"  # metadata key: each user turn's TurnTiming, as a list of dicts

_TRACE = "otel"  # metadata["source"] of a sample rebuilt from a trace (turneval.traces)


@dataclass(frozen=True, slots=True)
class Provenance:
    """What produced one sample: where it came from, its agent run and its trial.

    Attributes:
        source: What produced the conversation (:data:`~turneval.results.Source`).
        agent: The agent run (an ``EvalTask`` replay, a simulated conversation, a trace).
        trial: The trial of a simulated conversation.
        error: Why the source step could not produce a sample (a trace that did not
            convert): every metric of the row fails with it.
    """

    source: Source = "dataset"
    agent: AgentRun | None = None
    trial: Trial | None = None
    error: str | None = None


DATASET = Provenance()
"""A sample as given: no agent run, no trial."""


def sample_provenance(sample: Any) -> Provenance:
    """The provenance a source step recorded in ``sample.metadata`` (:data:`DATASET` if none)."""
    meta = getattr(sample, "metadata", None)
    if not meta:
        return DATASET
    if meta.get("source") == _TRACE:
        return _trace(sample, meta)
    if "scenario_id" in meta:
        stop, trial = meta.get("stop_reason"), meta.get("trial")
        return Provenance(
            "simulation",
            trial=Trial(
                str(meta["scenario_id"]),
                int(trial) if trial is not None else 0,
                None if stop is None else str(stop),
            ),
        )
    return DATASET


def _trace(sample: Any, meta: dict[str, Any]) -> Provenance:
    """A trace's agent run (its latency, status, tokens and AI messages) and conversion error."""
    error = meta.get("conversion_error")
    agent = None
    if meta.get("latency_in_seconds") is not None:
        messages = list(getattr(sample, "user_input", ()))
        agent = AgentRun(
            messages,
            float(meta["latency_in_seconds"]),
            (meta.get("error") or error or "trace status ERROR")
            if meta.get("status") == "ERROR" or error
            else None,
            Usage(int(meta.get("input_tokens", 0)), int(meta.get("output_tokens", 0))),
            sum(1 for m in messages if m.type == "ai"),
        )
    return Provenance("traces", agent, error=None if error is None else str(error))


# -- what the source step measured: turn timings, the simulated user's usage --------------------


def with_turn_timings(
    metadata: Mapping[str, Any] | None, turns: Sequence[TurnTiming]
) -> dict[str, Any]:
    """``metadata`` (copied) with each user turn's timing recorded (no key when none was timed)."""
    record = dict(metadata or {})
    if turns:
        record[_TIMINGS] = [turn.to_dict() for turn in turns]
    return record


def turn_timings(sample: Any) -> list[TurnTiming] | None:
    """Each user turn's timing, as the source step recorded it (None when none did).

    Raises:
        InvalidSampleError: the record is there but malformed (naming the turn and field).
    """
    meta = getattr(sample, "metadata", None) or {}
    raw = meta.get(_TIMINGS)
    if raw is None:
        return None
    field = f"metadata.{_TIMINGS}"
    if not isinstance(raw, list):
        raise InvalidSampleError(f"{field} must be a list, got {type(raw).__name__}", field=field)
    turns = []
    for position, item in enumerate(raw):
        try:
            turns.append(TurnTiming.from_dict(item))
        except ValueError as exc:
            raise InvalidSampleError(f"{field}[{position}]: {exc}", field=field) from None
    return turns


def user_simulator_usage(sample: Any) -> tuple[Usage, str | None] | None:
    """The simulated user's tokens and model in a simulated conversation (None: no such user).

    Raises:
        InvalidSampleError: the recorded usage is malformed.
    """
    meta = getattr(sample, "metadata", None) or {}
    raw = meta.get("user_usage")
    if raw is None:
        return None
    try:
        usage = Usage.from_dict(raw) if isinstance(raw, Mapping) else None
    except ValueError as exc:
        raise InvalidSampleError(
            f"metadata.user_usage: {exc}", field="metadata.user_usage"
        ) from None
    if usage is None:
        raise InvalidSampleError(
            f"metadata.user_usage must be an object of token counts, got {type(raw).__name__}",
            field="metadata.user_usage",
        )
    model = meta.get("user_model")
    return usage, None if model is None else str(model)

"""Rows: one metric's result or failure on one sample, an agent run, a trial, a sample's row.

These are the records every layer above passes around: metrics return :class:`MetricResult`,
the pipeline fills a :class:`SampleResult` per sample with what produced it (``source``,
``agent``, ``trial``), the codec (:mod:`turneval.results_codec`) writes and reads them, and
:mod:`turneval.results` gathers them into a run. All are importable from ``turneval.results``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from turneval.usage import Usage

if TYPE_CHECKING:
    from turneval.messages import Message
    from turneval.samples import Sample

__all__ = [
    "AGENT_FIGURES",
    "AgentRun",
    "MetricFailure",
    "MetricResult",
    "SampleResult",
    "ToolTiming",
    "Trial",
    "TurnTiming",
    "json_line",
    "ratio",
]


@dataclass(frozen=True, slots=True)
class MetricResult:
    """The detailed score of one metric on one sample.

    Attributes:
        name: The metric's name.
        value: The score, a finite float (in [0, 1] for every built-in but the 1-5 rubric judges).
        reason: How the score was reached, with its arithmetic (``precision=2/3=0.667 ...``).
        details: Structured evidence, e.g. which calls were matched.
        usage: Judge tokens and calls spent on this result (None for rule-based metrics).
    """

    name: str
    value: float
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    usage: Usage | None = None

    def __post_init__(self) -> None:
        """Reject non-finite values: a failure is recorded as an error, never as NaN."""
        if not math.isfinite(self.value):
            raise ValueError(f"metric {self.name!r} produced a non-finite value {self.value!r}")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the fields."""
        usage = None if self.usage is None else self.usage.to_dict()
        return {
            "name": self.name,
            "value": self.value,
            "reason": self.reason,
            "details": self.details,
            "usage": usage,
        }


def ratio(label: str, numerator: int, denominator: int, value: float) -> str:
    """Format ``label=k/n=0.667`` as used in reasons."""
    return f"{label}={numerator}/{denominator}={value:.3f}"


@dataclass(frozen=True, slots=True)
class MetricFailure:
    """A metric that failed on one sample: the error's type and message, kept on the row.

    ``traceback`` is where the metric raised (the last frames, formatted as Python prints
    them, at most a few KB), or None when the error was not raised by a metric's code (an
    unreadable line, a timeout, a failed agent run) or is a data error
    (:class:`~turneval.errors.InvalidSampleError`, which names the sample and field). results.jsonl keeps it as
    ``<name>_traceback`` on the rows that have one.
    """

    name: str
    sample_index: int
    error_type: str
    message: str
    traceback: str | None = None

    def __str__(self) -> str:
        """``"<ErrorType>: <message>"``."""
        return f"{self.error_type}: {self.message}"


Source = Literal["dataset", "agent", "simulation", "traces"]
"""What produced a row's conversation: a sample as given (``"dataset"``), an agent replaying a
sample's turns (``"agent"``, ``EvalTask``), a simulated user talking with an agent
(``"simulation"``) or a trace of a run elsewhere (``"traces"``)."""


@dataclass(frozen=True, slots=True)
class Trial:
    """Which trial of which scenario a simulated conversation is (pass^k groups rows by it).

    Attributes:
        scenario_id: The scenario's id.
        index: The trial's number (0-based) among the scenario's trials.
        stop_reason: Why the conversation ended (``user_done``, ``max_turns``, ``agent_error``,
            ``timeout``), None when the simulated user failed.
    """

    scenario_id: str
    index: int = 0
    stop_reason: str | None = None

    @property
    def agent_failed(self) -> bool:
        """Whether the agent failed or timed out (the trial then counts as a failure)."""
        return self.stop_reason in ("agent_error", "timeout")


@dataclass(frozen=True, slots=True)
class ToolTiming:
    """One tool call of a turn, timed: which tool, and the seconds it took.

    Attributes:
        name: The tool's name.
        latency_s: Seconds from the call to its result.
    """

    name: str
    latency_s: float


@dataclass(frozen=True, slots=True)
class TurnTiming:
    """How long the agent took to answer one user turn (what the source step measured).

    Attributes:
        latency_s: Seconds from the user's message to the agent's last message of the turn.
        first_token_s: Seconds from the user's message to the first token of the agent's
            answer, where a trace recorded it (a streamed model call); None otherwise.
        tools: The turn's tool calls with their durations, where the source step could time
            them (a LangGraph graph streamed step by step, a trace's tool spans); None when
            tools were not timed (an agent that answers a turn in one call).
    """

    latency_s: float
    first_token_s: float | None = None
    tools: tuple[ToolTiming, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``first_token_s`` and ``tools`` only when known)."""
        record: dict[str, Any] = {"latency_s": self.latency_s}
        if self.first_token_s is not None:
            record["first_token_s"] = self.first_token_s
        if self.tools is not None:
            record["tools"] = [{"name": t.name, "latency_s": t.latency_s} for t in self.tools]
        return record

    @classmethod
    def from_dict(cls, data: Any) -> TurnTiming:
        """The turn :meth:`to_dict` wrote.

        Raises:
            ValueError: naming the field, when a duration is not a finite number >= 0, a tool
                has no name, or the record is not an object.
        """
        if not isinstance(data, dict):
            raise ValueError(f"a turn's timing must be an object, got {type(data).__name__}")
        latency = _seconds(data.get("latency_s"), "latency_s")
        if latency is None:
            raise ValueError("a turn's timing needs latency_s (seconds)")
        first = _seconds(data.get("first_token_s"), "first_token_s")
        tools = data.get("tools")
        if tools is not None:
            if not isinstance(tools, list):
                raise ValueError(f"tools must be a list, got {type(tools).__name__}")
            timed = []
            for position, tool in enumerate(tools):
                found = tool if isinstance(tool, dict) else {}
                name = found.get("name")
                seconds = _seconds(found.get("latency_s"), f"tools[{position}].latency_s")
                if not isinstance(name, str) or not name or seconds is None:
                    raise ValueError(
                        f"tools[{position}] must be {{'name': str, 'latency_s': seconds}}, "
                        f"got {tool!r}"
                    )
                timed.append(ToolTiming(name, seconds))
            return cls(latency, first, tuple(timed))
        return cls(latency, first)


def _seconds(value: Any, field_name: str) -> float | None:
    """A duration in seconds (None stays None); ValueError naming the field otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{field_name} must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{field_name} must be a finite number of seconds >= 0, got {value!r}")
    return float(value)


@dataclass(slots=True)
class AgentRun:
    """What one run of an agent produced (``EvalTask``, a simulated conversation or a trace).

    Attributes:
        messages: The conversation, as it happened.
        latency_s: Wall-clock seconds the run took.
        error: ``"<ErrorType>: <message>"`` when the run failed (the row's metrics then fail
            with it), else None.
        usage: The agent's token usage (from its AI messages' usage metadata).
        steps: The number of AI messages the agent produced.
        error_type: The error type recorded on the row's metrics when the run failed.
        by_agent: Whether ``error`` is the agent's; False when something else ended the run (a
            simulated user that failed): the row's metrics fail with it, but the agent did not.
        turns: Each user turn answered, timed (:class:`TurnTiming`), in order; a turn the
            agent failed on is left out.
    """

    messages: list[Message]
    latency_s: float
    error: str | None = None
    usage: Usage = field(default_factory=Usage)
    steps: int = 0
    error_type: str = "AgentRunError"
    by_agent: bool = True
    turns: list[TurnTiming] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """Whether the agent failed (``error`` is set and is the agent's)."""
        return self.error is not None and self.by_agent


AGENT_FIGURES = ("latency_in_seconds", "failure", "agent_total_tokens", "steps")
"""The figures a run's summary adds when an agent was run, before its metrics."""


@dataclass(slots=True)
class SampleResult:
    """Everything measured on one sample: a result or a failure per metric.

    What produced the row is typed, set by the source step: ``source`` (:data:`Source`);
    ``agent``, the :class:`AgentRun` when an agent was run on the sample (``EvalTask``, a
    simulated conversation, a trace), which ``latency_s``, ``failure`` (0/1), ``agent_error``,
    ``agent_usage`` and ``steps`` read (None without one); ``trial``, the :class:`Trial` of a
    simulated conversation (None else). ``line`` is the sample's 1-based line in the input
    file when it was read from one (the streaming CLI), so reports name the same line as
    results.jsonl. ``stored_id`` is the id a results file holds for a row read back without
    its sample (see :attr:`sample_id`).
    """

    index: int
    sample: Sample | None
    results: dict[str, MetricResult] = field(default_factory=dict)
    failures: dict[str, MetricFailure] = field(default_factory=dict)
    line: int | None = None
    agent: AgentRun | None = None
    stored_id: str | None = None
    trial: Trial | None = None
    source: Source = "dataset"

    @property
    def sample_id(self) -> str | None:
        """The sample's ``metadata["id"]`` as text (None without one)."""
        metadata = getattr(self.sample, "metadata", None) if self.sample is not None else None
        if metadata and metadata.get("id") is not None:
            return str(metadata["id"])
        return self.stored_id

    @property
    def latency_s(self) -> float | None:
        """The agent run's latency in seconds (None without an agent run)."""
        return None if self.agent is None else self.agent.latency_s

    @property
    def failure(self) -> int | None:
        """1 if the agent run failed, 0 if it succeeded, None without an agent run."""
        return None if self.agent is None else int(self.agent.failed)

    @property
    def agent_error(self) -> str | None:
        """The agent run's error (None when it succeeded or there was none)."""
        return None if self.agent is None else self.agent.error

    @property
    def agent_usage(self) -> Usage | None:
        """The agent run's token usage (None without an agent run)."""
        return None if self.agent is None else self.agent.usage

    @property
    def steps(self) -> int | None:
        """The agent run's AI messages (None without an agent run)."""
        return None if self.agent is None else self.agent.steps

    def score(self, name: str) -> float:
        """The metric's value, NaN where it failed (ragas' convention at this boundary)."""
        result = self.results.get(name)
        return result.value if result is not None else math.nan

    @property
    def usage(self) -> Usage:
        """Judge usage summed over this row's metrics."""
        return sum((r.usage for r in self.results.values() if r.usage is not None), Usage())


def json_line(record: dict[str, Any]) -> str:
    """``record`` as one line of JSON, whatever its strings (lone surrogates are escaped)."""
    text = json.dumps(record, ensure_ascii=False, default=str)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: \\uXXXX escapes keep the line valid UTF-8
        text = json.dumps(record, ensure_ascii=True, default=str)
    return text

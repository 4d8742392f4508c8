"""Operations, rule-based: how slow, how expensive, how many tokens a conversation took.

These read what the run recorded of the conversation, not its words: each user turn's timing
(:class:`~turneval.results.TurnTiming`, recorded by ``EvalTask``, ``simulate`` and the trace
converter in the sample's metadata; see :mod:`turneval.provenance`) and each AI message's token
usage and model (``usage_metadata`` and ``response_metadata``, as LangChain chat models report
them and traces record them). Lower is better for all four
(:attr:`~turneval.metrics.Evaluator.higher_is_better` is False): ``turneval compare
--fail-on-regression`` fails on a rise of their mean, and ``turneval plan`` sizes a run to see
one. A sample without what a metric reads fails that metric on its row, naming what is missing.

Percentiles are numpy's default (linear interpolation between order statistics, Hyndman and
Fan's type 7): the p95 of 1, 2, 3, 4 s is 3 + 0.85 x (4 - 3) = 3.85 s.

Longer than 400 lines: four small metrics over what a run recorded (timings, usage, prices),
sharing the percentile and spread helpers and the reading of usage off AI messages; the cost
metric, with its prices read and checked, is the longest of the four.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from statistics import fmean
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator

from turneval.errors import InvalidSampleError
from turneval.messages import AIMessage, HumanMessage, Message, ToolMessage
from turneval.metrics.base import Explained, MultiTurnMetric
from turneval.provenance import turn_timings, user_simulator_usage
from turneval.results import MetricResult, Prices, TurnTiming
from turneval.samples import MultiTurnSample
from turneval.usage import Usage

__all__ = [
    "ConversationCost",
    "DEFAULT_PRICES",
    "PRICES_AS_OF",
    "TokensPerTurn",
    "ToolLatency",
    "TurnLatency",
    "message_model",
    "message_usage",
    "percentile",
    "price_for",
]

PRICES_AS_OF = "2025-06"
"""When :data:`DEFAULT_PRICES` were the providers' list prices."""

DEFAULT_PRICES: Mapping[str, Prices] = {
    "gpt-4o": Prices(2.50, 10.00),
    "gpt-4o-mini": Prices(0.15, 0.60),
    "gpt-4.1": Prices(2.00, 8.00),
    "gpt-4.1-mini": Prices(0.40, 1.60),
    "gpt-4.1-nano": Prices(0.10, 0.40),
    "o3": Prices(2.00, 8.00),
    "o3-mini": Prices(1.10, 4.40),
    "o4-mini": Prices(1.10, 4.40),
    "claude-3-haiku": Prices(0.25, 1.25),
    "claude-3-5-haiku": Prices(0.80, 4.00),
    "claude-3-5-sonnet": Prices(3.00, 15.00),
    "claude-3-7-sonnet": Prices(3.00, 15.00),
    "claude-sonnet-4": Prices(3.00, 15.00),
    "claude-opus-4": Prices(15.00, 75.00),
}
"""List prices in USD per one million input and output tokens, by model name (as of
:data:`PRICES_AS_OF`). A model is priced by its name or the longest name here it starts with
(``gpt-4o-mini-2024-07-18`` is ``gpt-4o-mini``); ``ConversationCost(prices=...)`` adds and
overrides entries (prices change: check yours)."""

Statistic = Literal["p50", "p95", "max", "mean"]


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, numpy's linear method (type 7)."""
    import numpy as np  # on first use: importing the metrics loads no numerics

    return float(np.percentile(np.asarray(values, dtype=float), q))


def _statistic(values: Sequence[float], statistic: str) -> float:
    if statistic == "mean":
        return fmean(values)
    if statistic == "max":
        return float(max(values))
    return percentile(values, float(statistic[1:]))


def _spread(values: Sequence[float]) -> dict[str, float]:
    """p50, p95, max and mean of ``values`` (non-empty)."""
    return {
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "max": float(max(values)),
        "mean": fmean(values),
    }


def _row_figures(results: Sequence[MetricResult]) -> dict[str, float]:
    """Run-level figures of per-row values: ``rows_p50``, ``rows_p95``, ``rows_max``."""
    values = [result.value for result in results]
    if not values:
        return {}
    spread = _spread(values)
    return {f"rows_{key}": spread[key] for key in ("p50", "p95", "max")}


def _seconds(values: Sequence[float]) -> str:
    return ", ".join(f"{value:.3g}" for value in values)


def _timings(metric: MultiTurnMetric, sample: MultiTurnSample) -> list[TurnTiming]:
    turns = turn_timings(sample)
    if not turns:
        raise InvalidSampleError(
            f"metric {metric.name!r} needs each turn's timing (metadata.turn_timings), which "
            "the run records when it runs the agent (EvalTask, simulate) or reads a trace; "
            "this sample has none",
            field="metadata.turn_timings",
        )
    return turns


class TurnLatency(MultiTurnMetric):
    """Seconds the agent took to answer a user turn: a percentile over the conversation's turns.

    A turn runs from the user's message to the agent's last message before the next user
    message (tool calls included). ``statistic`` picks the row's value among the turns'
    latencies (``p50``, ``p95``, ``max`` or ``mean``); every one of them is in the details.
    With ``first_token=True`` the value is the time to the first token of the agent's answer
    instead, from the turns whose trace recorded it (a streamed model call). The summary adds
    ``rows_p50``, ``rows_p95`` and ``rows_max`` (of the rows' values) and, with details kept,
    ``turns_p50``, ``turns_p95`` and ``turns_max`` over every turn of the run.

    Attributes:
        statistic: The row's value among its turns' latencies.
        first_token: Measure the time to the first token instead of the whole answer.
    """

    name: str = "turn_latency"
    statistic: Statistic = "p50"
    first_token: bool = False
    higher_is_better: ClassVar[bool] = False

    @property
    def scale(self) -> tuple[float, float]:
        """Seconds: 0 and up."""
        return (0.0, math.inf)

    async def _evaluate(self, sample: MultiTurnSample) -> Explained:
        turns = _timings(self, sample)
        latencies = [turn.latency_s for turn in turns]
        firsts = [turn.first_token_s for turn in turns if turn.first_token_s is not None]
        measured = latencies
        what = "turn latency"
        if self.first_token:
            if not firsts:
                raise InvalidSampleError(
                    f"metric {self.name!r} with first_token=True needs a turn whose trace "
                    "recorded its first token (a streamed model call); none of this "
                    f"sample's {len(turns)} turns has one",
                    field="metadata.turn_timings",
                )
            measured, what = firsts, "time to first token"
        value = _statistic(measured, self.statistic)
        details: dict[str, Any] = {"turns_s": latencies, **_spread(latencies)}
        if firsts:
            details["first_token_s"] = firsts
            details["first_token"] = _spread(firsts)
        reason = (
            f"{self.statistic} {what} over {len(measured)} turn{'s' if len(measured) != 1 else ''}"
            f" = {value:.3f} s (turns: {_seconds(measured)} s)"
        )
        return Explained(value, reason, details)

    def summary_extras(self, results: Sequence[MetricResult]) -> dict[str, float]:
        """The rows' p50, p95 and max, and every turn's (when the results keep details)."""
        extras = _row_figures(results)
        key = "first_token_s" if self.first_token else "turns_s"
        turns = [float(v) for result in results for v in result.details.get(key, ())]
        if turns:
            spread = _spread(turns)
            extras.update({f"turns_{k}": spread[k] for k in ("p50", "p95", "max")})
        return extras


def _turns(messages: Sequence[Message]) -> list[list[Message]]:
    """The messages after each user message, up to the next one (its answer)."""
    turns: list[list[Message]] = []
    for message in messages:
        if isinstance(message, HumanMessage):
            turns.append([])
        elif turns:
            turns[-1].append(message)
    return turns


def message_usage(message: Message) -> Usage | None:
    """An AI message's token usage as its model reported it (``usage_metadata``), or None."""
    if not isinstance(message, AIMessage):
        return None
    raw = (message.metadata or {}).get("usage_metadata")
    if not isinstance(raw, Mapping):
        return None
    counts = []
    for key in ("input_tokens", "output_tokens"):
        value = raw.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidSampleError(
                f"usage_metadata.{key} must be a token count, got {value!r}",
                field="usage_metadata",
            )
        counts.append(value)
    return Usage(counts[0], counts[1])


def message_model(message: Message) -> str | None:
    """The model an AI message names (``response_metadata``'s ``model_name`` or ``model``)."""
    meta = (message.metadata or {}).get("response_metadata")
    if isinstance(meta, Mapping):
        for key in ("model_name", "model"):
            value = meta.get(key)
            if isinstance(value, str) and value:
                return value
    return None


def _no_usage(metric: MultiTurnMetric) -> InvalidSampleError:
    return InvalidSampleError(
        f"metric {metric.name!r} needs the token usage the agent's model reported on its AI "
        "messages (usage_metadata, as LangChain chat models and traces record it); none of "
        "this sample's AI messages has any",
        field="usage_metadata",
    )


class TokensPerTurn(MultiTurnMetric):
    """Tokens the agent's model used to answer a user turn, on average over the conversation.

    A turn's tokens are the sum over the AI messages answering it (every model call of the
    turn, tool steps included) of their ``usage_metadata``: ``input``, ``output`` or both
    (``total``). Turns without an answer are left out; the details list every turn's counts.

    Attributes:
        tokens: Which tokens to count.
    """

    name: str = "tokens_per_turn"
    tokens: Literal["total", "input", "output"] = "total"
    higher_is_better: ClassVar[bool] = False

    @property
    def scale(self) -> tuple[float, float]:
        """Tokens: 0 and up."""
        return (0.0, math.inf)

    async def _evaluate(self, sample: MultiTurnSample) -> Explained:
        counted = []
        seen = False
        for turn in _turns(sample.user_input):
            answers = [m for m in turn if isinstance(m, AIMessage)]
            if not answers:
                continue
            usage = Usage()
            for message in answers:
                found = message_usage(message)
                seen = seen or found is not None
                usage = usage + (found or Usage())
            counted.append(usage)
        if not seen:
            raise _no_usage(self)
        per_turn = [
            usage.total_tokens
            if self.tokens == "total"
            else usage.input_tokens
            if self.tokens == "input"
            else usage.output_tokens
            for usage in counted
        ]
        value = fmean(per_turn)
        reason = (
            f"{self.tokens} tokens per turn = {sum(per_turn):,} / {len(per_turn)} turns = "
            f"{value:.1f}"
        )
        details = {
            "turns": [
                {"input_tokens": u.input_tokens, "output_tokens": u.output_tokens} for u in counted
            ],
            "max": max(per_turn),
        }
        return Explained(value, reason, details)

    def summary_extras(self, results: Sequence[MetricResult]) -> dict[str, float]:
        """The rows' p50, p95 and max."""
        return _row_figures(results)


def price_for(model: str, prices: Mapping[str, Prices]) -> Prices | None:
    """The prices of ``model``: its own entry, else the longest name it starts with.

    A provider prefix (``openai/gpt-4o``) is ignored when the full name has no entry.
    """
    for name in (model, model.rpartition("/")[2]):
        if name in prices:
            return prices[name]
        prefixes = [key for key in prices if name.startswith(key)]
        if prefixes:
            return prices[max(prefixes, key=len)]
    return None


def _as_prices(value: Any) -> Any:
    """``Prices``, ``[input, output]`` or ``{"input": .., "output": ..}`` as ``Prices``."""
    if isinstance(value, list | tuple) and len(value) == 2:
        return Prices(float(value[0]), float(value[1]))
    if isinstance(value, Mapping) and set(value) == {"input", "output"}:
        return Prices(float(value["input"]), float(value["output"]))
    return value


class ConversationCost(MultiTurnMetric):
    """What the models of a conversation cost: the agent's, and a simulated user's.

    The agent's cost is each AI message's tokens (``usage_metadata``) at its model's prices
    (the model ``response_metadata`` names, else ``agent_model``); a simulated conversation
    adds its user model's (``user_usage`` and ``user_model`` in the sample's metadata, else
    ``user_model``) unless ``include_user=False``. Prices come from :data:`DEFAULT_PRICES`
    with ``prices`` over them (USD per one million tokens, or any unit you price in). The
    judges' cost is not in it: it is the evaluation's, reported with the summary's usage. A
    model without a price fails the row, naming it. The summary adds ``total`` (the sum over
    the rows) beside the mean.

    Attributes:
        prices: Prices by model name, added to and over :data:`DEFAULT_PRICES`
            (``{"my-model": Prices(1.0, 2.0)}``, or ``[input, output]`` per million tokens).
        agent_model: The model of AI messages that name none.
        user_model: The simulated user's model when the sample names none.
        include_user: Add the simulated user's cost.
    """

    name: str = "conversation_cost"
    prices: dict[str, Prices] = Field(default_factory=dict)
    agent_model: str | None = None
    user_model: str | None = None
    include_user: bool = True
    higher_is_better: ClassVar[bool] = False

    @field_validator("prices", mode="before")
    @classmethod
    def _read_prices(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {str(model): _as_prices(price) for model, price in value.items()}
        return value

    @property
    def scale(self) -> tuple[float, float]:
        """Money: 0 and up."""
        return (0.0, math.inf)

    def _price(self, model: str, whose: str) -> Prices:
        found = price_for(model, {**DEFAULT_PRICES, **self.prices})
        if found is None:
            raise InvalidSampleError(
                f"metric {self.name!r}: no price for the {whose} model {model!r}; give one: "
                f"ConversationCost(prices={{{model!r}: [INPUT, OUTPUT]}}) (per million tokens)",
                field="prices",
            )
        return found

    async def _evaluate(self, sample: MultiTurnSample) -> Explained:
        by_model: dict[str, Usage] = {}
        unpriced = 0
        for position, message in enumerate(sample.user_input):
            usage = message_usage(message)
            if usage is None:
                unpriced += isinstance(message, AIMessage)
                continue
            model = message_model(message) or self.agent_model
            if model is None:
                raise InvalidSampleError(
                    f"metric {self.name!r}: AI message user_input[{position}] used "
                    f"{usage.total_tokens:,} tokens but names no model (response_metadata): "
                    "give agent_model=...",
                    field="agent_model",
                )
            by_model[model] = by_model.get(model, Usage()) + usage
        if not by_model:
            raise _no_usage(self)
        models: dict[str, dict[str, Any]] = {}
        agent_cost = 0.0
        for model, usage in by_model.items():
            cost = self._price(model, "agent's").cost(usage)
            agent_cost += cost
            models[model] = {**_counts(usage), "cost": cost}
        user_cost, user = 0.0, None
        simulated = user_simulator_usage(sample) if self.include_user else None
        if simulated is not None and simulated[0].total_tokens:
            usage, named = simulated
            model = named or self.user_model
            if model is None:
                raise InvalidSampleError(
                    f"metric {self.name!r}: the simulated user used {usage.total_tokens:,} "
                    "tokens but the sample names no model (metadata.user_model): give "
                    "user_model=... (or include_user=False)",
                    field="user_model",
                )
            user_cost = self._price(model, "simulated user's").cost(usage)
            user = {"model": model, **_counts(usage), "cost": user_cost}
        value = agent_cost + user_cost
        parts = "; ".join(
            f"{model}: {figures['input_tokens']:,} in + {figures['output_tokens']:,} out"
            for model, figures in models.items()
        )
        reason = f"agent {agent_cost:.6f} ({parts})"
        if user is not None:
            reason += (
                f" + simulated user {user_cost:.6f} ({user['model']}: "
                f"{user['input_tokens']:,} in + {user['output_tokens']:,} out)"
            )
        reason += f" = {value:.6f}; judges not included"
        if unpriced:
            reason += f"; {unpriced} AI message{'s' if unpriced != 1 else ''} without usage"
        details: dict[str, Any] = {
            "agent_cost": agent_cost,
            "user_cost": user_cost,
            "models": models,
            "user": user,
            "messages_without_usage": unpriced,
        }
        return Explained(value, reason, details)

    def summary_extras(self, results: Sequence[MetricResult]) -> dict[str, float]:
        """``total``: the sum over the rows; and the rows' p50, p95 and max."""
        if not results:
            return {}
        return {"total": float(sum(result.value for result in results)), **_row_figures(results)}


def _counts(usage: Usage) -> dict[str, int]:
    return {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}


class ToolLatency(MultiTurnMetric):
    """Seconds spent in tool calls: in all of a conversation's, or per call of one tool.

    Read from each turn's timed tool calls (a LangGraph graph's streamed steps, a trace's tool
    spans). The row's value is the ``statistic`` over the calls (of ``tool`` only, when set):
    ``total`` seconds (0 for a conversation that called none), or the ``mean``, ``p50``,
    ``p95`` or ``max`` of one call (a conversation without such a call fails that row, as
    there is nothing to measure). The details give each tool's calls, total, p50, p95 and max;
    the summary adds, with details kept, ``<tool>_p50``, ``<tool>_p95`` and ``<tool>_calls``
    per tool over the run, and the rows' ``rows_p50``, ``rows_p95``, ``rows_max``.

    Attributes:
        tool: The one tool to measure (None: every tool).
        statistic: The row's value over the calls.
    """

    name: str = "tool_latency"
    tool: str | None = None
    statistic: Literal["total", "mean", "p50", "p95", "max"] = "total"
    higher_is_better: ClassVar[bool] = False

    @property
    def scale(self) -> tuple[float, float]:
        """Seconds: 0 and up."""
        return (0.0, math.inf)

    @property
    def subject_tool(self) -> str | None:
        """The tool measured, when one is."""
        return self.tool

    async def _evaluate(self, sample: MultiTurnSample) -> Explained:
        answered = [
            turn
            for turn in _turns(sample.user_input)
            if any(isinstance(m, AIMessage) for m in turn)
        ]
        which = "tool calls" if self.tool is None else f"calls of {self.tool!r}"
        if not any(isinstance(m, ToolMessage) for turn in answered for m in turn):
            if self.statistic == "total":
                return Explained(0.0, "no tool call: 0 s in tools", {"calls": [], "by_tool": {}})
            raise self._none(which)
        timings = _timings(self, sample)
        calls: list[dict[str, Any]] = []
        for number, turn in enumerate(timings):
            answer = answered[number] if number < len(answered) else []
            if turn.tools is None and any(isinstance(m, ToolMessage) for m in answer):
                raise InvalidSampleError(
                    f"metric {self.name!r}: turn {number + 1}'s tool calls were not timed (only "
                    "a LangGraph graph's steps and a trace's tool spans time them)",
                    field="metadata.turn_timings",
                )
            for timed in turn.tools or ():
                if self.tool is None or timed.name == self.tool:
                    calls.append({"tool": timed.name, "latency_s": timed.latency_s, "turn": number})
        seconds = [call["latency_s"] for call in calls]
        if self.statistic == "total":
            value = float(sum(seconds))
            reason = f"total over {len(seconds)} {which} = {value:.3f} s"
        elif not seconds:
            raise self._none(which)
        else:
            value = _statistic(seconds, self.statistic)
            reason = f"{self.statistic} of {len(seconds)} {which} = {value:.3f} s ({_seconds(seconds)} s)"
        by_tool: dict[str, dict[str, float]] = {}
        for name in dict.fromkeys(call["tool"] for call in calls):
            own = [call["latency_s"] for call in calls if call["tool"] == name]
            spread = _spread(own)
            by_tool[name] = {
                "calls": len(own),
                "total_s": float(sum(own)),
                "p50_s": spread["p50"],
                "p95_s": spread["p95"],
                "max_s": spread["max"],
            }
        return Explained(value, reason, {"calls": calls, "by_tool": by_tool})

    def _none(self, which: str) -> InvalidSampleError:
        return InvalidSampleError(
            f"metric {self.name!r}: no {which} in this conversation, so no {self.statistic} "
            "(statistic='total' gives 0 s)",
            field="user_input",
        )

    def summary_extras(self, results: Sequence[MetricResult]) -> dict[str, float]:
        """The rows' p50, p95 and max; per tool (with details kept) its calls, p50 and p95."""
        extras = _row_figures(results)
        per_tool: dict[str, list[float]] = {}
        for result in results:
            for call in result.details.get("calls", ()):
                per_tool.setdefault(str(call["tool"]), []).append(float(call["latency_s"]))
        for name, seconds in sorted(per_tool.items()):
            extras[f"{name}_calls"] = float(len(seconds))
            extras[f"{name}_p50"] = percentile(seconds, 50)
            extras[f"{name}_p95"] = percentile(seconds, 95)
        return extras

"""Metrics of agents that work together: per-agent figures and handoffs, rule-based.

``by_agent=True`` on a rule-based conversation metric (:class:`PerAgentMetric`: the tool-call,
trajectory and behaviour metrics) scores each agent of the conversation on its own share of
it (:func:`agent_sample`): its own AI messages and the tool results answering them (with the
human and system messages), against its own reference calls, with its own allowed tools. The
metric itself is unchanged: the per-agent layer filters the sample and calls it once per agent.

:class:`HandoffAccuracy` compares the handoffs the agents made with the reference handoffs.
"""

from __future__ import annotations

import re
import statistics
from abc import ABC
from collections.abc import Sequence
from dataclasses import dataclass, field
from fnmatch import translate
from typing import Any

import anyio

from turneval.errors import InvalidSampleError
from turneval.messages import (
    AIMessage,
    Handoff,
    HandoffAt,
    Message,
    ToolCall,
    ToolMessage,
    agent_key,
    message_agents,
)
from turneval.metrics._arg_comparing import ArgComparing
from turneval.metrics._formulas import F1
from turneval.metrics._matching import CallComparison, Pair, args_score, json_key
from turneval.metrics.base import MultiTurnMetric, Outcome, missing_field
from turneval.results import MetricResult, ratio
from turneval.samples import AgentSpec, MultiTurnSample

__all__ = ["HandoffAccuracy", "PerAgentMetric", "agent_sample", "allowed_tools"]


# -- an agent's share of a conversation --------------------------------------------------------


def allowed_tools(agent: AgentSpec) -> list[str] | None:
    """The tool-name patterns ``agent`` may call: its ``tools`` and its handoff tools.

    None when it declares no ``tools``. Its handoffs are the handoff tools
    (``transfer_to_<agent>``, ``transfer_back_to_<agent>``) of the agents in ``handoffs``, or
    of any agent when it declares none.
    """
    if agent.tools is None:
        return None
    if agent.handoffs is None:
        return [*agent.tools, "transfer_to_*", "transfer_back_to_*"]
    keys = [agent_key(target) for target in agent.handoffs]
    return [
        *agent.tools,
        *(f"transfer_to_{key}" for key in keys),
        *(f"transfer_back_to_{key}" for key in keys),
    ]


def _matcher(patterns: Sequence[str]) -> re.Pattern[str]:
    if not patterns:
        return re.compile(r"(?!)")
    return re.compile("|".join(translate(pattern) for pattern in patterns))


def agent_sample(sample: MultiTurnSample, name: str) -> MultiTurnSample:
    """Agent ``name``'s share of ``sample``, as the per-agent metrics score it.

    * ``user_input``: the human and system messages, the agent's AI messages and the tool
      results answering its calls (:func:`~turneval.messages.message_agents`), in order;
    * ``reference_tool_calls``: the agent's own (:attr:`AgentSpec.reference_tool_calls`), else
      the sample's reference calls to the tools it declares (:func:`allowed_tools`), else None;
    * ``metadata["allowed_tools"]``: :func:`allowed_tools` when the agent declares its tools;
    * ``reference_handoffs``: the sample's reference handoffs from this agent.

    The rest is the sample's. The share is not validated again: a share of a valid
    conversation is one (a tool result always follows its caller's message).
    """
    return _share(sample, name)[0]


def _share(sample: MultiTurnSample, name: str) -> tuple[MultiTurnSample, list[int]]:
    """:func:`agent_sample`, and the index in ``sample.user_input`` of each of its messages."""
    owners = message_agents(sample.user_input)
    positions = [
        index
        for index, (message, owner) in enumerate(zip(sample.user_input, owners, strict=True))
        if owner == name or not isinstance(message, (AIMessage, ToolMessage))
    ]
    messages: list[Message] = [sample.user_input[index] for index in positions]
    spec = sample.agent(name)
    allowed = allowed_tools(spec) if spec is not None else None
    reference = spec.reference_tool_calls if spec is not None else None
    if reference is None and allowed is not None and sample.reference_tool_calls is not None:
        matcher = _matcher(allowed)
        reference = [c for c in sample.reference_tool_calls if matcher.fullmatch(c.name)]
    metadata = sample.metadata
    if allowed is not None:
        metadata = {**(metadata or {}), "allowed_tools": allowed}
    handoffs = sample.reference_handoffs
    if handoffs is not None:
        handoffs = [h for h in handoffs if h.source in (None, name)]
    share = MultiTurnSample.model_construct(
        user_input=messages,
        reference=sample.reference,
        reference_tool_calls=reference,
        reference_topics=sample.reference_topics,
        rubrics=sample.rubrics,
        metadata=metadata,
        agents=sample.agents,
        reference_handoffs=handoffs,
    )
    return share, positions


_INDEX_IN_TEXT = re.compile(r"user_input\[(\d+)\]")


def _renumbered(value: Any, positions: list[int], key: str = "") -> Any:
    """``value`` (a reason or details) with a share's message indices as the whole sample's.

    ``user_input[k]`` in texts, and the numbers under keys naming message indices
    (``message_index``, ``message_indices``, ``repeats_message_index``).
    """

    def whole(index: int) -> int:
        return positions[index] if 0 <= index < len(positions) else index

    if isinstance(value, str):
        return _INDEX_IN_TEXT.sub(lambda m: f"user_input[{whole(int(m.group(1)))}]", value)
    if isinstance(value, dict):
        return {k: _renumbered(v, positions, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [_renumbered(item, positions, key) for item in value]
    if "message_ind" in key and isinstance(value, int) and not isinstance(value, bool):
        return whole(value)
    return value


@dataclass(slots=True)
class _ByAgent(Outcome):
    """The mean of each agent's value; each agent's reason and details kept."""

    value: float
    scored: dict[str, tuple[float, str, dict[str, Any]]]
    skipped: dict[str, str] = field(default_factory=dict)

    def explain(self, details: bool = True) -> tuple[str, dict[str, Any]]:
        parts = [f"{name}: {reason}" for name, (_, reason, _) in self.scored.items()]
        parts += [f"{name}: not scored ({why})" for name, why in self.skipped.items()]
        reason = f"mean over {len(self.scored)} agent(s) = {self.value:.3f}; " + "; ".join(parts)
        evidence: dict[str, Any] = {
            "by_agent": {name: value for name, (value, _, _) in self.scored.items()}
        }
        if self.skipped:
            evidence["not_scored"] = dict(self.skipped)
        if details:
            evidence["agents"] = {
                name: {"value": value, "reason": why, "details": more}
                for name, (value, why, more) in self.scored.items()
            }
        return reason, evidence


class PerAgentMetric(MultiTurnMetric, ABC):
    """A rule-based conversation metric that can be scored per agent (``by_agent=True``).

    With ``by_agent``, each agent of the sample (:meth:`MultiTurnSample.agent_names`: those
    declared, then those the AI messages name) is scored on its share of the conversation
    (:func:`agent_sample`) by the metric as it is (the message indices in its reasons and
    details are those of the whole conversation); the value is the mean of the agents'
    values, ``details["by_agent"]`` holds each agent's value (kept even without details, so
    the summary, the report and the viewer break the metric down by agent) and
    ``details["agents"]`` each agent's reason and details. An agent that cannot be scored (no
    reference calls of its own, say) is listed in ``details["not_scored"]`` with why, and left
    out of the mean; when no agent can be scored the first agent's error is raised. A sample
    that names no agent is scored whole, as without ``by_agent``.

    Attributes:
        by_agent: Score each agent on its own share of the conversation.
    """

    by_agent: bool = False

    @property
    def keeps_results(self) -> bool:
        """True with ``by_agent``: the summary's per-agent figures are read from the results."""
        return self.by_agent or super().keeps_results

    async def _value(self, sample: MultiTurnSample, timeout: float | None) -> float:
        if not self.by_agent:
            return await super()._value(sample, timeout)
        self._check_type(sample)
        if timeout is None:
            return (await self._per_agent(sample)).value
        with anyio.fail_after(timeout):
            return (await self._per_agent(sample)).value

    async def ascore(self, sample: MultiTurnSample, *, details: bool = True) -> MetricResult:
        """Score ``sample`` (each agent on its own share, with ``by_agent``).

        Raises:
            InvalidSampleError: ``sample`` is not a conversation, lacks a field the metric
                needs, or (with ``by_agent``) no agent of it can be scored.
        """
        if not self.by_agent:
            return await super().ascore(sample, details=details)
        self._check_type(sample)
        outcome = await self._per_agent(sample)
        reason, evidence = outcome.explain(details)
        return MetricResult(self.name, float(outcome.value), reason, evidence)

    async def _per_agent(self, sample: MultiTurnSample) -> Outcome:
        names = sample.agent_names()
        if not names:
            return await self._evaluate(sample)
        scored: dict[str, tuple[float, str, dict[str, Any]]] = {}
        skipped: dict[str, str] = {}
        first: InvalidSampleError | None = None
        for name in names:
            share, positions = _share(sample, name)
            try:
                outcome = await self._evaluate(share)
            except InvalidSampleError as error:
                skipped[name] = _renumbered(str(error), positions)
                first = first or error
                continue
            reason, evidence = outcome.explain(True)
            scored[name] = (
                float(outcome.value),
                _renumbered(reason, positions),
                _renumbered(evidence, positions),
            )
        if not scored:
            assert first is not None
            raise InvalidSampleError(
                f"metric {self.name!r} with by_agent=True could score no agent: "
                + "; ".join(f"{name}: {why}" for name, why in skipped.items())
                + " (give each agent its own reference calls in agents[i].reference_tool_calls, "
                "or its tools in agents[i].tools to take its share of the sample's)",
                field=first.field,
            )
        value = statistics.fmean(value for value, _, _ in scored.values())
        return _ByAgent(value, scored, skipped)


# -- HandoffAccuracy ---------------------------------------------------------------------------


@dataclass(slots=True)
class _HandoffOutcome(Outcome):
    value: float
    strict_order: bool
    predicted: list[HandoffAt]
    reference: list[Handoff]
    pairs: list[Pair]

    def explain(self, details: bool = True) -> tuple[str, dict[str, Any]]:
        n_pred, n_ref, matched = len(self.predicted), len(self.reference), len(self.pairs)
        if not n_pred and not n_ref:
            reason = "no handoff made and none expected: 1.0"
        elif not n_pred:
            reason = f"no handoff made, {n_ref} expected: 0.0"
        elif not n_ref:
            reason = f"{n_pred} handoff(s) made, none expected: 0.0"
        else:
            how = "in order" if self.strict_order else "as a set"
            precision, recall = matched / n_pred, matched / n_ref
            reason = (
                f"handoffs matched {how}: {ratio('precision', matched, n_pred, precision)}, "
                f"{ratio('recall', matched, n_ref, recall)}, F1={self.value:.3f}"
            )
        if not details:
            return reason, {}
        matched_pred = {p for p, _ in self.pairs}
        matched_ref = {r for _, r in self.pairs}
        evidence = {
            "strict_order": self.strict_order,
            "predicted": [
                {
                    "handoff": found.handoff.pretty_repr(),
                    "message_index": found.message_index,
                    "explicit": found.explicit,
                }
                for found in self.predicted
            ],
            "reference": [handoff.pretty_repr() for handoff in self.reference],
            "matched": [
                {"predicted_index": p, "reference_index": r} for p, r in sorted(self.pairs)
            ],
            "unmatched_predicted": [i for i in range(n_pred) if i not in matched_pred],
            "unmatched_reference": [i for i in range(n_ref) if i not in matched_ref],
        }
        return reason, evidence


def _in_order_pairs(comparison: CallComparison) -> list[Pair]:
    """A longest common subsequence of the two lists under the comparison's relation."""
    n, m = len(comparison.predicted), len(comparison.reference)
    table = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            if comparison.equal(i, j):
                table[i][j] = table[i + 1][j + 1] + 1
            else:
                table[i][j] = max(table[i + 1][j], table[i][j + 1])
    pairs: list[Pair] = []
    i = j = 0
    while i < n and j < m:
        if comparison.equal(i, j) and table[i][j] == table[i + 1][j + 1] + 1:
            pairs.append((i, j))
            i, j = i + 1, j + 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs


class HandoffAccuracy(ArgComparing, MultiTurnMetric):
    """F1 of the handoffs made against the reference handoffs, in order or as a set.

    The handoffs made are those of :attr:`MultiTurnSample.handoffs
    <turneval.MultiTurnSample.handoffs>` (handoff tool calls, and changes of speaker no call
    announced); the reference is ``reference_handoffs``. A made handoff matches a reference
    one when the targets are equal, the sources are equal (a reference without ``source``
    accepts any), and the arguments match as tool-call arguments do in
    :class:`~turneval.metrics.ToolCallF1`: equal as JSON values by default, else scored by
    ``arg_comparison_metric`` or ``arg_rules`` (keyed by the target agent's name) up to
    ``match_threshold``. With ``strict_order`` the matched handoffs are a longest common
    subsequence of the two lists (order kept), else a maximum one-to-one matching;
    precision = matched/|made|, recall = matched/|reference|, F1 = 2PR/(P+R). Both empty:
    1.0; exactly one empty: 0.0.

    Attributes:
        strict_order: Match in order (True) or as a set.
        arg_comparison_metric: As in ToolCallF1: None for JSON-value equality of arguments.
        match_threshold: The arguments score a pair needs to match.
        arg_rules: Per-argument rules ``{"target_agent": {"arg": rule}}``
            (:mod:`turneval.metrics.arg_rules`).
    """

    name: str = "handoff_accuracy"
    strict_order: bool = True

    async def _score(self, made: Handoff, expected: Handoff) -> float:
        if made.target != expected.target:
            return -1.0
        if expected.source is not None and made.source != expected.source:
            return -1.0
        book, comparator = self._rule_book, self._comparator
        if book is not None:
            return await book.union_score(expected.target, expected.args, made.args, comparator)
        if comparator is not None:
            return await args_score(comparator, expected.args, made.args)
        return 1.0 if json_key(made.args) == json_key(expected.args) else 0.0

    async def _evaluate(self, sample: MultiTurnSample) -> Outcome:
        reference = sample.reference_handoffs
        if reference is None:
            raise missing_field(self, "reference_handoffs")
        predicted = sample.handoffs
        scores: dict[Pair, float] = {}
        for i, found in enumerate(predicted):
            for j, expected in enumerate(reference):
                score = await self._score(found.handoff, expected)
                if score >= 0.0:
                    scores[i, j] = score
        comparison = CallComparison(
            [ToolCall(name=found.handoff.target) for found in predicted],
            [ToolCall(name=handoff.target) for handoff in reference],
            scores=scores,
            threshold=self.match_threshold,
        )
        pairs = _in_order_pairs(comparison) if self.strict_order else comparison.maximum_matching()
        value = F1.value(len(predicted), len(reference), len(pairs))
        return _HandoffOutcome(value, self.strict_order, predicted, list(reference), pairs)

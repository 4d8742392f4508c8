"""Scenarios distilled from real conversations: stored runs, trace files, ``turneval watch``.

Each conversation becomes one request, and one scenario: the user's goal, their persona, the
facts they knew and gave, their opening message and what a correct agent achieves. Personal
data never reaches the generator: the conversation is shown through a
:class:`~turneval.scenarios.pii.Scrubber` (emails, phones, cards, the names you give), and
the scenario's texts go through the same scrubber again (same stand-ins). The tools the
conversation called are recorded as the tools the scenario exercises.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from os import PathLike
from typing import Any

from turneval.errors import ConfigError
from turneval.judge import JudgeRequest, render_conversation
from turneval.messages import AIMessage
from turneval.samples import MultiTurnSample
from turneval.scenarios._drafts import draft_fields, draft_model, named_model
from turneval.scenarios._sources import (
    GENERATOR_SYSTEM,
    Ask,
    ScenarioSource,
    Slot,
    generated_record,
)
from turneval.scenarios.pii import Scrubber
from turneval.simulation import Scenario

__all__ = [
    "ConversationsSource",
    "from_conversations",
    "from_stored_run",
    "from_traces",
    "scrubbed_fields",
    "tools_called",
]

_INSTRUCTIONS = (
    "The conversation above was recorded between a real user and the agent (personal data was "
    "replaced by stand-ins: keep them as they are). Distill it into one test scenario: the "
    "user's goal (what they wanted, whether or not they got it), who they are and how they "
    "write, the facts they gave or knew, their opening message, and what a correct agent "
    "achieves (which may differ from what this agent did)."
)


def tools_called(sample: MultiTurnSample) -> list[str]:
    """The tools a conversation's AI messages called, each once, in order."""
    names = [
        call.name
        for message in sample.user_input
        if isinstance(message, AIMessage)
        for call in message.tool_calls or []
    ]
    return list(dict.fromkeys(names))


def scrubbed_fields(fields: Mapping[str, Any], scrub: Scrubber) -> dict[str, Any]:
    """Scenario fields with every text (facts included) through ``scrub``."""
    cleaned: dict[str, Any] = dict(fields)
    for name in ("goal", "persona", "first_message", "reference"):
        if isinstance(cleaned.get(name), str):
            cleaned[name] = scrub(cleaned[name])
    cleaned["user_facts"] = {
        scrub(str(key)): scrub(str(value)) for key, value in dict(fields["user_facts"]).items()
    }
    return cleaned


class ConversationsSource(ScenarioSource):
    """One scenario per conversation, distilled, personal data replaced.

    Args:
        conversations: :class:`~turneval.MultiTurnSample` objects (a dataset, a list). A
            sample a trace could not be converted into (``metadata["conversion_error"]``) is
            skipped with its reason, and so is anything that is not a conversation.
        names: People's names to replace (besides those a conversation introduces).
        label: What :attr:`Coverage.sources` counts these scenarios under.
    """

    name = "conversations"

    def __init__(
        self,
        conversations: Iterable[Any],
        *,
        names: Sequence[str] = (),
        label: str = "conversations",
    ) -> None:
        """Keep the conversations (nothing is sent yet)."""
        super().__init__()
        self.name = label
        self.names = list(names)
        self.conversations: list[tuple[int, MultiTurnSample]] = []
        for index, sample in enumerate(conversations):
            if not isinstance(sample, MultiTurnSample):
                self.skipped.append(f"input {index}: not a conversation ({type(sample).__name__})")
                continue
            problem = (sample.metadata or {}).get("conversion_error")
            if problem:
                self.skipped.append(f"input {index}: {problem}")
                continue
            self.conversations.append((index, sample))
        self._tools = sorted({t for _, s in self.conversations for t in tools_called(s)})

    def tool_names(self) -> list[str]:
        """Every tool the conversations called."""
        return list(self._tools)

    def plan(self, *, n: int | None, seed: int, batch_size: int) -> list[Ask]:
        """One request per conversation (``n`` of them, chosen by ``seed``, in input order)."""
        chosen = self.conversations
        if n is not None:
            if n < 1:
                raise ConfigError(f"n must be at least 1, got {n}")
            if n < len(chosen):
                picked = sorted(random.Random(seed).sample(range(len(chosen)), n))
                chosen = [chosen[i] for i in picked]
        if not chosen:
            raise ConfigError(
                "no conversation to distill"
                + (f" (skipped: {'; '.join(self.skipped[:3])})" if self.skipped else "")
            )
        schema = named_model("Distilled", {"scenario": draft_model("DistilledDraft")})
        asks = []
        for index, sample in chosen:
            scrub = Scrubber(self.names)
            shown = scrub(render_conversation(sample))
            ident = (sample.metadata or {}).get("id")
            origin: dict[str, Any] = {"conversation": index}
            if ident is not None:
                origin["id"] = scrub(str(ident))
            request = JudgeRequest(
                prompt=f"{shown}\n\n{_INSTRUCTIONS}",
                schema=schema,
                system=GENERATOR_SYSTEM,
                label=f"conversation {index}",
            )
            slot = Slot("scenario", "distilled", origin=origin)
            context = {"scrub": scrub, "tools": tools_called(sample)}
            asks.append(Ask(request.label, request, (slot,), context))
        return asks

    def build(self, ask: Ask, answer: Mapping[str, Any]) -> list[Scenario]:
        """The conversation's scenario, its texts scrubbed with the conversation's stand-ins."""
        draft = answer["scenario"]
        scrub: Scrubber = ask.context["scrub"]
        fields = scrubbed_fields(draft_fields(draft), scrub)
        record = generated_record(self.name, ask.slots[0], draft, ask.context["tools"])
        record["personal_data_replaced"] = dict(scrub.counts)
        return [Scenario(**fields, metadata={"generated": record})]


def from_conversations(
    conversations: Iterable[Any], *, names: Sequence[str] = ()
) -> ConversationsSource:
    """Scenarios distilled from conversations (see :class:`ConversationsSource`)."""
    return ConversationsSource(conversations, names=names)


def from_traces(
    traces: str | PathLike[str] | Iterable[Any],
    *,
    group_by: str = "trace",
    names: Sequence[str] = (),
) -> ConversationsSource:
    """Scenarios distilled from traced conversations: an OTLP/JSON file or SDK spans.

    The conversations are rebuilt as :mod:`turneval.traces` rebuilds them (``group_by``:
    one per trace, or per session); traces that are no conversation are counted in
    ``skipped``. Needs the ``otel`` extra.
    """
    from turneval.traces import from_otel_spans, from_otlp_json

    if group_by not in ("trace", "session"):
        raise ConfigError(f"group_by must be 'trace' or 'session', got {group_by!r}")
    grouping: Any = group_by
    if isinstance(traces, (str, PathLike)):
        dataset = from_otlp_json(traces, group_by=grouping)
    else:
        dataset = from_otel_spans(traces, group_by=grouping)
    source = ConversationsSource(dataset, names=names, label="traces")
    skipped = getattr(dataset, "skipped_traces", None) or {}
    source.skipped += [f"{count} trace(s) skipped: {why}" for why, count in skipped.items()]
    return source


def from_stored_run(store: Any, run: str, *, names: Sequence[str] = ()) -> ConversationsSource:
    """Scenarios distilled from a stored run's conversations (``turneval watch`` keeps them).

    Args:
        store: A :class:`~turneval.store.RunStore` (or its URL or path).
        run: The run's id (or a unique prefix).
        names: People's names to replace.
    """
    from turneval.store import RunStore

    opened = RunStore.coerce(store)
    if opened is None:
        raise ConfigError("from_stored_run needs a run store")
    stored = opened.run(run)
    found = opened.samples(stored.id, range(stored.rows))
    samples: list[Any] = []
    for index in range(stored.rows):
        data = found.get(index)
        try:
            samples.append(MultiTurnSample.model_validate(data))
        except Exception:
            samples.append(data)
    source = ConversationsSource(samples, names=names, label="store")
    return source

"""Variants of existing scenarios: paraphrased, another persona, one more constraint.

One request per scenario asks for one variant per kind, each a property of its own. A
paraphrase or a persona swap keeps what the scenario expects (its references, facts and
world); an added constraint changes the goal, so its expected outcome is the variant's own
and, on a world, its reference actions are generated and replayed like any.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from typing import Any

from turneval.errors import ConfigError
from turneval.judge import JudgeRequest, tagged
from turneval.scenarios._drafts import (
    action_model,
    calls_of,
    draft_fields,
    draft_model,
    named_model,
)
from turneval.scenarios._files import scenario_record
from turneval.scenarios._sources import (
    GENERATOR_SYSTEM,
    Ask,
    ScenarioSource,
    Slot,
    generated_record,
    state_text,
)
from turneval.scenarios._tools import read_tools, tools_text
from turneval.simulation import Scenario
from turneval.worlds import ToolWorld

__all__ = [
    "PERTURBATIONS",
    "PerturbSource",
    "kept_fields",
    "perturb",
    "scenario_brief",
    "world_material",
]

PERTURBATIONS = {
    "paraphrase": "the same goal and facts in other words (another opening message too)",
    "persona_swap": "the same goal and facts, another kind of user (persona, voice, opening)",
    "added_constraint": "the same situation with one more constraint on what the user wants "
    "(a limit, a deadline, a condition); its expected outcome says what a correct agent "
    "achieves under it",
}
"""The kinds of variant :func:`perturb` asks for, and what each is."""


def scenario_brief(scenario: Scenario) -> str:
    """What the generator is shown of a scenario: its record, without the generation record."""
    record = scenario_record(scenario)
    metadata = dict(record.get("metadata") or {})
    metadata.pop("generated", None)
    record.pop("metadata", None)
    if metadata:
        record["metadata"] = metadata
    return json.dumps(record, ensure_ascii=False, sort_keys=True, default=str)


def world_material(world: ToolWorld) -> str:
    """A world's tools and state, tagged, as the generator sees them."""
    return (
        tagged("tools", tools_text(read_tools(world)))
        + "\n"
        + tagged("world_state", state_text(world))
    )


def kept_fields(original: Scenario) -> dict[str, Any]:
    """The fields a variant that keeps the goal takes from its original (references, state)."""
    return {
        "goal": original.goal,
        "persona": original.persona,
        "user_facts": dict(original.user_facts),
        "first_message": original.first_message,
        "max_turns": original.max_turns,
        "reference": original.reference,
        "reference_tool_calls": original.reference_tool_calls,
        "reference_topics": original.reference_topics,
        "rubrics": original.rubrics,
        "world": original.world,
        "initial_state": original.initial_state,
    }


def _own_metadata(original: Scenario) -> dict[str, Any]:
    metadata = dict(original.metadata or {})
    metadata.pop("generated", None)
    return metadata


class PerturbSource(ScenarioSource):
    """Variants of existing scenarios, one per kind (see :data:`PERTURBATIONS`).

    Args:
        scenarios: The scenarios to vary.
        kinds: The variants wanted, each at most once per scenario.
        world: The world added constraints' reference actions are replayed on (default: the
            scenarios' own world, when they have one).
    """

    name = "perturbation"

    def __init__(
        self,
        scenarios: Sequence[Scenario],
        *,
        kinds: Sequence[str] = tuple(PERTURBATIONS),
        world: ToolWorld | None = None,
    ) -> None:
        """Check the kinds and the scenarios now."""
        super().__init__()
        unknown = [kind for kind in kinds if kind not in PERTURBATIONS]
        if unknown or not kinds or len(set(kinds)) < len(kinds):
            raise ConfigError(
                f"kinds must be distinct names among {list(PERTURBATIONS)}, got {list(kinds)}"
            )
        self.kinds = list(kinds)
        given: list[Any] = list(scenarios)
        self.scenarios = Scenario.from_list(given) if given else []
        if not self.scenarios:
            raise ConfigError("perturb needs at least one scenario")
        self.world = world or next((s.world for s in self.scenarios if s.world), None)
        self._action: Any = None
        self._as_text: dict[str, set[str]] = {}
        if self.world is not None:
            self._action, self._as_text = action_model(self.world)

    def tool_names(self) -> list[str]:
        """The world's tools (else those the scenarios' reference calls name)."""
        if self.world is not None:
            return sorted(self.world.tools)
        return sorted({c.name for s in self.scenarios for c in s.reference_tool_calls or []})

    def _drafts(self, kinds: Sequence[str]) -> Any:
        return named_model(
            "Variants_" + "_".join(kinds),
            {
                kind: draft_model(
                    f"{kind}_draft",
                    actions=self._action if kind == "added_constraint" else None,
                )
                for kind in kinds
            },
        )

    def plan(self, *, n: int | None, seed: int, batch_size: int) -> list[Ask]:
        """One request per scenario (in a seeded order when ``n`` leaves some out)."""
        order = list(range(len(self.scenarios)))
        total = len(order) * len(self.kinds)
        if n is not None:
            if n < 1:
                raise ConfigError(f"n must be at least 1, got {n}")
            random.Random(seed).shuffle(order)
            total = min(total, n)
        asks = []
        for index in order:
            if total <= 0:
                break
            kinds = self.kinds[: min(len(self.kinds), total)]
            total -= len(kinds)
            original = self.scenarios[index]
            wanted = "\n".join(f"- {kind}: {PERTURBATIONS[kind]}." for kind in kinds)
            material = world_material(self.world) + "\n" if self.world is not None else ""
            extra = (
                " For added_constraint, list the reference actions a correct agent makes; "
                "they are replayed on the world state shown and must all succeed."
                if self.world is not None and "added_constraint" in kinds
                else ""
            )
            request = JudgeRequest(
                prompt=f"{material}{tagged('scenario', scenario_brief(original))}\n\nWrite "
                f"variants of this test scenario, one per entry of the answer:\n{wanted}\n"
                f"Keep what each kind says to keep.{extra} (Variation seed {seed}.)",
                schema=self._drafts(kinds),
                system=GENERATOR_SYSTEM,
                label=f"scenario {original.id or index}",
            )
            origin = {"scenario": original.id if original.id is not None else str(index)}
            slots = tuple(Slot(kind, kind, origin=origin) for kind in kinds)
            asks.append(Ask(request.label, request, slots, {"original": index}))
        return asks

    def build(self, ask: Ask, answer: Mapping[str, Any]) -> list[Scenario]:
        """One variant per kind asked."""
        original = self.scenarios[int(ask.context["original"])]
        made = []
        for slot in ask.slots:
            draft = answer[slot.key]
            fields = kept_fields(original)
            drafted = draft_fields(draft)
            if slot.kind == "paraphrase":
                fields.update(goal=drafted["goal"], first_message=drafted["first_message"])
            elif slot.kind == "persona_swap":
                fields.update(
                    persona=drafted["persona"],
                    first_message=drafted["first_message"],
                    max_turns=drafted["max_turns"],
                )
            else:
                fields.update(drafted, reference_tool_calls=None, rubrics=None)
                if self.world is not None:
                    fields.update(
                        reference_tool_calls=calls_of(draft.get("actions") or [], self._as_text),
                        world=self.world,
                    )
            calls = fields["reference_tool_calls"] or []
            record = generated_record(self.name, slot, draft, [c.name for c in calls])
            if self.world is not None and fields["reference_tool_calls"] is not None:
                record.update(world=self.world.name, replay=True)
            made.append(
                Scenario(**fields, metadata={**_own_metadata(original), "generated": record})
            )
        return made


def perturb(
    scenarios: Sequence[Scenario],
    *,
    kinds: Sequence[str] = tuple(PERTURBATIONS),
    world: ToolWorld | None = None,
) -> PerturbSource:
    """Variants of existing scenarios (see :class:`PerturbSource`)."""
    return PerturbSource(scenarios, kinds=kinds, world=world)

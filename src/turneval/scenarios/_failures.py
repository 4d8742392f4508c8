"""Near misses of what just failed: a run's failed rows, grouped, become harder variants.

A row failed when the agent failed, a metric failed on it, or a metric scored below its bar
(the run's success thresholds, else 1.0, unless ``thresholds`` says otherwise). Failed rows
are grouped by what went wrong (their reasons with numbers masked, compared with rapidfuzz),
or by clusters you give (``clusters=``, e.g. ``turneval clusters``' groups); each group gives
one request for near-miss variants of its first row:

* ``harder_persona``: the same goal, a harder user (same references and world);
* ``changed_constraint``: one constraint changed (on a world, with reference actions that
  are replayed like any);
* ``tool_fault``: the same goal while one tool the conversation used fails throughout
  (``metadata["generated"]["fault"]``; :func:`~turneval.scenarios.load` gives such a
  scenario a world whose tool fails on every call). It has no reference end state: grade it
  by its expected outcome (a judge), not by ``EndStateMatch``.

Personal data in the conversations is replaced before the generator sees it, as in
:func:`~turneval.scenarios.from_conversations`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from rapidfuzz import fuzz

from turneval.errors import ConfigError
from turneval.judge import JudgeRequest, render_conversation, tagged
from turneval.results import EvaluationResult, SampleResult
from turneval.samples import MultiTurnSample
from turneval.scenarios._distill import scrubbed_fields, tools_called
from turneval.scenarios._drafts import (
    action_model,
    calls_of,
    draft_fields,
    draft_model,
    named_model,
)
from turneval.scenarios._files import faulty_world
from turneval.scenarios._perturbations import kept_fields, scenario_brief, world_material
from turneval.scenarios._sources import (
    GENERATOR_SYSTEM,
    Ask,
    ScenarioSource,
    Slot,
    generated_record,
)
from turneval.scenarios.pii import Scrubber
from turneval.simulation import Scenario
from turneval.worlds import ToolWorld

__all__ = [
    "FailuresSource",
    "NEAR_MISSES",
    "failed_reasons",
    "from_failures",
    "group_failures",
]

NEAR_MISSES = {
    "harder_persona": "the same goal, a harder user (vaguer, more impatient, or giving facts "
    "only when asked)",
    "changed_constraint": "the same situation with one constraint changed (another amount, "
    "item, deadline or condition)",
    "tool_fault": "the same goal while the tool named in fault_tool fails throughout; the "
    "expected outcome says how a correct agent handles that",
}
"""The near-miss variants :func:`from_failures` asks for, and what each is."""


def failed_reasons(row: SampleResult, thresholds: Mapping[str, float], default: float) -> list[str]:
    """Why a row failed, one line per cause (empty when it did not fail)."""
    reasons = []
    if row.agent is not None and row.agent.failed:
        reasons.append(f"the agent failed: {row.agent.error}")
    for name, failure in row.failures.items():
        reasons.append(f"{name} failed: {failure.error_type}: {failure.message}")
    for name, result in row.results.items():
        bar = thresholds.get(name, default)
        if result.value < bar:
            reason = f": {result.reason}" if result.reason else ""
            reasons.append(f"{name} = {result.value:.3g} < {bar:g}{reason}")
    return reasons


def _signature(reasons: Sequence[str]) -> str:
    """The reasons with numbers masked: rows failing the same way look alike."""
    return " | ".join(sorted(re.sub(r"\d+(?:\.\d+)?", "#", r) for r in reasons))


def group_failures(signatures: Sequence[str], threshold: float) -> list[list[int]]:
    """Groups of positions whose signatures are alike (the first of a group leads it).

    Each signature joins the first group whose leader's ``token_set_ratio`` with it reaches
    ``threshold`` (0-1), else starts a group; groups come largest first.
    """
    groups: list[list[int]] = []
    for position, signature in enumerate(signatures):
        for group in groups:
            if fuzz.token_set_ratio(signatures[group[0]], signature) >= threshold * 100:
                group.append(position)
                break
        else:
            groups.append([position])
    return sorted(groups, key=len, reverse=True)


class FailuresSource(ScenarioSource):
    """Near-miss variants of a run's failed rows (see the module docs).

    Args:
        result: The run: an :class:`~turneval.results.EvaluationResult` (in memory, from
            ``EvalTask`` or ``evaluate``, or read back with ``RunStore.result``).
        thresholds: The bar a metric's value must reach (one for all, or per metric); default:
            the run's success thresholds, else 1.0.
        scenarios: The scenarios that were played, if any: a failed row's scenario (by
            ``scenario_id``) is shown to the generator and its goal and references kept.
        world: The world the run played on: changed constraints get reference actions
            replayed on it, and faults name its tools.
        kinds: The variants wanted (see :data:`NEAR_MISSES`).
        names: People's names to replace in the conversations.
        samples: The rows' samples by row index, for rows read back without them.
        clusters: Groups of row indexes to use instead of grouping by reasons (e.g. the
            rows of each cluster ``turneval clusters`` finds).
        cluster_threshold: How alike (0-1) two rows' reasons must be to share a group.
    """

    name = "failures"

    def __init__(
        self,
        result: EvaluationResult,
        *,
        thresholds: float | Mapping[str, float] | None = None,
        scenarios: Sequence[Scenario] = (),
        world: ToolWorld | None = None,
        kinds: Sequence[str] = tuple(NEAR_MISSES),
        names: Sequence[str] = (),
        samples: Mapping[int, Any] | None = None,
        clusters: Sequence[Sequence[int]] | None = None,
        cluster_threshold: float = 0.8,
    ) -> None:
        """Find the failed rows and group them (nothing is sent yet)."""
        super().__init__()
        if not isinstance(result, EvaluationResult):
            raise ConfigError(
                f"from_failures needs an EvaluationResult, got {type(result).__name__}"
            )
        if not kinds or any(k not in NEAR_MISSES for k in kinds) or len(set(kinds)) < len(kinds):
            raise ConfigError(
                f"kinds must be distinct names among {list(NEAR_MISSES)}, got {list(kinds)}"
            )
        self.kinds, self.names, self.world = list(kinds), list(names), world
        self.by_id = {str(s.id): s for s in scenarios if s.id is not None}
        bars = dict(result.success_thresholds)
        default = 1.0
        if isinstance(thresholds, (int, float)):
            default, bars = float(thresholds), {}
        elif thresholds is not None:
            bars.update(thresholds)
        self.failed: dict[int, tuple[MultiTurnSample, list[str], SampleResult]] = {}
        for row in result.rows:
            reasons = failed_reasons(row, bars, default)
            if not reasons:
                continue
            sample = row.sample if row.sample is not None else (samples or {}).get(row.index)
            if isinstance(sample, Mapping):
                try:
                    sample = MultiTurnSample.model_validate(sample)
                except ValueError as exc:  # pydantic's ValidationError: one row, its reason
                    problem = " ".join(str(exc).split())[:200]
                    self.skipped.append(
                        f"row {row.index}: its conversation is not valid: {problem}"
                    )
                    continue
            if not isinstance(sample, MultiTurnSample):
                self.skipped.append(f"row {row.index}: failed, but no conversation is kept for it")
                continue
            self.failed[row.index] = (sample, reasons, row)
        if clusters is not None:
            groups = [[i for i in group if i in self.failed] for group in clusters]
            self.groups = [group for group in groups if group]
        else:
            indexes = list(self.failed)
            signatures = [_signature(self.failed[i][1]) for i in indexes]
            self.groups = [
                [indexes[p] for p in group]
                for group in group_failures(signatures, cluster_threshold)
            ]
        self._action: Any = None
        self._as_text: dict[str, set[str]] = {}
        if world is not None:
            self._action, self._as_text = action_model(world)

    def tool_names(self) -> list[str]:
        """The world's tools, else those the failed conversations called."""
        if self.world is not None:
            return sorted(self.world.tools)
        return sorted({t for sample, _, _ in self.failed.values() for t in tools_called(sample)})

    def _origin(self, row: SampleResult, sample: MultiTurnSample) -> Scenario | None:
        scenario_id = row.trial.scenario_id if row.trial is not None else None
        scenario_id = scenario_id or (sample.metadata or {}).get("scenario_id")
        return self.by_id.get(str(scenario_id)) if scenario_id is not None else None

    def plan(self, *, n: int | None, seed: int, batch_size: int) -> list[Ask]:
        """One request per group of failed rows, largest group first (``n`` caps the variants)."""
        if not self.groups:
            raise ConfigError(
                "the run has no failed row to grow near misses from"
                + (f" ({'; '.join(self.skipped[:3])})" if self.skipped else "")
            )
        budget = n if n is not None else len(self.groups) * len(self.kinds)
        if budget < 1:
            raise ConfigError(f"n must be at least 1, got {n}")
        asks = []
        for group in self.groups:
            if budget <= 0:
                break
            index = group[0]
            sample, reasons, row = self.failed[index]
            origin = self._origin(row, sample)
            fault_tools = sorted(self.world.tools) if self.world else tools_called(sample)
            kinds = [k for k in self.kinds if k != "tool_fault" or fault_tools][:budget]
            if not kinds:
                continue
            budget -= len(kinds)
            scrub = Scrubber(self.names)
            drafts = {
                kind: draft_model(
                    f"{kind}_draft",
                    actions=self._action if kind == "changed_constraint" else None,
                    fault_tools=fault_tools if kind == "tool_fault" else None,
                )
                for kind in kinds
            }
            material = world_material(self.world) + "\n" if self.world is not None else ""
            if origin is not None:
                material += tagged("scenario", scrub(scenario_brief(origin))) + "\n"
            shown = "\n".join(f"- {scrub(reason)}" for reason in dict.fromkeys(reasons))
            wanted = "\n".join(f"- {kind}: {NEAR_MISSES[kind]}." for kind in kinds)
            actions = (
                " For changed_constraint, list the reference actions a correct agent makes; "
                "they are replayed on the world state shown and must all succeed."
                if self.world is not None and "changed_constraint" in kinds
                else ""
            )
            prompt = (
                f"{material}{scrub(render_conversation(sample))}\n"
                f"{tagged('failure', shown)}\n\nThis conversation failed, as {len(group)} of "
                "the run did in a similar way (personal data was replaced by stand-ins: keep "
                "them). Write near-miss test scenarios that probe the same weakness, one per "
                f"entry of the answer:\n{wanted}{actions} (Variation seed {seed}.)"
            )
            request = JudgeRequest(
                prompt=prompt,
                schema=named_model("NearMisses_" + "_".join(kinds), drafts),
                system=GENERATOR_SYSTEM,
                label=f"failed row {index}",
            )
            where: dict[str, Any] = {"row": index, "failed_like_it": len(group)}
            if origin is not None:
                where["scenario"] = str(origin.id)
            slots = tuple(Slot(kind, kind, origin=where) for kind in kinds)
            context = {"row": index, "scrub": scrub, "reasons": reasons}
            asks.append(Ask(request.label, request, slots, context))
        return asks

    def _start(self, origin: Scenario | None, sample: MultiTurnSample) -> dict[str, Any]:
        """What a variant that keeps the goal takes from its origin (or from the row)."""
        if origin is not None:
            return kept_fields(origin)
        return {
            "reference": sample.reference,
            "reference_tool_calls": sample.reference_tool_calls,
            "reference_topics": sample.reference_topics,
            "rubrics": sample.rubrics,
            "world": self.world,
        }

    def build(self, ask: Ask, answer: Mapping[str, Any]) -> list[Scenario]:
        """One near miss per kind asked; texts scrubbed with the row's stand-ins."""
        sample, _, row = self.failed[int(ask.context["row"])]
        origin = self._origin(row, sample)
        scrub: Scrubber = ask.context["scrub"]
        made = []
        for slot in ask.slots:
            draft = answer[slot.key]
            drafted = scrubbed_fields(draft_fields(draft), scrub)
            fields = self._start(origin, sample)
            record = generated_record(self.name, slot, draft, [])
            if slot.kind == "changed_constraint":
                fields.update(drafted, reference_tool_calls=None, rubrics=None)
                if self.world is not None:
                    fields.update(
                        reference_tool_calls=calls_of(draft.get("actions") or [], self._as_text),
                        world=self.world,
                    )
            else:  # the same goal: from the scenario played when known, else as drafted
                voice = ("persona", "first_message", "max_turns")
                own = voice if origin is not None else (*voice, "goal", "user_facts")
                fields.update({key: drafted[key] for key in own})
                fields["reference"] = fields.get("reference") or drafted["reference"]
            if slot.kind == "tool_fault":  # no end state to reach: a tool fails throughout
                fields.update(reference=drafted["reference"], reference_tool_calls=None)
                record["fault"] = {"tool": draft["fault_tool"], "kind": draft["fault_kind"]}
            fields["world"] = fields.get("world") or self.world
            if "fault" in record and fields["world"] is not None:
                fields["world"] = faulty_world(fields["world"], record["fault"])
            calls = fields.get("reference_tool_calls") or []
            record["tools"] = sorted({c.name for c in calls} | set(tools_called(sample)))
            if self.world is not None:
                record["world"] = self.world.name
                record["replay"] = fields.get("reference_tool_calls") is not None
            if fields.get("world") is None:
                fields.pop("initial_state", None)
            made.append(Scenario(**fields, metadata={"generated": record}))
        return made


def from_failures(
    result: EvaluationResult,
    *,
    thresholds: float | Mapping[str, float] | None = None,
    scenarios: Sequence[Scenario] = (),
    world: ToolWorld | None = None,
    kinds: Sequence[str] = tuple(NEAR_MISSES),
    names: Sequence[str] = (),
    samples: Mapping[int, Any] | None = None,
    clusters: Sequence[Sequence[int]] | None = None,
    cluster_threshold: float = 0.8,
) -> FailuresSource:
    """Near-miss variants of a run's failed rows (see :class:`FailuresSource`)."""
    return FailuresSource(
        result,
        thresholds=thresholds,
        scenarios=scenarios,
        world=world,
        kinds=kinds,
        names=names,
        samples=samples,
        clusters=clusters,
        cluster_threshold=cluster_threshold,
    )

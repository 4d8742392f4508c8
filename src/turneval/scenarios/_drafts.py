"""What the generator model answers: scenario drafts, in schemas that admit only usable ones.

Every answer schema follows the judge layer's rules (:mod:`turneval.judge._schema`): closed
objects, every property required, choices as enums, and **one property per generated
scenario** (``scenario_0``, ``scenario_1``, ... or one per variant kind), so a schema-following
model answers exactly the scenarios asked for, never one more or one fewer. Every answer valid
under the schema becomes a scenario: a goal has a visible character (a ``pattern``), a blank
persona, opening message or expected outcome is read as "none", and a fact with a blank name
gets one. Reference actions are typed per tool (an ``anyOf`` of one object per tool, its
arguments typed from the tool's signature), so a schema-following model can only name a real
tool with arguments of the right types; whether they *succeed* is for the world to say.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from enum import Enum
from types import NoneType, UnionType
from typing import Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel, Field, create_model

from turneval.judge import StrictVerdict, list_field
from turneval.messages import ToolCall
from turneval.worlds import ToolWorld

__all__ = [
    "DIFFICULTIES",
    "FAULT_KINDS",
    "Fact",
    "MAX_TURNS",
    "PERSONA_TYPES",
    "action_model",
    "calls_of",
    "draft_fields",
    "draft_model",
    "listed_model",
    "named_model",
]

PERSONA_TYPES = (
    "cooperative",
    "impatient",
    "vague",
    "expert",
    "non_native_speaker",
    "confused",
    "skeptical",
)
"""The kinds of user the generator is asked to cover (a draft names its kind)."""

DIFFICULTIES = ("easy", "medium", "hard")
"""A scenario's difficulty, as the generator rates it."""

MAX_TURNS = {"easy": 6, "medium": 10, "hard": 14}
"""The user turns a generated scenario allows, by difficulty (``Scenario.max_turns``)."""

FAULT_KINDS = ("error", "timeout", "rate_limit", "malformed")
"""The faults a near-miss variant may inject into one tool (:class:`~turneval.worlds.Faults`)."""

_VISIBLE: dict[str, Any] = {"pattern": r"\S"}


def _enum_of_const(schema: dict[str, Any]) -> None:
    """A one-value ``Literal`` as ``enum`` (strict structured outputs take enums everywhere)."""
    if "const" in schema:
        schema["enum"] = [schema.pop("const")]


class Fact(StrictVerdict):
    """A fact the user knows and reveals when asked (an order number, an address)."""

    name: str = Field(description="What the fact is, in a few words (e.g. order_id).")
    value: str = Field(description="Its value, as the user would say it.")


_COMMON: dict[str, tuple[Any, Any]] = {
    "goal": (
        str,
        Field(
            description="What the user wants to achieve, specific and in one or two sentences.",
            json_schema_extra=_VISIBLE,
        ),
    ),
    "persona": (
        str,
        Field(description="Who the user is and how they write, in one sentence."),
    ),
    "persona_type": (
        Literal[PERSONA_TYPES],
        Field(description="The kind of user this persona is."),
    ),
    "difficulty": (
        Literal[DIFFICULTIES],
        Field(description="How hard the scenario is for a good agent."),
    ),
    "user_facts": (
        list[Fact],
        Field(description="The facts the user knows and gives when the agent asks for them."),
    ),
    "first_message": (
        str,
        Field(
            description="The user's opening message, in their voice (empty to let the "
            "simulated user write it)."
        ),
    ),
    "reference": (
        str,
        Field(description="What a correct agent achieves or answers: the expected outcome."),
    ),
}


def _literal(values: Sequence[Any]) -> Any:
    """``Literal[values]`` built at run time (a choice among given names)."""
    return Literal[tuple(values)]


def _safe(name: str) -> str:
    """A name usable as a schema title: letters, digits and underscores."""
    return re.sub(r"\W", "_", name) or "tool"


def _argument_type(annotation: Any) -> tuple[Any, bool]:
    """A strict-schema type for an argument, and whether its value is sent as JSON text.

    Plain values, choices, lists of plain values and optional ones keep their type; anything
    else (a dict, a model, a union) is asked for as JSON text and parsed back.
    """
    if annotation in (str, int, float, bool):
        return annotation, False
    origin = get_origin(annotation)
    if origin is Literal and all(
        isinstance(v, (str, int, float, bool)) for v in get_args(annotation)
    ):
        return annotation, False
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        values = tuple(member.value for member in annotation)
        if values and all(isinstance(v, (str, int, float, bool)) for v in values):
            return Literal[values], False
    if origin in (Union, UnionType):
        members = [a for a in get_args(annotation) if a is not NoneType]
        if len(members) == 1 and len(members) < len(get_args(annotation)):
            inner, text = _argument_type(members[0])
            return (inner | None), text
    if origin is list:
        (item,) = get_args(annotation) or (Any,)
        inner, text = _argument_type(item)
        if not text and get_origin(inner) is not list:
            return list[inner], False  # type: ignore[valid-type]
    return str, True


def action_model(world: ToolWorld) -> tuple[type[BaseModel], dict[str, set[str]]]:
    """The schema of one reference action on ``world``: an ``anyOf`` of one object per tool.

    Each object is ``{"tool": <its name>, "arguments": {...}}`` with the tool's arguments
    typed from its signature, every one required (an optional one may be null: left out).
    Returns the model and, per tool, the arguments sent as JSON text.
    """
    members: list[type[BaseModel]] = []
    as_text: dict[str, set[str]] = {}
    for spec in world.tools.values():
        fields: dict[str, Any] = {}
        as_text[spec.name] = set()
        for name, info in spec.args_model.model_fields.items():
            kind, text = _argument_type(info.annotation)
            if not info.is_required() and get_origin(kind) not in (Union, UnionType):
                kind = kind | None
            note = "JSON text of the value. " if text else ""
            optional = "" if info.is_required() else "null to leave it out. "
            fields[name] = (kind, Field(description=f"{note}{optional}".strip() or name))
            if text:
                as_text[spec.name].add(name)
        arguments = create_model(f"{_safe(spec.name)}_arguments", __base__=StrictVerdict, **fields)
        members.append(
            create_model(
                f"call_{_safe(spec.name)}",
                __base__=StrictVerdict,
                __doc__=spec.description,
                tool=(
                    _literal([spec.name]),
                    Field(description="The tool called.", json_schema_extra=_enum_of_const),
                ),
                arguments=(arguments, ...),
            )
        )
    if len(members) == 1:
        return members[0], as_text
    return Union[tuple(members)], as_text  # type: ignore[return-value]  # noqa: UP007


def calls_of(
    actions: Sequence[Mapping[str, Any]], as_text: Mapping[str, set[str]]
) -> list[ToolCall]:
    """Parsed reference actions as tool calls: null arguments left out, JSON text read back.

    A JSON-text argument that is not JSON is kept as the text (the world then says whether
    the tool takes it).
    """
    calls = []
    for action in actions:
        tool = str(action["tool"])
        args: dict[str, Any] = {}
        for key, value in dict(action.get("arguments") or {}).items():
            if value is None:
                continue
            if key in as_text.get(tool, set()) and isinstance(value, str):
                try:
                    value = json.loads(value)
                except ValueError:
                    pass
            args[key] = value
        calls.append(ToolCall(name=tool, args=args))
    return calls


def draft_model(
    name: str,
    *,
    tools: Sequence[str] | None = None,
    actions: Any = None,
    fault_tools: Sequence[str] | None = None,
) -> type[BaseModel]:
    """The model of one scenario draft: the common fields, plus what the source adds.

    Args:
        name: The model's name (its schema title).
        tools: Tool names the scenario declares it needs (an enum list), when given.
        actions: An :func:`action_model`: the draft lists its reference actions.
        fault_tools: Tools one of which the draft names as failing (a near-miss variant).
    """
    fields: dict[str, Any] = dict(_COMMON)
    if tools:
        fields["tools"] = (
            list[_literal(tools)],  # type: ignore[misc]
            Field(description="The tools a good agent needs for this goal."),
        )
    if actions is not None:
        fields["actions"] = (
            list[actions],
            Field(
                description="The reference actions: the tool calls a correct agent makes, in "
                "order, each succeeding on the state shown."
            ),
        )
    if fault_tools:
        fields["fault_tool"] = (
            _literal(fault_tools),
            Field(description="The tool that fails throughout this scenario."),
        )
        fields["fault_kind"] = (
            Literal[FAULT_KINDS],
            Field(description="How it fails."),
        )
    return create_model(_safe(name), __base__=StrictVerdict, **fields)


def listed_model(name: str, draft: type[BaseModel], keys: Sequence[str]) -> type[BaseModel]:
    """An answer of drafts, one property per key (``scenario_0``, ...): exactly that many."""
    return create_model(
        _safe(name),
        __base__=StrictVerdict,
        scenarios=list_field(
            draft, description="One scenario per entry, each as its brief asks.", keys=list(keys)
        ),
    )


def named_model(name: str, drafts: Mapping[str, type[BaseModel]]) -> type[BaseModel]:
    """An answer of one draft per variant kind, each a property of its own (maybe its own shape)."""
    fields: dict[str, Any] = {kind: (model, ...) for kind, model in drafts.items()}
    model: type[BaseModel] = create_model(_safe(name), __base__=StrictVerdict, **fields)
    return model


def _blank(text: Any) -> str | None:
    return text.strip() if isinstance(text, str) and text.strip() else None


def _facts(facts: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Facts as ``user_facts``: blank names named, repeated names numbered, in order."""
    known: dict[str, str] = {}
    for number, fact in enumerate(facts, start=1):
        name = _blank(fact.get("name")) or f"fact_{number}"
        key, again = name, 2
        while key in known:
            key, again = f"{name}_{again}", again + 1
        known[key] = str(fact.get("value", ""))
    return known


def draft_fields(draft: Mapping[str, Any]) -> dict[str, Any]:
    """A parsed draft (JSON) as :class:`~turneval.simulation.Scenario` fields.

    Never refuses a schema-valid draft: blank texts become None and facts are named.
    """
    difficulty = str(draft.get("difficulty", "medium"))
    return {
        "goal": str(draft["goal"]).strip(),
        "persona": _blank(draft.get("persona")),
        "user_facts": _facts(draft.get("user_facts") or []),
        "first_message": _blank(draft.get("first_message")),
        "reference": _blank(draft.get("reference")),
        "max_turns": MAX_TURNS.get(difficulty, 10),
    }

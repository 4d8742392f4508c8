"""Verdict schemas that admit only valid verdicts, in the subset strict structured output takes.

A judge's output schema is sent to the model (OpenAI strict structured outputs, vLLM or Ollama
guided decoding), so a model that follows it can never give an unusable verdict. The rules:

* every object is closed (``additionalProperties: false``) and lists every property as required
  (derive static verdict classes from :class:`StrictVerdict`);
* choices are enums (:func:`enum_field`; a ``Literal`` in a class body): rubric scores, yes/no,
  pairwise choices;
* lists have items of a declared shape, and a fixed length where the question fixes it.

Validation stays the guard for models that ignore schemas: an answer outside the enum is an
invalid answer (the judge shows the model the error and asks again, then raises
:class:`~turneval.errors.JudgeOutputError`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    create_model,
    field_validator,
)

__all__ = [
    "StrictVerdict",
    "enum_field",
    "list_field",
    "rubric_score_model",
    "strict_schema_problems",
]


class StrictVerdict(BaseModel):
    """Base of verdict models: closed objects in the schema, so it is strict-compatible.

    Declare every field without a default (strict structured output requires all of them).
    The schema says ``additionalProperties: false``; parsing still ignores extra keys from
    models that do not follow schemas, and reads a text choice in another case or with spaces
    around it (``"Yes"`` for ``"yes"``) as the choice: the meaning is not in doubt.
    """

    model_config = ConfigDict(extra="ignore", json_schema_extra={"additionalProperties": False})

    @field_validator("*", mode="before")
    @classmethod
    def _choice_in_any_case(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, str) and info.field_name is not None:
            choices = _text_choices(cls, info.field_name)
            if choices and value not in choices:
                return choices.get(value.strip().casefold(), value)
        return value


@lru_cache(maxsize=1024)
def _text_choices(model: type[BaseModel], name: str) -> dict[str, str]:
    """A field's text choices by their casefolded form (empty: not a choice of texts)."""
    field = model.model_fields.get(name)
    annotation = field.annotation if field is not None else None
    if get_origin(annotation) is not Literal:
        return {}
    choices = [choice for choice in get_args(annotation) if isinstance(choice, str)]
    folded = {choice.casefold(): choice for choice in choices}
    return folded if len(folded) == len(choices) else {}  # "A" and "a" both: no guessing


def enum_field(values: Iterable[str | int | float | bool], *, description: str) -> Any:
    """A ``(type, Field)`` pair for :func:`pydantic.create_model`: one of ``values``, as an enum.

    Example: ``create_model("Verdict", __base__=StrictVerdict, reason=(str, Field(...)),
    rating=enum_field(["yes", "no"], description="yes if ..."))``.
    """
    choices = tuple(dict.fromkeys(values))
    if not choices:
        raise ValueError("an enum needs at least one value")
    return (Literal[choices], Field(description=description))


def list_field(item: type[BaseModel], *, description: str, length: int | None = None) -> Any:
    """A ``(type, Field)`` pair: a list of ``item`` objects, of exactly ``length`` when given."""
    if length is None:
        return (list[item], Field(description=description))  # type: ignore[valid-type]
    return (
        list[item],  # type: ignore[valid-type]
        Field(description=description, min_length=length, max_length=length),
    )


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"rating_rubric keys must be numbers, got {text!r}") from None


@lru_cache(maxsize=256)
def _score_model(values: tuple[float, ...], reason_field: str) -> type[BaseModel]:
    allowed = frozenset(values)
    shown = sorted(allowed)
    integral = all(value.is_integer() for value in values)
    enum: list[float | int] = [int(v) if integral else v for v in shown]

    def in_rubric(score: float) -> float:
        if score not in allowed:
            raise ValueError(f"score {score:g} is not in the rubric {shown}")
        return score

    score_type = Annotated[
        float,
        AfterValidator(in_rubric),
        Field(
            description=f"One of {enum}, per the rating rubric.",
            json_schema_extra={"type": "integer" if integral else "number", "enum": enum},
        ),
    ]
    fields: dict[str, Any] = {
        reason_field: (str, Field(description="Why this score, citing the inputs.")),
        "score": (score_type, ...),
    }
    return create_model("RubricVerdict", __base__=StrictVerdict, **fields)


def rubric_score_model(
    values: Iterable[str | int | float], *, reason_field: str = "explanation"
) -> type[BaseModel]:
    """The verdict model of a rating rubric: ``{reason_field: str, "score": one of values}``.

    The JSON schema gives the score as an enum of the rubric's values (``"type": "integer"``
    when they are all integers), so schema-following models can only answer a rubric score;
    validation rejects any other score with ``score X is not in the rubric [...]``. Parsed
    scores are floats. Models are cached per rubric.

    Raises:
        ValueError: a value is not a number, or there is none.
    """
    numbers = tuple(sorted({_number(str(v)) for v in values}))
    if not numbers:
        raise ValueError("a rating rubric needs at least one score")
    return _score_model(numbers, reason_field)


_UNSUPPORTED = ("default", "patternProperties", "unevaluatedProperties", "propertyNames")


def strict_schema_problems(schema: dict[str, Any] | type[BaseModel]) -> list[str]:
    """Why a JSON schema (or a model's) is not strict-compatible; empty when it is.

    Checks what OpenAI strict structured outputs require of every object: closed
    (``additionalProperties: false``), every property required, no unsupported keyword.
    """
    if isinstance(schema, type):
        schema = schema.model_json_schema()
    problems: list[str] = []

    def walk(node: Any, where: str) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object" or "properties" in node:
                properties = node.get("properties", {})
                if node.get("additionalProperties") is not False:
                    problems.append(f"{where}: additionalProperties is not false")
                missing = sorted(set(properties) - set(node.get("required", [])))
                if missing:
                    problems.append(f"{where}: properties not required: {missing}")
            problems.extend(f"{where}: unsupported {k!r}" for k in _UNSUPPORTED if k in node)
            for key, value in node.items():
                if key == "properties" and isinstance(value, dict):
                    for name, sub in value.items():
                        walk(sub, f"{where}.{name}")
                elif key != "properties":
                    walk(value, f"{where}/{key}")
        elif isinstance(node, Sequence) and not isinstance(node, str):
            for index, item in enumerate(node):
                walk(item, f"{where}[{index}]")

    walk(schema, "$")
    return problems

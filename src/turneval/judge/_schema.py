"""Verdict schemas that admit only valid verdicts, in the subset strict structured output takes.

A judge's output schema is sent to the model (OpenAI strict structured outputs, vLLM or Ollama
guided decoding), so a model that follows it can never give an unusable verdict. The rules:

* every object is closed (``additionalProperties: false``) and lists every property as required
  (derive static verdict classes from :class:`StrictVerdict`);
* choices are enums (:func:`enum_field`; a ``Literal`` in a class body): rubric scores, yes/no,
  pairwise choices;
* lists have items of a declared shape; a list that rates given items (turns, claims, chunks)
  is *per item*: one required property per item, in order (:func:`list_field` with ``length``
  or ``keys``), so a schema-following model can neither skip, repeat nor reorder an item. The
  parsed value is still a list, in the items' order.

A verdict class that declares a list of a fixed length any other way (``Field(min_length=n,
max_length=n)``) raises :class:`~turneval.errors.ConfigError` naming the field when it is
defined, and so does a :class:`~turneval.judge.JudgeRequest` whose schema holds such a list
(:func:`per_item_problems`): such a list cannot tie an entry to its item.

Validation stays the guard for models that ignore schemas: an answer outside the enum is an
invalid answer (the judge shows the model the error and asks again, then raises
:class:`~turneval.errors.JudgeOutputError`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import lru_cache, partial
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    create_model,
    field_validator,
)

from turneval.errors import ConfigError

__all__ = [
    "StrictVerdict",
    "enum_field",
    "list_field",
    "per_item_problems",
    "per_item_schema",
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

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        """Refuse a fixed-length list that is not per item (see :func:`list_field`)."""
        super().__pydantic_init_subclass__(**kwargs)
        for name, info in cls.model_fields.items():
            if get_origin(info.annotation) is not list or _PER_ITEM in info.metadata:
                continue
            # MinLen and MaxLen (Field(min_length=...)), or Len (conlist, Annotated[..., Len])
            low = [getattr(m, "min_length", None) for m in info.metadata]
            high = [getattr(m, "max_length", None) for m in info.metadata]
            extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
            low.append(extra.get("minItems"))
            high.append(extra.get("maxItems"))
            fixed = {n for n in low if isinstance(n, int)} & {n for n in high if isinstance(n, int)}
            if any(n >= 1 for n in fixed):
                raise ConfigError(
                    f"verdict {cls.__name__}, field {name!r}: a list of exactly {max(fixed)} "
                    "items cannot tie each entry to its item, so a schema-following model may "
                    "skip, repeat or reorder items; declare it per item with list_field(Item, "
                    f"description=..., length={max(fixed)}) (one required property per item)"
                )

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


class _PerItem:
    """Marks a field built by :func:`list_field` as per item (for the subclass check)."""

    def __repr__(self) -> str:
        return "per_item"


_PER_ITEM = _PerItem()


def _item_keys(length: int | None, keys: Sequence[str] | None) -> tuple[str, ...]:
    if keys is None:
        if length is None or length < 0:
            raise ConfigError(f"list_field: length must be >= 0, got {length}")
        return tuple(f"item_{i}" for i in range(length))
    names = tuple(keys)
    if isinstance(keys, str) or not all(isinstance(k, str) and k for k in names):
        raise ConfigError(f"list_field: keys must be non-empty texts, got {keys!r}")
    if len(set(names)) != len(names):
        repeated = sorted({k for k in names if names.count(k) > 1})
        raise ConfigError(f"list_field: keys must be unique, repeated: {repeated}")
    if length is not None and length != len(names):
        raise ConfigError(f"list_field: length={length} but {len(names)} keys given")
    return names


def per_item_schema(keys: Sequence[str]) -> Callable[[dict[str, Any]], None]:
    """A ``json_schema_extra`` that turns a list field's schema into one property per item.

    The array ``{"type": "array", "items": X}`` becomes ``{"type": "object", "properties":
    {key: X for key in keys}, "required": keys, "additionalProperties": false}``: every item
    has its entry, named, and none other. :func:`list_field` uses it; use it alone for a
    verdict that parses the answer itself (a model validator reading the entries by key).
    """
    names = _item_keys(None, keys)
    return partial(_one_property_per_item, names)


def _one_property_per_item(keys: tuple[str, ...], schema: dict[str, Any]) -> None:
    item = schema.pop("items", {})
    for keyword in ("type", "minItems", "maxItems", "default"):
        schema.pop(keyword, None)
    schema.update(
        type="object",
        properties={key: dict(item) for key in keys},
        required=list(keys),
        additionalProperties=False,
    )


def _entries_in_order(keys: tuple[str, ...], value: Any) -> Any:
    """The entries of a per-item answer as a list, in the items' order.

    Also takes a list of one entry per item (a cached verdict, or a model that ignored the
    schema and answered a list).
    """
    if isinstance(value, dict):
        missing = [key for key in keys if key not in value]
        if missing:
            raise ValueError(
                f"no entry for {', '.join(missing)} (expected one per item: {list(keys)})"
            )
        return [value[key] for key in keys]
    if isinstance(value, list) and len(value) != len(keys):
        raise ValueError(
            f"expected one entry per item ({len(keys)}: {list(keys)}), got {len(value)}"
        )
    return value


def list_field(
    item: type[BaseModel],
    *,
    description: str,
    length: int | None = None,
    keys: Sequence[str] | None = None,
) -> Any:
    """A ``(type, Field)`` pair: a list of ``item`` objects; per item when the items are given.

    Without ``length`` or ``keys`` the list is open (the judge lists what it finds, e.g. the
    topics of a conversation). With them, the list rates given items, and its schema is *per
    item*: an object with one required property per item, in order (named ``keys``, default
    ``item_0``, ``item_1``, ...), so a schema-following model answers exactly one entry for
    each item and nothing else; OpenAI strict mode and guided decoding accept it. The parsed
    value is a list of ``item`` in the items' order, whatever order the keys came in.

    Example: ``create_model("ChunkVerdicts", __base__=StrictVerdict, chunks=list_field(
    YesNoVerdict, description="One verdict per chunk.", keys=["chunk_0", "chunk_1"]))``.

    Raises:
        ConfigError: ``length`` is negative or disagrees with ``keys``, or a key is empty or
            repeated.
    """
    if length is None and keys is None:
        return (list[item], Field(description=description))  # type: ignore[valid-type]
    names = _item_keys(length, keys)
    shape = Annotated[
        list[item],  # type: ignore[valid-type]
        BeforeValidator(partial(_entries_in_order, names)),
        _PER_ITEM,
    ]
    return (shape, Field(description=description, json_schema_extra=per_item_schema(names)))


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


def _schema_nodes(node: Any, where: str = "$") -> Iterator[tuple[dict[str, Any], str]]:
    """Every object of a JSON schema with its place (``$.turns/items``), depth first."""
    if isinstance(node, dict):
        yield node, where
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for name, sub in value.items():
                    yield from _schema_nodes(sub, f"{where}.{name}")
            elif key != "properties":
                yield from _schema_nodes(value, f"{where}/{key}")
    elif isinstance(node, Sequence) and not isinstance(node, str):
        for index, item in enumerate(node):
            yield from _schema_nodes(item, f"{where}[{index}]")


def strict_schema_problems(schema: dict[str, Any] | type[BaseModel]) -> list[str]:
    """Why a JSON schema (or a model's) is not strict-compatible; empty when it is.

    Checks what OpenAI strict structured outputs require of every object: closed
    (``additionalProperties: false``), every property required, no unsupported keyword.
    """
    if isinstance(schema, type):
        schema = schema.model_json_schema()
    problems: list[str] = []
    for node, where in _schema_nodes(schema):
        if node.get("type") == "object" or "properties" in node:
            properties = node.get("properties", {})
            if node.get("additionalProperties") is not False:
                problems.append(f"{where}: additionalProperties is not false")
            missing = sorted(set(properties) - set(node.get("required", [])))
            if missing:
                problems.append(f"{where}: properties not required: {missing}")
        problems.extend(f"{where}: unsupported {k!r}" for k in _UNSUPPORTED if k in node)
    return problems


def per_item_problems(schema: dict[str, Any] | type[BaseModel]) -> list[str]:
    """Lists in a JSON schema (or a model's) that rate given items but are not per item.

    A list of a fixed length (``minItems == maxItems >= 1``) without ``prefixItems`` cannot tie
    each entry to its item: a schema-following model may skip, repeat or reorder items (say
    rate turn 3 twice and turn 5 never), and its answer would then be rejected or misread.
    Per-item lists (:func:`list_field`) and open lists (the judge lists what it finds) pass.
    """
    if isinstance(schema, type):
        schema = schema.model_json_schema()
    problems: list[str] = []
    for node, where in _schema_nodes(schema):
        low, high = node.get("minItems"), node.get("maxItems")
        if (
            isinstance(low, int)
            and low >= 1
            and low == high
            and "prefixItems" not in node
            and node.get("type", "array") == "array"
        ):
            problems.append(
                f"{where}: a list of exactly {low} items is not per item (use list_field "
                "with length= or keys=: one required property per item)"
            )
    return problems

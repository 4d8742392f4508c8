"""A metric's configuration as JSON, and back: the fields of ``MetricSpec.config``.

A turneval model (the metric itself, a rule, a worked example) is written field by field; a
model from elsewhere in a field (a chat model) by its model name, never its keys; anything
else as pydantic makes it JSON (a value it cannot, by its ``repr``). A metric inside a field
that does not declare its class (``arg_comparison_metric=ExactMatch()``, a trace judge's
metric) also carries its class path under :data:`CLASS_KEY`, and a function defined at a
module's top level (a predicate, a comparator) is recorded by its path under
:data:`FUNCTION_KEY` (a lambda by its ``repr``), so that building the configuration again
builds them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from turneval.manifest._classes import (
    class_path,
    function_path,
    resolve_class,
    resolve_function,
)

FUNCTION_KEY = "$function"
"""The key naming a function held in a field (a predicate, a comparator) by its path."""

__all__ = [
    "FUNCTION_KEY",
    "CLASS_KEY",
    "build_value",
    "config_of",
    "jsonable",
    "model_name",
]

CLASS_KEY = "$class"
"""The key naming the class of a metric held in another metric's field."""


def model_name(model: Any) -> str | None:
    """The model name of a judge (a LangChain chat model or a wrapper); None without one."""
    if model is None:
        return None
    inner = getattr(model, "langchain_llm", None) or getattr(model, "llm", None)
    for candidate in (model, inner):
        for attribute in ("model_name", "model", "deployment_name", "model_id"):
            name = getattr(candidate, attribute, None)
            if isinstance(name, str) and name:
                return name
    return type(model).__name__


def _is_metric(value: Any) -> bool:
    """Whether a turneval model is an evaluator (a metric: its class is not implied)."""
    return callable(getattr(value, "summary_extras", None)) and hasattr(value, "name")


def jsonable(value: Any, *, top: bool = True) -> Any:
    """``value`` JSON-ready (see the module); ``top``: the metric itself (no class key)."""
    from pydantic import BaseModel
    from pydantic_core import to_jsonable_python

    if isinstance(value, BaseModel):
        cls = type(value)
        if not cls.__module__.startswith("turneval"):
            return model_name(value)  # a chat model: its name, never its keys
        fields = {name: jsonable(getattr(value, name), top=False) for name in cls.model_fields}
        if not top and _is_metric(value):
            return {CLASS_KEY: class_path(cls), **fields}
        return fields
    if isinstance(value, Mapping):
        return {str(key): jsonable(item, top=False) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(item, top=False) for item in value]
    path = function_path(value)
    if path is not None:  # a module's function: by its path, built again from it
        return {FUNCTION_KEY: path}
    try:
        return to_jsonable_python(value, serialize_unknown=True)
    except Exception:  # whatever it is, the run is recorded
        return repr(value)


def config_of(metric: Any) -> Any:
    """A metric's configuration: its fields (a turneval model's or a user's), JSON-ready."""
    from pydantic import BaseModel

    if isinstance(metric, BaseModel):
        return {
            name: jsonable(getattr(metric, name), top=False) for name in type(metric).model_fields
        }
    return jsonable(metric)


def build_value(value: Any, classes: Iterable[type], import_any: bool) -> Any:
    """``value`` with every metric recorded in it (:data:`CLASS_KEY`) built again."""
    if isinstance(value, Mapping):
        if set(value) == {FUNCTION_KEY} and isinstance(value[FUNCTION_KEY], str):
            return resolve_function(value[FUNCTION_KEY], import_any=import_any)
        if isinstance(value.get(CLASS_KEY), str):
            cls: Any = resolve_class(
                value[CLASS_KEY], classes=classes, import_any=import_any, what="metric class"
            )
            fields = {k: build_value(v, classes, import_any) for k, v in value.items()}
            fields.pop(CLASS_KEY)
            return cls.model_validate(fields)
        return {key: build_value(item, classes, import_any) for key, item in value.items()}
    if isinstance(value, list):
        return [build_value(item, classes, import_any) for item in value]
    return value

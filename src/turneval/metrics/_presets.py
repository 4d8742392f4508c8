"""Built-in judges as data: a row of a preset table becomes the class users import.

The rubric and assessment presets (``Fluency``, ``Correctness``, ...) are rows of tables;
:func:`preset_class` makes each a subclass of its judged base, re-exported by
:mod:`turneval.metrics._judged`.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

from pydantic import create_model

from turneval.metrics.base import Metric

__all__ = ["Preset", "preset_class"]

M = TypeVar("M", bound=Metric)


class Preset(Protocol):
    """A row of a preset table: the class to make, its docstring and its field defaults."""

    @property
    def class_name(self) -> str:
        """The class's name (``Fluency``)."""
        ...

    @property
    def doc(self) -> str:
        """The class's docstring."""
        ...

    def defaults(self) -> dict[str, Any]:
        """Field values of the preset (besides ``name``)."""
        ...


def preset_class(base: type[M], name: str, row: Preset, module: str) -> type[M]:
    """The class users import for a row of a preset table (``Fluency``, ``Correctness``, ...).

    A subclass of ``base`` whose ``name`` defaults to ``name`` and whose other fields default
    to ``row.defaults()``: built-in judges are data, this turns a row into a class.
    """
    defaults = {"name": name, **row.defaults()}
    fields: dict[str, Any] = {
        key: (base.model_fields[key].annotation, value) for key, value in defaults.items()
    }
    return create_model(row.class_name, __base__=base, __module__=module, __doc__=row.doc, **fields)

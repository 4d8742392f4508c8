"""Griffe extension for turneval's API reference (loaded by mkdocstrings, see mkdocs.yml).

Three things the static reading of the source cannot do alone:

* Preset metrics (``Fluency``, ``Correctness``, ...) are classes made at import time from a data
  table (``preset_class``), so griffe sees a plain assignment. Every metric the registry knows
  (``turneval.metrics.base.builtin_metrics()``) that griffe read as an attribute becomes a class
  here, with its docstring and the preset's field defaults, so adding a preset documents it.
* A sync form is made from its async function (``evaluate = sync_form(aevaluate)``: one
  signature, one body), so griffe sees an attribute. Each becomes a function with the async
  one's parameters and return type, documented by the docstring under the assignment.
* The docstrings use Sphinx roles (``:class:`Metric```). Each becomes the name in code, linked
  (an optional autorefs reference, as mkdocstrings makes for the types in signatures) to where
  the reference documents it: the name is resolved in the scope of the object whose docstring
  holds it. A name the reference does not document (a private helper) stays plain code.
"""

from __future__ import annotations

import pprint
import re
import textwrap
from functools import partial
from typing import Any

import griffe

# reST's "text::" before an indented literal block: Markdown keeps the block as code.
_LITERAL = re.compile(r"::\n\n")
_ROLE = re.compile(r":(?:class|func|meth|attr|mod|data|exc|obj):`(~?)([\w.]+)`")


class TurnevalDocs(griffe.Extension):
    """Document preset metric classes and turn Sphinx roles into cross-references."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        """Patch the loaded ``turneval`` package."""
        if pkg.path != "turneval":
            return
        _add_preset_classes(pkg)
        _add_sync_forms(pkg)
        for obj in _walk(pkg):
            if obj.docstring is not None:
                text = _ROLE.sub(partial(_crossref, obj), obj.docstring.value)
                obj.docstring.value = _LITERAL.sub(":\n\n", text)


def _walk(obj: griffe.Object) -> Any:
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _walk(member)  # type: ignore[arg-type]


def _crossref(obj: griffe.Object, match: re.Match[str]) -> str:
    short, target = match.group(1), match.group(2)
    title = target.rsplit(".", 1)[-1] if short else target
    head, _, rest = target.partition(".")
    if head != "turneval":
        try:
            head = obj.resolve(head)
        except griffe.NameResolutionError:
            return f"`{title}`"
    path = f"{head}.{rest}" if rest else head
    if not path.startswith("turneval"):
        return f"`{title}`"  # another library's name
    return f'<autoref identifier="{path}" optional><code>{title}</code></autoref>'


def _keyword(key: str, value: Any) -> str:
    """``    key=value,`` with the value pretty-printed, continuation lines aligned under it."""
    text = pprint.pformat(value, width=84 - len(key), sort_dicts=False)
    return (
        textwrap.indent(f"{key}=" + text.replace("\n", "\n" + " " * (len(key) + 1)), "    ") + ",\n"
    )


def _add_preset_classes(pkg: griffe.Module) -> None:
    from turneval.metrics.base import builtin_metrics

    for cls in builtin_metrics().values():
        module = pkg.modules_collection.get_member(cls.__module__)
        found = module.members.get(cls.__qualname__)
        if found is None or found.is_class or found.is_alias:
            continue
        base: Any = cls.__mro__[1]
        preset = {
            key: field.default
            for key, field in cls.model_fields.items()
            if key in base.model_fields and field.default != base.model_fields[key].default
        }
        args = "".join(_keyword(key, value) for key, value in preset.items())
        doc = (
            f"{cls.__doc__}\n\nA preset of `{base.__name__}`: the class is\n\n"
            f"```python\n{base.__name__}(\n{args})\n```\n"
        )
        new = griffe.Class(
            cls.__qualname__,
            lineno=found.lineno,
            endlineno=found.endlineno,
            bases=[griffe.ExprName(base.__name__, parent=module)],
            docstring=griffe.Docstring(doc, parent=None),
        )
        module.set_member(cls.__qualname__, new)
        new.docstring.parent = new  # type: ignore[union-attr]


def _add_sync_forms(pkg: griffe.Module) -> None:
    """Each ``name = sync_form(async_name)`` attribute as the function it is."""
    found = [
        member
        for obj in _walk(pkg)
        if obj.is_module or obj.is_class
        for member in list(obj.members.values())
        if not member.is_alias
        and member.is_attribute
        and isinstance(member.value, griffe.ExprCall)  # type: ignore[union-attr]
        and str(member.value.function) == "sync_form"  # type: ignore[union-attr]
    ]
    for attribute in found:
        parent = attribute.parent
        assert parent is not None
        (target,) = attribute.value.arguments  # type: ignore[union-attr]
        source = parent.members[str(target)]
        sync = griffe.Function(
            attribute.name,
            lineno=attribute.lineno,
            endlineno=attribute.endlineno,
            parameters=source.parameters,  # type: ignore[union-attr]
            returns=source.returns,  # type: ignore[union-attr]
            docstring=attribute.docstring,
        )
        parent.set_member(attribute.name, sync)
        if sync.docstring is not None:
            sync.docstring.parent = sync

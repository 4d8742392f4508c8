"""A world's state: rendered as JSON for the record, compared as the backend defines it.

A state is whatever a backend holds: dicts, lists, sets, dataclasses, pydantic models, plain
objects with attributes, objects with their own ``__eq__`` (BFCL's ``Directory``), and may be
cyclic (a directory's ``parent``). Two operations, written once here:

* :func:`render`: the state as JSON, never with a memory address: an object becomes the
  mapping of its public attributes, a set a list in canonical order, a cycle a
  ``{"$ref": path}`` to the ancestor it returns to.
* :func:`compare_states`: where two states differ. An object with its own ``__eq__`` is
  compared by it (when it says unequal, its attributes are walked to say where); everything
  else structurally: mappings key by key and sets element by element (order-free), lists and
  tuples item by item (ordered), objects attribute by attribute. A cycle is compared once
  (a pair met again on the way is taken as equal, as in a bisimulation).

Private attributes (a leading underscore) are not state: BFCL's checker skips them too.
States nested deeper than :data:`MAX_DEPTH` raise :class:`WorldStateError`.

Longer than 400 lines: rendering and comparing are one walk written twice over the same kinds
of values (mappings, sets, sequences, objects, cycles), with the path rules that ignore parts
of a state; kept together so the two agree on every kind.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import math
import re
from collections.abc import Mapping, Sequence, Set
from datetime import date, time, timedelta
from decimal import Decimal
from enum import Enum
from fnmatch import fnmatchcase
from pathlib import PurePath
from typing import Any
from uuid import UUID

from pydantic import BaseModel, TypeAdapter

from turneval.errors import TurnevalError

__all__ = [
    "MAX_DEPTH",
    "Difference",
    "Fields",
    "WorldStateError",
    "compare_states",
    "path_matches",
    "path_segments",
    "render",
]

MAX_DEPTH = 200
"""How deep a state may nest (containers and objects) before it is refused."""

_JSON: TypeAdapter[Any] = TypeAdapter(Any)
_SCALARS = (str, int, float, bool, type(None))
_LEAVES = (date, time, timedelta, Decimal, UUID, PurePath, bytes, bytearray, complex)
_ABSENT: Any = object()


class WorldStateError(TurnevalError):
    """A world's state cannot be rendered or compared (nested too deep, unreadable)."""


class Fields(dict[str, Any]):
    """A mapping whose keys are named fields (an object's attributes), shown as ``.name``."""


# -- paths -------------------------------------------------------------------------------------

Segment = tuple[str, Any]  # ("field", name) | ("key", key) | ("index", i)
Link = tuple[Any, str, Any, int] | None  # (parent link, kind, value, depth): a path, built cheaply


def _child(path: Link, kind: str, value: Any) -> Link:
    return (path, kind, value, 1 + (path[3] if path else 0))


def _depth(path: Link) -> int:
    return path[3] if path else 0


def _unlink(path: Link) -> list[Segment]:
    segments: list[Segment] = []
    while path is not None:
        path, kind, value, _ = path
        segments.append((kind, value))
    return segments[::-1]


def _shown(path: Link) -> str:
    return show(_unlink(path))


def show(path: Sequence[Segment]) -> str:
    """``files['a.txt'].content``: fields dotted (bare first), keys and indices in brackets.

    A state's top-level parts are shown bare too (``orders['A100']``), names permitting.
    """
    text = ""
    for kind, value in path:
        named = isinstance(value, str) and value.isidentifier()
        if named and (kind == "field" or (not text and kind == "key")):
            text += f".{value}" if text else value
        else:
            text += f"[{value!r}]"
    return text or "(state)"


def path_segments(rule: str) -> list[str]:
    """The segments of a path or an ignore rule, as text: ``a.b[0]['x.y']`` -> a, b, 0, x.y.

    Dotted names and bracketed keys mix freely; a bracket holds a Python literal (a quoted
    key, an index) or a bare word (``[*]``, ``[A100]``).
    """
    return [text for text, _ in _segments(rule)]


def _segments(rule: str) -> list[tuple[str, bool]]:
    """Each segment and whether it was written as a literal (a quoted key, a number)."""
    segments: list[tuple[str, bool]] = []
    position, size = 0, len(rule)
    while position < size:
        char = rule[position]
        if char == ".":
            position += 1
        elif char == "[":
            end = position + 1
            if end < size and rule[end] in "'\"":
                quote, end = rule[end], end + 1
                while end < size and rule[end] != quote:
                    end += 2 if rule[end] == "\\" else 1
                end += 1
            end = rule.find("]", end)
            end = size if end < 0 else end
            inner = rule[position + 1 : end].strip()
            try:
                segments.append((str(ast.literal_eval(inner)), True))
            except (ValueError, SyntaxError):
                segments.append((inner, False))
            position = end + 1
        else:
            end = position
            while end < size and rule[end] not in ".[":
                end += 1
            segments.append((rule[position:end], False))
            position = end
    return segments


def _pattern(rule: str) -> list[str]:
    """A rule's segments as globs: bare words glob (``*``), quoted keys match as written."""
    return [
        re.sub(r"([*?\[])", r"[\1]", text) if literal else text for text, literal in _segments(rule)
    ]


def _matches(path: Sequence[str], rules: Sequence[Sequence[str]]) -> bool:
    """A rule covers a path it matches segment by segment (``*`` globs), and all below it."""
    return any(
        len(rule) <= len(path) and all(fnmatchcase(p, r) for p, r in zip(path, rule, strict=False))
        for rule in rules
    )


# -- what an object holds ----------------------------------------------------------------------


def _probe_code() -> Any:
    @dataclasses.dataclass
    class Probe:
        x: int

    return getattr(Probe.__eq__, "__code__", None)


_GENERATED = _probe_code()  # how dataclasses' generated __eq__ looks on this Python


def own_equality(cls: type) -> bool:
    """Whether ``cls`` defines its own ``==`` (not object's identity, not a generated one).

    A dataclass's or a pydantic model's generated ``==`` compares fields with ``==`` (so a
    plain object inside compares by identity): those are walked field by field instead.
    """
    eq: Any = cls.__eq__
    if eq is object.__eq__ or (issubclass(cls, BaseModel) and eq is BaseModel.__eq__):
        return False
    code = getattr(eq, "__code__", None)
    if dataclasses.is_dataclass(cls) and code is not None and _GENERATED is not None:
        return bool(code.co_filename != _GENERATED.co_filename)
    return True


def attributes(value: Any) -> dict[str, Any] | None:
    """An object's public attributes (fields of a model or dataclass), or None for a leaf."""
    if isinstance(value, type) or inspect.isroutine(value):
        return None  # a class or a function held in the state: a leaf, shown by its type
    if isinstance(value, BaseModel):
        names = [*type(value).model_fields, *(value.model_extra or {})]
        return {name: getattr(value, name) for name in names if not name.startswith("_")}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            field.name: getattr(value, field.name)
            for field in dataclasses.fields(value)
            if not field.name.startswith("_") and hasattr(value, field.name)
        }
    found: dict[str, Any] = {}
    held = getattr(value, "__dict__", None)
    if isinstance(held, dict):
        found.update((k, v) for k, v in held.items() if isinstance(k, str) and k[:1] != "_")
    slotted = False
    for cls in type(value).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for slot in (slots,) if isinstance(slots, str) else slots:
            slotted = True
            if slot[:1] != "_" and slot not in found and hasattr(value, slot):
                found[slot] = getattr(value, slot)
    return found if isinstance(held, dict) or slotted else None


def _sequence(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes | bytearray)


# -- rendering ---------------------------------------------------------------------------------


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _key_text(rendered: Any) -> str:
    return rendered if isinstance(rendered, str) else _canonical(rendered)


def render(value: Any) -> Any:
    """``value`` as JSON: objects as their public attributes, sets sorted, cycles as ``$ref``.

    Raises:
        WorldStateError: the value nests deeper than :data:`MAX_DEPTH`.
    """
    ancestors: dict[int, Link] = {}

    def walk(item: Any, path: Link) -> Any:
        if isinstance(item, _SCALARS):
            return item
        if isinstance(item, Enum):
            return walk(item.value, path)
        if isinstance(item, _LEAVES):
            return _leaf(item)
        if id(item) in ancestors:
            return {"$ref": _shown(ancestors[id(item)])}
        if _depth(path) >= MAX_DEPTH:
            raise WorldStateError(
                f"the state nests deeper than {MAX_DEPTH} levels (at {_shown(path)})"
            )
        ancestors[id(item)] = path
        try:
            if type(item) is dict or isinstance(item, Mapping):
                out: dict[str, Any] = {}
                kind = "field" if isinstance(item, Fields) else "key"
                for key, inner in item.items():
                    text = key if isinstance(key, str) else _key_text(walk(key, path))
                    out[text] = walk(inner, _child(path, kind, key))
                return out
            if isinstance(item, Set):
                items = [walk(inner, _child(path, "index", n)) for n, inner in enumerate(item)]
                return sorted(items, key=_canonical)
            if _sequence(item):
                return [walk(inner, _child(path, "index", n)) for n, inner in enumerate(item)]
            held = attributes(item)
            if held is not None:
                return {
                    name: walk(inner, _child(path, "field", name)) for name, inner in held.items()
                }
            return _JSON.dump_python(item, mode="json", fallback=_opaque)
        finally:
            del ancestors[id(item)]

    try:
        return walk(value, None)
    except RecursionError:  # deep inside pydantic's own serializer
        raise WorldStateError("the state nests too deep to render") from None


def _leaf(value: Any) -> Any:
    """A date, a number type, a path, bytes: as pydantic writes it in JSON (else its type)."""
    try:
        return _JSON.dump_python(value, mode="json", fallback=_opaque)
    except ValueError:  # bytes that are not UTF-8
        return _opaque(value)


def _opaque(value: Any) -> str:
    """A value with no state to show (a lock, a function): its type (and name), no address."""
    named = isinstance(value, type) or inspect.isroutine(value)
    name = getattr(value, "__qualname__", None) if named else None
    return f"<{type(value).__qualname__} {name}>" if name else f"<{type(value).__qualname__}>"


# -- comparing ---------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Difference:
    """One place where two states differ.

    Attributes:
        path: Where (``files['a.txt'].content``; ``(state)`` for the whole state).
        kind: ``changed``, ``missing`` (in the expected state only) or ``unexpected`` (in
            the actual state only). A set's element is missing or unexpected at the set's
            path.
        expected: The expected value there (JSON), when it exists.
        actual: The actual value there (JSON), when it exists.
        note: Why two values that look alike differ (``unequal by File.__eq__``,
            ``type list != tuple``), or None.
    """

    path: str
    kind: str
    expected: Any = _ABSENT
    actual: Any = _ABSENT
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """``{"path", "kind", "expected", "actual", "note"}`` (absent sides left out)."""
        out: dict[str, Any] = {"path": self.path, "kind": self.kind}
        if self.expected is not _ABSENT:
            out["expected"] = self.expected
        if self.actual is not _ABSENT:
            out["actual"] = self.actual
        if self.note:
            out["note"] = self.note
        return out

    def brief(self) -> str:
        """One line: ``path: expected 'x', got 'y'``."""
        note = f" ({self.note})" if self.note else ""
        if self.kind == "missing":
            return f"{self.path}: expected {self.expected!r}, missing{note}"
        if self.kind == "unexpected":
            return f"{self.path}: unexpected {self.actual!r}{note}"
        return f"{self.path}: expected {self.expected!r}, got {self.actual!r}{note}"


def _numbers(a: Any, b: Any) -> bool:
    return all(isinstance(x, int | float) and not isinstance(x, bool) for x in (a, b))


def _same_scalar(a: Any, b: Any) -> bool:
    if _numbers(a, b):
        both_nan = isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
        return bool(a == b) or both_nan
    return type(a) is type(b) and bool(a == b)


class _Comparison:
    """One walk over two states, collecting differences (each pair of objects met once)."""

    def __init__(self) -> None:
        self.differences: list[Difference] = []
        self.active: set[tuple[int, int]] = set()

    def equal(self, path: Link, a: Any, b: Any) -> bool:
        """Whether two values are equal, on a separate walk (set elements, object keys)."""
        probe = _Comparison()
        probe.active = set(self.active)
        probe.walk(path, a, b)
        return not probe.differences

    def add(self, path: Link, kind: str, want: Any, got: Any, note: str | None) -> None:
        self.differences.append(
            Difference(
                _shown(path),
                kind,
                _ABSENT if want is _ABSENT else render(want),
                _ABSENT if got is _ABSENT else render(got),
                note,
            )
        )

    def walk(self, path: Link, want: Any, got: Any) -> None:
        if want is got:
            return
        if want is _ABSENT or got is _ABSENT:
            self.add(path, "unexpected" if want is _ABSENT else "missing", want, got, None)
            return
        if isinstance(want, _SCALARS) and isinstance(got, _SCALARS):
            if not _same_scalar(want, got):
                self.add(path, "changed", want, got, None)
            return
        if type(want) is not type(got) and not (
            isinstance(want, Mapping) and isinstance(got, Mapping)
        ):
            note = f"type {type(want).__name__} != {type(got).__name__}"
            self.add(path, "changed", want, got, note)
            return
        pair = (id(want), id(got))
        if pair in self.active:
            return  # met again through a cycle: equal unless a difference shows elsewhere
        if _depth(path) >= MAX_DEPTH:
            raise WorldStateError(
                f"the state nests deeper than {MAX_DEPTH} levels (at {_shown(path)})"
            )
        self.active.add(pair)
        try:
            self._inside(path, want, got)
        finally:
            self.active.discard(pair)

    def _inside(self, path: Link, want: Any, got: Any) -> None:
        if isinstance(want, Mapping):
            self._mapping(path, want, got)
        elif isinstance(want, Set):
            self._set(path, want, got)
        elif _sequence(want):
            for index in range(max(len(want), len(got))):
                self.walk(
                    _child(path, "index", index),
                    want[index] if index < len(want) else _ABSENT,
                    got[index] if index < len(got) else _ABSENT,
                )
        elif own_equality(type(want)):
            self._by_own_equality(path, want, got)
        else:
            self._attributes(path, want, got, attributes(want), attributes(got))

    def _by_own_equality(self, path: Link, want: Any, got: Any) -> None:
        note = f"unequal by {type(want).__qualname__}.__eq__"
        try:
            if bool(want == got):
                return
        except RecursionError:  # an __eq__ that follows a cycle: its attributes say
            note = f"{type(want).__qualname__}.__eq__ recursed without end"
        except Exception as exc:  # an __eq__ that cannot answer (an array's): its attributes say
            note = f"{type(want).__qualname__}.__eq__ raised {type(exc).__name__}: {exc}"
        before = len(self.differences)
        self._attributes(path, want, got, attributes(want), attributes(got))
        if len(self.differences) == before:
            self.add(path, "changed", want, got, note)

    def _attributes(
        self,
        path: Link,
        want: Any,
        got: Any,
        wanted: dict[str, Any] | None,
        gotten: dict[str, Any] | None,
    ) -> None:
        if wanted is None or gotten is None:  # an opaque leaf: equal when its text is
            if render(want) != render(got):
                self.add(path, "changed", want, got, None)
            return
        for name in [*wanted, *(name for name in gotten if name not in wanted)]:
            self.walk(
                _child(path, "field", name), wanted.get(name, _ABSENT), gotten.get(name, _ABSENT)
            )

    def _mapping(self, path: Link, want: Mapping[Any, Any], got: Mapping[Any, Any]) -> None:
        kind = "field" if isinstance(want, Fields) else "key"
        extra = [key for key in got if key not in want]
        lost = [key for key in want if key not in got]
        pairs = self._pair(path, lost, extra)  # keys equal only structurally (objects as keys)
        for key in want:
            if key in got:
                self.walk(_child(path, kind, key), want[key], got[key])
            elif key in pairs:
                self.walk(_child(path, kind, key), want[key], got[pairs[key]])
            else:
                self.walk(_child(path, kind, key), want[key], _ABSENT)
        taken = {id(key) for key in pairs.values()}
        for key in extra:
            if id(key) not in taken:
                self.walk(_child(path, kind, key), _ABSENT, got[key])

    def _set(self, path: Link, want: Set[Any], got: Set[Any]) -> None:
        lost = [item for item in want if item not in got]
        extra = [item for item in got if item not in want]
        pairs = self._pair(path, lost, extra)
        taken = {id(item) for item in pairs.values()}
        for item in sorted(
            (i for i in lost if i not in pairs), key=lambda i: _canonical(render(i))
        ):
            self.add(path, "missing", item, _ABSENT, "an element of the set")
        for item in sorted(
            (i for i in extra if id(i) not in taken), key=lambda i: _canonical(render(i))
        ):
            self.add(path, "unexpected", _ABSENT, item, "an element of the set")

    def _pair(self, path: Link, lost: list[Any], extra: list[Any]) -> dict[Any, Any]:
        """Each unmatched expected item with a structurally equal actual one, where one is."""
        pairs: dict[Any, Any] = {}
        free = list(extra)
        for item in lost:
            if isinstance(item, _SCALARS):
                continue
            for candidate in free:
                if self.equal(_child(path, "index", 0), item, candidate):
                    pairs[item] = candidate
                    free.remove(candidate)
                    break
        return pairs


def compare_states(expected: Any, actual: Any) -> list[Difference]:
    """Where ``actual`` differs from ``expected``, each :class:`Difference` with its path.

    Raises:
        WorldStateError: a state nests deeper than :data:`MAX_DEPTH`, or an object's own
            ``__eq__`` raised.
    """
    comparison = _Comparison()
    try:
        comparison.walk(None, expected, actual)
    except RecursionError:  # deep inside an object's own __eq__ or repr
        raise WorldStateError("the states nest too deep to compare") from None
    return comparison.differences


def path_matches(path: str, rules: Sequence[str]) -> bool:
    """Whether a rule covers ``path``: matched segment by segment (``*`` globs), or an ancestor.

    Rules are written as paths are shown (``files['a.txt'].content``) or dotted
    (``orders.*.note``, ``refunds.0``): ``['x']``, ``.x`` and ``[0]`` are all one segment.
    """
    return _matches(path_segments(path), [_pattern(rule) for rule in rules])

"""World states compared as the backend defines them: properties over random nested states.

A state is built from a random *spec* (dicts, lists, sets, dataclasses, plain objects with
attributes or slots, objects with their own ``__eq__``, trees with parent links, i.e. cycles).
Built twice with the insertion orders shuffled (a deep copy made another way), it compares
equal; with one random mutation, exactly that difference is reported, at the path written
out by hand here (``files['a.txt'].content`` style).
"""

import copy
import itertools
import json
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from decimal import Decimal
from enum import Enum
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from turneval.worlds import (
    MAX_DEPTH,
    Difference,
    ToolWorld,
    WorldStateError,
    compare_states,
    path_matches,
    path_segments,
)

STAMPS = itertools.count()


class Plain:
    """Attributes only: compared attribute by attribute (its == is identity)."""

    def __init__(self, attrs: list[tuple[str, Any]]) -> None:
        for name, value in attrs:
            setattr(self, name, value)


@dataclass
class Pair:
    """A dataclass: its generated == would compare a Plain inside by identity."""

    left: Any
    right: Any


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a: Any, b: Any) -> None:
        self.a, self.b = a, b


class Named:
    """Its own ==: name and content; a private stamp differs on every build."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, name: str, content: dict[str, Any]) -> None:
        self.name, self.content = name, content
        self._stamp = next(STAMPS)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Named) and (self.name, self.content) == (
            other.name,
            other.content,
        )


class Node:
    """A tree node with a link to its parent: a state with cycles."""

    def __init__(self, value: Any, parent: "Node | None") -> None:
        self.value, self.parent = value, parent
        self.children: dict[str, Node] = {}


# -- specs: plain data describing a state -----------------------------------------------------

SCALAR = st.integers(-3, 3) | st.sampled_from(["a", "b", "ab", ""]) | st.booleans() | st.none()
KEY = st.sampled_from(["a", "b", "a.b", "it's", "[0]", "x y", "é"]) | st.integers(0, 2)
ATTR = st.sampled_from(["p", "q", "name", "items"])
NEW = "zz"  # never one of the scalars above, nor a key: a mutation always differs


def _tree(depth: int) -> st.SearchStrategy[list[Any]]:
    children = (
        st.just([])
        if depth == 0
        else st.dictionaries(st.sampled_from(["x", "y", "z"]), _tree(depth - 1), max_size=2).map(
            lambda d: [[k, v] for k, v in d.items()]
        )
    )
    return st.builds(lambda v, c: ["node", v, c], st.integers(0, 3), children)


LEAF = (
    st.builds(lambda v: ["scalar", v], SCALAR)
    | st.builds(
        lambda items: ["set", sorted(items, key=repr)],
        st.sets(st.integers(0, 4) | st.sampled_from(["s", "t"]), max_size=3),
    )
    | st.builds(
        lambda name, content: ["named", name, [[k, v] for k, v in content.items()]],
        st.sampled_from(["f1", "f2"]),
        st.dictionaries(st.sampled_from(["k", "l"]), st.integers(0, 3), max_size=2),
    )
    | _tree(2)
)


def _extend(inner: st.SearchStrategy[list[Any]]) -> st.SearchStrategy[list[Any]]:
    return (
        st.dictionaries(KEY, inner, max_size=3).map(
            lambda d: ["dict", [[k, v] for k, v in d.items()]]
        )
        | st.lists(inner, max_size=3).map(lambda items: ["list", items])
        | st.dictionaries(ATTR, inner, max_size=3).map(
            lambda d: ["plain", [[k, v] for k, v in d.items()]]
        )
        | st.builds(lambda a, b: ["pair", a, b], inner, inner)
        | st.builds(lambda a, b: ["slots", a, b], inner, inner)
    )


NESTED = st.recursive(LEAF, _extend, max_leaves=10)
ROOT = st.dictionaries(st.sampled_from(["files", "orders", "x.y"]), NESTED, min_size=1).map(
    lambda d: ["dict", [[k, v] for k, v in d.items()]]
)


def build(spec: list[Any], rng: random.Random, parent: Node | None = None) -> Any:
    """The state a spec describes, each mapping, set and object filled in a shuffled order."""
    kind = spec[0]
    if kind == "scalar":
        return spec[1]
    if kind == "set":
        items = list(spec[1])
        rng.shuffle(items)
        return set(items)
    if kind == "named":
        items = list(spec[2])
        rng.shuffle(items)
        return Named(spec[1], dict((k, v) for k, v in items))
    if kind == "node":
        node = Node(spec[1], parent)
        children = list(spec[2])
        rng.shuffle(children)
        for name, child in children:
            node.children[name] = build(child, rng, node)
        return node
    if kind == "dict":
        items = list(spec[1])
        rng.shuffle(items)
        return {key: build(child, rng) for key, child in items}
    if kind == "list":
        return [build(child, rng) for child in spec[1]]
    if kind == "plain":
        items = list(spec[1])
        rng.shuffle(items)
        return Plain([(name, build(child, rng)) for name, child in items])
    if kind == "pair":
        return Pair(build(spec[1], rng), build(spec[2], rng))
    assert kind == "slots"
    return Slotted(build(spec[1], rng), build(spec[2], rng))


# -- mutations: where one can happen, and the difference it must show ------------------------

Site = tuple[Callable[[], None], dict[str, Any]]


def key_path(path: str, key: Any) -> str:
    """The documented form: a top-level name bare, other keys as ``[repr(key)]``."""
    if not path and isinstance(key, str) and key.isidentifier():
        return key
    return f"{path}[{key!r}]"


def field_path(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def rendered(spec: list[Any], here: str = "", parent: str | None = None) -> Any:
    """What the record shows for a spec's value, at path ``here`` of the value rendered.

    Written from the documented rules: objects as their public attributes, sets sorted, a
    link back to an ancestor as ``{"$ref": its path}`` (``(state)`` for the value itself).
    """
    kind = spec[0]
    if kind == "scalar":
        return spec[1]
    if kind == "set":
        return sorted(spec[1], key=lambda v: json.dumps(v))
    if kind == "named":
        return {"name": spec[1], "content": {k: v for k, v in spec[2]}}
    if kind == "node":
        children = {
            name: rendered(child, f"{field_path(here, 'children')}[{name!r}]", here or "(state)")
            for name, child in spec[2]
        }
        link = None if parent is None else {"$ref": parent}
        return {"value": spec[1], "parent": link, "children": children}
    if kind == "dict":
        return {
            k if isinstance(k, str) else json.dumps(k): rendered(c, key_path(here, k))
            for k, c in spec[1]
        }
    if kind == "list":
        return [rendered(child, f"{here}[{n}]") for n, child in enumerate(spec[1])]
    if kind == "plain":
        return {name: rendered(child, field_path(here, name)) for name, child in spec[1]}
    names = ("left", "right") if kind == "pair" else ("a", "b")
    return {
        names[0]: rendered(spec[1], field_path(here, names[0])),
        names[1]: rendered(spec[2], field_path(here, names[1])),
    }


def change(holder: list[Any], index: int, where: str) -> Site:
    """Replace ``holder[index]`` (a scalar) by NEW: changed at ``where``."""
    old = holder[index]

    def apply() -> None:
        holder[index] = NEW

    return apply, {"path": where, "kind": "changed", "expected": old, "actual": NEW}


def append(items: list[Any], entry: Any, where: str) -> Site:
    """Append ``entry`` (a scalar 1, as a list item or a key's) : unexpected at ``where``."""

    def apply() -> None:
        items.append(entry)

    return apply, {"path": where, "kind": "unexpected", "actual": 1}


def remove(items: list[Any], position: int, where: str, spec: list[Any]) -> Site:
    """Delete ``items[position]``, whose value is ``spec``: missing at ``where``."""

    def apply() -> None:
        del items[position]

    return apply, {"path": where, "kind": "missing", "expected": rendered(spec)}


def _set_sites(spec: list[Any], path: str) -> list[Site]:
    def add() -> None:
        spec[1] = [*spec[1], NEW]

    return [
        (add, {"path": path, "kind": "unexpected", "actual": NEW, "note": "an element of the set"})
    ]


def _node_sites(spec: list[Any], path: str) -> list[Site]:
    found = [change(spec, 1, f"{path}.value")]
    for name, child in spec[2]:
        found += sites(child, f"{path}.children[{name!r}]")
    return found


def _dict_sites(spec: list[Any], path: str) -> list[Site]:
    found: list[Site] = []
    for item in spec[1]:
        found += sites(item[1], key_path(path, item[0]))
    if path:  # keys added or removed below the top level
        found.append(append(spec[1], [NEW, ["scalar", 1]], key_path(path, NEW)))
        for position, (key, child) in enumerate(spec[1]):
            found.append(remove(spec[1], position, key_path(path, key), child))
    return found


def _list_sites(spec: list[Any], path: str) -> list[Site]:
    found: list[Site] = []
    for index, child in enumerate(spec[1]):
        found += sites(child, f"{path}[{index}]")
    found.append(append(spec[1], ["scalar", 1], f"{path}[{len(spec[1])}]"))
    if spec[1]:
        last = len(spec[1]) - 1
        found.append(remove(spec[1], last, f"{path}[{last}]", spec[1][last]))
    return found


def sites(spec: list[Any], path: str) -> list[Site]:
    """Every single mutation of ``spec`` (in place, on a copy), with the difference expected."""
    kind = spec[0]
    if kind == "scalar":
        return [change(spec, 1, path)]
    if kind == "named":
        return [change(item, 1, f"{path}.content[{item[0]!r}]") for item in spec[2]]
    if kind == "plain":
        return [site for name, child in spec[1] for site in sites(child, f"{path}.{name}")]
    if kind in ("pair", "slots"):
        names = ("left", "right") if kind == "pair" else ("a", "b")
        return sites(spec[1], f"{path}.{names[0]}") + sites(spec[2], f"{path}.{names[1]}")
    return {"set": _set_sites, "node": _node_sites, "dict": _dict_sites, "list": _list_sites}[kind](
        spec, path
    )


def differences(expected: Any, actual: Any) -> list[dict[str, Any]]:
    return [difference.to_dict() for difference in compare_states(expected, actual)]


@settings(max_examples=200, deadline=None)
@given(ROOT, st.integers(0, 2**16), st.integers(0, 2**16))
def test_a_state_equals_itself_built_in_any_insertion_order(
    spec: list[Any], one: int, two: int
) -> None:
    first, second = build(spec, random.Random(one)), build(spec, random.Random(two))
    assert differences(first, second) == []
    assert differences(first, copy.deepcopy(second)) == []
    world_a, world_b = (ToolWorld.from_object(Holder(state)) for state in (first, second))
    assert world_a.state == world_b.state  # the records agree too, whatever the order
    assert "0x" not in json.dumps(world_a.state)  # and show no memory address


class Holder:
    """A backend whose state is the built state."""

    def __init__(self, state: Any) -> None:
        self.state = state

    def noop(self) -> None:
        """Nothing."""


@settings(max_examples=300, deadline=None)
@given(ROOT, st.integers(0, 2**16), st.integers(0, 2**16), st.data())
def test_one_mutation_is_reported_once_at_its_path(
    spec: list[Any], one: int, two: int, data: st.DataObject
) -> None:
    mutated = copy.deepcopy(spec)
    possible = sites(mutated, "")
    assume(possible)  # an empty named object has nothing to mutate
    apply, expected = data.draw(st.sampled_from(possible))
    apply()
    found = differences(build(spec, random.Random(one)), build(mutated, random.Random(two)))
    assert found == [expected]
    # The path shown is one an ignore rule can name, and that rule covers the difference.
    assert path_matches(expected["path"], [expected["path"]])
    segments = path_segments(expected["path"])
    assert path_matches(expected["path"], [".".join("*" for _ in segments)])
    if len(segments) > 1:
        assert not path_matches(expected["path"], ["nothere"])


# -- the rules written out, one example each -------------------------------------------------


def test_lists_keep_order_and_sets_and_mappings_do_not() -> None:
    assert (
        differences({"s": {1, 2}, "m": {"a": 1, "b": 2}}, {"s": {2, 1}, "m": {"b": 2, "a": 1}})
        == []
    )
    assert differences({"l": [1, 2]}, {"l": [2, 1]}) == [
        {"path": "l[0]", "kind": "changed", "expected": 1, "actual": 2},
        {"path": "l[1]", "kind": "changed", "expected": 2, "actual": 1},
    ]
    assert differences((1, 2), [1, 2]) == [
        {
            "path": "(state)",
            "kind": "changed",
            "expected": [1, 2],
            "actual": [1, 2],
            "note": "type tuple != list",
        }
    ]
    assert differences({"n": 1}, {"n": 1.0}) == []  # numbers by value
    assert differences({"n": 1}, {"n": True}) == [
        {"path": "n", "kind": "changed", "expected": 1, "actual": True}  # a bool is no number
    ]


def test_set_elements_that_are_objects_pair_up_by_structure() -> None:
    class Tag:
        def __init__(self, label: str) -> None:
            self.label = label

    assert differences({Tag("a"), Tag("b")}, {Tag("b"), Tag("a")}) == []
    assert differences({Tag("a")}, {Tag("c")}) == [
        {
            "path": "(state)",
            "kind": "missing",
            "expected": {"label": "a"},
            "note": "an element of the set",
        },
        {
            "path": "(state)",
            "kind": "unexpected",
            "actual": {"label": "c"},
            "note": "an element of the set",
        },
    ]


def test_an_own_eq_that_says_unequal_with_no_visible_difference_is_named() -> None:
    class Secret:
        def __init__(self, key: int) -> None:
            self._key = key

        def __eq__(self, other: object) -> bool:
            return isinstance(other, Secret) and self._key == other._key

    assert differences({"s": Secret(1)}, {"s": Secret(1)}) == []
    assert differences({"s": Secret(1)}, {"s": Secret(2)}) == [
        {
            "path": "s",
            "kind": "changed",
            "expected": {},
            "actual": {},
            "note": "unequal by "
            "test_an_own_eq_that_says_unequal_with_no_visible_difference_is_named.<locals>.Secret"
            ".__eq__",
        }
    ]


def test_too_deep_a_state_is_refused_with_the_depth_named() -> None:
    deep: list[Any] = []
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(WorldStateError, match=f"nests deeper than {MAX_DEPTH} levels"):
        compare_states(deep, copy.deepcopy(deep))
    with pytest.raises(WorldStateError, match=f"nests deeper than {MAX_DEPTH} levels"):
        ToolWorld.from_object(Holder(deep))


def test_a_difference_reads_as_one_line() -> None:
    (difference,) = compare_states({"files": {"a.txt": "x"}}, {"files": {"a.txt": "y"}})
    assert difference == Difference("files['a.txt']", "changed", "x", "y")
    assert difference.brief() == "files['a.txt']: expected 'x', got 'y'"


class Colour(Enum):
    RED = "red"


class Model(BaseModel):
    name: str
    tags: set[str] = set()
    owner: Any = None


class Raises:
    def __init__(self, value: int) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        raise TypeError("cannot compare")


def test_values_of_every_kind_render_as_json_with_no_address() -> None:
    lock = threading.Lock()
    state = {
        "colour": Colour.RED,
        "when": datetime(2024, 5, 1, 12, 30, tzinfo=timezone.utc),
        "price": Decimal("9.50"),
        "model": Model(name="m", tags={"b", "a"}, owner=Plain([("id", 1)])),
        "slots": Slotted(1, [2]),
        "lock": lock,
        "hook": len,
        "kind": Model,
        "raw": b"\xff",
        "pair": (1, 2),
    }
    assert ToolWorld.from_object(Holder(state)).state == {
        "colour": "red",
        "when": "2024-05-01T12:30:00Z",
        "price": "9.50",
        "model": {"name": "m", "tags": ["a", "b"], "owner": {"id": 1}},
        "slots": {"a": 1, "b": [2]},
        "lock": "<lock>",
        "hook": "<builtin_function_or_method len>",
        "kind": "<ModelMetaclass Model>",
        "raw": "<bytes>",
        "pair": [1, 2],
    }
    # A pydantic model's own == would compare the Plain inside by identity: walked instead.
    assert (
        differences(
            Model(name="m", owner=Plain([("id", 1)])), Model(name="m", owner=Plain([("id", 1)]))
        )
        == []
    )
    assert differences(
        Model(name="m", owner=Plain([("id", 1)])), Model(name="m", owner=Plain([("id", 2)]))
    ) == [{"path": "owner.id", "kind": "changed", "expected": 1, "actual": 2}]
    assert differences(
        {"when": datetime(2024, 5, 1, tzinfo=timezone.utc)},
        {"when": datetime(2024, 5, 2, tzinfo=timezone.utc)},
    ) == [
        {
            "path": "when",
            "kind": "changed",
            "expected": "2024-05-01T00:00:00Z",
            "actual": "2024-05-02T00:00:00Z",
        }
    ]


def test_objects_as_keys_pair_up_and_an_eq_that_raises_is_noted() -> None:
    class Key:
        def __init__(self, name: str) -> None:
            self.name = name

    assert differences({Key("a"): 1}, {Key("a"): 1}) == []
    (found,) = differences({Key("a"): 1}, {Key("a"): 2})
    assert (found["kind"], found["expected"], found["actual"]) == ("changed", 1, 2)
    assert differences({"r": Raises(1)}, {"r": Raises(2)}) == [
        {"path": "r.value", "kind": "changed", "expected": 1, "actual": 2}
    ]
    (same,) = differences({"r": Raises(1)}, {"r": Raises(1)})
    assert same["note"] == "Raises.__eq__ raised TypeError: cannot compare"


def test_differences_read_as_lines_of_each_kind() -> None:
    missing, unexpected = compare_states({"a": 1}, {"b": 2})
    assert missing.brief() == "a: expected 1, missing"
    assert unexpected.brief() == "b: unexpected 2"

"""Per-argument matching rules for the tool-call and trajectory metrics (``arg_rules=``).

``arg_rules={"tool": {"arg": rule}}`` says how one argument of one tool is compared; ``"*"``
stands for any tool (``{"*": {"request_id": ignore()}}``) or for the tool's unnamed arguments
(``{"search": {"*": casefold()}}``). Arguments no rule covers keep the metric's own default
(ragas parity for ToolCallAccuracy, JSON-value equality for ToolCallF1 and the trajectories).

A rule is an :class:`ArgRule` (built by :func:`exact`, :func:`ignore`, :func:`numeric`,
:func:`casefold`, :func:`fuzzy`, :func:`subset`, :func:`superset`), one of those functions
itself (its defaults), a rule name (``"casefold"``), a dict (``{"kind": "numeric",
"tolerance": 0.5}``, handy in JSON and on the command line), a single-turn metric (it scores
``str(value)``) or any callable ``fn(reference_value, predicted_value) -> float | bool``, sync
or async, which receives the JSON values as they are.

Longer than 400 lines: :class:`ArgRule` (one class with every rule kind's comparison and its
JSON form), its builders and the :class:`RuleBook` that resolves ``tool``/``*`` keys are one
vocabulary, documented in one place.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from turneval.errors import ConfigError
from turneval.messages import ToolCall
from turneval.metrics._compare import ArgComparator, resolve_comparator
from turneval.metrics._matching import json_key
from turneval.metrics._text import DistanceMeasure, similarity_functions
from turneval.metrics.base import SingleTurnScoring

__all__ = [
    "ANY",
    "ArgRule",
    "RuleBook",
    "casefold",
    "exact",
    "fuzzy",
    "ignore",
    "numeric",
    "resolve_rules",
    "subset",
    "superset",
]

ANY = "*"
"""The key standing for any tool, or for a tool's unnamed arguments."""

RuleKind = Literal[
    "exact", "ignore", "numeric", "casefold", "fuzzy", "subset", "superset", "custom"
]
_KINDS = ("exact", "ignore", "numeric", "casefold", "fuzzy", "subset", "superset")


def _number(value: Any) -> float | None:
    if type(value) in (int, float):
        return float(value)
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


def _folded(value: Any) -> Any:
    if isinstance(value, str):
        return value.casefold()
    if isinstance(value, list):
        return [_folded(item) for item in value]
    if isinstance(value, dict):
        return {key: _folded(item) for key, item in value.items()}
    return value


def _contained(inner: Any, outer: Any) -> bool:
    """Whether every item (list) or key/value pair (dict) of ``inner`` is in ``outer``."""
    if isinstance(inner, list) and isinstance(outer, list):
        keys = {json_key(item) for item in outer}
        return all(json_key(item) in keys for item in inner)
    if isinstance(inner, dict) and isinstance(outer, dict):
        return all(
            key in outer and json_key(outer[key]) == json_key(item) for key, item in inner.items()
        )
    return json_key(inner) == json_key(outer)


class ArgRule(BaseModel):
    """How one argument's predicted value is compared with its reference value.

    Scores are in [0, 1]; every built-in rule gives 1.0 or 0.0.

    Attributes:
        kind: ``exact`` (equal as JSON values: ``1 == 1.0``, ``"1" != 1``, key order free),
            ``ignore`` (the argument is left out on both sides), ``numeric`` (numbers, or
            numeric strings, within ``tolerance``; other values exact), ``casefold`` (strings
            equal ignoring case, also inside lists and dicts), ``fuzzy`` (string similarity
            under ``measure`` at least ``threshold``), ``subset`` (the predicted list/dict holds
            only items of the reference's), ``superset`` (it holds every item of the
            reference's), or ``custom`` (``compare`` decides).
        tolerance: ``numeric``: the absolute difference allowed.
        relative: ``numeric``: the difference allowed relative to the larger magnitude.
        threshold: ``fuzzy``: the similarity needed.
        measure: ``fuzzy``: the similarity measure (as in ``NonLLMStringSimilarity``).
        compare: ``custom``: a single-turn metric (scores ``str(value)``) or a callable
            ``fn(reference_value, predicted_value) -> float | bool``, sync or async.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    kind: RuleKind
    tolerance: float = Field(default=0.0, ge=0.0)
    relative: float = Field(default=0.0, ge=0.0)
    threshold: float = Field(default=0.8, ge=0.0, le=1.0)
    measure: DistanceMeasure = DistanceMeasure.LEVENSHTEIN
    compare: Any = None

    @model_validator(mode="after")
    def _check_compare(self) -> ArgRule:
        if self.kind == "custom":
            if not (isinstance(self.compare, SingleTurnScoring) or callable(self.compare)):
                raise ValueError(
                    "a custom rule needs compare=<single-turn metric or callable "
                    f"fn(reference, prediction)>, got {type(self.compare).__name__}"
                )
        elif self.compare is not None:
            raise ValueError(f"compare= is only for custom rules, not {self.kind!r}")
        return self

    @property
    def label(self) -> str:
        """A short description, e.g. ``numeric(tolerance=0.5)``."""
        if self.kind == "numeric":
            return f"numeric(tolerance={self.tolerance:g}, relative={self.relative:g})"
        if self.kind == "fuzzy":
            return f"fuzzy(threshold={self.threshold:g}, measure={self.measure.value})"
        if self.kind == "custom":
            target = self.compare
            return getattr(target, "__qualname__", type(target).__name__)
        return self.kind

    @cached_property
    def sync(self) -> Callable[[Any, Any], float] | None:
        """The rule as a plain function of ``(reference, prediction)``, or None if async."""
        kind = self.kind
        if kind == "exact" or kind == "ignore":
            return lambda ref, pred: 1.0 if json_key(ref) == json_key(pred) else 0.0
        if kind == "numeric":
            return self._numeric
        if kind == "casefold":
            return lambda ref, pred: (
                1.0 if json_key(_folded(ref)) == json_key(_folded(pred)) else 0.0
            )
        if kind == "fuzzy":
            similarity, threshold = similarity_functions()[self.measure], self.threshold
            return lambda ref, pred: 1.0 if similarity(str(ref), str(pred)) >= threshold else 0.0
        if kind == "subset":
            return lambda ref, pred: 1.0 if _contained(pred, ref) else 0.0
        if kind == "superset":
            return lambda ref, pred: 1.0 if _contained(ref, pred) else 0.0
        return self._custom_sync

    def _numeric(self, reference: Any, prediction: Any) -> float:
        ref, pred = _number(reference), _number(prediction)
        if ref is None or pred is None:
            return 1.0 if json_key(reference) == json_key(prediction) else 0.0
        close = math.isclose(ref, pred, rel_tol=self.relative, abs_tol=self.tolerance)
        return 1.0 if close else 0.0

    @cached_property
    def _custom_sync(self) -> Callable[[Any, Any], float] | None:
        target = self.compare
        if isinstance(target, SingleTurnScoring):
            comparator = resolve_comparator(target)
            assert comparator is not None
            if comparator.sync is None:
                return None
            sync = comparator.sync
            return lambda ref, pred: sync(str(ref), str(pred))
        if inspect.iscoroutinefunction(target) or inspect.iscoroutinefunction(
            getattr(target, "__call__", None)  # noqa: B004 - objects with an async __call__
        ):
            return None

        def call(reference: Any, prediction: Any) -> float:
            value = target(reference, prediction)
            if inspect.isawaitable(value):
                close = getattr(value, "close", None)
                if close is not None:
                    close()
                raise ConfigError(
                    f"arg rule {self.label} returned an awaitable from a plain function; "
                    "declare it with 'async def'"
                )
            return self._checked(value, reference, prediction)

        return call

    def _checked(self, value: Any, reference: Any, prediction: Any) -> float:
        number = float(value) if isinstance(value, (bool, int, float)) else math.nan
        if not 0.0 <= number <= 1.0:
            raise ConfigError(
                f"arg rule {self.label} returned {value!r} for reference={reference!r}, "
                f"prediction={prediction!r}; expected a float in [0, 1] or a bool"
            )
        return number

    async def ascore(self, reference: Any, prediction: Any) -> float:
        """Score ``prediction`` against ``reference`` (JSON values), in [0, 1]."""
        sync = self.sync
        if sync is not None:
            return sync(reference, prediction)
        target = self.compare
        if isinstance(target, SingleTurnScoring):
            comparator: ArgComparator | None = resolve_comparator(target)
            assert comparator is not None
            return await comparator(str(reference), str(prediction))
        return self._checked(await target(reference, prediction), reference, prediction)


def exact() -> ArgRule:
    """Equal as JSON values (``1 == 1.0``, ``"1" != 1``, ``true != 1``, key order free)."""
    return ArgRule(kind="exact")


def ignore() -> ArgRule:
    """Leave the argument out on both sides (ids, timestamps, other non-deterministic values)."""
    return ArgRule(kind="ignore")


def casefold() -> ArgRule:
    """Strings equal ignoring case (``str.casefold``), also inside lists and dicts."""
    return ArgRule(kind="casefold")


def subset() -> ArgRule:
    """The predicted list (dict) holds only items (key/value pairs) of the reference's."""
    return ArgRule(kind="subset")


def superset() -> ArgRule:
    """The predicted list (dict) holds every item (key/value pair) of the reference's."""
    return ArgRule(kind="superset")


def numeric(tolerance: float = 0.0, *, relative: float = 0.0) -> ArgRule:
    """Numbers (or numeric strings) within ``tolerance``, or ``relative`` of the larger one.

    ``1``, ``1.0`` and ``"1"`` are equal; values that are not numbers are compared exactly.
    """
    return ArgRule(kind="numeric", tolerance=tolerance, relative=relative)


def fuzzy(
    threshold: float = 0.8, measure: DistanceMeasure | str = DistanceMeasure.LEVENSHTEIN
) -> ArgRule:
    """``str(value)`` similarity under ``measure`` (rapidfuzz) at least ``threshold``."""
    return ArgRule(kind="fuzzy", threshold=threshold, measure=DistanceMeasure(measure))


_FACTORIES: dict[Any, Callable[[], ArgRule]] = {
    exact: exact,
    ignore: ignore,
    casefold: casefold,
    subset: subset,
    superset: superset,
    numeric: numeric,
    fuzzy: fuzzy,
}


def _rule(value: Any, where: str) -> ArgRule:
    if isinstance(value, ArgRule):
        return value
    if isinstance(value, str):
        if value not in _KINDS:
            raise ConfigError(
                f"{where}: unknown rule {value!r}; expected one of {', '.join(_KINDS)}, "
                "a single-turn metric or a callable fn(reference, prediction)"
            )
        return ArgRule(kind=value)
    if isinstance(value, Mapping):
        try:
            return ArgRule.model_validate(dict(value))
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from exc
    factory = _FACTORIES.get(value) if not isinstance(value, SingleTurnScoring) else None
    if factory is not None:
        return factory()
    if isinstance(value, SingleTurnScoring) or callable(value):
        return ArgRule(kind="custom", compare=value)
    raise ConfigError(
        f"{where}: a rule must be an ArgRule, a rule name, a single-turn metric or a callable, "
        f"got {type(value).__name__}"
    )


def resolve_rules(value: Any) -> dict[str, dict[str, ArgRule]] | None:
    """Validate ``arg_rules`` and turn every rule into an :class:`ArgRule`.

    Raises:
        ConfigError: naming the tool and argument of the first malformed entry.
    """
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ConfigError(
            f'arg_rules must be a dict {{"tool": {{"arg": rule}}}}, got {type(value).__name__}'
        )
    resolved: dict[str, dict[str, ArgRule]] = {}
    for tool, rules in value.items():
        if not isinstance(tool, str) or not tool:
            raise ConfigError(f"arg_rules: tool names must be non-empty strings, got {tool!r}")
        if not isinstance(rules, Mapping):
            raise ConfigError(
                f"arg_rules[{tool!r}] must be a dict {{arg: rule}}, got {type(rules).__name__}"
            )
        resolved[tool] = {}
        for arg, rule in rules.items():
            if not isinstance(arg, str) or not arg:
                raise ConfigError(
                    f"arg_rules[{tool!r}]: argument names must be non-empty strings, got {arg!r}"
                )
            resolved[tool][arg] = _rule(rule, f"arg_rules[{tool!r}][{arg!r}]")
    return resolved


class RuleBook:
    """Resolved ``arg_rules``: which rule governs each (tool, argument).

    Precedence: ``rules[tool][arg]``, then ``rules["*"][arg]``, then ``rules[tool]["*"]``,
    then ``rules["*"]["*"]``; None leaves the argument to the metric's default.

    Attributes:
        rules: The resolved rules.
        tools: The tools named (``"*"`` aside).
        equality_only: Every rule is ``ignore`` or ``exact`` (JSON equality of what is left).
        all_sync: Every rule can be scored without awaiting.
    """

    __slots__ = ("_cache", "_ignoring", "all_sync", "equality_only", "rules", "tools")

    def __init__(self, rules: dict[str, dict[str, ArgRule]]) -> None:
        """Index ``rules`` (as returned by :func:`resolve_rules`)."""
        self.rules = rules
        self.tools = frozenset(tool for tool in rules if tool != ANY)
        self._cache: dict[str, tuple[dict[str, ArgRule], ArgRule | None]] = {}
        self._ignoring: dict[str, tuple[frozenset[str], bool]] = {}
        every = [rule for rules in rules.values() for rule in rules.values()]
        self.equality_only = all(rule.kind in ("ignore", "exact") for rule in every)
        self.all_sync = all(rule.sync is not None for rule in every)

    def for_tool(self, tool: str) -> tuple[dict[str, ArgRule], ArgRule | None]:
        """The named-argument rules of ``tool`` and its rule for unnamed arguments."""
        found = self._cache.get(tool)
        if found is None:
            anywhere = self.rules.get(ANY, {})
            own = self.rules.get(tool, {})
            named = {arg: rule for arg, rule in anywhere.items() if arg != ANY}
            named.update((arg, rule) for arg, rule in own.items() if arg != ANY)
            found = self._cache[tool] = (named, own.get(ANY, anywhere.get(ANY)))
        return found

    def ignored(self, tool: str) -> Callable[[str], bool]:
        """A predicate: is this argument of ``tool`` ignored?"""
        named, default = self.for_tool(tool)
        default_ignored = default is not None and default.kind == "ignore"
        return lambda arg: named[arg].kind == "ignore" if arg in named else default_ignored

    def without_ignored(self, calls: list[ToolCall]) -> list[ToolCall]:
        """``calls`` with the arguments the rules ignore removed (others returned as they are)."""
        kept: list[ToolCall] = []
        plans = self._ignoring
        for call in calls:
            name = call.name
            plan = plans.get(name)
            if plan is None:
                plan = plans[name] = self._ignore_plan(name)
            names, everything_else = plan
            args = call.args
            if everything_else:  # unnamed arguments are ignored: keep the named, unignored ones
                named = self.for_tool(name)[0]
                kept_args = {
                    k: v for k, v in args.items() if k in named and named[k].kind != "ignore"
                }
            elif names and not names.isdisjoint(args):
                kept_args = {k: v for k, v in args.items() if k not in names}
            else:
                kept.append(call)
                continue
            kept.append(ToolCall.model_construct(name=name, args=kept_args, id=call.id))
        return kept

    def _ignore_plan(self, tool: str) -> tuple[frozenset[str], bool]:
        """The argument names ``tool`` ignores, and whether its unnamed arguments are ignored."""
        named, default = self.for_tool(tool)
        ignored = frozenset(arg for arg, rule in named.items() if rule.kind == "ignore")
        return ignored, default is not None and default.kind == "ignore"

    def union_score_sync(
        self, tool: str, reference: dict[str, Any], prediction: dict[str, Any]
    ) -> float:
        """:meth:`union_score` with JSON-value equality as the fallback, when ``all_sync``."""
        named, default = self.for_tool(tool)
        total, counted = 0.0, 0
        for key in list(reference) + [key for key in prediction if key not in reference]:
            rule = named.get(key, default)
            if rule is not None and rule.kind == "ignore":
                continue
            counted += 1
            if key in reference and key in prediction:
                ref, pred = reference[key], prediction[key]
                if rule is None:
                    total += 1.0 if json_key(ref) == json_key(pred) else 0.0
                else:
                    total += rule.sync(ref, pred)  # type: ignore[misc]
        return total / counted if counted else 1.0

    async def union_score(
        self,
        tool: str,
        reference: dict[str, Any],
        prediction: dict[str, Any],
        fallback: ArgComparator | None,
    ) -> float:
        """Mean rule score over both calls' keys (one-sided keys 0; ignored ones left out).

        Unruled keys use ``fallback`` on ``str(value)``, or JSON-value equality when None.
        No key left on either side scores 1.0.
        """
        named, default = self.for_tool(tool)
        total, counted = 0.0, 0
        keys = list(reference) + [key for key in prediction if key not in reference]
        for key in keys:
            rule = named.get(key, default)
            if rule is not None and rule.kind == "ignore":
                continue
            counted += 1
            if key not in reference or key not in prediction:
                continue
            ref, pred = reference[key], prediction[key]
            if rule is not None:
                sync = rule.sync
                total += sync(ref, pred) if sync is not None else await rule.ascore(ref, pred)
            elif fallback is None:
                total += 1.0 if json_key(ref) == json_key(pred) else 0.0
            else:
                total += await fallback(str(ref), str(pred))
        return total / counted if counted else 1.0

    async def reference_scores(
        self,
        tool: str,
        reference: dict[str, Any],
        prediction: dict[str, Any],
        fallback: ArgComparator,
    ) -> tuple[float, dict[str, float]]:
        """ToolCallAccuracy's pair score: the mean over the reference's (unignored) keys.

        A missing key scores 0 and extra predicted keys are ignored; with no key left on the
        reference, the pair scores 1 if the prediction has none left either, else 0.
        Unruled keys use ``fallback`` on ``str(value)``. Returns the score and each key's.
        """
        ignored = self.ignored(tool)
        keys = [key for key in reference if not ignored(key)]
        if not keys:
            return (0.0 if any(not ignored(key) for key in prediction) else 1.0), {}
        named, default = self.for_tool(tool)
        scores: dict[str, float] = {}
        for key in keys:
            if key not in prediction:
                scores[key] = 0.0
                continue
            rule = named.get(key, default)
            ref, pred = reference[key], prediction[key]
            if rule is None:
                scores[key] = await fallback(str(ref), str(pred))
            else:
                sync = rule.sync
                scores[key] = sync(ref, pred) if sync is not None else await rule.ascore(ref, pred)
        return sum(scores.values()) / len(keys), scores

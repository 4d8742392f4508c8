"""The float path's core: what the accuracy and the matching kernels both read.

The float path of the tool-call and trajectory metrics is one plain function per metric,
built from the metric's formula: ToolCallAccuracy's in :mod:`._float_accuracy` (its unordered
pairing in :mod:`._float_unordered`), the call-matching metrics' (ToolCallF1, the trajectory
metrics) in :mod:`._float_matching`. Under the default configuration ``multi_turn_ascore``
calls it with the sample's messages and reference calls, and returns what it returns: no
coroutine besides its own, no outcome object, no comparison records. Each gives exactly the
float :meth:`~turneval.metrics.base.Metric.ascore` gives (``tests/metrics/test_reference_impl.py``
checks both paths against slow references written from the definitions).

Three shortcuts carry most of the speed, all exact:

* Call equality (JSON values of args) is first decided on ``(name, JSON text of args)``, as
  :class:`~turneval.metrics._matching.CallComparison` does with ``pydantic_core.to_json``;
  :func:`args_text` gives texts with the same equality classes, faster (orjson when installed,
  :data:`dumps`).
* The multiset metrics pair short call lists by Python equality checked value by value for
  what Python conflates (``True == 1``), without texts; a NaN sends the sample back to texts.
* ToolCallAccuracy scores an argument by ``str(reference) == str(prediction)`` (ragas);
  :func:`same_text` decides that without building the strings for same-typed values, and for
  nested values by comparing their JSON texts.

The kernels only count (matched calls, the equal prefix, calls found in order, summed
argument scores); every value comes from the metric's formula (:mod:`._formulas`), bound once
when the function is built: a count formula's values are read from its table by sizes
(:meth:`~turneval.metrics._formulas.CountFormula.row`), ToolCallAccuracy's pair scores from
its rows by arg counts (:attr:`~turneval.metrics._formulas.AccuracyFormula.pair_rows`), and
its mean formula is called as a local. The kernels import every name they call from here
directly (a global read, never an attribute of another module in a hot loop).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any

from pydantic_core import to_json

from turneval.messages import AIMessage, Message, ToolCall

__all__ = [
    "ArgsScore",
    "Kernel",
    "PairFormula",
    "args_text",
    "by_name",
    "dumps",
    "predicted_calls",
    "same_text",
]

Kernel = Callable[[Sequence[Message], list[ToolCall]], float]
"""``(messages, reference calls) -> value``: a metric's float path."""
ArgsScore = Callable[[dict[str, Any], dict[str, Any]], float]
"""``(reference args, predicted args) -> the pair's score`` (ToolCallAccuracy)."""
PairFormula = Callable[[int, int, float], float]
""":attr:`~turneval.metrics._formulas.AccuracyFormula.pair`."""

dumps: Callable[[Any], bytes]
"""A JSON writer to bytes: orjson's when installed (the ``fast`` extra), else pydantic's."""
try:
    from orjson import dumps
except ImportError:  # pragma: no cover - exercised only without orjson (the ``fast`` extra)
    dumps = to_json

by_name = attrgetter("name")
"""A call's name (the key of ragas' sort by name)."""


def predicted_calls(messages: Sequence[Message]) -> list[ToolCall]:
    """Every AIMessage's tool calls, flattened in order (``MultiTurnSample.tool_calls``)."""
    calls: list[ToolCall] = []
    for message in messages:
        if type(message) is AIMessage:
            found = message.tool_calls
            if found:
                calls += found
    return calls


def args_text(args: dict[str, Any]) -> bytes:
    """A JSON text of ``args``; two texts are equal exactly when their ``to_json`` texts are.

    orjson writes NaN and infinities as ``null``, so a text holding ``null`` is replaced by
    pydantic's (which keeps them apart from ``None``), as is any text orjson refuses (integers
    beyond 64 bits, lone surrogates: pydantic then writes the number or raises its own error,
    as before).
    """
    try:
        text = dumps(args)
    except TypeError:
        return to_json(args)
    if text.find(b"null") < 0:
        return text
    return to_json(args)


def same_text(reference: Any, prediction: Any) -> bool:
    """``str(reference) == str(prediction)`` for JSON values, mostly without ``str()``.

    Same-typed strings, integers and booleans compare directly; floats directly except for
    zeros (``-0.0``) and NaN; lists and dicts by their JSON texts (equal ``str()`` implies equal
    texts, and equal texts of equal values imply equal ``str()``); anything else by ``str()``.
    """
    kind = type(reference)
    if kind is not type(prediction):
        return str(reference) == str(prediction)
    if kind is str or kind is int or kind is bool:
        return bool(reference == prediction)
    if kind is float:
        if reference == prediction:
            return bool(reference) or str(reference) == str(prediction)
        return bool(reference != reference and prediction != prediction)  # both NaN: "nan"
    if kind is dict or kind is list:
        try:
            if dumps(reference) != dumps(prediction):
                return False
        except (TypeError, ValueError):
            return str(reference) == str(prediction)
        return bool(reference == prediction) or str(reference) == str(prediction)
    return str(reference) == str(prediction)

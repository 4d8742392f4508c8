"""Vertex AI's tool-call metrics on JSON instances: valid, name, parameter key and key/value match.

An instance (``response`` = prediction, ``reference``) is a JSON string
``{"content": str, "tool_calls": [{"name": str, "arguments": {...}}]}``; ``tool_calls`` may also
be a JSON string of that list, and ``arguments`` a JSON string of the object. On a
``MultiTurnSample`` the prediction is the last AI message that made tool calls, the reference
``reference_tool_calls``.

Vertex computes these on its servers without publishing formulas; ours are:

* calls are aligned by position (the i-th predicted call with the i-th reference call) over
  ``max(len(predicted), len(reference))`` positions; a position missing on one side scores 0;
* ``tool_call_valid``: 1 if the prediction parses, has at least one call, and every call has a
  non-empty string ``name`` and object ``arguments``;
* ``tool_name_match``: 1 if both lists have the same length and names position by position
  (both empty: 1);
* ``tool_parameter_key_match``: mean over positions of the share of the reference call's argument
  keys present in the predicted call (a reference call without arguments: 1);
* ``tool_parameter_kv_match``: mean over positions of the share of the reference call's
  key/value pairs whose values are equal: as JSON values with ``use_strict_string_match=True``,
  else after normalising case, whitespace and number formatting (``"1.0"``, ``1`` and ``1.0``
  are equal; ``"Paris "`` equals ``"paris"``).

A malformed prediction scores 0 (with the parse error as the reason); a malformed reference is a
data error (:class:`~turneval.errors.InvalidSampleError`).
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, ClassVar

from turneval.errors import InvalidSampleError
from turneval.messages import AIMessage
from turneval.metrics._matching import json_key
from turneval.metrics.base import (
    Explained,
    Metric,
    MultiTurnScoring,
    SingleTurnScoring,
    missing_field,
)
from turneval.results import ratio
from turneval.samples import MultiTurnSample, Sample, SingleTurnSample

__all__ = [
    "ToolCallValid",
    "ToolNameMatch",
    "ToolParameterKVMatch",
    "ToolParameterKeyMatch",
    "parse_tool_calls",
]


@dataclass(frozen=True, slots=True)
class _Call:
    name: str
    arguments: dict[str, Any]


class _Malformed(ValueError):
    pass


def parse_tool_calls(text: str) -> list[dict[str, Any]]:
    """Parse a Vertex instance string into ``[{"name", "arguments"}]`` (raises ValueError).

    Accepts ``tool_calls`` as a list or a JSON string of one, and ``arguments`` as an object, a
    JSON string of one, or missing (``{}``). A missing or null ``tool_calls`` is no call.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise _Malformed(f"not valid JSON ({exc.msg} at column {exc.colno})") from exc
    if not isinstance(data, dict):
        raise _Malformed(f"expected a JSON object with 'tool_calls', got {type(data).__name__}")
    calls = data.get("tool_calls")
    if calls is None:
        return []
    if isinstance(calls, str):
        try:
            calls = json.loads(calls)
        except json.JSONDecodeError as exc:
            raise _Malformed(f"'tool_calls' is a string but not valid JSON ({exc.msg})") from exc
    if not isinstance(calls, list):
        raise _Malformed(f"'tool_calls' must be a list, got {type(calls).__name__}")
    parsed = []
    for index, call in enumerate(calls):
        if not isinstance(call, dict):
            raise _Malformed(f"tool_calls[{index}] must be an object")
        arguments = call.get("arguments", {})
        if isinstance(arguments, str):
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except json.JSONDecodeError as exc:
                raise _Malformed(
                    f"tool_calls[{index}].arguments is not valid JSON ({exc.msg})"
                ) from exc
        parsed.append({"name": call.get("name"), "arguments": arguments})
    return parsed


def _well_formed(calls: list[dict[str, Any]]) -> list[_Call]:
    result = []
    for index, call in enumerate(calls):
        if not isinstance(call["name"], str) or not call["name"]:
            raise _Malformed(f"tool_calls[{index}].name must be a non-empty string")
        if not isinstance(call["arguments"], dict):
            raise _Malformed(f"tool_calls[{index}].arguments must be a JSON object")
        result.append(_Call(call["name"], call["arguments"]))
    return result


_SPACES = re.compile(r"\s+")


def _loose(value: Any) -> Hashable:
    """Normalise case, whitespace and number formatting, recursively."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        number = float(value)
        return str(int(number)) if number.is_integer() else repr(number)
    if isinstance(value, str):
        text = _SPACES.sub(" ", value.strip()).casefold()
        try:
            return _loose(float(text)) if text not in {"nan", "inf", "-inf", "infinity"} else text
        except ValueError:
            return text
    if isinstance(value, dict):
        return frozenset((_loose(k), _loose(v)) for k, v in value.items())
    if isinstance(value, list):
        return tuple(_loose(item) for item in value)
    return str(value)


class _ToolJsonMetric(MultiTurnScoring, SingleTurnScoring, Metric[Sample], ABC):
    needs_reference: ClassVar[bool] = True

    def _predicted(self, sample: SingleTurnSample | MultiTurnSample) -> list[_Call]:
        """The prediction's calls; raises _Malformed for a malformed prediction."""
        if isinstance(sample, MultiTurnSample):
            for message in reversed(sample.user_input):
                if isinstance(message, AIMessage) and message.tool_calls:
                    return [_Call(c.name, dict(c.args)) for c in message.tool_calls]
            return []
        if sample.response is None:
            raise missing_field(self, "response")
        return _well_formed(parse_tool_calls(sample.response))

    def _reference(self, sample: SingleTurnSample | MultiTurnSample) -> list[_Call]:
        if isinstance(sample, MultiTurnSample):
            if sample.reference_tool_calls is None:
                raise missing_field(self, "reference_tool_calls")
            return [_Call(c.name, dict(c.args)) for c in sample.reference_tool_calls]
        if sample.reference is None:
            raise missing_field(self, "reference")
        try:
            return _well_formed(parse_tool_calls(sample.reference))
        except _Malformed as exc:
            raise InvalidSampleError(
                f"metric {self.name!r}: the reference is not tool-call JSON: {exc}",
                field="reference",
            ) from exc

    async def _evaluate(self, sample: SingleTurnSample | MultiTurnSample) -> Explained:
        reference = self._reference(sample) if self.needs_reference else []
        try:
            predicted = self._predicted(sample)
        except _Malformed as exc:
            return Explained(0.0, f"the prediction is not valid tool-call JSON: {exc}: 0")
        return self._score(predicted, reference)

    @abstractmethod
    def _score(self, predicted: list[_Call], reference: list[_Call]) -> Explained: ...


class ToolCallValid(_ToolJsonMetric):
    """1 if the prediction is tool-call JSON with at least one well-formed call; needs no reference."""

    name: str = "tool_call_valid"
    needs_reference: ClassVar[bool] = False

    def _score(self, predicted: list[_Call], reference: list[_Call]) -> Explained:
        if not predicted:
            return Explained(0.0, "the prediction has no tool call: 0")
        names = [call.name for call in predicted]
        return Explained(1.0, f"{len(predicted)} well-formed call(s) {names}: 1")


class ToolNameMatch(_ToolJsonMetric):
    """1 if the predicted and reference calls have the same names, position by position."""

    name: str = "tool_name_match"

    def _score(self, predicted: list[_Call], reference: list[_Call]) -> Explained:
        pred_names = [call.name for call in predicted]
        ref_names = [call.name for call in reference]
        if pred_names == ref_names:
            return Explained(1.0, f"names match: {ref_names}: 1", {"names": ref_names})
        reason = f"names differ: predicted {pred_names} vs reference {ref_names}: 0"
        return Explained(0.0, reason, {"predicted": pred_names, "reference": ref_names})


def _positions(
    predicted: list[_Call], reference: list[_Call]
) -> list[tuple[_Call | None, _Call | None]]:
    size = max(len(predicted), len(reference))
    return [
        (predicted[i] if i < len(predicted) else None, reference[i] if i < len(reference) else None)
        for i in range(size)
    ]


def _mean_over_positions(
    predicted: list[_Call],
    reference: list[_Call],
    label: str,
    share: Any,
    suffix: str = "",
) -> Explained:
    """Mean over aligned positions of ``share(pred, ref) -> (count, total)``.

    A position missing on one side scores 0; a reference call without arguments scores 1.
    """
    pairs = _positions(predicted, reference)
    if not pairs:
        return Explained(1.0, "no call on either side: 1")
    scores, parts = [], []
    for pred, ref in pairs:
        if pred is None or ref is None:
            scores.append(0.0)
            parts.append("missing call: 0")
        elif not ref.arguments:
            scores.append(1.0)
            parts.append(f"{ref.name}: no reference arguments: 1")
        else:
            count, total = share(pred, ref)
            scores.append(count / total)
            parts.append(ratio(f"{ref.name} {label}", count, total, scores[-1]))
    value = sum(scores) / len(scores)
    return Explained(
        value, f"{'; '.join(parts)}; mean={value:.3f}{suffix}", {"position_scores": scores}
    )


class ToolParameterKeyMatch(_ToolJsonMetric):
    """Mean over aligned calls of the share of the reference's argument keys present."""

    name: str = "tool_parameter_key_match"

    def _score(self, predicted: list[_Call], reference: list[_Call]) -> Explained:
        def share(pred: _Call, ref: _Call) -> tuple[int, int]:
            return sum(1 for key in ref.arguments if key in pred.arguments), len(ref.arguments)

        return _mean_over_positions(predicted, reference, "keys", share)


class ToolParameterKVMatch(_ToolJsonMetric):
    """Mean over aligned calls of the share of the reference's key/value pairs matched.

    Attributes:
        use_strict_string_match: Compare values as exact JSON values; by default they are
            compared after normalising case, whitespace and number formatting.
    """

    name: str = "tool_parameter_kv_match"
    use_strict_string_match: bool = False

    def _score(self, predicted: list[_Call], reference: list[_Call]) -> Explained:
        same = json_key if self.use_strict_string_match else _loose

        def share(pred: _Call, ref: _Call) -> tuple[int, int]:
            equal = sum(
                1
                for key, value in ref.arguments.items()
                if key in pred.arguments and same(pred.arguments[key]) == same(value)
            )
            return equal, len(ref.arguments)

        mode = "strict" if self.use_strict_string_match else "normalised"
        return _mean_over_positions(predicted, reference, "key/values", share, f" ({mode} values)")

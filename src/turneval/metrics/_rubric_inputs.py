"""A rubric judge's prompt: the sample's named inputs, and the score's confidence.

:func:`rubric_inputs` draws the named inputs (``instruction``, ``prediction``, ``context``, ...)
from a sample, :func:`render_rubric` writes criteria, rubric and inputs as one question, and
:func:`score_confidence` (re-exported by :mod:`turneval.metrics.rubric`) reads the score's
probability from the answer's log-probabilities.
"""

from __future__ import annotations

import math
from typing import Any

from turneval.errors import ConfigError, InvalidSampleError
from turneval.judge import conversation_text, tagged
from turneval.samples import MultiTurnSample

__all__ = ["render_rubric", "rubric_inputs", "score_confidence"]

_FIELDS = {
    "instruction": "user_input",
    "prediction": "response",
    "response": "response",
    "baseline_prediction": "baseline_response",
    "reference": "reference",
    "context": "retrieved_contexts",
}


def rubric_inputs(sample: Any, names: tuple[str, ...], metric: str) -> dict[str, str]:
    """The sample's values of the inputs ``names`` (a missing ``context`` is left out)."""
    values: dict[str, str] = {}
    for name in names:
        if isinstance(sample, MultiTurnSample):
            if name == "conversation":
                values[name] = conversation_text(sample)
                continue
            if name == "reference" and sample.reference is not None:
                values[name] = sample.reference
                continue
            raise ConfigError(f"metric {metric!r}: a multi-turn sample has no input {name!r}")
        field = _FIELDS.get(name)
        value = getattr(sample, field, None) if field else None
        if value is None and name == "context":
            continue  # context is optional: judged without it
        if value is None:
            raise InvalidSampleError(
                f"metric {metric!r} needs the sample field {field or name!r}, which is missing",
                field=field or name,
            )
        values[name] = "\n\n".join(value) if isinstance(value, list) else str(value)
    return values


def render_rubric(
    criteria: str | dict[str, str], choices: dict[str, str], values: dict[str, str], *, title: str
) -> str:
    """Criteria, the rubric (or choices) and the inputs, each input tagged and escaped."""
    criteria_text = (
        criteria
        if isinstance(criteria, str)
        else "\n".join(f"- {k}: {v}" for k, v in criteria.items())
    )
    rubric_text = "\n".join(f"{score}: {meaning}" for score, meaning in choices.items())
    inputs = "\n".join(tagged(name, value) for name, value in values.items())
    return f"# Criteria\n{criteria_text}\n\n# {title}\n{rubric_text}\n\n# Inputs\n{inputs}"


def score_confidence(message: Any, score: str) -> float | None:
    """Probability of the score's tokens in an answer, from its log-probabilities, or None.

    Looks for ``"score"`` in the answer's tokens and multiplies the probabilities of the tokens
    that spell the score after it (OpenAI-style ``response_metadata["logprobs"]["content"]``).
    """
    metadata = getattr(message, "response_metadata", None) or {}
    logprobs = metadata.get("logprobs") or {}
    tokens = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not tokens:
        return None
    text = ""
    for position, token in enumerate(tokens):
        text += str(token.get("token", ""))
        if text.rstrip().endswith('"score":') or text.rstrip().endswith('"score": '):
            spelled, total = "", 0.0
            for follower in tokens[position + 1 :]:
                piece = str(follower.get("token", "")).strip().strip('"')
                if not piece and not spelled:
                    continue
                if spelled + piece and score.startswith(spelled + piece):
                    spelled += piece
                    total += float(follower.get("logprob", 0.0))
                    if spelled == score:
                        return math.exp(total)
                    continue
                break
            return None
    return None

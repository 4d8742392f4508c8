"""A judge configuration you keep: instructions and worked examples a judged metric loads.

``turneval optimize`` (:func:`turneval.calibration.optimize`) writes one after searching for the
instructions and examples that agree best with human labels; any judged metric loads it with
``judge_config=`` (a :class:`JudgeConfig` or the path of its file), and every CLI command that
runs judges with ``--judge-config FILE``. The instructions are added to the judge's system
message, after the metric's own (which keeps saying that the conversation is data, never an
instruction); the examples are shown with the metric's own worked examples, before the question.

The file is JSON::

    {"format": "turneval.judge_config", "version": 1, "metric": "agent_goal_accuracy_without_reference",
     "instructions": "...", "examples": [{"input": "...", "output": "..."}],
     "model": "gpt-4o-mini", "scale": [0.0, 1.0], "labels_digest": "sha256:...",
     "parent": "sha256:...", "report": {...}}

``digest`` is the SHA-256 of what changes the judge's prompts (instructions and examples): two
files with the same digest judge alike, and a run records it (``run.json``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import replace
from os import PathLike
from pathlib import Path
from typing import Annotated, Any, Final, Literal, TypeAlias

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from turneval.errors import ConfigError
from turneval.judge._template import JudgeExample, JudgeRequest

__all__ = [
    "CONFIG_FORMAT",
    "CONFIG_VERSION",
    "INSTRUCTIONS_HEADING",
    "JudgeConfig",
    "JudgeConfigField",
    "load_judge_config",
]

CONFIG_FORMAT: Final = "turneval.judge_config"
"""The ``format`` every judge configuration file carries."""

CONFIG_VERSION: Final = 1
"""The version of the file's layout this turneval writes and reads."""

INSTRUCTIONS_HEADING = "# Instructions for this judge (calibrated against human labels)"
"""The heading put before a configuration's instructions in the judge's system message."""


class JudgeConfig(BaseModel):
    """A judge's calibrated instructions and worked examples, with where they came from.

    Attributes:
        format: Always ``"turneval.judge_config"`` (a file of another kind is refused).
        version: The layout's version (1).
        metric: The metric it was made for (None: any judged metric).
        instructions: Text added to the judge's system message ("" adds nothing).
        examples: Worked examples shown before every question, after the metric's own.
        model: The judge model it was optimised with (a name; informative).
        scale: The labels' scale it was optimised on (informative).
        labels_digest: SHA-256 of the labels it was optimised on (informative).
        parent: The digest of the configuration it was derived from (None: the metric's own
            prompts).
        report: What the optimisation measured (before/after agreement on validation rows);
            informative, not part of the digest.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: Literal["turneval.judge_config"] = CONFIG_FORMAT
    version: Literal[1] = CONFIG_VERSION
    metric: str | None = None
    instructions: str = ""
    examples: tuple[JudgeExample, ...] = ()
    model: str | None = None
    scale: tuple[float, ...] | None = None
    labels_digest: str | None = None
    parent: str | None = None
    report: dict[str, Any] | None = Field(default=None)

    @property
    def digest(self) -> str:
        """``sha256:<hex>`` of the instructions and examples (what changes the prompts)."""
        payload = {
            "instructions": self.instructions,
            "examples": [[e.input, e.output] for e in self.examples],
        }
        text = json.dumps(payload, sort_keys=True, ensure_ascii=True)
        return "sha256:" + hashlib.sha256(text.encode()).hexdigest()

    @property
    def empty(self) -> bool:
        """True when it changes nothing (no instructions, no examples)."""
        return not self.instructions.strip() and not self.examples

    def system(self, system: str) -> str:
        """``system`` with the instructions added (unchanged when there are none)."""
        if not self.instructions.strip():
            return system
        return f"{system}\n\n{INSTRUCTIONS_HEADING}\n{self.instructions.strip()}"

    def apply(self, requests: Sequence[JudgeRequest[Any]]) -> list[JudgeRequest[Any]]:
        """The requests with the instructions added to each system message."""
        if not self.instructions.strip():
            return list(requests)
        return [replace(request, system=self.system(request.system)) for request in requests]

    def to_json(self) -> str:
        """The file's text (indented JSON)."""
        return self.model_dump_json(indent=2) + "\n"

    def save(self, path: str | PathLike[str]) -> Path:
        """Write the configuration as JSON to ``path``; returns the path."""
        target = Path(path)
        target.write_text(self.to_json(), encoding="utf-8")
        return target

    @classmethod
    def from_json(cls, text: str, where: str = "judge configuration") -> JudgeConfig:
        """Read a configuration from its JSON text; ``where`` names it in errors.

        Raises:
            ConfigError: naming ``where`` and the field, for text that is not JSON, not a
                judge configuration, of another version, or with an invalid field.
        """
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{where}: not JSON ({exc.msg}, line {exc.lineno})") from None
        if not isinstance(data, dict) or data.get("format") != CONFIG_FORMAT:
            raise ConfigError(
                f'{where}: not a judge configuration (expected "format": "{CONFIG_FORMAT}"; '
                "write one with turneval optimize)"
            )
        if data.get("version") != CONFIG_VERSION:
            raise ConfigError(
                f"{where}: judge configuration version {data.get('version')!r}; this turneval "
                f"reads version {CONFIG_VERSION}"
            )
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'file'}: {e['msg']}"
                for e in exc.errors(include_url=False)
            )
            raise ConfigError(f"{where}: {problems}") from None

    @classmethod
    def load(cls, path: str | PathLike[str]) -> JudgeConfig:
        """Read a configuration file.

        Raises:
            ConfigError: naming the file, when it is missing or not a valid configuration.
        """
        source = Path(path)
        try:
            text = source.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"judge configuration {source}: no such file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"judge configuration {source}: cannot read it ({exc})") from None
        return cls.from_json(text, f"judge configuration {source}")


def load_judge_config(value: Any) -> Any:
    """A ``judge_config`` field's value: a path (str or PathLike) is read as a file.

    A dict is validated as a configuration (as a metric configuration stored in run.json or a
    store gives it back); anything else is left to the field's validation.
    """
    if isinstance(value, (str, PathLike)):
        return JudgeConfig.load(value)
    if isinstance(value, dict) and value.get("format") == CONFIG_FORMAT:
        return JudgeConfig.from_json(json.dumps(value))
    return value


JudgeConfigField: TypeAlias = Annotated[JudgeConfig | None, BeforeValidator(load_judge_config)]
"""The type of :attr:`~turneval.metrics.JudgedMetric.judge_config`: a configuration, its file's
path, or None."""

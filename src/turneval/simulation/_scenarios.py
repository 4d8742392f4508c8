"""Scenarios: what a simulated user wants, who they are and what they know; read and checked.

Every scenario of a run is validated before any model call (:func:`check_scenarios`); an error
names the scenario (its index, line or item, and its id) and the field.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from turneval.dataset import EvaluationDataset
from turneval.errors import ConfigError, InvalidSampleError
from turneval.jsonl import jsonl_rows
from turneval.messages import ToolCall
from turneval.worlds import ToolWorld

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Scenario", "as_scenarios", "check_scenarios"]


class Scenario(BaseModel):
    """What a simulated user wants, who they are and what they know.

    Attributes:
        goal: What the user wants to achieve (required, non-empty).
        id: A name for the scenario (default: its position); trials are grouped by it.
        persona: Who the user is and how they write.
        user_facts: Facts the user knows and reveals when the agent asks (order number, ...).
        first_message: Used verbatim as the opening turn (no user-model call for it).
        max_turns: The most user turns in one conversation (>= 1).
        reference: The expected outcome; becomes the sample's ``reference``.
        reference_tool_calls: Expected tool calls, for tool-call and trajectory metrics.
        reference_topics: Allowed topics, for topic adherence.
        rubrics: Rubrics, as on samples.
        metadata: Anything else; copied into each sample's metadata.
        world: The :class:`~turneval.worlds.ToolWorld` the agent acts on: every trial gets
            a fresh copy (bound under the world's name, so tools built once with
            ``world.as_langchain_tools()`` act on it), and the sample's
            ``metadata["world"]`` records the initial and end states, the reference end state
            (``reference_tool_calls`` replayed on another fresh copy), the calls and the
            injected faults.
        initial_state: Top-level parts of the world's state this scenario starts from.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    goal: str = Field(min_length=1)
    id: str | None = None
    persona: str | None = None
    user_facts: dict[str, Any] = Field(default_factory=dict)
    first_message: str | None = None
    max_turns: int = Field(default=10, ge=1)
    reference: str | None = None
    reference_tool_calls: list[ToolCall] | None = None
    reference_topics: list[str] | None = None
    rubrics: dict[str, str] | None = None
    metadata: dict[str, Any] | None = None
    world: ToolWorld | None = None
    initial_state: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _check_world(self) -> Scenario:
        if self.initial_state is not None:
            if self.world is None:
                raise ValueError("initial_state needs a world (the state of which world?)")
            self.world.fresh(self.initial_state)  # its fields must exist: fail now, not mid-run
        return self

    @field_validator("goal")
    @classmethod
    def _goal_not_blank(cls, goal: str) -> str:
        if not goal.strip():
            raise ValueError("the goal must say what the user wants (it is blank)")
        return goal

    @field_validator("id", mode="before")
    @classmethod
    def _id_as_text(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value

    @classmethod
    def from_list(cls, rows: Iterable[Mapping[str, Any]]) -> list[Scenario]:
        """Scenarios from dicts; an error names the row (index or id) and the field."""
        return [_scenario(row, f"scenario {index}") for index, row in enumerate(rows)]

    @classmethod
    def from_jsonl(cls, path: str | PathLike[str]) -> list[Scenario]:
        """Read one scenario per line (blank lines skipped); errors name the line number."""
        return [_scenario(row, f"{path}: line {n}") for n, row in jsonl_rows(path)]

    @classmethod
    def from_yaml(cls, path: str | PathLike[str]) -> list[Scenario]:
        """Read a YAML list of scenarios (or ``{"scenarios": [...]}``); errors name the item."""
        import yaml  # PyYAML comes with langchain-core (types-PyYAML types it)

        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        if isinstance(data, Mapping) and "scenarios" in data:
            data = data["scenarios"]
        if not isinstance(data, list):
            raise InvalidSampleError(
                f"{path}: expected a list of scenarios (or a 'scenarios' key holding one)"
            )
        return [_scenario(row, f"{path}: item {index}") for index, row in enumerate(data)]

    @classmethod
    def from_pandas(cls, frame: pd.DataFrame) -> list[Scenario]:
        """One scenario per row (NaN/None cells left unset); errors name the row."""
        rows = [
            {str(k): v for k, v in record.items() if not _missing(v)}
            for record in frame.to_dict(orient="records")
        ]
        return cls.from_list(rows)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _scenario(row: Any, where: str) -> Scenario:
    if isinstance(row, Scenario):
        row = row.model_dump()  # re-validated: model_construct or copies may skip checks
    if not isinstance(row, Mapping):
        raise InvalidSampleError(
            f"{where}: expected a Scenario or a dict, got {type(row).__name__}", sample_id=where
        )
    name = f"{where} (id {row['id']!r})" if row.get("id") is not None else where
    try:
        return Scenario.model_validate(row)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        field_name = str(first["loc"][0]) if first["loc"] else None
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or 'scenario'}: {error['msg']}"
            for error in exc.errors(include_url=False)
        )
        raise InvalidSampleError(f"{name}: {problems}", sample_id=where, field=field_name) from exc


def check_scenarios(scenarios: Iterable[Scenario | Mapping[str, Any]]) -> list[Scenario]:
    """Validate every scenario before any model call; ids are set (default: position)."""
    checked = []
    for index, item in enumerate(scenarios):
        scenario = _scenario(item, f"scenario {index}")
        if scenario.id is None:
            scenario = scenario.model_copy(update={"id": str(index)})
        checked.append(scenario)
    if not checked:
        raise ConfigError("no scenario given")
    ids = [scenario.id for scenario in checked]
    duplicates = sorted({i for i in ids if ids.count(i) > 1}, key=str)
    if duplicates:
        raise InvalidSampleError(
            f"scenario ids must be unique (trials are grouped by id); repeated: {duplicates}",
            field="id",
        )
    return checked


def as_scenarios(items: EvaluationDataset | Sequence[Any]) -> list[Scenario] | None:
    """The scenarios in ``items`` when it holds :class:`Scenario` objects, else None.

    Dicts with a ``goal`` and no ``user_input`` are scenarios too, as :func:`asimulate` takes.
    """
    if isinstance(items, EvaluationDataset) or not items:
        return None
    first = items[0]
    if isinstance(first, Scenario) or (
        isinstance(first, Mapping) and "goal" in first and "user_input" not in first
    ):
        return check_scenarios(items)
    return None

"""``MetricSpec``: a metric as a run records it (name, class path, configuration), and back."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from turneval.errors import ConfigError
from turneval.manifest._changes import NOT_SCORING, changes
from turneval.manifest._classes import canonical_class, class_path, resolve_class
from turneval.manifest._config import build_value, config_of

if TYPE_CHECKING:
    from turneval.metrics import Evaluator

__all__ = [
    "JUDGE_MODEL_FIELDS",
    "MetricSpec",
]

JUDGE_MODEL_FIELDS = frozenset({"llm"})
"""Fields recorded as a model's name (a chat model is never written whole): left out when a
metric is built again, which takes its judge as ``build(llm=...)``."""


@dataclass(frozen=True)
class MetricSpec:
    """One metric of a run: its name, class and configuration, as ``run.json`` keeps them.

    ``MetricSpec.of(metric)`` records a metric; :meth:`build` makes it again (its judge given
    apart: a chat model is recorded by its name only). The configuration holds every field
    of the metric, JSON-ready (see :func:`~turneval.manifest.config_of`); a metric held in a
    field carries its class too.

    Attributes:
        name: The metric's name (its column in results.jsonl).
        class_path: Its class, ``module:Qualname`` (None: not recorded, as for a run imported
            from a folder without ``run.json``).
        config: Its fields, JSON-ready (None: not recorded).
        extra: Other keys of its record, kept as written (a ``"scale"`` the viewer and
            ``calibrate`` read for a metric of labels only, as the scenario review's).
    """

    name: str
    class_path: str | None = None
    config: Mapping[str, Any] | None = None
    extra: Mapping[str, Any] | None = None

    @classmethod
    def of(cls, metric: Evaluator) -> MetricSpec:
        """Record ``metric``: its name, class path and every field."""
        config = config_of(metric)
        return cls(
            str(metric.name),
            class_path(type(metric)),
            config if isinstance(config, Mapping) else {"config": config},
        )

    @classmethod
    def from_dict(cls, record: Any, where: str = "metric record") -> MetricSpec:
        """Read ``{"name", "class", "config"}`` (either class-path form).

        Raises:
            ConfigError: ``record`` is not such an object (naming ``where``).
        """
        if not isinstance(record, Mapping) or not isinstance(record.get("name"), str):
            raise ConfigError(f'{where}: expected an object with a "name", got {record!r}'[:300])
        path, config = record.get("class"), record.get("config")
        extra = {k: v for k, v in record.items() if k not in ("name", "class", "config")}
        return cls(
            record["name"],
            path if isinstance(path, str) and path else None,
            config if isinstance(config, Mapping) else None,
            extra or None,
        )

    def to_dict(self) -> dict[str, Any]:
        """``{"name", "class", "config"}`` and other keys: a metric in run.json and the store."""
        record: dict[str, Any] = {
            "name": self.name,
            "class": self.class_path,
            "config": None if self.config is None else dict(self.config),
        }
        record.update({k: v for k, v in (self.extra or {}).items() if k not in record})
        return record

    def metric_class(self, *, classes: Iterable[type] = (), import_any: bool = False) -> type:
        """The metric's class (see :func:`~turneval.manifest.resolve_class`).

        Raises:
            ConfigError: no class is recorded, or it cannot be found safely.
        """
        if self.class_path is None:
            raise ConfigError(f"metric {self.name}: its class is not recorded")
        return resolve_class(
            self.class_path, classes=classes, import_any=import_any, what="metric class"
        )

    def build(
        self, llm: Any = None, *, classes: Iterable[type] = (), import_any: bool = False
    ) -> Evaluator:
        """The metric again, from its class and configuration.

        Args:
            llm: Its judge (None: the metric asks the run's default judge, as one built
                without ``llm``).
            classes: Classes to take when the class path names them (a user's metrics; their
                module may also simply be imported before).
            import_any: Import any module the class path names: only for records the caller
                wrote itself (a run file from elsewhere never chooses what is imported).

        Raises:
            ConfigError: no class or configuration is recorded, the class cannot be found,
                or the configuration is not valid for it (naming the metric).
        """
        if self.config is None:
            raise ConfigError(f"metric {self.name}: its configuration is not recorded")
        classes = tuple(classes)
        cls: Any = self.metric_class(classes=classes, import_any=import_any)
        fields = {k: v for k, v in self.config.items() if k not in JUDGE_MODEL_FIELDS}
        if llm is not None and "llm" in getattr(cls, "model_fields", {}):
            fields["llm"] = llm
        try:
            built: Evaluator = cls.model_validate(build_value(fields, classes, import_any))
        except (ValidationError, TypeError, ValueError) as exc:
            detail = " ".join(str(exc).split())[:300]
            raise ConfigError(f"metric {self.name} ({self.class_path}): {detail}") from None
        return built

    def changes(self, other: MetricSpec, *, ignored: Iterable[str] = ()) -> list[str]:
        """What differs between this record of a metric and ``other``'s, both values shown.

        Each differing field (dotted for nested ones, ``arg_rules.*.city "exact" ->
        "ignore"``), and the class (compared as the class both paths name: a class that moved
        between turneval's modules, or a path in the older dotted form, is the same class).
        The fields of :data:`~turneval.manifest.NOT_SCORING` and ``ignored`` are left out;
        empty when the two score alike.
        """
        leave = NOT_SCORING | set(ignored)
        sides = []
        for spec in (self, other):
            config = {k: v for k, v in (spec.config or {}).items() if k not in leave}
            sides.append({"class": canonical_class(spec.class_path), **config})
        return list(changes(sides[0], sides[1]))

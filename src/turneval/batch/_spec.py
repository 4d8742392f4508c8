"""What a batch run's folder records of its metrics and its judge, and how they are rebuilt.

The metrics are kept as their class path (``module:Qual``) and configuration (``model_dump``),
the judge as its class path and the fields that choose the model and the server (never a
key). :meth:`~turneval.batch.BatchRun.open` rebuilds both from the folder.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from typing import Any

from turneval.errors import ConfigError

__all__ = ["class_path", "import_path", "llm_from", "llm_spec", "metric_spec", "metrics_from"]


def class_path(obj: Any) -> str:
    """``module:Qual`` of ``obj``'s class (what :func:`import_path` imports back)."""
    return f"{type(obj).__module__}:{type(obj).__qualname__}"


def import_path(path: str) -> Any:
    """The object a ``module:Qual`` path names."""
    module, _, name = path.partition(":")
    target: Any = importlib.import_module(module)
    for part in name.split("."):
        target = getattr(target, part)
    return target


def metric_spec(metrics: Sequence[Any]) -> list[dict[str, Any]]:
    """Each metric's class path, name and configuration (None when it cannot be dumped)."""
    specs = []
    for metric in metrics:
        try:
            config = metric.model_dump(mode="json", exclude={"llm"})
        except Exception:
            config = None
        specs.append({"class": class_path(metric), "name": metric.name, "config": config})
    return specs


def metrics_from(specs: list[dict[str, Any]]) -> list[Any]:
    """The metrics :func:`metric_spec` recorded, rebuilt (by class, else by built-in name)."""
    from turneval.runner import resolve_metrics

    metrics = []
    for spec in specs:
        try:
            cls = import_path(spec["class"])
            metrics.append(cls.model_validate(spec["config"]))
        except Exception:
            try:
                metrics += resolve_metrics([spec["name"]])
            except Exception as exc:
                raise ConfigError(
                    f"cannot rebuild metric {spec['name']!r} ({spec['class']}) of this batch "
                    "run: pass metrics=[...] to BatchRun.open"
                ) from exc
    return metrics


_LLM_FIELDS = (
    "model_name",
    "model",
    "openai_api_base",
    "anthropic_api_url",
    "temperature",
    "seed",
    "max_tokens",
    "deployment_name",
    "azure_endpoint",
    "openai_api_version",
)


def llm_spec(llm: Any) -> dict[str, Any]:
    """The judge model's class path and the fields that choose its model and server."""
    fields = type(llm).model_fields
    values = {name: getattr(llm, name) for name in _LLM_FIELDS if name in fields}
    return {
        "class": class_path(llm),
        "fields": {k: v for k, v in values.items() if isinstance(v, (str, int, float))},
    }


def llm_from(spec: dict[str, Any]) -> Any:
    """The judge model :func:`llm_spec` recorded, rebuilt."""
    cls = import_path(spec["class"])
    return cls(**spec["fields"])  # the key from the provider's usual environment variable

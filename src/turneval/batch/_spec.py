"""What a batch run's folder records of its metrics and its judge, and how they are rebuilt.

The metrics are kept as the run manifest records them (:class:`~turneval.manifest.MetricSpec`:
one class-path format, the configuration), the judge as its class path and the fields that
choose the model and the server (never a key). :meth:`~turneval.batch.BatchRun.open` rebuilds
both from the folder; folders of an older turneval (``module:Qual`` paths) read as well.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from turneval.errors import ConfigError
from turneval.manifest import MetricSpec, class_path, resolve_class

__all__ = ["llm_from", "llm_spec", "metric_spec", "metrics_from"]


def metric_spec(metrics: Sequence[Any]) -> list[dict[str, Any]]:
    """Each metric as the run manifest records it (:class:`~turneval.manifest.MetricSpec`)."""
    return [MetricSpec.of(metric).to_dict() for metric in metrics]


def metrics_from(specs: list[dict[str, Any]]) -> list[Any]:
    """The metrics :func:`metric_spec` recorded (or a folder of an older turneval), rebuilt.

    By class and configuration (the folder is the caller's own: any class path is imported),
    else a built-in metric by its name.
    """
    from turneval.runner import resolve_metrics

    metrics = []
    for record in specs:
        spec = MetricSpec.from_dict(record, "batch run metric")
        try:
            metrics.append(spec.build(import_any=True))
        except ConfigError:
            try:
                metrics += resolve_metrics([spec.name])
            except Exception as exc:
                raise ConfigError(
                    f"cannot rebuild metric {spec.name!r} ({spec.class_path}) of this batch "
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
        "class": class_path(type(llm)),
        "fields": {k: v for k, v in values.items() if isinstance(v, (str, int, float))},
    }


def llm_from(spec: dict[str, Any]) -> Any:
    """The judge model :func:`llm_spec` recorded, rebuilt (any class path: the folder is yours)."""
    cls: Any = resolve_class(spec["class"], import_any=True, what="judge class")
    return cls(**spec["fields"])  # the key from the provider's usual environment variable

"""Whether two runs' metrics are configured alike: the manifests' metric records compared."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from turneval.errors import ConfigError
from turneval.manifest import MetricSpec, metric_changes

__all__ = ["JUDGE_FIELDS", "MetricRecords", "check_metric_configs", "metric_config_changes"]


JUDGE_FIELDS = frozenset({"llm"})
"""Fields of a metric's configuration that :func:`check_metric_configs` leaves out besides
those that change no score (pass thresholds, timeouts, retries): the judge model a metric
asks. Comparing two judges is a comparison made on purpose, as comparing two runs with
another ``--judge-model`` is."""


MetricRecords = Sequence[MetricSpec | Mapping[str, Any]]
"""A run's metrics as recorded: :class:`~turneval.manifest.MetricSpec` objects, or their
``{"name", "class", "config"}`` records (run.json's ``metrics``, a stored run's
:attr:`~turneval.store.StoredRun.metrics`)."""


def _specs(records: MetricRecords) -> list[MetricSpec]:
    return [
        record if isinstance(record, MetricSpec) else MetricSpec.from_dict(record)
        for record in records
        if isinstance(record, (MetricSpec, Mapping))
    ]


def check_metric_configs(baseline: MetricRecords, candidate: MetricRecords) -> None:
    """Refuse two runs whose metrics of one name are configured differently.

    Each run is given as its metrics' records (:data:`MetricRecords`: run.json's
    ``metrics``, a stored run's, or ``MetricSpec.of(metric)`` of the metric objects). Fields
    that change no score (a pass threshold, timeouts, retries) and :data:`JUDGE_FIELDS` do
    not count; metrics only one run has are not compared anyway.

    Raises:
        ConfigError: one line naming each metric configured differently and its differing
            fields with both values, and how to compare anyway.
    """
    differing = metric_config_changes(baseline, candidate)
    if differing:
        noun = "metric" if len(differing) == 1 else "metrics"
        verb = "is" if len(differing) == 1 else "are"
        raise ConfigError(
            f"{noun} {', '.join(differing)} {verb} configured differently in the two runs, so "
            "their scores do not compare; compare anyway with --allow-config-change "
            "(allow_config_change=True)"
        )


def metric_config_changes(baseline: MetricRecords, candidate: MetricRecords) -> list[str]:
    """Each metric of one name configured differently in the two runs, with its changes.

    ``name (field old -> new; ...)`` per metric, as :func:`check_metric_configs` names them
    (empty when every shared metric scores alike): :meth:`MetricSpec.changes
    <turneval.manifest.MetricSpec.changes>` without :data:`JUDGE_FIELDS`.
    """
    return metric_changes(_specs(baseline), _specs(candidate), ignored=JUDGE_FIELDS)

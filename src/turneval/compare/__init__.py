"""Compare two runs of the same dataset: mean differences, significance, flipped samples.

A run is read by :func:`turneval.runs.open_run`: a ``--out`` folder, its ``results.jsonl``,
its ``summary.json`` (the rows beside it when they are there, else the summary's means
alone) or a stored run's id. Two runs whose metrics of one name are configured differently
(``arg_rules``, a rubric, ...: their :class:`~turneval.manifest.RunManifest` says) are
refused unless told ``allow_config_change`` (see :func:`check_metric_configs`).

The package's modules: ``_pairing`` (which rows are the same sample), ``_configs`` (metrics
configured alike), ``_result`` (:class:`Comparison` and its metrics), ``_compare`` (the paired
tests), ``_gates`` (regression gates), ``_files`` (runs read from folders, files or a store).
"""

from turneval.compare._compare import compare, metric_directions
from turneval.compare._configs import JUDGE_FIELDS, check_metric_configs, metric_config_changes
from turneval.compare._files import compare_files
from turneval.compare._gates import TEST, RegressionCheck, RegressionGates, regression_gates
from turneval.compare._pairing import (
    RowPairing,
    match_keys,
    match_rows,
    pair_rows,
    pairing_notes,
    row_key,
    trial_key,
)
from turneval.compare._result import Comparison, MetricComparison

__all__ = [
    "Comparison",
    "JUDGE_FIELDS",
    "MetricComparison",
    "RegressionCheck",
    "RegressionGates",
    "RowPairing",
    "TEST",
    "check_metric_configs",
    "compare",
    "compare_files",
    "match_keys",
    "match_rows",
    "metric_config_changes",
    "metric_directions",
    "pair_rows",
    "pairing_notes",
    "regression_gates",
    "row_key",
    "trial_key",
]

"""One run manifest: what a run was started with, and its metrics as a run records them.

:class:`RunManifest` is the one reader and writer of ``run.json`` and of metric
configurations: a streamed run writes it before its first row (and checks it on
``resume``), the run store keeps its metrics, a batch run rebuilds its metrics from it,
``turneval watch`` writes it into its state folder, ``regrade`` rebuilds a stored run's
judged metrics, ``compare`` refuses two runs whose metrics of one name are configured
differently, and calibration saves an aligned metric with it. :class:`MetricSpec` records one
metric (``MetricSpec.of(metric)``) and builds it again (``.build(llm=None)``), with one
class-path form, ``module:Qualname`` (:func:`class_path`); :class:`JudgeSpec` records the
default judge (model, server, prompt version and the judge configurations its metrics load,
never a key: :func:`judge_configs`, the one function that records them).

A run read back with its manifest rebuilds its metrics (:func:`turneval.runs.open_run`), so
its summary comes from the metrics; only files written before the manifest have their
pairwise judges recognised by the text of their reasons and their metric names by their
``<name>_reason`` columns (marked legacy).
"""

from turneval.manifest._changes import NOT_SCORING
from turneval.manifest._classes import canonical_class, class_path, resolve_class
from turneval.manifest._config import CLASS_KEY, config_of
from turneval.manifest._config import model_name as judge_model
from turneval.manifest._judge import JudgeSpec, judge_base_url, judge_configs
from turneval.manifest._metric import JUDGE_MODEL_FIELDS, MetricSpec
from turneval.manifest._run import (
    RUN_FILE,
    RUN_FILES,
    DatasetSpec,
    RunManifest,
    dataset_version,
    metric_changes,
)

__all__ = [
    "CLASS_KEY",
    "DatasetSpec",
    "JUDGE_MODEL_FIELDS",
    "JudgeSpec",
    "MetricSpec",
    "NOT_SCORING",
    "RUN_FILE",
    "RUN_FILES",
    "RunManifest",
    "canonical_class",
    "class_path",
    "config_of",
    "dataset_version",
    "judge_base_url",
    "judge_configs",
    "judge_model",
    "metric_changes",
    "resolve_class",
]

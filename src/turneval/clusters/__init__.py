"""Failure clusters: a run's failed rows grouped by why they failed (``turneval clusters RUN``).

:func:`cluster_failures` groups them without a model (:mod:`turneval.clusters.grouping`);
:func:`name_clusters` asks a judge to name each group (:mod:`turneval.clusters.naming`);
:func:`read_run` reads the run they come from.
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path

from turneval.clusters.grouping import (
    DEFAULT_FAIL_UNDER,
    ClusterMethod,
    FailedRow,
    FailureCluster,
    cluster_failures,
    failed_rows,
)
from turneval.clusters.naming import ClusterName, aname_clusters, name_clusters
from turneval.errors import ConfigError
from turneval.results import EvaluationResult

__all__ = [
    "DEFAULT_FAIL_UNDER",
    "ClusterMethod",
    "ClusterName",
    "FailedRow",
    "FailureCluster",
    "aname_clusters",
    "cluster_failures",
    "failed_rows",
    "name_clusters",
    "read_run",
]


def read_run(run: str | PathLike[str]) -> EvaluationResult:
    """The rows of a run: a run folder (its ``results.jsonl``) or a ``results.jsonl`` file.

    The one place ``turneval clusters`` reads a run from.

    Raises:
        ConfigError: there is no such file or folder, or the folder has no results.jsonl.
    """
    path = Path(run)
    if path.is_dir():
        path = path / "results.jsonl"
    if not path.is_file():
        raise ConfigError(
            f"{run}: no such run; expected a run folder (with results.jsonl) or a results.jsonl"
        )
    return EvaluationResult.from_jsonl(path)

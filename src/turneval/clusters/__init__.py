"""Failure clusters: a run's failed rows grouped by why they failed (``turneval clusters RUN``).

:func:`cluster_failures` groups them without a model (:mod:`turneval.clusters.grouping`);
:func:`name_clusters` asks a judge to name each group (:mod:`turneval.clusters.naming`);
:func:`read_run` reads the run they come from.

The judge's names and :func:`read_run` are imported on first use: the HTML report groups the
rows it shows with :mod:`turneval.clusters.grouping` alone, which loads no LLM framework.
"""

from __future__ import annotations

from importlib import import_module
from os import PathLike
from typing import TYPE_CHECKING, Any

from turneval.clusters.grouping import (
    DEFAULT_FAIL_UNDER,
    ClusterMethod,
    FailedRow,
    FailureCluster,
    cluster_failures,
    failed_rows,
)

if TYPE_CHECKING:
    from turneval.clusters.naming import ClusterName, aname_clusters, name_clusters
    from turneval.results import EvaluationResult

__all__ = [
    "ClusterMethod",
    "ClusterName",
    "DEFAULT_FAIL_UNDER",
    "FailedRow",
    "FailureCluster",
    "aname_clusters",
    "cluster_failures",
    "failed_rows",
    "name_clusters",
    "read_run",
]

_LAZY = {
    name: "turneval.clusters.naming" for name in ("ClusterName", "aname_clusters", "name_clusters")
}


def __getattr__(name: str) -> Any:
    """The judge's names, imported on first use (they load LangChain)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'turneval.clusters' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def read_run(run: str | PathLike[str], store: Any = None) -> EvaluationResult:
    """The rows of a run, read by :func:`turneval.runs.open_run`.

    A run folder (its ``results.jsonl``), a ``results.jsonl`` file, or a run kept in
    ``store`` (its id). The one place ``turneval clusters`` reads a run from.

    Raises:
        ConfigError: there is no such file or folder (or stored run), or the folder has no
            results.jsonl.
    """
    from turneval.errors import ConfigError
    from turneval.runs import open_run

    try:
        with open_run(run, store) as opened:
            return opened.result
    except ConfigError as exc:
        raise ConfigError(
            f"{exc}; expected a run folder (with results.jsonl) or a results.jsonl"
        ) from None

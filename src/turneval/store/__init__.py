"""The run store: every run kept (metadata, rows, summary) with human labels, in one database.

``RunStore()`` is a SQLite file, ``.turneval/runs.db`` in the working directory;
``RunStore("postgresql://...")`` a database shared by a team. Every front end takes
``store=`` and writes its rows there as they finish; ``turneval store import|export|list``,
``turneval labels export`` and ``turneval datasets add|list|show|diff`` (dataset versions,
kept by content digest) work on it from the command line. Needs the ``store`` extra.
"""

from turneval._files import file_digest
from turneval.store._datasets import DatasetDiff, DatasetRow, StoredDataset, diff_files
from turneval.store._engine import DEFAULT_STORE, STORE_ENV
from turneval.store._judge_configs import StoredJudgeConfig
from turneval.store._labels import StoredLabel
from turneval.store._recorder import RunRecorder
from turneval.store._rows import RunColumns, StoredRow
from turneval.store._runs import StoredRun
from turneval.store._skips import StoredSkip
from turneval.store._store import RunStore, dataset_version, judge_model, metric_configs

__all__ = [
    "DEFAULT_STORE",
    "DatasetDiff",
    "DatasetRow",
    "RunColumns",
    "RunRecorder",
    "RunStore",
    "STORE_ENV",
    "StoredDataset",
    "StoredJudgeConfig",
    "StoredLabel",
    "StoredRow",
    "StoredRun",
    "StoredSkip",
    "dataset_version",
    "diff_files",
    "file_digest",
    "judge_model",
    "metric_configs",
]

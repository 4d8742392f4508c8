"""The run store: every run kept (metadata, rows, summary) with human labels, in one database.

``RunStore()`` is a SQLite file, ``.turneval/runs.db`` in the working directory;
``RunStore("postgresql://...")`` a database shared by a team. Every front end takes
``store=`` and writes its rows there as they finish; ``turneval store import|export|list``
and ``turneval labels export`` work on it from the command line. Needs the ``store`` extra.
"""

from turneval.store._judge_configs import StoredJudgeConfig
from turneval.store._skips import StoredSkip
from turneval.store._store import (
    DEFAULT_STORE,
    STORE_ENV,
    RunColumns,
    RunRecorder,
    RunStore,
    StoredLabel,
    StoredRow,
    StoredRun,
    file_digest,
    judge_model,
    metric_configs,
)

__all__ = [
    "DEFAULT_STORE",
    "STORE_ENV",
    "RunColumns",
    "RunRecorder",
    "RunStore",
    "StoredJudgeConfig",
    "StoredLabel",
    "StoredRow",
    "StoredRun",
    "StoredSkip",
    "file_digest",
    "judge_model",
    "metric_configs",
]

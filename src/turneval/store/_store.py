"""The run store: every run's metadata, rows and human labels in one database.

SQLite (a file, WAL mode) by default, PostgreSQL for a team. Rows are the results.jsonl rows
(:meth:`turneval.results.SampleResult.record`), kept as written, with the sample beside them.
:class:`RunStore` is made of its parts, one module each: the database (``_engine``), runs
(``_runs``), rows (``_rows``), labels (``_labels``), run folders in and out (``_transfer``);
a run's rows are written by ``_recorder``'s :class:`~turneval.store.RunRecorder`. Watch's
claims and skips, and dataset versions, are kept here (their queries: ``_skips``,
``_datasets``).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from turneval.errors import ConfigError
from turneval.manifest import MetricSpec
from turneval.manifest import dataset_version as manifest_dataset_version
from turneval.manifest import judge_model as manifest_judge_model
from turneval.store._datasets import DatasetDiff, DatasetRow, StoredDataset
from turneval.store._labels import LabelsPart
from turneval.store._skips import StoredSkip
from turneval.store._transfer import TransferPart

__all__ = ["RunStore", "dataset_version", "judge_model", "metric_configs"]


def judge_model(llm: Any) -> str | None:
    """Deprecated: :func:`turneval.manifest.judge_model` (the run manifest names judges)."""
    warnings.warn(
        "turneval.store.judge_model is deprecated; use turneval.manifest.judge_model",
        DeprecationWarning,
        stacklevel=2,
    )
    return manifest_judge_model(llm)


def metric_configs(metrics: Sequence[Any]) -> list[dict[str, Any]]:
    """Deprecated: ``MetricSpec.of(metric).to_dict()`` (:class:`turneval.manifest.MetricSpec`)."""
    warnings.warn(
        "turneval.store.metric_configs is deprecated; use "
        "turneval.manifest.MetricSpec.of(metric).to_dict()",
        DeprecationWarning,
        stacklevel=2,
    )
    return [MetricSpec.of(metric).to_dict() for metric in metrics]


def dataset_version(
    path: str | os.PathLike[str], store: RunStore | None = None, *, digest: str | None = None
) -> dict[str, Any]:
    """What a run records of the dataset it reads: its digest, and its name and version.

    :func:`turneval.manifest.dataset_version` (the manifest records it): ``{"digest": SHA-256
    of the file, "name": ..., "version": ...}``, the name and version when ``store`` keeps
    that content (``turneval datasets add``), else None. ``digest``, when known, saves
    reading the file again.
    """
    return manifest_dataset_version(path, store, digest=digest)


class RunStore(TransferPart, LabelsPart):
    """The runs of a project (or a team) in one database: metadata, rows and labels.

    ``RunStore()`` opens ``.turneval/runs.db`` in the working directory (created if missing,
    with its folder; SQLite in WAL mode, so readers never block the run writing); a path or
    ``sqlite:///PATH`` names another file (created if missing, in a folder that must exist: a
    mistyped path is an error, not a new folder), and ``postgresql://user:pass@host/db`` a shared PostgreSQL database
    (through psycopg 3). Opening a store made by an older turneval migrates it (Alembic); one
    made by a newer turneval is refused. Several processes may write one store at once: SQLite
    serialises their transactions (waiting up to ``busy_timeout`` seconds), no row is lost.

    Needs the ``store`` extra: ``pip install 'turneval[store]'``.

    Args:
        url: A file path, ``sqlite:///PATH`` or ``postgresql://...`` (None: the default file).
        batch_rows: Rows written per transaction at most (a run's rows are also written at
            least once a second, and at its end).
        busy_timeout: Seconds a SQLite writer waits for another one's transaction.

    Raises:
        ConfigError: the extra is missing, the URL has another scheme (or lacks its ``//``),
            a SQLite file's folder does not exist (or the path is a folder), the database
            cannot be opened, or it was made by a newer turneval (one line, saying which).

    Attributes:
        url: The store's URL, its password hidden (a SQLite store: the file's path).
        kind: ``"sqlite"`` or ``"postgresql"``.
        engine: The SQLAlchemy engine.
        batch_rows: Rows written per transaction at most.
        close_after_run: Close the connections when a run ends (a store a front end opened
            from a URL).
    """

    def __init__(
        self,
        url: str | os.PathLike[str] | None = None,
        *,
        batch_rows: int = 500,
        busy_timeout: float = 60.0,
    ) -> None:
        """Open (and create or migrate) the store at ``url``."""
        super().__init__(url, batch_rows=batch_rows, busy_timeout=busy_timeout)

    def claim(self, key: str, owner: str, run_id: str) -> bool:
        """Claim ``key`` for ``owner`` (writing into ``run_id``); whether ``owner`` holds it.

        The first claim of a key wins, across processes sharing the store; claiming a key one
        already holds (after a restart) is True again.
        """
        from sqlalchemy import insert, select
        from sqlalchemy.exc import IntegrityError

        from turneval.store._schema import claims

        try:
            with self.writing() as connection:
                connection.execute(
                    insert(claims).values(
                        key=key, owner=owner, run_id=run_id, claimed=datetime.now(timezone.utc)
                    )
                )
            return True
        except IntegrityError:
            with self.engine.connect() as connection:
                holder = connection.execute(
                    select(claims.c.owner).where(claims.c.key == key)
                ).scalar()
            return bool(holder == owner)

    # -- conversations `turneval watch` skipped (schema revision 0005) -----------------------

    def add_skipped(self, run_id: str, skips: Iterable[StoredSkip]) -> None:
        """Record conversations a ``turneval watch`` run did not score, with why.

        A conversation the run already has is left as it was (recording again is harmless).
        """
        from turneval.store._skips import insert_skips

        with self.writing() as connection:
            insert_skips(connection, self.kind, self._resolve(connection, run_id), skips)

    def skipped(
        self, run_id: str, *, reason: str | None = None, limit: int | None = 100
    ) -> list[StoredSkip]:
        """A run's skipped conversations, newest first: of one ``reason``, ``limit`` at most."""
        from turneval.store._skips import select_skips

        with self.engine.connect() as connection:
            return select_skips(connection, self._resolve(connection, run_id), reason, limit)

    def skipped_counts(self, run_id: str) -> dict[str, int]:
        """A run's skipped conversations counted by reason, most first (empty: none)."""
        from turneval.store._skips import select_skip_counts

        with self.engine.connect() as connection:
            return select_skip_counts(connection, self._resolve(connection, run_id))

    # -- dataset versions (schema revision 0008; turneval.store._datasets) ---------------------

    def add_dataset(self, path: str | os.PathLike[str], *, name: str) -> tuple[StoredDataset, bool]:
        """Keep a JSONL file as ``name``'s next version; whether that version is new.

        The content is kept once by its SHA-256; when it is ``name``'s latest version already,
        that version is returned (False). Raises ConfigError for an unreadable file.
        """
        from turneval.store import _datasets

        if not name.strip():
            raise ConfigError("a dataset needs a name")
        digest, rows = _datasets.file_rows(Path(path))
        with self.writing() as connection:
            return _datasets.add(connection, Path(path).resolve(), name.strip(), digest, rows)

    def datasets(self, *, name: str | None = None) -> list[StoredDataset]:
        """Every dataset version (of ``name`` only, when given), by name then version."""
        from turneval.store import _datasets

        with self.engine.connect() as connection:
            return _datasets.listed(connection, name)

    def dataset(self, ref: str) -> StoredDataset:
        """The version ``ref`` names: ``NAME@VERSION``, ``NAME`` (its latest), or a digest.

        Raises:
            ConfigError: none matches.
        """
        from turneval.store import _datasets

        with self.engine.connect() as connection:
            return _datasets.find(connection, ref)

    def dataset_of(self, digest: str | None) -> StoredDataset | None:
        """The dataset version with this content digest (a run's input), None when none."""
        from turneval.store import _datasets

        if not digest:
            return None
        with self.engine.connect() as connection:
            return _datasets.by_digest(connection, digest)

    def dataset_rows(self, ref: str, *, limit: int | None = None) -> list[DatasetRow]:
        """The lines of the version ``ref`` names, in order (the first ``limit``)."""
        from turneval.store import _datasets

        with self.engine.connect() as connection:
            found = _datasets.find(connection, ref)
            return _datasets.contents(connection, found.digest, limit)

    def diff_datasets(self, old: str, new: str) -> DatasetDiff:
        """The rows added, removed and changed from version ``old`` to ``new`` (refs or digests).

        Raises:
            ConfigError: a ref names no version.
        """
        from turneval.store import _datasets

        with self.engine.connect() as connection:
            before, after = _datasets.find(connection, old), _datasets.find(connection, new)
            return _datasets.diff_rows(
                _datasets.row_keys(connection, before.digest),
                _datasets.row_keys(connection, after.digest),
                labels=(before.label, after.label),
            )

    @classmethod
    def coerce(cls, value: RunStore | str | os.PathLike[str] | None) -> RunStore | None:
        """A store from a store, a URL or a path (None stays None)."""
        if value is None or isinstance(value, RunStore):
            return value
        if isinstance(value, (str, os.PathLike)):
            store = cls(value)
            store.close_after_run = True  # opened for a run: its connections end with it
            return store
        raise ConfigError(f"store must be a RunStore, a URL or a path, got {type(value).__name__}")

    def __repr__(self) -> str:
        """``RunStore('<url without password>')``."""
        return f"RunStore({self.url!r})"

    def __enter__(self) -> RunStore:
        """The store itself, closed on exit."""
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the store."""
        self.close()

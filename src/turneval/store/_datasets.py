"""Dataset versions in the run store: kept by content digest, named and numbered (revision 0008).

``turneval datasets add FILE --name NAME`` keeps a JSONL file's lines under their digest (the
file's SHA-256, as a run records the input it read) and gives it the next version of NAME; a
file whose content is the name's latest version already is that version again. Each line is
kept with its *key* (its sample's ``metadata.id``, else a top-level ``id``, else ``line N``;
a key seen again gets ``#2``, ``#3``...) and the digest of its JSON written canonically
(sorted keys, no spaces), so two versions differ by the rows added, removed and changed, not
by their formatting (:func:`diff_rows`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turneval._dataset_rows import (  # the rows of a file and two versions' difference
    DatasetDiff,
    DatasetRow,
    diff_files,
    diff_rows,
    file_rows,
    read_rows,
)
from turneval.errors import ConfigError

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

__all__ = [
    "DatasetDiff",
    "DatasetRow",
    "StoredDataset",
    "diff_files",
    "diff_rows",
    "file_rows",
    "read_rows",
]

_BATCH = 1000  # rows inserted per statement


@dataclass(frozen=True)
class StoredDataset:
    """One version of a named dataset in the store.

    Attributes:
        name: The dataset's name.
        version: Its number among the name's versions (1, 2, ...).
        digest: The SHA-256 of the file's content (what a run records of its input).
        rows: Its lines.
        path: The file it was added from.
        created: When this version was added (UTC).
    """

    name: str
    version: int
    digest: str
    rows: int
    path: str | None
    created: datetime

    @property
    def label(self) -> str:
        """``name@version``."""
        return f"{self.name}@{self.version}"

    def __str__(self) -> str:
        """``name@version (sha256 1a2b3c4d5e6f, N rows)``."""
        return f"{self.label} (sha256 {self.digest[:12]}, {self.rows:,} rows)"


def _record(row: Any) -> StoredDataset:
    created = row.created
    if created is not None and created.tzinfo is None:
        created = created.replace(tzinfo=timezone.utc)
    return StoredDataset(row.name, int(row.version), row.digest, int(row.rows), row.path, created)


def _versions_query() -> Any:
    from sqlalchemy import select

    from turneval.store._schema import dataset_versions, datasets

    return select(
        dataset_versions.c.name,
        dataset_versions.c.version,
        dataset_versions.c.digest,
        dataset_versions.c.path,
        dataset_versions.c.created,
        datasets.c.rows,
    ).join(datasets, datasets.c.digest == dataset_versions.c.digest)


def add(
    connection: Connection, path: Path, name: str, digest: str, rows: Sequence[DatasetRow]
) -> tuple[StoredDataset, bool]:
    """Keep ``rows`` under ``digest`` and make them ``name``'s next version.

    Returns the version and whether it is new (False: the name's latest version already holds
    this content).
    """
    from sqlalchemy import func, insert, select

    from turneval.store._schema import dataset_rows, dataset_versions, datasets

    versions = dataset_versions.c
    latest = connection.execute(
        _versions_query().where(versions.name == name).order_by(versions.version.desc()).limit(1)
    ).first()
    if latest is not None and latest.digest == digest:
        return _record(latest), False
    now = datetime.now(timezone.utc)
    known = connection.execute(select(datasets.c.digest).where(datasets.c.digest == digest))
    if known.first() is None:
        connection.execute(insert(datasets).values(digest=digest, rows=len(rows), created=now))
        for start in range(0, len(rows), _BATCH):
            connection.execute(
                insert(dataset_rows),
                [
                    {
                        "digest": digest,
                        "position": row.position,
                        "key": row.key,
                        "row_digest": row.digest,
                        "content": row.content,
                    }
                    for row in rows[start : start + _BATCH]
                ],
            )
    number = connection.execute(
        select(func.coalesce(func.max(versions.version), 0)).where(versions.name == name)
    ).scalar_one()
    connection.execute(
        insert(dataset_versions).values(
            name=name, version=int(number) + 1, digest=digest, path=str(path), created=now
        )
    )
    return StoredDataset(name, int(number) + 1, digest, len(rows), str(path), now), True


def listed(connection: Connection, name: str | None) -> list[StoredDataset]:
    """Every version (of ``name`` only, when given), by name then version."""
    columns = _columns()
    versions = _versions_query().order_by(columns.name, columns.version)
    if name is not None:
        versions = versions.where(columns.name == name)
    return [_record(row) for row in connection.execute(versions)]


def _columns() -> Any:
    from turneval.store._schema import dataset_versions

    return dataset_versions.c


def find(connection: Connection, ref: str) -> StoredDataset:
    """The version ``ref`` names: ``name@version``, ``name`` (its latest) or a digest prefix.

    Raises:
        ConfigError: no version (or several, for a digest prefix) matches, naming ``ref``.
    """
    columns = _columns()
    name, at, number = ref.rpartition("@")
    if at and number.isdigit():
        query = _versions_query().where(columns.name == name, columns.version == int(number))
        found = connection.execute(query).first()
        if found is None:
            raise ConfigError(
                f"dataset {ref!r} is not in the store (no version {number} of {name!r})"
            )
        return _record(found)
    latest = connection.execute(
        _versions_query().where(columns.name == ref).order_by(columns.version.desc()).limit(1)
    ).first()
    if latest is not None:
        return _record(latest)
    prefix = ref.strip().lower()
    if len(prefix) >= 6 and all(char in "0123456789abcdef" for char in prefix):
        matches = connection.execute(
            _versions_query()
            .where(columns.digest.startswith(prefix, autoescape=True))
            .order_by(columns.created.desc())
        ).all()
        digests = {row.digest for row in matches}
        if len(digests) == 1:
            return _record(matches[0])
        if len(digests) > 1:
            raise ConfigError(f"dataset digest {ref!r} names several datasets: give more of it")
    raise ConfigError(
        f"dataset {ref!r} is not in the store (give NAME, NAME@VERSION or a digest; "
        "'turneval datasets list' shows them)"
    )


def by_digest(connection: Connection, digest: str) -> StoredDataset | None:
    """The latest version holding ``digest`` (None: the store has no such content)."""
    columns = _columns()
    found = connection.execute(
        _versions_query().where(columns.digest == digest).order_by(columns.created.desc()).limit(1)
    ).first()
    return None if found is None else _record(found)


def row_keys(connection: Connection, digest: str) -> list[tuple[str, str]]:
    """The ``(key, row digest)`` of each row kept under ``digest``, in line order."""
    from sqlalchemy import select

    from turneval.store._schema import dataset_rows

    table = dataset_rows.c
    query = select(table.key, table.row_digest).where(table.digest == digest)
    return [(key, digest) for key, digest in connection.execute(query.order_by(table.position))]


def contents(connection: Connection, digest: str, limit: int | None) -> list[DatasetRow]:
    """The rows kept under ``digest``, in line order (the first ``limit``)."""
    from sqlalchemy import select

    from turneval.store._schema import dataset_rows

    table = dataset_rows.c
    query = (
        select(table.position, table.key, table.row_digest, table.content)
        .where(table.digest == digest)
        .order_by(table.position)
    )
    if limit is not None:
        query = query.limit(limit)
    return [DatasetRow(int(p), k, d, c) for p, k, d, c in connection.execute(query)]

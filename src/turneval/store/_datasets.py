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

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turneval.errors import ConfigError

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

__all__ = [
    "DatasetDiff",
    "DatasetRow",
    "StoredDataset",
    "diff_files",
    "diff_rows",
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


@dataclass(frozen=True)
class DatasetRow:
    """One line of a stored dataset.

    Attributes:
        position: Its 0-based line.
        key: What pairs it with a row of another version (its id, else ``line N``).
        digest: The SHA-256 of its JSON written canonically (of its text, if no JSON).
        content: The line as given.
    """

    position: int
    key: str
    digest: str
    content: str


@dataclass(frozen=True)
class DatasetDiff:
    """What changed between two versions of a dataset, by row key.

    Attributes:
        old: The earlier version's label (or digest).
        new: The later version's label (or digest).
        added: Keys only the new version has, in its order.
        removed: Keys only the old version has, in its order.
        changed: Keys both have with different content, in the new version's order.
        unchanged: How many keys both have alike.
    """

    old: str
    new: str
    added: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unchanged: int = 0

    @property
    def same(self) -> bool:
        """Whether no row was added, removed or changed."""
        return not (self.added or self.removed or self.changed)

    def summary(self, listed: int = 10) -> str:
        """``3 added (a, b, c), 1 removed (d), 2 changed (e, f), 40 unchanged``."""
        parts = []
        for word, keys in (("added", self.added), ("removed", self.removed)):
            parts.append(f"{len(keys)} {word}{_listing(keys, listed)}")
        parts.append(f"{len(self.changed)} changed{_listing(self.changed, listed)}")
        parts.append(f"{self.unchanged} unchanged")
        return ", ".join(parts)

    def __str__(self) -> str:
        """``old -> new: <summary>``."""
        return f"{self.old} -> {self.new}: {self.summary()}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "old": self.old,
            "new": self.new,
            "added": self.added,
            "removed": self.removed,
            "changed": self.changed,
            "unchanged": self.unchanged,
        }


def _listing(keys: Sequence[str], listed: int) -> str:
    if not keys:
        return ""
    shown = ", ".join(keys[:listed])
    more = f" (+{len(keys) - listed} more)" if len(keys) > listed else ""
    return f" ({shown}{more})"


def _key(record: Any, position: int) -> str:
    if isinstance(record, dict):
        metadata = record.get("metadata")
        if isinstance(metadata, dict) and metadata.get("id") is not None:
            return str(metadata["id"])
        if record.get("id") is not None:
            return str(record["id"])
    return f"line {position + 1}"


def read_rows(lines: Iterable[str]) -> Iterator[DatasetRow]:
    """Each non-blank line of a JSONL file as a :class:`DatasetRow` (keys made unique)."""
    seen: dict[str, int] = {}
    for position, raw in enumerate(lines):
        text = raw.rstrip("\r\n")
        if not text.strip():
            continue
        try:
            record: Any = json.loads(text)
            canonical = json.dumps(
                record, sort_keys=True, separators=(",", ":"), ensure_ascii=False
            )
        except ValueError:
            record, canonical = None, text
        key = _key(record, position)
        seen[key] = seen.get(key, 0) + 1
        if seen[key] > 1:
            key = f"{key}#{seen[key]}"
        digest = hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()
        yield DatasetRow(position, key, digest, text)


def diff_rows(
    old: Iterable[tuple[str, str]], new: Iterable[tuple[str, str]], *, labels: tuple[str, str]
) -> DatasetDiff:
    """The rows added, removed and changed between two versions, as ``(key, digest)`` pairs."""
    before = dict(old)
    after = dict(new)
    return DatasetDiff(
        labels[0],
        labels[1],
        [key for key in after if key not in before],
        [key for key in before if key not in after],
        [key for key, digest in after.items() if key in before and before[key] != digest],
        sum(1 for key, digest in after.items() if before.get(key) == digest),
    )


def file_rows(path: Path) -> tuple[str, list[DatasetRow]]:
    """A JSONL file's SHA-256 and its rows.

    Raises:
        ConfigError: the file cannot be read, or is not UTF-8 (naming it).
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the dataset ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 (byte {exc.start})") from None
    return hashlib.sha256(data).hexdigest(), list(read_rows(text.splitlines(keepends=True)))


def diff_files(old: str | Path, new: str | Path) -> DatasetDiff:
    """The rows added, removed and changed from one JSONL file to another (by key).

    Raises:
        ConfigError: a file cannot be read.
    """
    before, after = file_rows(Path(old)), file_rows(Path(new))
    return diff_rows(
        [(row.key, row.digest) for row in before[1]],
        [(row.key, row.digest) for row in after[1]],
        labels=(str(old), str(new)),
    )


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

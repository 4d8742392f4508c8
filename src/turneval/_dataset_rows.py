"""A dataset's rows and what changed between two versions of it (pure: no store).

Each line is read with its *key* (its sample's ``metadata.id``, else a top-level ``id``, else
``line N``; a key seen again gets ``#2``, ``#3``...) and the digest of its JSON written
canonically (sorted keys, no spaces), so two versions differ by the rows added, removed and
changed, not by their formatting (:func:`diff_rows`). The run store keeps dataset versions
with these rows (:mod:`turneval.store`); ``compare`` diffs two runs' input files with
:func:`diff_files` when the store keeps neither.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from turneval.errors import ConfigError

__all__ = [
    "DatasetDiff",
    "DatasetRow",
    "diff_files",
    "diff_rows",
    "file_rows",
    "read_rows",
]


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

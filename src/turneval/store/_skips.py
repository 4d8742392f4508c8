"""Conversations a ``turneval watch`` run did not score, and why (schema revision 0005).

``turneval watch`` records each conversation it skips (no model call in it, filtered out,
sampled out, scored by another receiver, over the judge budget) in its state folder's ledger
and, with a store, here: a team reading the shared store, or the viewer, sees what was skipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection

__all__ = ["StoredSkip", "insert_skips", "select_skip_counts", "select_skips"]


@dataclass(frozen=True)
class StoredSkip:
    """A conversation a ``turneval watch`` run did not score, and why.

    Attributes:
        conversation: Its id: ``trace:<trace id>`` or ``session:<session id>``.
        reason: ``no_conversation``, ``filtered``, ``sampled_out``, ``elsewhere`` or ``budget``
            (see docs/how-to/watch.md).
        detail: Why, in words (``no service.name=checkout``, ``estimated 0.012 USD; ...``).
        trace_ids: Its trace ids.
        created: When it was skipped (UTC; None when recording it: now).
    """

    conversation: str
    reason: str
    detail: str | None = None
    trace_ids: tuple[str, ...] = field(default_factory=tuple)
    created: datetime | None = None


def insert_skips(
    connection: Connection, kind: str, run_id: str, skips: Iterable[StoredSkip]
) -> None:
    """Insert ``skips`` for ``run_id``; a conversation the run already has is left as it is."""
    from turneval.store._schema import watch_skips

    now = datetime.now(timezone.utc)
    values = [
        {
            "run_id": run_id,
            "conversation": skip.conversation,
            "reason": skip.reason,
            "detail": skip.detail,
            "trace_ids": json.dumps(list(skip.trace_ids)),
            "created": skip.created or now,
        }
        for skip in skips
    ]
    if not values:
        return
    if kind == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert  # type: ignore[assignment]
    statement = insert(watch_skips).on_conflict_do_nothing(
        index_elements=["run_id", "conversation"]
    )
    connection.execute(statement, values)


def select_skips(
    connection: Connection, run_id: str, reason: str | None, limit: int | None
) -> list[StoredSkip]:
    """A run's skipped conversations, newest first (of one ``reason``, at most ``limit``)."""
    from sqlalchemy import select

    from turneval.store._schema import watch_skips

    table = watch_skips.c
    query = (
        select(table.conversation, table.reason, table.detail, table.trace_ids, table.created)
        .where(table.run_id == run_id)
        .order_by(table.created.desc(), table.conversation)
    )
    if reason is not None:
        query = query.where(table.reason == reason)
    if limit is not None:
        query = query.limit(limit)
    return [
        StoredSkip(
            conversation,
            reason,
            detail,
            tuple(json.loads(trace_ids)),
            created if created.tzinfo else created.replace(tzinfo=timezone.utc),
        )
        for conversation, reason, detail, trace_ids, created in connection.execute(query)
    ]


def select_skip_counts(connection: Connection, run_id: str) -> dict[str, int]:
    """A run's skipped conversations counted by reason (most first)."""
    from sqlalchemy import func, select

    from turneval.store._schema import watch_skips

    table = watch_skips.c
    found: list[Any] = list(
        connection.execute(
            select(table.reason, func.count()).where(table.run_id == run_id).group_by(table.reason)
        )
    )
    return {str(reason): int(count) for reason, count in sorted(found, key=lambda r: (-r[1], r[0]))}

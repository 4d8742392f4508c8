"""Where a batch run stands: :class:`BatchStatus`, read from the folder's state, and its bar."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

from turneval.usage import Usage

from ._state import State

__all__ = ["BatchStatus", "ProgressBar", "last_round", "read_status"]


@dataclass
class BatchStatus:
    """Where a batch run stands, and how its judge requests were answered.

    The requests the metrics state up front are what ``--dry-run`` counts (``stated``); of
    them, those identical to another are asked once; the cache answers some; the others are
    sent in batches, some more than once (follow-ups of errors and expired requests, repairs
    of invalid answers). A request that depends on an earlier answer is found in a later
    round (``found_later``).

    Attributes:
        requests: Distinct judge requests of the run (the cache's answers included).
        answered: Requests answered (and stored in the cache).
        failed: Requests that failed every attempt (their cells fail, or go live with
            ``fallback="sync"``).
        waiting: Requests in open batches or about to be sent in the next round.
        rounds: Rounds of batches so far (a follow-up of errors or a repair is a round).
        batches: Provider id and status of every batch.
        usage: What the batches spent: tokens they reported, and ``calls``, the request
            lines sent (follow-ups and repairs included).
        stated: Requests the metrics stated up front, identical ones counted each time (what
            ``--dry-run`` counts); None for a folder written before it was recorded.
        identical: Stated requests identical to another one (asked once, answered for both).
        cached: Requests the cache answered before any batch.
        sent: Distinct requests sent in batches.
        found_later: Requests found in later rounds (they depend on an earlier answer).
        refused: Cells whose metric stated no request because it refused the row (a field
            it needs is missing): they fail at collect time with the metric's reason.
    """

    requests: int = 0
    answered: int = 0
    failed: int = 0
    waiting: int = 0
    rounds: int = 0
    batches: list[tuple[str, str]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stated: int | None = None
    identical: int = 0
    cached: int = 0
    sent: int = 0
    found_later: int = 0
    refused: int = 0

    @property
    def done(self) -> bool:
        """True when no request waits: :meth:`~turneval.batch.BatchRun.collect` can run."""
        return self.waiting == 0

    def __str__(self) -> str:
        """One line for a terminal."""
        return (
            f"{self.answered}/{self.requests} answered, {self.failed} failed, "
            f"{self.waiting} waiting; {len(self.batches)} batch(es) in {self.rounds} round(s)"
        )

    def explain(self) -> str:
        """One line: from the requests stated (``--dry-run``'s count) to the lines sent."""
        lines = self.usage.calls
        again = lines - self.sent
        parts = []
        if self.stated is not None:
            parts.append(f"{self.stated} stated up front (what --dry-run counts)")
            if self.identical:
                parts.append(f"{self.identical} identical to another one (asked once)")
        else:
            parts.append(f"{self.requests} distinct")
        if self.found_later:
            parts.append(f"{self.found_later} found in later rounds (they need an earlier answer)")
        parts.append(f"{self.cached} answered by the cache")
        sent = f"{self.sent} sent in batches"
        if again:
            sent += f" as {lines} lines ({again} follow-ups and repairs)"
        parts.append(sent)
        unsent = self.requests - self.cached - self.sent
        if unsent:
            parts.append(f"{unsent} never sent (cancelled)")
        if self.refused:
            parts.append(
                f"{self.refused} cell(s) with no request: the metric refused the row, which "
                "fails with its reason"
            )
        return "judge requests: " + "; ".join(parts)


def last_round(store: State) -> int:
    """The number of the run's latest round of batches (0 before any)."""
    row = store.db.execute("SELECT MAX(round) FROM batches").fetchone()
    return int(row[0] or 0)


def read_status(store: State) -> BatchStatus:
    """Counts of the run's requests and its batches (from the folder; no provider call)."""
    db = store.db
    counts = dict(db.execute("SELECT state, COUNT(*) FROM requests GROUP BY state").fetchall())
    tokens = db.execute(
        "SELECT COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0) FROM batches"
    ).fetchone()
    sent, lines = db.execute(
        "SELECT COUNT(*), COALESCE(SUM(sends), 0) FROM requests WHERE sends > 0"
    ).fetchone()
    cached = db.execute(
        "SELECT COUNT(*) FROM requests WHERE sends = 0 AND state = 'answered'"
    ).fetchone()[0]
    batches = [
        (str(pid or local), str(status or state))
        for local, pid, status, state in db.execute(
            "SELECT local_id, provider_id, remote_status, state FROM batches ORDER BY created"
        )
    ]
    total = sum(counts.values())
    answered = counts.get("answered", 0)
    failed = counts.get("failed", 0)
    planned = store.meta("planned") or {}
    distinct = int(planned.get("distinct", total))
    stated = planned.get("stated")
    return BatchStatus(
        requests=total,
        answered=answered,
        failed=failed,
        waiting=total - answered - failed,
        rounds=last_round(store),
        batches=batches,
        usage=Usage(input_tokens=int(tokens[0]), output_tokens=int(tokens[1]), calls=int(lines)),
        stated=None if stated is None else int(stated),
        identical=0 if stated is None else int(stated) - distinct,
        cached=int(cached),
        sent=int(sent),
        found_later=max(total - distinct, 0),
        refused=int(planned.get("refused", 0)),
    )


class ProgressBar:
    """The progress of :meth:`~turneval.batch.BatchRun.wait` on stderr (tqdm, else lines)."""

    def __init__(self, enabled: bool) -> None:
        """A bar shown only when ``enabled``."""
        self.enabled = enabled
        self.bar: Any = None
        self.last = ""

    def show(self, status: BatchStatus) -> None:
        """Show ``status``."""
        if not self.enabled:
            return
        try:
            from tqdm import tqdm
        except ImportError:
            line = str(status)
            if line != self.last:
                print(line, file=sys.stderr)
                self.last = line
            return
        if self.bar is None:
            self.bar = tqdm(total=status.requests, desc="batch", unit="req")
        self.bar.total = status.requests
        self.bar.n = status.answered + status.failed
        self.bar.set_postfix_str(f"round {status.rounds}, {status.failed} failed")
        self.bar.refresh()

    def close(self) -> None:
        """Close the bar."""
        if self.bar is not None:
            self.bar.close()

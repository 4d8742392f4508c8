"""Scoring the complete conversations of ``turneval watch``: decided, claimed, scored, written.

A conversation idle for long enough is complete; :meth:`Scoring.tick` decides each one (no
conversation in its spans, filtered out, sampled out, claimed by another watch sharing the
store, over the budget, or scored), claims the decisions in the ledger, then scores the batch
with the pipeline and writes its rows (``results.jsonl`` or the run store). :class:`Scoring`
is a base of :class:`~turneval.watch.Watcher`.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turneval.errors import ConfigError
from turneval.traces import Span, trace_conversation

from ._budget import BudgetKeeping, Spend
from ._intake import Group, GroupBy

if TYPE_CHECKING:
    from turneval.runs import FolderSink

    from ._alerts import Alerts, ScoreHistograms

__all__ = ["DONE_KEPT", "SKIP_REASONS", "Scoring", "parse_filter", "sampled"]

DONE_KEPT = 10  # decided trace ids remembered per queue slot (for dropping late spans)
SKIP_REASONS = ("no_conversation", "filtered", "sampled_out", "elsewhere", "budget")


def sampled(conversation_id: str, rate: float) -> bool:
    """Whether a conversation is in a ``rate`` sample: deterministic, a hash of its id.

    The id is the row's (the trace id, or the session id with ``group_by="session"``); the
    first 8 bytes of its SHA-256, read big-endian and divided by 2**64, must be below ``rate``.
    Every receiver and every restart makes the same choice.
    """
    if rate >= 1:
        return True
    digest = hashlib.sha256(conversation_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < rate


def parse_filter(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` (a resource or span attribute and its value)."""
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise ConfigError(f"filter {text!r} is not KEY=VALUE (e.g. service.name=checkout)")
    return key.strip(), value.strip()


class Scoring(BudgetKeeping):
    """The scoring side of a :class:`~turneval.watch.Watcher` (the state it shares)."""

    names: list[str]
    state: Path
    group_by: GroupBy
    idle: float
    max_queue: int
    rate: float
    filters: list[tuple[str, str]]
    store: Any
    owner: str
    skipped: dict[str, int]
    _recorder: Any
    _events: tuple[Any, Any] | None
    _folder: FolderSink
    _spans: dict[str, list[Span]]
    _resource: dict[str, dict[str, Any]]
    _key: dict[str, str]
    _groups: dict[str, Group]
    _seen: set[tuple[str, str]]
    _done: dict[str, None]
    _queued: int
    _next: int
    _unwritten: list[Any]
    _write_lock: threading.Lock
    scores: ScoreHistograms
    alerts: Alerts | None

    def _forget(self) -> None:
        """Keep the newest ``DONE_KEPT * max_queue`` decided trace ids."""
        extra = len(self._done) - DONE_KEPT * self.max_queue
        if extra > 0:
            for trace in list(itertools.islice(self._done, extra)):
                del self._done[trace]

    def _unmatched(self, traces: list[str], spans: list[Span]) -> str | None:
        """The first filter the conversation does not hold (``KEY=VALUE``), or None."""
        for key, value in self.filters:
            resources = (self._resource.get(t, {}) for t in traces)
            values = [*(r.get(key) for r in resources), *(s.attributes.get(key) for s in spans)]
            if value not in {str(v) for v in values if v is not None}:
                return f"{key}={value}"
        return None

    def _claim(self, key: str) -> bool:
        """Whether this watch scores ``key``: True without a store, or once it holds the claim.

        Several watch processes sharing a store (a conversation sent to more than one) claim it
        in the store's ``claims`` table; the first insert wins, and a restarted process finds
        its own claims again.
        """
        if self.store is None:
            return True
        return bool(self.store.claim(key, self.owner, self._recorder.run_id))

    def _decide(self, key: str, spend: Spend) -> tuple[dict[str, Any], Any]:
        """A complete conversation's claim, and its sample when it is scored (None: skipped).

        A claim to score has no index yet; one skipped has its reason and why. Under a budget
        the conversation's estimated cost is added to ``spend`` when it fits.
        """
        traces = sorted(self._groups[key].traces)
        spans = [span for trace in traces for span in self._spans.get(trace, ())]
        claim: dict[str, Any] = {"id": key, "trace_ids": traces}
        why: dict[str, int] = {}
        sample = trace_conversation(spans, self.group_by, False, why)
        if sample is None:
            detail = f"{', '.join(why) or 'no conversation'} in {len(spans)} spans"
            return claim | {"skipped": "no_conversation", "detail": detail}, None
        missing = self._unmatched(traces, spans)
        if missing is not None:
            return claim | {"skipped": "filtered", "detail": f"no {missing}"}, None
        if not sampled(key.split(":", 1)[1], self.rate):
            return claim | {
                "skipped": "sampled_out",
                "detail": f"not in the {self.rate:g} sample",
            }, None
        if not self._claim(key):
            detail = "claimed by another watch sharing the store"
            return claim | {"skipped": "elsewhere", "detail": detail}, None
        if self.budget is not None:
            cost, estimated = self._cost(sample)
            if spend.spent + cost > self.budget.amount:
                detail = (
                    f"estimated {cost:.6g} {self.budget.unit}; {spend.spent:.6g} of "
                    f"{self.budget.amount:g} spent in this period"
                )
                return claim | {"skipped": "budget", "detail": detail}, None
            spend.spent += cost
            if cost:
                claim.update(cost=cost, estimated_input=estimated, at=spend.at)
        return claim, sample

    def tick(self, *, force: bool = False) -> int:
        """Score the conversations complete now (all of them with ``force``); returns how many.

        The decisions are made, then claimed in the ledger (and the skipped ones recorded in
        the store): when either write fails, nothing was decided and the next tick decides
        again. Rows scored whose write failed are written at the next tick.
        """
        self._write_rows([])
        with self.lock:
            now = time.monotonic()
            ready = [key for key, g in self._groups.items() if force or now - g.last >= self.idle]
            if not ready:
                return 0
            at = self.clock()
            spend = self._period(at) if self.budget is not None else Spend()
            index, sampled_count = self._next, 0
            batch: list[tuple[dict[str, Any], Any]] = []
            skips: list[dict[str, Any]] = []
            for key in ready:
                claim, sample = self._decide(key, spend)
                if sample is not None or claim.get("skipped") == "budget":
                    sampled_count += 1
                if sample is None:
                    skips.append(claim)
                else:
                    claim["index"] = index
                    index += 1
                    batch.append((claim, sample))
            if skips and self._recorder is not None:  # recorded again after a failure: kept once
                from turneval.store import StoredSkip

                recorded = [
                    StoredSkip(c["id"], c["skipped"], c["detail"], tuple(c["trace_ids"]))
                    for c in skips
                ]
                self.store.add_skipped(self._recorder.run_id, recorded)
            self._ledger.append([claim for claim, _ in batch] + skips)
            # decided: from here on nothing fails
            self._next, self._spend = index, spend
            self.counts["conversations_complete"] += len(ready)
            self.counts["conversations_sampled"] += sampled_count
            for claim in skips:
                self.skipped[claim["skipped"]] += 1
            for key in ready:
                for trace in self._groups.pop(key).traces:
                    held = self._spans.pop(trace, [])
                    self._queued -= len(held)
                    for span in held:
                        self._seen.discard((trace, span.span_id))
                    self._resource.pop(trace, None)
                    self._key.pop(trace, None)
                    self._done[trace] = None
            self._forget()
        if batch:
            self._score(batch)
        return len(batch)

    def _score(self, batch: list[tuple[dict[str, Any], Any]]) -> None:
        from turneval.pipeline import score_batch

        samples = [sample for _, sample in batch]
        first = int(batch[0][0]["index"])
        judge = self.options.judge_run()
        rows = score_batch(
            samples, self.metrics, options=self.options, start_index=first, judge=judge
        )
        if self.prices is not None:
            self.counts["judge_spend_usd"] = self.counts.get("judge_spend_usd", 0.0) + float(
                self.prices.cost(judge.usage)
            )
        if self.budget is not None:
            self._spent(batch, judge.usage)
        self._write_rows(rows)
        if self._events is not None:
            from turneval.results import EvaluationResult
            from turneval.traces import to_otel_events

            result = EvaluationResult(rows, self.names, judge.usage)
            to_otel_events(result, logger=self._events[1])  # sent in the background

    def _write_rows(self, rows: list[Any]) -> None:
        """Write scored rows, and those an earlier write failed to (a full disk, say).

        Raises what the write raised; the rows are kept and written at the next tick.
        """
        from turneval.runs import Rows

        with self._write_lock:
            retrying = bool(self._unwritten)
            self._unwritten += rows
            todo = self._unwritten
            if not todo:
                return
            if self._recorder is not None:
                if retrying:  # what an earlier, failed write stored (or left buffered)
                    self._recorder.flush()
                    stored = self._recorder.store.stored_indexes(self._recorder.run_id)
                    todo = [row for row in todo if row.index not in stored]
                self._recorder.add(Rows.of(todo, self.names, details=self.options.details))
                self._recorder.flush()
            else:  # appended whole (fsync'd) or not at all, through the folder sink
                self._folder.add(Rows.of(todo, self.names, details=self.options.details))
            written, self._unwritten = self._unwritten, []
        with self.lock:
            self.counts["conversations_scored"] += len(written)
            self.counts["rows_failed"] += sum(1 for row in written if row.failures)
        self.scores.observe(written)  # issue 49: /metrics histograms, and the alerts on them
        if self.alerts is not None:
            self.alerts.observe(written, self.clock())

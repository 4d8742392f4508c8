"""The rounds of a batch run: send, reconcile, read what ended, follow up, repair, discover.

:class:`Rounds` holds the work :class:`~turneval.batch.BatchRun` does under the folder's lock
(its public methods take the lock, then call these). Each batch is written ahead: recorded in
the state (``submitting``) before the provider is asked to create it, so a crash between the
two is reconciled from the provider's list of batches, never sent twice. Rounds follow one
another: the next is sent once every batch of the last has ended (follow-ups of errored or
expired requests, repairs of answers that could not be parsed, requests found by a scoring
pass from the cache).
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turneval.errors import JudgeCallError
from turneval.judge._cache import SQLiteCache
from turneval.usage import Usage

from ._plan import Planned, may_ask_unstated
from ._providers import Outcome, Provider, provider_for
from ._state import State
from ._status import last_round
from ._usage import BatchCache

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage

    from turneval.judge._core import Judge
    from turneval.samples import Sample

__all__ = ["Rounds"]

_CLOCK_SKEW = 600.0
"""Seconds the provider's clock may lag ours when a message batch is matched by its time."""


class Rounds:
    """The rounds' work on a batch run's state (a base of :class:`~turneval.batch.BatchRun`).

    Call these with the folder's lock held; the attributes are the run's.
    """

    samples: list[Sample]
    metrics: list[Any]
    llm: Any
    cache_path: Path
    cache: SQLiteCache
    provider: Provider | None
    run_id: str
    max_attempts: int
    _store: State
    _plan: dict[str, Planned]
    _refreshed_at: int
    _providers: dict[int, Provider]

    def _refresh_plan(self) -> None:
        """Find the requests of later rounds again (another process may have added some).

        A scoring pass finds them; it runs only when the folder holds requests the plan lacks
        and their number changed since the last pass.
        """
        known = int(self._store.db.execute("SELECT COUNT(*) FROM requests").fetchone()[0])
        if known > len(self._plan) and known != self._refreshed_at:
            self._plan.update(self._find_unstated())
            self._refreshed_at = known

    def _state(self, key: str) -> str | None:
        row = self._store.db.execute("SELECT state FROM requests WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    # -- submission -----------------------------------------------------------------------------

    def _body(self, key: str, feedback: list[list[str]]) -> dict[str, Any]:
        from turneval.judge._core import with_feedback

        planned = self._plan[key]
        messages = planned.messages
        for raw, detail in feedback:  # a repair round: the model sees its earlier answers
            messages = with_feedback(messages, raw, detail)
        provider = self._providers.get(id(planned.judge))
        if provider is None:  # a judge first seen in a scoring pass (another temperature)
            provider = self._providers[id(planned.judge)] = provider_for(planned.judge.llm)
        return provider.body(messages, planned.schema)

    def _submit_pending(self) -> int:
        """Send every pending request in batches within the provider's limits (one round)."""
        rows = self._store.db.execute(
            "SELECT key, sends, feedback FROM requests WHERE state = 'pending' ORDER BY rowid"
        ).fetchall()
        if not rows or self.provider is None:
            return 0
        round_ = self._rounds() + 1
        chunk: list[tuple[str, str, dict[str, Any]]] = []
        size = 0
        for key, sends, feedback in rows:
            custom_id = f"{key[:56]}-{sends + 1}"
            body = self._body(key, json.loads(feedback))
            line = len(json.dumps(body)) + 200
            if chunk and (
                len(chunk) >= self.provider.max_requests or size + line > self.provider.max_bytes
            ):
                self._create(chunk, round_)
                chunk, size = [], 0
            chunk.append((key, custom_id, body))
            size += line
        self._create(chunk, round_)
        return len(rows)

    def _create(self, chunk: list[tuple[str, str, dict[str, Any]]], round_: int) -> None:
        assert self.provider is not None
        local = uuid.uuid4().hex
        with self._store.transaction() as db:  # write-ahead: recorded before the provider knows
            db.execute(
                "INSERT INTO batches (local_id, round, state, created, count) "
                "VALUES (?, ?, 'submitting', ?, ?)",
                (local, round_, time.time(), len(chunk)),
            )
            db.executemany(
                "UPDATE requests SET state = 'sending', batch = ?, custom_id = ?, "
                "sends = sends + 1 WHERE key = ?",
                [(local, custom_id, key) for key, custom_id, _ in chunk],
            )
        provider_id = self.provider.create(
            [(custom_id, body) for _, custom_id, body in chunk],
            {"turneval_run": self.run_id, "turneval_batch": local},
        )
        self._opened(local, provider_id)

    def _opened(self, local: str, provider_id: str) -> None:
        with self._store.transaction() as db:
            db.execute(
                "UPDATE batches SET provider_id = ?, state = 'open' WHERE local_id = ?",
                (provider_id, local),
            )
            db.execute("UPDATE requests SET state = 'sent' WHERE batch = ?", (local,))

    def _reconcile(self) -> None:
        pending = self._store.db.execute(
            "SELECT local_id, created, count FROM batches WHERE state = 'submitting'"
        ).fetchall()
        if not pending or self.provider is None:
            return
        known = {
            row[0]
            for row in self._store.db.execute(
                "SELECT provider_id FROM batches WHERE provider_id IS NOT NULL"
            )
        }
        since = min(created for _, created, _ in pending) - _CLOCK_SKEW
        remote = [b for b in self.provider.batches(since) if b.id not in known]
        for local, created, count in pending:
            match = next((b for b in remote if b.metadata.get("turneval_batch") == local), None)
            if match is None and self.provider.name == "anthropic":  # no metadata: time, count
                match = next(
                    (
                        b
                        for b in remote
                        if b.created_at >= created - _CLOCK_SKEW and b.total == count
                    ),
                    None,
                )
            if match is not None:
                remote.remove(match)
                self._opened(local, match.id)
                continue
            with self._store.transaction() as db:
                db.execute(
                    "UPDATE requests SET state = 'pending', batch = NULL, sends = sends - 1 "
                    "WHERE batch = ?",
                    (local,),
                )
                db.execute("DELETE FROM batches WHERE local_id = ?", (local,))

    # -- polling --------------------------------------------------------------------------------

    def _rounds(self) -> int:
        return last_round(self._store)

    def _poll(self) -> None:
        self._refresh_plan()
        self._reconcile()
        assert self.provider is not None or not self._plan
        open_batches = self._store.db.execute(
            "SELECT local_id, provider_id FROM batches WHERE state = 'open'"
        ).fetchall()
        for local, provider_id in open_batches:
            assert self.provider is not None
            remote = self.provider.retrieve(provider_id)
            self._store.db.execute(
                "UPDATE batches SET remote_status = ? WHERE local_id = ?", (remote.status, local)
            )
            if remote.ended:
                why = remote.status if remote.error is None else f"{remote.status}: {remote.error}"
                self._ingest(local, self.provider.results(provider_id), why)
        still_open = self._store.db.execute(
            "SELECT COUNT(*) FROM batches WHERE state = 'open'"
        ).fetchone()[0]
        if not still_open:  # rounds follow one another: the next starts once all ended
            if not self._submit_pending() and not self._store.meta("discovered"):
                self._discover()

    def _discover(self) -> int:
        """Score the run from the cache to find requests no metric stated up front.

        A judge request that depends on an earlier answer (or that a metric makes outside
        ``judge_requests``) is only known once that answer is in: every such request the
        cache does not answer becomes part of the next round. Once a pass finds none, the run
        is complete.
        """
        found = self._find_unstated() if may_ask_unstated(self.metrics) else {}
        if found:
            with self._store.transaction() as db:
                db.executemany(
                    "INSERT OR IGNORE INTO requests (key, state) VALUES (?, 'pending')",
                    [(key,) for key in found],
                )
            self._plan.update(found)
            return self._submit_pending()
        self._store.set_meta("discovered", True)
        return 0

    def _find_unstated(self) -> dict[str, Planned]:
        """The requests a scoring pass would make that the plan lacks (none are sent)."""
        from turneval.judge._core import DEFERRED_REQUESTS
        from turneval.runner import evaluate

        found: dict[str, Planned] = {}

        def record(judge: Judge, key: str, messages: list[BaseMessage], schema: Any) -> None:
            if key not in self._plan:
                found[key] = Planned(judge, schema, messages)
            raise JudgeCallError("asked in the next batch round")

        cache = BatchCache(self.cache_path, {}, "sync")  # answers, or a miss: never raises
        token = DEFERRED_REQUESTS.set(record)
        try:
            evaluate(
                self.samples,
                self.metrics,
                llm=self.llm,
                cache=cache,
                show_progress=False,
                details=False,
            )
        finally:
            DEFERRED_REQUESTS.reset(token)
            cache.close()
        return found

    def _ingest(self, local: str, outcomes: list[Outcome], remote_status: str) -> None:
        """Store the answers of an ended batch; plan follow-ups and repairs."""
        from pydantic import ValidationError

        from turneval.judge._core import (
            describe_parse_error,
            message_text,
            message_tokens,
            parse_json_reply,
            structured_arguments,
        )

        rows = {
            custom_id: (key, sends, repairs, feedback)
            for key, custom_id, sends, repairs, feedback in self._store.db.execute(
                "SELECT key, custom_id, sends, repairs, feedback FROM requests "
                "WHERE batch = ? AND state = 'sent'",
                (local,),
            )
        }
        usage = Usage()
        updates: list[tuple[str, int, str, str | None, str]] = []
        answers: list[tuple[str, dict[str, Any]]] = []
        spent: list[tuple[int, int, str]] = []  # each answer's tokens, on its request
        for outcome in outcomes:
            row = rows.pop(outcome.custom_id, None)
            if row is None:  # not ours, or already read
                continue
            key, sends, repairs, feedback = row
            planned = self._plan.get(key)
            if planned is None:  # never so after open() (it rebuilds every request)
                updates.append(("failed", repairs, feedback, "request not rebuilt", key))
                continue
            if outcome.message is None:
                updates.append(self._retry(key, sends, repairs, feedback, str(outcome.error)))
                continue
            tokens = message_tokens(outcome.message)
            usage = usage + tokens
            spent.append((tokens.input_tokens, tokens.output_tokens, key))
            text = message_text(outcome.message)
            arguments = structured_arguments(outcome.message)
            raw = text or arguments or ""
            try:
                parsed = parse_json_reply(arguments or text, planned.schema)
            except (ValueError, ValidationError) as error:
                detail = describe_parse_error(error)
                notes = [*json.loads(feedback), [raw, detail]]
                if repairs < planned.judge.max_parse_retries:
                    updates.append(("pending", repairs + 1, json.dumps(notes), None, key))
                else:
                    message = (
                        f"judge output could not be parsed after {repairs + 1} attempt(s): "
                        f"{detail}; its last output: {raw[:300]!r}"
                    )
                    updates.append(("failed", repairs, feedback, message, key))
                continue
            answers.append((key, {"raw": raw, "parsed": parsed.model_dump(mode="json")}))
            updates.append(("answered", repairs, feedback, None, key))
        for key, sends, repairs, feedback in rows.values():  # no result at all
            updates.append(
                self._retry(key, sends, repairs, feedback, f"no result (batch {remote_status})")
            )
        self.cache.set_many(answers, replace=True)  # before the state says "answered"
        with self._store.transaction() as db:
            db.executemany(
                "UPDATE requests SET state = ?, repairs = ?, feedback = ?, error = ? WHERE key = ?",
                updates,
            )
            db.executemany(
                "UPDATE requests SET input_tokens = input_tokens + ?, "
                "output_tokens = output_tokens + ? WHERE key = ?",
                spent,
            )
            db.execute(
                "UPDATE batches SET state = 'ended', remote_status = ?, "
                "input_tokens = input_tokens + ?, output_tokens = output_tokens + ? "
                "WHERE local_id = ?",
                (remote_status, usage.input_tokens, usage.output_tokens, local),
            )

    def _retry(
        self, key: str, sends: int, repairs: int, feedback: str, error: str
    ) -> tuple[str, int, str, str | None, str]:
        """An errored or expired request: a follow-up batch, or failed after the last attempt."""
        cancelled = self._store.meta("cancelled")
        if sends < self.max_attempts and not cancelled:
            return ("pending", repairs, feedback, error, key)
        return ("failed", repairs, feedback, f"{error} (after {sends} attempt(s))", key)

    def _cancel(self) -> None:
        self._store.set_meta("cancelled", True)
        with self._store.transaction() as db:
            db.execute(
                "UPDATE requests SET state = 'failed', error = 'cancelled' WHERE state = 'pending'"
            )
        for (provider_id,) in self._store.db.execute(
            "SELECT provider_id FROM batches WHERE state = 'open'"
        ).fetchall():
            assert self.provider is not None
            self.provider.cancel(provider_id)

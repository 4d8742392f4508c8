"""A batch run persisted in a folder: plan, write-ahead submission, polling, rounds, collect."""

from __future__ import annotations

import importlib
import json
import sqlite3
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from turneval.errors import ConfigError, JudgeCallError
from turneval.judge.cache import SQLiteCache
from turneval.usage import Usage

from ._providers import Outcome, Provider, provider_for

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage
    from pydantic import BaseModel

    from turneval.dataset import EvaluationDataset
    from turneval.judge.core import Judge
    from turneval.metrics.base import Evaluator
    from turneval.results import EvaluationResult, Prices
    from turneval.samples import Sample
    from turneval.stream import StreamResult

__all__ = ["BatchRun", "BatchStatus", "Fallback", "submit"]

Fallback = Literal["fail", "sync"]
"""What becomes of a request the batches could not answer: a failed cell, or a live call."""

DEFAULT_MAX_ATTEMPTS = 3
"""Times a request is sent in batches at most (the first and its follow-ups)."""

_CLOCK_SKEW = 600.0
"""Seconds the provider's clock may lag ours when a message batch is matched by its time."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS requests (
    key TEXT PRIMARY KEY,
    custom_id TEXT,
    state TEXT NOT NULL,
    sends INTEGER NOT NULL DEFAULT 0,
    repairs INTEGER NOT NULL DEFAULT 0,
    feedback TEXT NOT NULL DEFAULT '[]',
    batch TEXT,
    error TEXT
);
CREATE INDEX IF NOT EXISTS requests_custom_id ON requests (custom_id);
CREATE INDEX IF NOT EXISTS requests_state ON requests (state);
CREATE TABLE IF NOT EXISTS batches (
    local_id TEXT PRIMARY KEY,
    provider_id TEXT,
    round INTEGER NOT NULL,
    state TEXT NOT NULL,
    remote_status TEXT,
    created REAL NOT NULL,
    count INTEGER NOT NULL,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0
);
"""


@dataclass
class BatchStatus:
    """Where a batch run stands.

    Attributes:
        requests: Judge requests the run needs answered (the cache's answers excluded).
        answered: Requests answered (and stored in the cache).
        failed: Requests that failed every attempt (their cells fail, or go live with
            ``fallback="sync"``).
        waiting: Requests in open batches or about to be sent in the next round.
        rounds: Rounds of batches so far (a follow-up of errors or a repair is a round).
        batches: Provider id and status of every batch.
        usage: Tokens the batches reported.
    """

    requests: int = 0
    answered: int = 0
    failed: int = 0
    waiting: int = 0
    rounds: int = 0
    batches: list[tuple[str, str]] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)

    @property
    def done(self) -> bool:
        """True when no request waits: :meth:`BatchRun.collect` can run."""
        return self.waiting == 0

    def __str__(self) -> str:
        """One line for a terminal."""
        return (
            f"{self.answered}/{self.requests} answered, {self.failed} failed, "
            f"{self.waiting} waiting; {len(self.batches)} batch(es) in {self.rounds} round(s)"
        )


@dataclass
class _Planned:
    judge: Judge
    schema: type[BaseModel]
    messages: list[BaseMessage]


class _Store:
    """The folder's state database (SQLite): every write is committed before the next step."""

    def __init__(self, path: Path) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.executescript(_SCHEMA)

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    def meta(self, name: str) -> Any:
        row = self.db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return None if row is None else json.loads(row[0])

    def set_meta(self, name: str, value: Any) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)", (name, json.dumps(value))
        )


def _class_path(obj: Any) -> str:
    return f"{type(obj).__module__}:{type(obj).__qualname__}"


def _import(path: str) -> Any:
    module, _, name = path.partition(":")
    target: Any = importlib.import_module(module)
    for part in name.split("."):
        target = getattr(target, part)
    return target


def _metric_spec(metrics: Sequence[Any]) -> list[dict[str, Any]]:
    specs = []
    for metric in metrics:
        try:
            config = metric.model_dump(mode="json", exclude={"llm"})
        except Exception:
            config = None
        specs.append({"class": _class_path(metric), "name": metric.name, "config": config})
    return specs


def _metrics_from(specs: list[dict[str, Any]]) -> list[Any]:
    from turneval.runner import resolve_metrics

    metrics = []
    for spec in specs:
        try:
            cls = _import(spec["class"])
            metrics.append(cls.model_validate(spec["config"]))
        except Exception:
            try:
                metrics += resolve_metrics([spec["name"]])
            except Exception as exc:
                raise ConfigError(
                    f"cannot rebuild metric {spec['name']!r} ({spec['class']}) of this batch "
                    "run: pass metrics=[...] to BatchRun.open"
                ) from exc
    return metrics


_LLM_FIELDS = (
    "model_name",
    "model",
    "openai_api_base",
    "anthropic_api_url",
    "temperature",
    "seed",
    "max_tokens",
    "deployment_name",
    "azure_endpoint",
    "openai_api_version",
)


def _llm_spec(llm: Any) -> dict[str, Any]:
    fields = type(llm).model_fields
    values = {name: getattr(llm, name) for name in _LLM_FIELDS if name in fields}
    return {
        "class": _class_path(llm),
        "fields": {k: v for k, v in values.items() if isinstance(v, (str, int, float))},
    }


def _llm_from(spec: dict[str, Any]) -> Any:
    cls = _import(spec["class"])
    return cls(**spec["fields"])  # the key from the provider's usual environment variable


class _BatchCache(SQLiteCache):
    """The run's cache at collect time: answers from the batches, and nothing live.

    A request the batches did not answer is asked live only with the fallback ``sync``; with
    ``fail`` its cell fails with the provider's error.
    """

    def __init__(
        self, path: str | PathLike[str], failed: dict[str, str], fallback: Fallback
    ) -> None:
        super().__init__(path)
        self.failed = failed
        self.fallback = fallback

    def get(self, key: str) -> dict[str, Any] | None:
        """The batch's answer for ``key``; an unanswered request raises ``JudgeCallError``."""
        hit = super().get(key)
        if hit is not None or self.fallback == "sync":
            return hit
        error = self.failed.get(key)
        if error is not None:
            raise JudgeCallError(f"batch request failed: {error}")
        raise JudgeCallError(
            "this judge request was not stated up front, so no batch answered it; collect "
            "with fallback='sync' (--batch-fallback sync) to ask it live"
        )


def _may_ask_unstated(metrics: Sequence[Evaluator]) -> bool:
    """Whether a metric may ask the judge beyond the requests it states up front.

    A judged metric that keeps the template's ``_evaluate`` and ``ask`` asks exactly its
    ``judge_requests``; a rule-based metric asks nothing. Any other metric that uses an LLM
    (a verdict depending on an earlier one, a hand-written judge call) may.
    """
    from turneval.metrics import JudgedMetric

    def stated(metric: Any) -> bool:
        kind = type(metric)
        return isinstance(metric, JudgedMetric) and (
            kind._evaluate is JudgedMetric._evaluate and kind.ask is JudgedMetric.ask
        )

    return any(m.uses_llm and not stated(m) for m in metrics)


def _plan(samples: Sequence[Sample], metrics: Sequence[Any], llm: Any) -> dict[str, _Planned]:
    """Every judge request of the run, keyed by its cache key (the judge's own)."""
    from turneval.judge import JudgeRun, judge_run
    from turneval.metrics import JudgedMetric

    plan: dict[str, _Planned] = {}
    judged = [m for m in metrics if isinstance(m, JudgedMetric)]
    with judge_run(JudgeRun(llm=llm)):
        for sample in samples:
            for metric in judged:
                if not isinstance(sample, metric.sample_types):
                    continue
                try:
                    requests = metric.judge_requests(sample)
                except Exception:  # the row fails at collect time, with its reason
                    continue
                for request in requests:
                    if request.after is not None:  # reads a summary not yet written: a
                        continue  # later round asks it (issue 47's running summary)
                    judge = metric.judge(
                        temperature=request.temperature,
                        logprobs=request.logprobs,
                        repeat=request.repeat,
                    )
                    messages = judge.prompt(request.system, request.prompt, request.schema)
                    key = judge.cache_key(
                        messages, request.schema, request.cache_extra, vote=request.vote
                    )
                    plan[key] = _Planned(judge, request.schema, messages)
    return plan


class BatchRun:
    """A judged run executed through the provider's batch API, persisted in a folder.

    Make one with :func:`submit`, reopen it with :meth:`open` (after a crash, or from another
    process), follow it with :meth:`status` / :meth:`wait`, and read the result with
    :meth:`collect`. The folder holds the samples, the metrics' configuration, the judge's
    model (never its key), the cache of answers (unless another was given) and ``state.sqlite``:
    every request's ``custom_id`` and every batch, written before the batch is created.

    Attributes:
        out: The run's folder.
        samples: The samples, as submitted.
        metrics: The metrics.
        llm: The judge model.
        cache_path: The judge cache the answers go to.
        provider: The batch API the requests go through (None when nothing is judged).
        max_attempts: Times a request that errors or expires is sent at most.
        fallback: What :meth:`collect` does with a request every attempt failed.
    """

    def __init__(
        self,
        out: Path,
        samples: Sequence[Sample],
        metrics: Sequence[Any],
        llm: Any,
        cache_path: Path,
        store: _Store,
    ) -> None:
        """Use :func:`submit` or :meth:`open`."""
        self.out = out
        self.samples = list(samples)
        self.metrics = list(metrics)
        self.llm = llm
        self.cache_path = cache_path
        self.cache = SQLiteCache(cache_path)
        self._store = store
        self.run_id: str = store.meta("run_id")
        self.max_attempts: int = store.meta("max_attempts")
        self.fallback: Fallback = store.meta("fallback")
        self._plan = _plan(self.samples, self.metrics, llm)
        judges = {id(p.judge): p.judge for p in self._plan.values()}
        self._providers = {jid: provider_for(judge.llm) for jid, judge in judges.items()}
        first = next(iter(self._providers.values()), None)
        self.provider: Provider | None = first or (None if llm is None else provider_for(llm))
        servers = {p.server for p in self._providers.values()}
        if len(servers) > 1:
            raise ConfigError(
                "the judges of a batch run must share one provider and server, got "
                + ", ".join(sorted(servers))
                + ": submit one batch run per judge"
            )

    # -- opening --------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        out: str | PathLike[str],
        *,
        llm: Any = None,
        metrics: Sequence[Any] | None = None,
    ) -> BatchRun:
        """Reopen the batch run in folder ``out``; it reconciles with the provider first.

        Args:
            out: The folder given to :func:`submit`.
            llm: The judge model (default: rebuilt from the folder; its API key is read from
                the provider's usual environment variable).
            metrics: The metrics (default: rebuilt from their stored configuration).
        """
        from turneval.dataset import EvaluationDataset

        folder = Path(out)
        if not (folder / "state.sqlite").exists():
            raise ConfigError(f"{folder} holds no batch run (no state.sqlite): submit one first")
        store = _Store(folder / "state.sqlite")
        resolved = metrics if metrics is not None else _metrics_from(store.meta("metrics"))
        model = llm if llm is not None else _llm_from(store.meta("llm"))
        samples = EvaluationDataset.from_jsonl(folder / "samples.jsonl").samples
        run = cls(folder, samples, resolved, model, Path(store.meta("cache")), store)
        missing = sum(1 for key in run._plan if run._state(key) is None)
        if missing:
            raise ConfigError(
                f"{missing} judge request(s) of these metrics and judge were not part of the "
                f"batch run in {folder}: open it with the judge model and metrics it was "
                "submitted with"
            )
        unplanned = run._store.db.execute("SELECT key FROM requests").fetchall()
        if len(unplanned) > len(run._plan):  # requests found by a scoring pass: find them again
            run._plan.update(run._find_unstated())
        run.reconcile()
        return run

    def _state(self, key: str) -> str | None:
        row = self._store.db.execute("SELECT state FROM requests WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    # -- submission -----------------------------------------------------------------------------

    def _body(self, key: str, feedback: list[list[str]]) -> dict[str, Any]:
        from turneval.judge.core import with_feedback

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

    def reconcile(self) -> None:
        """Match batches whose creation was interrupted with the provider's list of batches.

        A batch the provider has is adopted (its requests are not sent again); one it never
        received is forgotten and its requests go back to pending.
        """
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
        row = self._store.db.execute("SELECT MAX(round) FROM batches").fetchone()
        return int(row[0] or 0)

    def poll(self) -> BatchStatus:
        """One pass: reconcile, read every ended batch, send the next round when one is due."""
        self.reconcile()
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
        return self.status()

    def _discover(self) -> int:
        """Score the run from the cache to find requests no metric stated up front.

        A judge request that depends on an earlier answer (or that a metric makes outside
        ``judge_requests``) is only known once that answer is in: every such request the
        cache does not answer becomes part of the next round. Once a pass finds none, the run
        is complete.
        """
        found = self._find_unstated() if _may_ask_unstated(self.metrics) else {}
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

    def _find_unstated(self) -> dict[str, _Planned]:
        """The requests a scoring pass would make that the plan lacks (none are sent)."""
        from turneval.judge.core import DEFERRED_REQUESTS
        from turneval.runner import evaluate

        found: dict[str, _Planned] = {}

        def record(judge: Judge, key: str, messages: list[BaseMessage], schema: Any) -> None:
            if key not in self._plan:
                found[key] = _Planned(judge, schema, messages)
            raise JudgeCallError("asked in the next batch round")

        cache = _BatchCache(self.cache_path, {}, "sync")  # answers, or a miss: never raises
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

        from turneval.judge.core import (
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
            usage = usage + message_tokens(outcome.message)
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

    def status(self) -> BatchStatus:
        """Counts of the run's requests and its batches (from the folder; no provider call)."""
        db = self._store.db
        counts = dict(db.execute("SELECT state, COUNT(*) FROM requests GROUP BY state").fetchall())
        tokens = db.execute(
            "SELECT COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0) FROM batches"
        ).fetchone()
        batches = [
            (str(pid or local), str(status or state))
            for local, pid, status, state in db.execute(
                "SELECT local_id, provider_id, remote_status, state FROM batches ORDER BY created"
            )
        ]
        total = sum(counts.values())
        answered = counts.get("answered", 0)
        failed = counts.get("failed", 0)
        return BatchStatus(
            requests=total,
            answered=answered,
            failed=failed,
            waiting=total - answered - failed,
            rounds=self._rounds(),
            batches=batches,
            usage=Usage(input_tokens=int(tokens[0]), output_tokens=int(tokens[1])),
        )

    def wait(
        self, *, progress: bool = True, poll_interval: float = 30.0, timeout: float | None = None
    ) -> BatchStatus:
        """Poll until no request waits (every round ended); returns the final status.

        Args:
            progress: A progress bar on stderr (tqdm, the ``progress`` extra; else a line
                per change).
            poll_interval: Seconds between polls.
            timeout: Give up waiting after this many seconds (the batches keep running);
                raises ``TimeoutError``.
        """
        start = time.monotonic()
        bar = _Bar(progress)
        try:
            while True:
                status = self.poll()
                bar.show(status)
                if status.done:
                    return status
                if timeout is not None and time.monotonic() - start > timeout:
                    raise TimeoutError(f"batch run in {self.out} still running: {status}")
                time.sleep(poll_interval)
        finally:
            bar.close()

    # -- results --------------------------------------------------------------------------------

    def collect(self, *, fallback: Fallback | None = None) -> EvaluationResult:
        """The run's result: rule-based metrics scored here, judged cells from the batches.

        Every judged cell goes through the metric's own ``verdict()``, reading the answers the
        batches stored in the cache (exactly as a live run with that cache would); a request
        that failed every attempt fails its cell with the provider's error, or is asked live
        with ``fallback="sync"``. Also writes ``results.jsonl`` in the folder.

        Raises:
            ConfigError: batches are still running (:meth:`wait` first).
        """
        from turneval.runner import evaluate

        status = self.status()
        if not status.done:
            raise ConfigError(f"batch run in {self.out} is not finished ({status}): wait first")
        cache = _BatchCache(self.cache_path, self.failed_requests(), fallback or self.fallback)
        try:
            result = evaluate(
                self.samples, self.metrics, llm=self.llm, cache=cache, show_progress=False
            )
        finally:
            cache.close()
        result.to_jsonl(self.out / "results.jsonl")
        return result

    def failed_requests(self) -> dict[str, str]:
        """The provider's error (or the parse error) of each request that failed, by key."""
        return dict(
            self._store.db.execute("SELECT key, error FROM requests WHERE state = 'failed'")
        )

    def collect_files(
        self, *, fallback: Fallback | None = None, show_progress: bool | None = None
    ) -> StreamResult:
        """Score the run into its folder as a live file run does (``turneval batch collect``).

        Like :meth:`collect`, from the answers the batches stored, but through
        :func:`~turneval.stream.evaluate_jsonl`: the folder gets ``results.jsonl``,
        ``summary.json`` and ``report.html``, and the result is the streamed summary.

        Args:
            fallback: What to do with a request every attempt failed (default: the run's).
            show_progress: The progress bar (None: when the output is a terminal).
        """
        from turneval.stream import evaluate_jsonl

        cache = _BatchCache(self.cache_path, self.failed_requests(), fallback or self.fallback)
        try:
            return evaluate_jsonl(
                self.out / "samples.jsonl",
                self.metrics,
                self.out,
                llm=self.llm,
                cache=cache,
                show_progress=show_progress,
                overwrite=True,
            )
        finally:
            cache.close()

    def remember(self, values: dict[str, Any]) -> None:
        """Keep how a front end built the judge (its flags, never a key) in the folder.

        :meth:`remembered` reads them back, before the run is opened.
        """
        self._store.set_meta("cli", values)

    @staticmethod
    def remembered(out: str | PathLike[str]) -> dict[str, Any] | None:
        """What :meth:`remember` kept in the batch run folder ``out`` (None: nothing).

        Raises:
            ConfigError: ``out`` holds no batch run.
        """
        folder = Path(out)
        if not (folder / "state.sqlite").exists():
            raise ConfigError(
                f"{folder} holds no batch run: start one with evaluate --engine batch"
            )
        store = _Store(folder / "state.sqlite")
        try:
            values: dict[str, Any] | None = store.meta("cli")
        finally:
            store.db.close()
        return values

    def cost(self, prices: Prices) -> tuple[float, float]:
        """What the batches cost at ``prices`` (their discount applied), and the live price."""
        usage = self.status().usage
        live = prices.cost(usage)
        return prices.batch_cost(usage), live

    def cancel(self) -> None:
        """Cancel every open batch; no further round is sent (answers so far are kept)."""
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

    def close(self) -> None:
        """Close the folder's databases."""
        self.cache.close()
        self._store.db.close()


class _Bar:
    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.bar: Any = None
        self.last = ""

    def show(self, status: BatchStatus) -> None:
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
        if self.bar is not None:
            self.bar.close()


def submit(
    data: EvaluationDataset | Sequence[Sample] | Sample,
    metrics: Any,
    *,
    llm: Any,
    out: str | PathLike[str],
    cache: SQLiteCache | str | PathLike[str] | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    fallback: Fallback = "fail",
) -> BatchRun:
    """Send every judge request of a run to the provider's batch API; returns the run.

    Requests the cache already answers are not sent. The judge's provider is chosen from its
    model (``ChatOpenAI``/``AzureChatOpenAI``: OpenAI's Batch API; ``ChatAnthropic``: Message
    Batches); the requests are split into batches within the provider's limits.

    Args:
        data: The samples.
        metrics: Metrics or built-in names, as for ``evaluate``.
        llm: The judge model (the default of judged metrics built without one).
        out: A new (or empty) folder that will hold the run.
        cache: The judge cache the answers go to (default ``out/cache.sqlite``); a live run
            with it afterwards pays nothing for them.
        max_attempts: Times a request that errors or expires is sent at most.
        fallback: ``"fail"``: a request that failed every attempt fails its cell with the
            provider's error; ``"sync"``: it is asked live at :meth:`BatchRun.collect`.
    """
    from turneval.dataset import EvaluationDataset
    from turneval.runner import resolve_metrics

    if max_attempts < 1:
        raise ConfigError(f"max_attempts must be at least 1, got {max_attempts}")
    if fallback not in ("fail", "sync"):
        raise ConfigError(f"fallback must be 'fail' or 'sync', got {fallback!r}")
    if llm is None:
        raise ConfigError("submit needs llm=: the judge model whose provider runs the batches")
    provider_for(llm)  # a model without a batch API fails before the folder is written
    folder = Path(out)
    if (folder / "state.sqlite").exists():
        raise ConfigError(
            f"{folder} already holds a batch run: open it with BatchRun.open, or choose "
            "another folder"
        )
    folder.mkdir(parents=True, exist_ok=True)
    dataset = EvaluationDataset.coerce(data)
    resolved = resolve_metrics(metrics)
    cache_path = (
        cache.path
        if isinstance(cache, SQLiteCache)
        else Path(cache)
        if cache is not None
        else folder / "cache.sqlite"
    )
    dataset.to_jsonl(folder / "samples.jsonl")
    store = _Store(folder / "state.sqlite")
    try:  # until the requests are recorded, a refused run leaves the folder as it was
        with store.transaction():
            store.set_meta("run_id", uuid.uuid4().hex)
            store.set_meta("metrics", _metric_spec(resolved))
            store.set_meta("llm", _llm_spec(llm))
            store.set_meta("cache", str(Path(cache_path).resolve()))
            store.set_meta("max_attempts", max_attempts)
            store.set_meta("fallback", fallback)
        run = BatchRun(folder, dataset.samples, resolved, llm, Path(cache_path), store)
        for key in list(run._plan)[:1]:  # a request the provider cannot take fails here
            run._body(key, [])
        with store.transaction() as db:
            db.executemany(
                "INSERT OR IGNORE INTO requests (key, state) VALUES (?, ?)",
                [
                    (key, "answered" if run.cache.get(key) is not None else "pending")
                    for key in run._plan
                ],
            )
    except Exception:
        store.db.close()
        for name in ("state.sqlite", "state.sqlite-wal", "state.sqlite-shm", "samples.jsonl"):
            (folder / name).unlink(missing_ok=True)
        raise
    run._submit_pending()
    return run

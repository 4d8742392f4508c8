"""A batch run persisted in a folder: plan, write-ahead submission, polling, rounds, collect.

The folder's ``state.sqlite`` appears only once the run is planned whole: planning writes
``state.sqlite.part`` and renames it, so a process stopped while planning (SIGTERM, Ctrl-C)
leaves no run, and the same command plans again. One process at a time works on a folder: it
holds ``batch.lock`` (``fcntl.flock``) while it plans, reconciles, polls (reads the batches that
ended, sends a round), cancels or collects; another waits for it, then works from what the
first wrote, so no round is sent twice.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal

from turneval.errors import ConfigError, JudgeCallError
from turneval.judge.cache import SQLiteCache
from turneval.manifest import MetricSpec, RunManifest, class_path, resolve_class
from turneval.usage import Usage

from ._providers import Outcome, Provider, provider_for

if TYPE_CHECKING:
    from langchain_core.messages import BaseMessage
    from pydantic import BaseModel

    from turneval.dataset import EvaluationDataset
    from turneval.judge.core import Judge
    from turneval.metrics.base import Evaluator
    from turneval.options import RunOptions
    from turneval.results import EvaluationResult, Prices
    from turneval.samples import Sample
    from turneval.store import RunStore
    from turneval.stream import StreamResult
    from turneval.stream.chunks import Chunk, Line

__all__ = ["BatchRun", "BatchStatus", "Fallback", "submit"]

Fallback = Literal["fail", "sync"]
"""What becomes of a request the batches could not answer: a failed cell, or a live call."""

DEFAULT_MAX_ATTEMPTS = 3
"""Times a request is sent in batches at most (the first and its follow-ups)."""

_CLOCK_SKEW = 600.0
"""Seconds the provider's clock may lag ours when a message batch is matched by its time."""

STATE_FILE = "state.sqlite"
"""The run's state in its folder; it exists only once the run is planned whole."""

_PARTIAL = "state.sqlite.part"
"""The state while the run is planned (renamed to :data:`STATE_FILE` at the end)."""

LOCK_FILE = "batch.lock"
"""The folder's lock file: held by the one process working on the run (its pid inside)."""

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
    error TEXT,
    input_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0
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
        """True when no request waits: :meth:`BatchRun.collect` can run."""
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


@dataclass
class _Planned:
    judge: Judge
    schema: type[BaseModel]
    messages: list[BaseMessage]
    metric: str | None = None  # the metric that states it (None: found by a scoring pass)


@dataclass
class _Counts:
    """What planning found: requests stated (identical ones each time), cells refused."""

    stated: int = 0
    refused: int = 0


class _Store:
    """The folder's state database (SQLite): every write is committed before the next step."""

    def __init__(self, path: Path, *, wal: bool = True) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute(f"PRAGMA journal_mode={'WAL' if wal else 'DELETE'}")
        self.db.executescript(_SCHEMA)
        columns = {row[1] for row in self.db.execute("PRAGMA table_info(requests)")}
        for name in ("input_tokens", "output_tokens"):  # a folder from before they were kept
            if name not in columns:
                try:
                    self.db.execute(
                        f"ALTER TABLE requests ADD COLUMN {name} INTEGER NOT NULL DEFAULT 0"
                    )
                except sqlite3.OperationalError:  # another process added it first
                    pass

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


if sys.platform == "win32":  # pragma: no cover - no flock: one process per folder is on you

    def _flock(handle: IO[str], wait: bool) -> bool:
        return True

else:
    import fcntl

    def _flock(handle: IO[str], wait: bool) -> bool:
        """Take the exclusive lock on ``handle``; False if another holds it and not ``wait``."""
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            return False
        return True


class _FolderLock:
    """The run folder's lock (:data:`LOCK_FILE`): one process works on the run at a time.

    A second process waits for the first (saying once on stderr which process it waits for),
    then reads what the first wrote. Reentrant: a thread holding it may take it again; other
    threads of the process wait as other processes do.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._thread_lock = threading.RLock()
        self._depth = 0

    @contextmanager
    def held(self) -> Iterator[None]:
        with self._thread_lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            path = self.folder / LOCK_FILE
            with path.open("a+", encoding="utf-8") as handle:  # closing it releases the lock
                if not _flock(handle, wait=False):
                    handle.seek(0)
                    holder = handle.read().strip() or "?"
                    print(
                        f"turneval: waiting for process {holder}, which is working on the "
                        f"batch run in {self.folder}",
                        file=sys.stderr,
                        flush=True,
                    )
                    _flock(handle, wait=True)
                handle.seek(0)
                handle.truncate()
                handle.write(f"{os.getpid()}\n")
                handle.flush()
                self._depth = 1
                try:
                    yield
                finally:
                    self._depth = 0


def _metric_spec(metrics: Sequence[Any]) -> list[dict[str, Any]]:
    """Each metric as the run manifest records it (:class:`~turneval.manifest.MetricSpec`)."""
    return [MetricSpec.of(metric).to_dict() for metric in metrics]


def _metrics_from(specs: list[dict[str, Any]]) -> list[Any]:
    """The metrics :func:`_metric_spec` recorded (or a folder of an older turneval), rebuilt.

    By class and configuration (the folder is the caller's own: any class path is imported),
    else a built-in metric by its name.
    """
    from turneval.runner import resolve_metrics

    metrics = []
    for record in specs:
        spec = MetricSpec.from_dict(record, "batch run metric")
        try:
            metrics.append(spec.build(import_any=True))
        except ConfigError:
            try:
                metrics += resolve_metrics([spec.name])
            except Exception as exc:
                raise ConfigError(
                    f"cannot rebuild metric {spec.name!r} ({spec.class_path}) of this batch "
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
        "class": class_path(type(llm)),
        "fields": {k: v for k, v in values.items() if isinstance(v, (str, int, float))},
    }


def _llm_from(spec: dict[str, Any]) -> Any:
    cls: Any = resolve_class(spec["class"], import_any=True, what="judge class")
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
        self.reads: list[str] = []  # every key asked, in order (what the batches spent on it)

    def get(self, key: str) -> dict[str, Any] | None:
        """The batch's answer for ``key``; an unanswered request raises ``JudgeCallError``."""
        self.reads.append(key)
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


def _charged(usage: Usage, spent: Usage, answered: int) -> Usage:
    """``usage`` of a scoring pass, with what the batches ``spent`` on the answers it read.

    ``answered`` of its cache hits were answers of this run's batches: no cache hits, but the
    requests the batches sent for them.
    """
    return Usage(
        input_tokens=usage.input_tokens + spent.input_tokens,
        output_tokens=usage.output_tokens + spent.output_tokens,
        calls=usage.calls + spent.calls,
        cached_calls=max(usage.cached_calls - answered, 0),
    )


class _Spent:
    """What the batches spent on each request, charged to the first cell that reads it.

    :meth:`take` turns the keys the collecting pass read since the last call into usage;
    :attr:`engine` scores a streamed run's chunks here, each with what its cells read.
    """

    def __init__(self, run: BatchRun, cache: _BatchCache) -> None:
        self.cache = cache
        self.metric_of = {key: planned.metric for key, planned in run._plan.items()}
        self.spent: dict[str, tuple[Usage, bool]] = {
            key: (Usage(input_tokens, output_tokens, calls=sends), state == "answered")
            for key, sends, input_tokens, output_tokens, state in run._store.db.execute(
                "SELECT key, sends, input_tokens, output_tokens, state FROM requests "
                "WHERE sends > 0"
            )
        }
        self.read = 0

    def take(self) -> tuple[Usage, int, dict[str, tuple[Usage, int]]]:
        """The usage of the requests read first since the last call: all, and per metric.

        Each with how many of them were answered (the collecting judge counted those as
        cache hits).
        """
        keys = self.cache.reads[self.read :]
        self.read += len(keys)
        total, answered = Usage(), 0
        by_metric: dict[str, tuple[Usage, int]] = {}
        for key in keys:
            found = self.spent.pop(key, None)  # popped: charged once, to the first reader
            if found is None:
                continue
            usage, hit = found
            total, answered = total + usage, answered + hit
            metric = self.metric_of.get(key)
            if metric is not None:
                before, hits = by_metric.get(metric, (Usage(), 0))
                by_metric[metric] = (before + usage, hits + hit)
        return total, answered, by_metric

    def engine(
        self,
        chunks: Iterator[tuple[list[Line], int, int]],
        metrics: list[Evaluator],
        options: RunOptions,
    ) -> Iterable[Chunk]:
        """Score the chunks here, one after another, each charged what its cells read."""
        from turneval._gc import batch_collection
        from turneval.stream.scoring import run_chunk

        for lines, first, keep in chunks:
            with batch_collection():
                chunk = run_chunk(lines, first, metrics, keep, options)
            total, answered, by_metric = self.take()
            chunk.usage = _charged(chunk.usage, total, answered)
            for name, (usage, hits) in by_metric.items():
                if name in chunk.metric_usage:
                    chunk.metric_usage[name] = _charged(chunk.metric_usage[name], usage, hits)
            yield chunk


def _check_input(folder: Path, recorded: dict[str, Any] | None, data: Path) -> None:
    """Refuse ``data`` when the run in ``folder`` was submitted with another input."""
    from turneval.store import file_digest

    if recorded is None:  # a folder from before the input was recorded
        return
    digest = file_digest(data)
    if digest is None:
        raise ConfigError(f"{data}: cannot be read (no such file, or not readable)")
    if digest != recorded.get("sha256"):
        submitted = recorded.get("path") or "samples given in memory"
        raise ConfigError(
            f"{folder} holds the batch run of {submitted} (sha256 {recorded.get('sha256')}), "
            f"not of {data} (sha256 {digest}): collect that run as it is, or give this "
            "input another folder"
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


def _plan(
    samples: Sequence[Sample], metrics: Sequence[Any], llm: Any, counts: _Counts | None = None
) -> dict[str, _Planned]:
    """Every judge request of the run, keyed by its cache key (the judge's own).

    ``counts`` gets the requests stated (identical ones each time, as ``--dry-run`` counts
    them) and the cells whose metric refused the row.
    """
    from turneval.judge import JudgeRun, judge_run
    from turneval.metrics import JudgedMetric

    plan: dict[str, _Planned] = {}
    counts = counts if counts is not None else _Counts()
    judged = [m for m in metrics if isinstance(m, JudgedMetric)]
    with judge_run(JudgeRun(llm=llm)):
        for sample in samples:
            for metric in judged:
                if not isinstance(sample, metric.sample_types):
                    continue
                try:
                    requests = metric.judge_requests(sample)
                except Exception:  # the row fails at collect time, with its reason
                    counts.refused += 1
                    continue
                counts.stated += len(requests)
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
                    plan.setdefault(key, _Planned(judge, request.schema, messages, metric.name))
    return plan


class BatchRun:
    """A judged run executed through the provider's batch API, persisted in a folder.

    Make one with :func:`submit`, reopen it with :meth:`open` (after a crash, or from another
    process), follow it with :meth:`status` / :meth:`wait`, and read the result with
    :meth:`collect`. The folder holds the samples, the metrics' configuration, the judge's
    model (never its key), the cache of answers (unless another was given) and ``state.sqlite``:
    every request's ``custom_id`` and every batch, written before the batch is created. One
    process at a time works on the folder (see the module): another waits for it.

    Attributes:
        out: The run's folder.
        samples: The samples, as submitted.
        metrics: The metrics.
        llm: The judge model.
        cache_path: The judge cache the answers go to.
        provider: The batch API the requests go through (None when nothing is judged).
        max_attempts: Times a request that errors or expires is sent at most.
        fallback: What :meth:`collect` does with a request every attempt failed.
        input: The input the run was submitted with: ``{"path", "sha256"}`` (``path`` None for
            samples given in memory; ``sha256`` of ``samples.jsonl``, which is a copy of the
            input file); None for a folder written before it was recorded.
    """

    def __init__(
        self,
        out: Path,
        samples: Sequence[Sample],
        metrics: Sequence[Any],
        llm: Any,
        cache_path: Path,
        store: _Store,
        lock: _FolderLock | None = None,
    ) -> None:
        """Use :func:`submit` or :meth:`open`."""
        self.out = out
        self.samples = list(samples)
        self.metrics = list(metrics)
        self.llm = llm
        self.cache_path = cache_path
        self.cache = SQLiteCache(cache_path)
        self._store = store
        self._lock = lock or _FolderLock(out)
        self.run_id: str = store.meta("run_id")
        self.max_attempts: int = store.meta("max_attempts")
        self.fallback: Fallback = store.meta("fallback")
        self.input: dict[str, Any] | None = store.meta("input")
        self._counts = _Counts()
        self._plan = _plan(self.samples, self.metrics, llm, self._counts)
        self._refreshed_at = 0  # requests in the folder when the plan was last completed
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
        data: str | PathLike[str] | None = None,
    ) -> BatchRun:
        """Reopen the batch run in folder ``out``; it reconciles with the provider first.

        Args:
            out: The folder given to :func:`submit`.
            llm: The judge model (default: rebuilt from the folder; its API key is read from
                the provider's usual environment variable).
            metrics: The metrics (default: rebuilt from their stored configuration).
            data: The input file this run is expected to be of: refused if the run was
                submitted with other samples (checked first, by digest).

        Raises:
            ConfigError: no batch run in ``out``; ``data`` is not the run's input (naming both
                files and their SHA-256 digests); the judge or metrics state requests the
                run was not submitted with.
        """
        from turneval.dataset import EvaluationDataset

        folder = Path(out)
        if not (folder / STATE_FILE).exists():
            raise ConfigError(f"{folder} holds no batch run (no {STATE_FILE}): submit one first")
        store = _Store(folder / STATE_FILE)
        try:
            if data is not None:
                _check_input(folder, store.meta("input"), Path(data))
            resolved = metrics if metrics is not None else _metrics_from(store.meta("metrics"))
            model = llm if llm is not None else _llm_from(store.meta("llm"))
            samples = EvaluationDataset.from_jsonl(folder / "samples.jsonl").samples
            run = cls(folder, samples, resolved, model, Path(store.meta("cache")), store)
        except BaseException:
            store.db.close()
            raise
        missing = sum(1 for key in run._plan if run._state(key) is None)
        if missing:
            run.close()
            raise ConfigError(
                f"{missing} judge request(s) of these metrics and judge were not part of the "
                f"batch run in {folder}: open it with the judge model and metrics it was "
                "submitted with"
            )
        with run._lock.held():
            run._refresh_plan()
            run.reconcile()
        return run

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
        received is forgotten and its requests go back to pending. Holds the folder's lock: a
        batch another process is creating is never taken for one the provider never received.
        """
        with self._lock.held():
            self._reconcile()

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
        row = self._store.db.execute("SELECT MAX(round) FROM batches").fetchone()
        return int(row[0] or 0)

    def poll(self) -> BatchStatus:
        """One pass: reconcile, read every ended batch, send the next round when one is due.

        Holds the folder's lock for the pass: a process polling the same folder waits for it,
        then finds the batches read and the round sent.
        """
        with self._lock.held():
            self._poll()
        return self.status()

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

    def status(self) -> BatchStatus:
        """Counts of the run's requests and its batches (from the folder; no provider call)."""
        db = self._store.db
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
        planned = self._store.meta("planned") or {}
        distinct = int(planned.get("distinct", total))
        stated = planned.get("stated")
        return BatchStatus(
            requests=total,
            answered=answered,
            failed=failed,
            waiting=total - answered - failed,
            rounds=self._rounds(),
            batches=batches,
            usage=Usage(
                input_tokens=int(tokens[0]), output_tokens=int(tokens[1]), calls=int(lines)
            ),
            stated=None if stated is None else int(stated),
            identical=0 if stated is None else int(stated) - distinct,
            cached=int(cached),
            sent=int(sent),
            found_later=max(total - distinct, 0),
            refused=int(planned.get("refused", 0)),
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
        with ``fallback="sync"``. Also writes ``results.jsonl`` in the folder. The result's
        ``usage`` counts what the batches spent (see :meth:`collect_files`).

        Raises:
            ConfigError: batches are still running (:meth:`wait` first).
        """
        from turneval.runner import evaluate

        with self._lock.held():
            status = self.status()
            if not status.done:
                raise ConfigError(f"batch run in {self.out} is not finished ({status}): wait first")
            cache = _BatchCache(self.cache_path, self.failed_requests(), fallback or self.fallback)
            spent = _Spent(self, cache)
            try:
                result = evaluate(
                    self.samples, self.metrics, llm=self.llm, cache=cache, show_progress=False
                )
            finally:
                cache.close()
            charged, answered, _ = spent.take()
            result.usage = _charged(result.usage, charged, answered)
            self._write(result)
        return result

    def _write(self, result: EvaluationResult) -> None:
        """Write the collected rows into the folder, through the folder sink.

        ``run.json`` (its batch section kept), ``results.jsonl`` (with details) and
        ``summary.json``.
        """
        from turneval.aggregate import summary_document
        from turneval.results import json_line
        from turneval.runs import FolderSink, Rows

        before = RunManifest.find(self.out)
        manifest = RunManifest.of(self.metrics, self.llm)
        manifest.batch = None if before is None else before.batch
        folder = FolderSink(self.out)
        try:
            folder.start(manifest)
            lines = [json_line(record) for record in result.records(details=True)]
            folder.add(Rows.encoded(lines, result.metric_names))
            summary = summary_document(len(result), result.summary(), result.usage)
            folder.finish(summary, "finished")
        finally:
            folder.close()

    def failed_requests(self) -> dict[str, str]:
        """The provider's error (or the parse error) of each request that failed, by key."""
        return dict(
            self._store.db.execute("SELECT key, error FROM requests WHERE state = 'failed'")
        )

    def collect_files(
        self,
        *,
        fallback: Fallback | None = None,
        show_progress: bool | None = None,
        store: RunStore | str | PathLike[str] | None = None,
        prices: Prices | None = None,
    ) -> StreamResult:
        """Score the run into its folder as a live file run does (``turneval batch collect``).

        Like :meth:`collect`, from the answers the batches stored, but through
        :func:`~turneval.stream.evaluate_jsonl`: the folder gets ``results.jsonl``,
        ``summary.json`` and ``report.html``, and the result is the streamed summary.

        The judge usage (the result's, summary.json's, each metric's) is what the batches
        spent: ``calls`` counts the request lines sent (follow-ups and repairs included) and
        the tokens are those the batches reported, each charged to the first row that reads
        the answer; ``cached_calls`` counts the cells answered without a request of this run
        (the cache's earlier answers, identical requests). ``run.json`` gets a ``batch``
        section: the input, the accounting of :class:`BatchStatus`, the usage and, with
        ``prices``, the cost through the batches and what it would have been live.

        Args:
            fallback: What to do with a request every attempt failed (default: the run's).
            show_progress: The progress bar (None: when the output is a terminal).
            store: A run store (or its URL): the run is kept there too, as
                ``evaluate_jsonl(store=...)`` keeps a live run.
            prices: The judge's prices, for the cost in ``run.json``.
        """
        from turneval.stream import evaluate_jsonl

        with self._lock.held():
            cache = _BatchCache(self.cache_path, self.failed_requests(), fallback or self.fallback)
            spent = _Spent(self, cache)
            try:
                result = evaluate_jsonl(
                    self.out / "samples.jsonl",
                    self.metrics,
                    self.out,
                    llm=self.llm,
                    cache=cache,
                    show_progress=show_progress,
                    overwrite=True,
                    store=store,
                    engine=spent.engine,
                )
            finally:
                cache.close()
            self._record(prices)
        return result

    def _record(self, prices: Prices | None) -> None:
        """Add the ``batch`` section to the folder's run.json (the run manifest's)."""
        manifest = RunManifest.find(self.out) or RunManifest.of(self.metrics, self.llm)
        status = self.status()
        manifest.batch = {
            "run_id": self.run_id,
            "provider": None if self.provider is None else self.provider.server,
            "input": self.input,
            "requests": {
                "stated": status.stated,
                "identical": status.identical,
                "found_later": status.found_later,
                "distinct": status.requests,
                "cached": status.cached,
                "sent": status.sent,
                "lines_sent": status.usage.calls,
                "answered": status.answered,
                "failed": status.failed,
                "refused_cells": status.refused,
            },
            "rounds": status.rounds,
            "batches": [batch_id for batch_id, _ in status.batches],
            "usage": status.usage.to_dict(),
            "prices": None
            if prices is None
            else {
                "input_per_million": prices.input_per_million,
                "output_per_million": prices.output_per_million,
                "batch_discount": prices.batch_discount,
            },
            "cost": None
            if prices is None
            else {"batch": prices.batch_cost(status.usage), "live": prices.cost(status.usage)},
        }
        manifest.write(self.out)

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
        with self._lock.held():
            self._cancel()

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
    data: EvaluationDataset | Sequence[Sample] | Sample | str | PathLike[str],
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

    The run is planned whole before its state appears in the folder (see the module): a
    process stopped while planning leaves no run there, and submitting again plans it again.

    Args:
        data: The samples, or a JSONL file of them (copied into the folder as
            ``samples.jsonl``; its path and SHA-256 are recorded, so that a rerun of
            ``evaluate --engine batch`` on another file is refused).
        metrics: Metrics or built-in names, as for ``evaluate``.
        llm: The judge model (the default of judged metrics built without one).
        out: A new (or empty) folder that will hold the run.
        cache: The judge cache the answers go to (default ``out/cache.sqlite``); a live run
            with it afterwards pays nothing for them.
        max_attempts: Times a request that errors or expires is sent at most.
        fallback: ``"fail"``: a request that failed every attempt fails its cell with the
            provider's error; ``"sync"``: it is asked live at :meth:`BatchRun.collect`.

    Raises:
        ConfigError: ``out`` already holds a batch run; the judge has no batch API; the
            judges of the metrics talk to several servers.
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
    if (folder / STATE_FILE).exists():
        raise ConfigError(
            f"{folder} already holds a batch run: open it with BatchRun.open, or choose "
            "another folder"
        )
    resolved = resolve_metrics(metrics)
    source: Path | None = None
    dataset: EvaluationDataset | None = None
    if isinstance(data, (str, PathLike)):
        source = Path(data)
    else:
        dataset = EvaluationDataset.coerce(data)
    folder.mkdir(parents=True, exist_ok=True)
    lock = _FolderLock(folder)
    with lock.held():
        if (folder / STATE_FILE).exists():  # another process planned it while we waited
            raise ConfigError(
                f"{folder} already holds a batch run: open it with BatchRun.open, or choose "
                "another folder"
            )
        run = _planned(folder, source, dataset, resolved, llm, cache, max_attempts, fallback, lock)
        run._submit_pending()
    return run


def _discard_partial(folder: Path) -> None:
    """Remove the state of a planning that was stopped (it never became the run's)."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        (folder / (_PARTIAL + suffix)).unlink(missing_ok=True)


def _planned(
    folder: Path,
    source: Path | None,
    dataset: EvaluationDataset | None,
    metrics: list[Any],
    llm: Any,
    cache: SQLiteCache | str | PathLike[str] | None,
    max_attempts: int,
    fallback: Fallback,
    lock: _FolderLock,
) -> BatchRun:
    """Plan the run in ``folder`` (its lock held): written aside, renamed into place at the end.

    Nothing of a planning that fails (or is stopped) is left as the run: a rerun plans again.
    """
    from turneval.dataset import EvaluationDataset
    from turneval.store import file_digest

    cache_path = (
        cache.path
        if isinstance(cache, SQLiteCache)
        else Path(cache)
        if cache is not None
        else folder / "cache.sqlite"
    )
    samples_path = folder / "samples.jsonl"
    _discard_partial(folder)
    store: _Store | None = None
    run: BatchRun | None = None
    try:
        if source is not None:
            shutil.copyfile(source, samples_path)  # byte for byte: the digest is the input's
            dataset = EvaluationDataset.from_jsonl(samples_path)
        else:
            assert dataset is not None
            dataset.to_jsonl(samples_path)
        store = _Store(folder / _PARTIAL, wal=False)
        with store.transaction():
            store.set_meta("run_id", uuid.uuid4().hex)
            store.set_meta("metrics", _metric_spec(metrics))
            store.set_meta("llm", _llm_spec(llm))
            store.set_meta("cache", str(Path(cache_path).resolve()))
            store.set_meta("max_attempts", max_attempts)
            store.set_meta("fallback", fallback)
            store.set_meta(
                "input",
                {
                    "path": None if source is None else str(source.resolve()),
                    "sha256": file_digest(samples_path),
                },
            )
        run = BatchRun(folder, dataset.samples, metrics, llm, Path(cache_path), store, lock)
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
            store.set_meta(
                "planned",
                {
                    "stated": run._counts.stated,
                    "distinct": len(run._plan),
                    "refused": run._counts.refused,
                },
            )
        store.db.close()
        os.replace(folder / _PARTIAL, folder / STATE_FILE)  # the run exists from here on
    except BaseException:
        if run is not None:
            run.cache.close()
        if store is not None:
            store.db.close()
        _discard_partial(folder)
        samples_path.unlink(missing_ok=True)
        raise
    run._store = _Store(folder / STATE_FILE)
    return run

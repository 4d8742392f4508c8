"""A batch run persisted in a folder: open it, follow it round by round, collect it.

:func:`~turneval.batch.submit` plans the run whole before its state appears in the folder
(``_submit``). One process at a time works on a folder: it holds
``batch.lock`` (``fcntl.flock``) while it plans, reconciles, polls (reads the batches that
ended, sends a round), cancels or collects; another waits for it, then works from what the
first wrote, so no round is sent twice. The rounds' work is ``_rounds.Rounds`` (a base of
:class:`BatchRun`); the folder's state, lock and input digest are in ``_state``; what the
batches spent is charged to the cells in ``_usage``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turneval.errors import ConfigError
from turneval.judge._cache import SQLiteCache
from turneval.manifest import RunManifest

from ._plan import Counts, plan_requests
from ._providers import Provider, provider_for
from ._rounds import Rounds
from ._spec import llm_from, metrics_from
from ._state import STATE_FILE, Fallback, FolderLock, State, check_input
from ._status import BatchStatus, ProgressBar, read_status
from ._usage import BatchCache, Spent, with_spent

if TYPE_CHECKING:
    from turneval.results import EvaluationResult, Prices
    from turneval.samples import Sample
    from turneval.store import RunStore
    from turneval.stream import StreamResult

__all__ = ["BatchRun"]


class BatchRun(Rounds):
    """A judged run executed through the provider's batch API, persisted in a folder.

    Make one with :func:`~turneval.batch.submit`, reopen it with :meth:`open` (after a crash,
    or from another process), follow it with :meth:`status` / :meth:`wait`, and read the
    result with :meth:`collect`. The folder holds the samples, the metrics' configuration, the
    judge's model (never its key), the cache of answers (unless another was given) and
    ``state.sqlite``: every request's ``custom_id`` and every batch, written before the batch
    is created. One process at a time works on the folder (see the module): another waits for
    it.

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
        store: State,
        lock: FolderLock | None = None,
    ) -> None:
        """Use :func:`~turneval.batch.submit` or :meth:`open`."""
        self.out = out
        self.samples = list(samples)
        self.metrics = list(metrics)
        self.llm = llm
        self.cache_path = cache_path
        self.cache = SQLiteCache(cache_path)
        self._store = store
        self._lock = lock or FolderLock(out)
        self.run_id: str = store.meta("run_id")
        self.max_attempts: int = store.meta("max_attempts")
        self.fallback: Fallback = store.meta("fallback")
        self.input: dict[str, Any] | None = store.meta("input")
        self._counts = Counts()
        self._plan = plan_requests(self.samples, self.metrics, llm, self._counts)
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
            out: The folder given to :func:`~turneval.batch.submit`.
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
        store = State(folder / STATE_FILE)
        try:
            if data is not None:
                check_input(folder, store.meta("input"), Path(data))
            resolved = metrics if metrics is not None else metrics_from(store.meta("metrics"))
            model = llm if llm is not None else llm_from(store.meta("llm"))
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

    def reconcile(self) -> None:
        """Match batches whose creation was interrupted with the provider's list of batches.

        A batch the provider has is adopted (its requests are not sent again); one it never
        received is forgotten and its requests go back to pending. Holds the folder's lock: a
        batch another process is creating is never taken for one the provider never received.
        """
        with self._lock.held():
            self._reconcile()

    def poll(self) -> BatchStatus:
        """One pass: reconcile, read every ended batch, send the next round when one is due.

        Holds the folder's lock for the pass: a process polling the same folder waits for it,
        then finds the batches read and the round sent.
        """
        with self._lock.held():
            self._poll()
        return self.status()

    def status(self) -> BatchStatus:
        """Counts of the run's requests and its batches (from the folder; no provider call)."""
        return read_status(self._store)

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
        bar = ProgressBar(progress)
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
            cache = BatchCache(self.cache_path, self.failed_requests(), fallback or self.fallback)
            spent = Spent(self._plan, self._store, cache)
            try:
                result = evaluate(
                    self.samples, self.metrics, llm=self.llm, cache=cache, show_progress=False
                )
            finally:
                cache.close()
            charged, answered, _ = spent.take()
            result.usage = with_spent(result.usage, charged, answered)
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
        name: str | None = None,
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
            name: The run's name in ``run.json`` and the store (default: the input's name).
        """
        from turneval.stream._evaluate import evaluate_jsonl

        with self._lock.held():
            cache = BatchCache(self.cache_path, self.failed_requests(), fallback or self.fallback)
            spent = Spent(self._plan, self._store, cache)
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
                    name=name,
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
        store = State(folder / "state.sqlite")
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

    def close(self) -> None:
        """Close the folder's databases."""
        self.cache.close()
        self._store.db.close()

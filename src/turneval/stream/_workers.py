"""The score step of a local run: chunks scored in this process or in worker processes.

Rule-based metrics may run in a pool of worker processes (at most ``2 x workers`` chunks in
flight), each worker holding the metrics from its start and ending with its parent; judged
metrics run in this process. Either way the chunks reach the sink in input order.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor

from turneval._gc import batch_collection, freeze_process
from turneval.metrics import Evaluator
from turneval.options import RunOptions
from turneval.stream._chunks import Chunk, Line
from turneval.stream._engine import ChunkWork
from turneval.stream.scoring import run_chunk

__all__ = ["score_chunks"]

_WORKER_METRICS: list[Evaluator] = []
_WORKER_OPTIONS: list[RunOptions] = []


def _init_worker(metrics: list[Evaluator], options: RunOptions) -> None:
    _end_with_parent()
    _WORKER_METRICS[:] = metrics
    _WORKER_OPTIONS[:] = [options]
    freeze_process()  # start-up objects (modules, metrics): never walked by the collector again


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def _end_with_parent() -> None:
    """Make this worker process end when its parent dies (``kill -9`` included), within 1 s.

    On Linux the kernel sends SIGKILL when the parent exits (``prctl(PR_SET_PDEATHSIG)``);
    elsewhere, and as a second guard, a daemon thread checks ``os.getppid()`` four times a
    second and exits when the worker has been re-parented. SIGTERM is restored to its default
    (a fork copies the parent's handler, which only asks the parent's loop to stop), and
    SIGINT is left to the parent, which stops the run.
    """
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # pragma: no cover - no prctl: the thread alone
            pass
    if parent == 1 or os.getppid() != parent:  # the parent died before the watch was set
        os._exit(1)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.25)
        os._exit(1)

    threading.Thread(target=watch, name="turneval-parent-watch", daemon=True).start()


def _score_in_worker(lines: list[Line], first_index: int, keep: int) -> Chunk:
    with batch_collection():
        return run_chunk(lines, first_index, _WORKER_METRICS, keep, _WORKER_OPTIONS[0])


def score_chunks(
    chunks: Iterator[ChunkWork],
    metrics: list[Evaluator],
    options: RunOptions,
    workers: int | None,
) -> Iterator[Chunk]:
    """The score step of a local run: each chunk scored here or in worker processes, in order.

    ``workers`` worker processes score rule-based metrics (None: one per core, at most two);
    a run with a metric that will call a judge is scored in this process. Chunks are taken
    as they are scored: here one at a time, in workers at most ``2 x workers`` in flight.
    """
    # metrics that will call a judge (grounding without one runs offline)
    judged = any(metric.needs_judge(options.llm) for metric in metrics)
    if workers is None:
        workers = 1 if judged else min(2, os.cpu_count() or 1)
    if judged:
        workers = 1
    if workers <= 1:
        for work in chunks:
            with batch_collection():
                chunk = run_chunk(work.lines, work.first_index, metrics, work.keep, options)
            yield chunk
        return
    portable = options.replace(
        cache=None, llm=None, on_row=None, show_progress=False, rate_limit=None
    )
    portable = portable.replace(max_concurrency=1, max_llm_concurrency=1)
    with ProcessPoolExecutor(
        workers, initializer=_init_worker, initargs=(metrics, portable)
    ) as pool:
        window: deque[Future[Chunk]] = deque()
        for work in chunks:
            window.append(pool.submit(_score_in_worker, *work))
            if len(window) >= 2 * workers:
                yield window.popleft().result()
        while window:
            yield window.popleft().result()

"""Submitting a batch run: planned whole aside, renamed into place, then its first round sent.

The folder's ``state.sqlite`` appears only once the run is planned whole: planning writes
``state.sqlite.part`` and renames it, so a process stopped while planning (SIGTERM, Ctrl-C)
leaves no run, and the same command plans again.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Sequence
from os import PathLike
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turneval.errors import ConfigError
from turneval.judge._cache import SQLiteCache

from ._providers import provider_for
from ._run import BatchRun
from ._spec import llm_spec, metric_spec
from ._state import (
    DEFAULT_MAX_ATTEMPTS,
    PARTIAL_FILE,
    STATE_FILE,
    Fallback,
    FolderLock,
    State,
    discard_partial,
)

if TYPE_CHECKING:
    from turneval.dataset import EvaluationDataset
    from turneval.samples import Sample

__all__ = ["submit"]


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
    lock = FolderLock(folder)
    with lock.held():
        if (folder / STATE_FILE).exists():  # another process planned it while we waited
            raise ConfigError(
                f"{folder} already holds a batch run: open it with BatchRun.open, or choose "
                "another folder"
            )
        run = _planned(folder, source, dataset, resolved, llm, cache, max_attempts, fallback, lock)
        run._submit_pending()
    return run


def _planned(
    folder: Path,
    source: Path | None,
    dataset: EvaluationDataset | None,
    metrics: list[Any],
    llm: Any,
    cache: SQLiteCache | str | PathLike[str] | None,
    max_attempts: int,
    fallback: Fallback,
    lock: FolderLock,
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
    discard_partial(folder)
    store: State | None = None
    run: BatchRun | None = None
    try:
        if source is not None:
            shutil.copyfile(source, samples_path)  # byte for byte: the digest is the input's
            dataset = EvaluationDataset.from_jsonl(samples_path)
        else:
            assert dataset is not None
            dataset.to_jsonl(samples_path)
        store = State(folder / PARTIAL_FILE, wal=False)
        with store.transaction():
            store.set_meta("run_id", uuid.uuid4().hex)
            store.set_meta("metrics", metric_spec(metrics))
            store.set_meta("llm", llm_spec(llm))
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
        os.replace(folder / PARTIAL_FILE, folder / STATE_FILE)  # the run exists from here on
    except BaseException:
        if run is not None:
            run.cache.close()
        if store is not None:
            store.db.close()
        discard_partial(folder)
        samples_path.unlink(missing_ok=True)
        raise
    run._store = State(folder / STATE_FILE)
    return run

"""The batch engine: the judge's requests through the provider's batch API (``--engine batch``).

About half the price of live requests, answered within 24 hours: every judge request of the run
is sent in batches (OpenAI's Batch API for ``ChatOpenAI``/``AzureChatOpenAI``, Message Batches
for ``ChatAnthropic``), round after round (follow-ups of errored or expired requests, repairs
of invalid answers), into the judge cache; then the run is scored from those answers as a live
run with that cache would be, into the run folder. The run's state is kept in the folder (see
:mod:`turneval.batch`): the same call again reopens the run instead of submitting twice.
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from turneval.batch import BatchRun, submit
from turneval.engines._base import Engine
from turneval.errors import ConfigError
from turneval.metrics import Evaluator
from turneval.options import RunOptions, option_default
from turneval.runner import check_judges
from turneval.stream._run import StreamJob
from turneval.stream._sink import StreamResult
from turneval.stream._sources import JsonlSource

if TYPE_CHECKING:
    from turneval.judge import SQLiteCache

__all__ = ["Batch"]

_TAKEN = ("llm", "cache", "show_progress")
"""The run options a batch run takes: the judge, its cache (where the answers go), progress."""

_STATE_FILE = "state.sqlite"
"""A batch run's state in its folder (there once the run is planned whole)."""


class Batch(Engine):
    """Judge through the provider's batch API, then score the run from the answers.

    ``llm`` (the judge model) is needed: its provider runs the batches. The run options it
    takes are ``llm``, ``cache`` (where the answers go; default ``OUT/cache.sqlite``) and
    ``show_progress``; another given is refused (the run is scored from the answers, as
    ``turneval batch collect`` scores it). ``resume`` and ``overwrite`` do not apply: a
    folder that holds a batch run is reopened (:meth:`start`), on the same input only.

    Attributes:
        poll_interval: Seconds between polls of the provider (the CLI's ``--poll-interval``).
        max_attempts: Times an errored or expired request is sent at most, the first included
            (the CLI's ``--batch-attempts``).
        fallback: A request every attempt failed fails its cell with the provider's error
            (``"fail"``) or is asked live (``"sync"``) (the CLI's ``--batch-fallback``).
    """

    name: ClassVar[str] = "batch"

    poll_interval: float = Field(default=30.0, ge=0)
    max_attempts: int = Field(default=3, ge=1)
    fallback: Literal["fail", "sync"] = "fail"

    def check(self, metrics: list[Evaluator], options: RunOptions) -> None:
        """Refuse a run without a judge, or with run options a batch run does not take.

        Raises:
            ConfigError: no ``llm``; a judged metric without a judge; another run option set.
        """
        if options.llm is None:
            raise ConfigError(
                "the batch engine needs a judge: pass llm=... (its provider runs the batches)"
            )
        check_judges(metrics, options.llm)
        given = [
            name
            for name in type(options).model_fields
            if name not in _TAKEN and getattr(options, name) != option_default(name)
        ]
        if given:
            raise ConfigError(
                f"the batch engine does not take {', '.join(given)}: a batch run is scored from "
                f"the batches' answers with the options {', '.join(_TAKEN)} only"
            )

    @staticmethod
    def holds_run(out: Path) -> bool:
        """Whether the folder ``out`` holds a batch run (planned whole): :meth:`start` reopens it."""
        return (out / _STATE_FILE).exists()

    def start(
        self,
        data: Path,
        metrics: list[Evaluator],
        out: Path,
        llm: Any,
        cache: SQLiteCache | str | Path | None = None,
    ) -> BatchRun:
        """Submit the run's judge requests, or reopen the batch run ``out`` holds.

        A folder that holds a batch run is reopened, if it was submitted with ``data``
        (refused otherwise, naming both files' digests); else every request is sent.
        """
        if self.holds_run(out):
            return BatchRun.open(out, llm=llm, metrics=metrics, data=data)
        return submit(
            data,
            metrics,
            llm=llm,
            out=out,
            cache=cache,
            max_attempts=self.max_attempts,
            fallback=self.fallback,
        )

    def run(self, job: StreamJob) -> StreamResult:
        """Submit (or reopen), wait for every round, then score the run into its folder."""
        source = job.source
        if type(source) is not JsonlSource or source.lenient_json:
            raise ConfigError(
                f"the batch engine reads a JSONL file of samples (strict JSON), got {source!r}"
            )
        given = [
            field.name
            for field in fields(job)
            if field.name in ("report_rows", "title", "stop")
            and getattr(job, field.name) != field.default
        ]
        if given:
            raise ConfigError(f"the batch engine does not take {', '.join(given)}")
        options = job.options
        run = self.start(source.path, job.metrics, job.out, options.llm, options.cache)
        try:
            run.wait(progress=options.progress_shown(), poll_interval=self.poll_interval)
            return run.collect_files(show_progress=options.show_progress, store=job.store)
        finally:
            run.close()

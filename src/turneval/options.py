"""The run options, declared once: every front end takes them by these names and defaults.

:class:`RunOptions` is the one declaration of the options a run takes (name, type, default,
validation, meaning). ``evaluate``/``aevaluate``, ``EvalTask``, ``evaluate_jsonl``,
``simulate``/``asimulate``, ``evaluate_on_ray``, the CLI and the pytest plugin take them as
keyword arguments (flags) of the same names and defaults, each the options that apply to it,
and build a ``RunOptions`` from them; ``tests/test_options.py`` checks every front end's
signature against this class. :func:`option_default` gives a default to whoever needs it
(the CLI's flags).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from os import PathLike
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from turneval.aggregate import RunAggregate
from turneval.errors import ConfigError
from turneval.judge import JudgeRun, SQLiteCache
from turneval.ratelimit import RateLimiter

__all__ = ["MIN_ROWS_FOR_FRACTION", "RunOptions", "invalid", "option_default"]

MIN_ROWS_FOR_FRACTION = 20
"""``fail_on_error=<fraction>`` is first checked once this many rows are done."""


class RunOptions(BaseModel):
    """The options of a run, declared and validated once; every front end builds one.

    ``evaluate``/``aevaluate``, ``EvalTask``, ``evaluate_jsonl``, ``simulate``/``asimulate``,
    ``evaluate_on_ray``, the CLI and the pytest plugin take these as keyword arguments (flags)
    of the same names and defaults, each those that apply to it, and build a ``RunOptions``;
    an invalid value raises :class:`~turneval.errors.ConfigError` naming the option, before
    anything runs.

    Attributes:
        max_concurrency: Samples (agent runs, conversations) in flight at once.
        max_llm_concurrency: Judge requests in flight at once, across metrics and samples.
        timeout: Seconds allowed to score one sample; metrics unfinished by then fail with
            ``TimeoutError`` (None: no limit).
        agent_timeout: Seconds allowed for the agent or simulation step of one sample (one
            agent run with all its turns, one simulated conversation); past it the row fails
            with ``TimeoutError`` and is not scored (None: no limit).
        fail_on_error: False: never abort. True: abort at the first failed row. A fraction f
            in [0, 1): abort once more than f of the rows done have failed (checked from
            :data:`MIN_ROWS_FOR_FRACTION` rows on). Aborting raises
            :class:`~turneval.errors.EvaluationAbortedError` carrying the rows done so far. A
            streamed run (``evaluate_jsonl``, Ray) checks after each chunk it writes, so it
            stops at the end of the chunk that crossed the line.
        on_row: Called with each finished row (a :class:`~turneval.results.SampleResult`),
            in completion order (a streamed run: in input order, as written). An exception it
            raises stops the run and is raised as it is.
        show_progress: A progress display on stderr; None shows it only when stderr is a
            terminal.
        details: Keep each result's ``details`` (matched calls, verdicts, ...); False saves
            their cost (summary extras that need details, such as a pairwise judge's position
            consistency, are then left out).
        cache: A judge cache: a :class:`~turneval.llms.SQLiteCache` or the path of one (opened
            here, so an unreadable cache fails before any row is scored).
        llm: The default judge (a LangChain chat model) for judged metrics built without one.
        seed: Seed of the simulated user (trial t uses ``seed + t``), where the model has one.
        rate_limit: The provider's quota: a :class:`~turneval.ratelimit.RateLimit` (a
            :class:`~turneval.ratelimit.RateLimiter` is made from it here, so copies of these
            options share it) or a limiter shared as is. Judge requests (and the simulated
            user's) are paced to it and adapt to 429s.
        aggregates: Run-level figure sets (:class:`~turneval.aggregate.RunAggregate`)
            computed once the rows are in, into ``result.aggregates`` (a streamed run reads
            its rows back from results.jsonl for them).
        store: A run store (:class:`~turneval.store.RunStore`, or its URL or path, opened
            here): the run and its rows are kept there, each row written as it finishes.
        sinks: More places the run goes (:class:`~turneval.runs.RunSink`: any object with
            ``start(manifest)``, ``add(rows)`` and ``finish(summary, status, error)``),
            told it starts, given its rows as they finish and told how it ended.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    max_concurrency: int = Field(default=16, ge=1)
    max_llm_concurrency: int = Field(default=8, ge=1)
    timeout: float | None = Field(default=None, gt=0)
    agent_timeout: float | None = Field(default=None, gt=0)
    fail_on_error: bool | float = False
    on_row: Callable[[Any], None] | None = None  # each SampleResult (results: no cycle)
    show_progress: bool | None = None
    details: bool = True
    cache: SQLiteCache | None = None
    llm: Any = None
    seed: int | None = None
    rate_limit: RateLimiter | None = None
    aggregates: tuple[RunAggregate, ...] = ()
    store: Any = None
    sinks: tuple[Any, ...] = ()

    def __init__(self, **options: Any) -> None:
        """Validate ``options``; a bad value raises ConfigError naming the option."""
        try:
            super().__init__(**options)
        except ValidationError as exc:
            raise invalid("run option", exc) from None

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any], **changes: Any) -> RunOptions:
        """The run options among a front end's ``arguments`` (its ``locals()``), validated.

        Every argument named as a field is taken (the others are the front end's own), then
        ``changes`` are applied: a front end declares its options once, in its signature.
        """
        fields = cls.model_fields
        return cls(**{**{k: v for k, v in arguments.items() if k in fields}, **changes})

    @field_validator("fail_on_error", mode="before")
    @classmethod
    def _fraction(cls, value: Any) -> bool | float:
        if isinstance(value, bool):
            return value
        if not isinstance(value, (int, float)) or not 0.0 <= float(value) < 1.0:
            raise ValueError(f"must be a bool or a fraction in [0, 1), got {value!r}")
        return float(value)

    @field_validator("cache", mode="before")
    @classmethod
    def _open_cache(cls, value: Any) -> SQLiteCache | None:
        if value is None or isinstance(value, SQLiteCache):
            return value
        if isinstance(value, (str, PathLike)):
            return SQLiteCache(value)  # ConfigError here names the unreadable file
        raise ValueError(f"must be a SQLiteCache or the path of one, got {type(value).__name__}")

    @field_validator("aggregates", mode="before")
    @classmethod
    def _aggregates(cls, value: Any) -> tuple[RunAggregate, ...]:
        found = tuple(value or ())
        wrong = [type(item).__name__ for item in found if not isinstance(item, RunAggregate)]
        if wrong:
            raise ValueError(f"expected RunAggregate objects, got {', '.join(wrong)}")
        return found

    @field_validator("store", mode="before")
    @classmethod
    def _open_store(cls, value: Any) -> Any:
        if value is None:
            return None
        from turneval.store import RunStore

        return RunStore.coerce(value)  # ConfigError here names the store that cannot open

    @field_validator("sinks", mode="before")
    @classmethod
    def _sinks(cls, value: Any) -> tuple[Any, ...]:
        found = tuple(value or ())
        wrong = [
            type(item).__name__
            for item in found
            if not all(callable(getattr(item, name, None)) for name in ("start", "add", "finish"))
        ]
        if wrong:
            raise ValueError(f"expected sinks (start, add and finish), got {', '.join(wrong)}")
        return found

    @field_validator("rate_limit", mode="before")
    @classmethod
    def _limiter(cls, value: Any) -> RateLimiter | None:
        return RateLimiter.coerce(value)  # ConfigError, as is, for anything else

    def replace(self, **changes: Any) -> RunOptions:
        """A copy with ``changes`` applied, validated like the original."""
        values = {name: getattr(self, name) for name in type(self).model_fields}
        return type(self)(**{**values, **changes})

    def judge_run(self) -> JudgeRun:
        """A fresh judge context for one run: default model, request limiter and cache."""
        return JudgeRun(
            llm=self.llm,
            max_concurrency=self.max_llm_concurrency,
            cache=self.cache,
            rate_limiter=self.rate_limit,
        )

    def should_abort(self, failed: int, done: int) -> bool:
        """Whether ``fail_on_error`` stops a run with ``failed`` of ``done`` rows failed."""
        if isinstance(self.fail_on_error, bool):
            return self.fail_on_error and failed > 0
        return done >= MIN_ROWS_FOR_FRACTION and failed / done > self.fail_on_error

    def progress_shown(self) -> bool:
        """Whether to show progress (``show_progress``, or None and stderr is a terminal)."""
        if self.show_progress is None:
            return sys.stderr.isatty()
        return self.show_progress


def option_default(name: str) -> Any:
    """The default of the run option ``name`` (a :class:`RunOptions` field).

    Raises:
        KeyError: ``name`` is no run option.
    """
    return RunOptions.model_fields[name].get_default(call_default_factory=True)


def invalid(what: str, exc: ValidationError) -> ConfigError:
    """A :class:`ConfigError` naming each invalid field of ``exc`` (``invalid run option: ...``).

    ``what`` names the kind of settings (``"run option"``, ``"Local engine setting"``).
    """
    problems = "; ".join(
        f"{'.'.join(str(part) for part in error['loc']) or 'options'}: {error['msg']}"
        for error in exc.errors(include_url=False)
    )
    return ConfigError(f"invalid {what}: {problems}")

"""The one results codec: a row to its results.jsonl record and back.

``results.jsonl`` holds one JSON object a line (``pandas.read_json(path, lines=True)`` reads
it). Every writer and reader goes through here: :func:`encode` (a row to its record),
:func:`fast_line` (a record to its line, orjson for plain rows), :func:`decode` (a record back
to a row), :func:`read_results` (a whole file, named errors) and :func:`read_finished` (the
finished rows of an interrupted run, for ``--resume``). The keys users read are fixed:

* ``index``, ``id`` (the sample's ``metadata["id"]``), ``line`` (1-based input line);
* per metric ``<name>``, ``<name>_reason``, ``<name>_error`` (``"<ErrorType>: <message>"``),
  ``<name>_traceback`` (when the failure kept one), ``<name>_details``, ``<name>_usage``;
* a trial (:class:`~turneval.results.Trial`): ``scenario_id``, ``trial``, ``stop_reason``;
* an agent run (:class:`~turneval.results.AgentRun`): ``latency_in_seconds``, ``failure``,
  ``agent_error``, ``agent_input_tokens``, ``agent_output_tokens``, ``agent_total_tokens``,
  ``steps``;
* ``source`` when the row was not a sample as given (``agent``, ``simulation``, ``traces``).

Files written before ``source`` existed still read: a row with trial columns is a
simulation's, a row with agent columns without them an agent's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any, get_args

from turneval._rows import (
    AgentRun,
    MetricFailure,
    MetricResult,
    SampleResult,
    Source,
    Trial,
    json_line,
)
from turneval.errors import ConfigError
from turneval.usage import Usage

__all__ = [
    "KEPT_DETAILS",
    "TRIAL_KEYS",
    "decode",
    "decode_file",
    "early_stop_columns",
    "encode",
    "fast_line",
    "metric_names",
    "named_error",
    "read_finished",
    "read_results",
]

_orjson_dumps: Callable[[Any], bytes] | None
try:  # the "fast" extra (also a langsmith dependency, so nearly always present)
    from orjson import dumps as _orjson_dumps
except ImportError:  # pragma: no cover - exercised only without orjson
    _orjson_dumps = None

KEPT_DETAILS = frozenset({"repeats", "by_agent", "not_scored", "attribution"})
"""The keys of a result's details that results.jsonl keeps even without ``--details``."""

TRIAL_KEYS = ("scenario_id", "trial", "stop_reason")
"""The columns of a row's :class:`~turneval.results.Trial`."""

_SOURCES: frozenset[str] = frozenset(get_args(Source))


def encode(
    row: SampleResult, metric_names: Sequence[str], *, details: bool = False
) -> dict[str, Any]:
    """A row's flat, JSON-ready record: ``<name>``, ``<name>_reason``, ``<name>_error`` per metric.

    ``id`` follows ``index`` when the sample has ``metadata["id"]``, then the trial's columns.
    Values are None where the metric failed; ``details=True`` adds ``<name>_details`` and,
    for judged results, ``<name>_usage`` (:meth:`Usage.to_dict`). Without details, the small
    records of :data:`KEPT_DETAILS` are still kept in ``<name>_details``: a judged metric's
    vote record (``repeats`` > 1, without each vote), so that a file read back
    (``from_jsonl``, ``--resume``, ``compare``) counts the same unstable rows; a per-agent
    metric's values (``by_agent``, ``not_scored``) and an attribution (``attribution``), so
    that its summary and failure clusters are the same. The agent run's figures and ``source`` follow; ``line`` comes last when the
    row was read from a file.
    """
    record: dict[str, Any] = {"index": row.index}
    sample_id = row.sample_id
    if sample_id is not None:  # what labels and reports name the row by
        record["id"] = sample_id
    trial = row.trial
    if trial is not None:
        record.update(
            scenario_id=trial.scenario_id, trial=trial.index, stop_reason=trial.stop_reason
        )
    results, failures = row.results, row.failures
    for name in metric_names:
        result, failure = results.get(name), failures.get(name)
        record[name] = result.value if result is not None else None
        record[f"{name}_reason"] = result.reason if result is not None else None
        record[f"{name}_error"] = str(failure) if failure is not None else None
        if failure is not None and failure.traceback:
            record[f"{name}_traceback"] = failure.traceback
        if details and result is not None:
            record[f"{name}_details"] = result.details
            if result.usage is not None:
                record[f"{name}_usage"] = result.usage.to_dict()
        elif result is not None and not KEPT_DETAILS.isdisjoint(result.details):
            kept = {k: v for k, v in result.details.items() if k in KEPT_DETAILS}
            if "repeats" in kept:
                kept["repeats"] = {k: v for k, v in kept["repeats"].items() if k != "votes"}
            record[f"{name}_details"] = kept
    agent = row.agent
    if agent is not None:
        usage = agent.usage
        record.update(
            latency_in_seconds=agent.latency_s,
            failure=int(agent.failed),
            agent_error=agent.error,
            agent_input_tokens=usage.input_tokens,
            agent_output_tokens=usage.output_tokens,
            agent_total_tokens=usage.total_tokens,
            steps=agent.steps,
        )
    if row.source != "dataset":
        record["source"] = row.source
    if row.line is not None:  # read from a file: the 1-based input line
        record["line"] = row.line
    return record


def fast_line(record: dict[str, Any], plain_size: int) -> str:
    """One results.jsonl line; orjson (Rust) for plain rows, the stdlib for anything else.

    A plain row (``plain_size`` keys) holds only the index (and the sample id, a string), the
    line and each metric's value (finite), reason and error (strings): orjson writes the same
    JSON values for it as :func:`~turneval.results.json_line`, only faster. Details and other
    columns may hold values the two write differently (NaN, huge integers), so those rows, and
    any string orjson refuses (a lone surrogate), take :func:`~turneval.results.json_line`.
    """
    if _orjson_dumps is not None and len(record) == plain_size:
        try:
            return _orjson_dumps(record).decode("utf-8")
        except TypeError:  # orjson.JSONEncodeError: e.g. a lone surrogate in a reason
            pass
    return json_line(record)


def metric_names(record: Mapping[str, Any]) -> list[str]:
    """The metric names of a record: the keys that have a ``<key>_reason`` beside them.

    Legacy: only for rows written before the run manifest; a run's
    :class:`~turneval.manifest.RunManifest` names its metrics.
    """
    return [key for key in record if f"{key}_reason" in record]


def decode(record: Mapping[str, Any], names: Sequence[str], number: int) -> SampleResult:
    """The row of one results.jsonl record (``number``: its 1-based line in the file).

    Values, reasons, errors (with their tracebacks), details and judge usage; the trial; the
    agent run's figures (``row.agent``, with no messages); ``source``. Samples are not stored,
    so ``row.sample`` is None and ``row.stored_id`` holds the id.

    Raises:
        ValueError: a field of the wrong type, named.
    """
    row = SampleResult(int(_number(record, "index", number - 1)), None)
    if record.get("line") is not None:  # the streaming CLI's input line
        row.line = int(_number(record, "line"))
    if record.get("id") is not None:
        row.stored_id = str(record["id"])
    if "scenario_id" in record:  # a simulated conversation: pass^k again
        trial, stop = record.get("trial"), record.get("stop_reason")
        row.trial = Trial(
            str(record["scenario_id"]),
            int(_number(record, "trial")) if trial is not None else 0,
            None if stop is None else str(stop),
        )
    for name in names:
        if record.get(name) is not None:
            row.results[name] = MetricResult(
                name,
                float(_number(record, name)),
                record.get(f"{name}_reason") or "",
                dict(record.get(f"{name}_details") or {}),
                _usage(record.get(f"{name}_usage"), name, number),
            )
        elif record.get(f"{name}_error"):
            error_type, _, message = str(record[f"{name}_error"]).partition(": ")
            trace = record.get(f"{name}_traceback")
            row.failures[name] = MetricFailure(
                name, row.index, error_type, message, str(trace) if trace else None
            )
    if record.get("latency_in_seconds") is not None:
        row.agent = _agent(record)
    row.source = _source(record, row)
    return row


def _source(record: Mapping[str, Any], row: SampleResult) -> Source:
    """The row's source: its ``source`` column, else what its columns show (older files)."""
    written = record.get("source")
    if written is not None:
        if written not in _SOURCES:
            raise ValueError(f"'source' must be one of {sorted(_SOURCES)}, got {written!r}")
        found: Source = written
        return found
    if row.trial is not None:
        return "simulation"
    return "agent" if row.agent is not None else "dataset"


def _agent(record: Mapping[str, Any]) -> AgentRun:
    """The agent run of a record (its figures; the messages are not stored)."""
    error = record.get("agent_error")
    return AgentRun(
        [],
        float(_number(record, "latency_in_seconds")),
        str(error) if error else None,
        Usage(
            int(record.get("agent_input_tokens") or 0),
            int(record.get("agent_output_tokens") or 0),
        ),
        int(record.get("steps") or 0),
        by_agent=not error or bool(record.get("failure", 1)),  # an error with failure 0: not its
    )


def _number(record: Mapping[str, Any], key: str, default: int | None = None) -> int | float:
    """``record[key]`` as a number (an int or float; the field named if it is not one)."""
    value: Any = record.get(key, default)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    try:
        return float(value)  # a number written as text, as before
    except (TypeError, ValueError):
        raise ValueError(f"{key!r} must be a number, got {value!r}") from None


def _usage(data: Any, name: str, line: int) -> Usage | None:
    """The ``<name>_usage`` object of a results line, None when absent."""
    if data is None:
        return None
    if not isinstance(data, Mapping):
        raise ValueError(f"line {line}: {name}_usage must be an object, got {data!r}")
    try:
        return Usage.from_dict(data)
    except ValueError as error:
        raise ValueError(f"line {line}: {name}_usage: {error}") from None


def early_stop_columns(record: Mapping[str, Any], skipped: dict[str, int]) -> tuple[int, int]:
    """``(trials, needed)`` of a row of a run that stopped trials early.

    Its scenario's skipped trials go into ``skipped`` (by scenario id, when some were).
    """
    trials, needed, left = (
        _number(record, key, 0) for key in ("trials_of", "trials_needed", "skipped_trials")
    )
    if left:
        skipped[str(record.get("scenario_id"))] = int(left)
    return int(trials), int(needed)


def read_results(path: str | PathLike[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each record of a results file with its 1-based line (blank lines skipped).

    Raises:
        ConfigError: naming the file and line, for a line that is not a JSON object (or not
            UTF-8).
    """
    with Path(path).open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8"))
                if not isinstance(record, dict):
                    raise TypeError(f"expected a JSON object, got {type(record).__name__}")
            except (ValueError, TypeError) as exc:
                raise named_error(path, number, exc) from exc
            yield number, record


def named_error(path: str | PathLike[str], number: int, exc: Exception) -> ConfigError:
    """A :class:`ConfigError` naming the file and line of a record that did not read."""
    detail = " ".join(str(exc).split())
    if isinstance(exc, json.JSONDecodeError):  # its line is the text's own
        detail = f"{exc.msg}, column {exc.colno}"
    named = detail.removeprefix(f"line {number}: ")  # a field's own message
    if named == detail:
        named = f"not a turneval results row ({type(exc).__name__}: {detail})"
    return ConfigError(f"{path} line {number}: {named}")


def decode_file(
    path: str | PathLike[str], names: Sequence[str] | None = None
) -> tuple[list[SampleResult], list[str], list[tuple[int, dict[str, Any]]]]:
    """Every row of a results file, its metric names and the records as read (with lines).

    The metric names are ``names`` (the run manifest's), else those of the first row's
    ``<name>_reason`` columns (a file written before the manifest).

    Raises:
        ConfigError: naming the file and line, for a line that is not a results row (not
            UTF-8, not a JSON object, a value of the wrong type).
    """
    rows: list[SampleResult] = []
    found: list[str] = [] if names is None else list(names)
    records: list[tuple[int, dict[str, Any]]] = []
    for number, record in read_results(path):
        if not found:
            found = metric_names(record)
        try:
            rows.append(decode(record, found, number))
        except (ValueError, TypeError, KeyError) as exc:  # a field's type
            raise named_error(path, number, exc) from exc
        records.append((number, record))
    return rows, found, records


def read_finished(
    path: str | PathLike[str], *, key: Callable[[dict[str, Any]], Any]
) -> dict[Any, dict[str, Any]]:
    """The rows an interrupted run finished, by ``key(record)`` (the first row of a key wins).

    Cuts off a torn last line (a run killed while writing it), so that appending continues
    the file cleanly. Rows are complete JSON objects with a ``line``.

    Raises:
        ConfigError: the file holds a line that is not such a row (not a results.jsonl).
    """
    target = Path(path)
    rows: dict[Any, dict[str, Any]] = {}
    if not target.exists():
        return rows
    with target.open("r+b") as handle:
        good_end = 0
        for raw in handle:
            if not raw.endswith(b"\n"):
                break  # torn: the run was killed mid-write
            try:
                record = json.loads(raw)
                int(record["line"])
                rows.setdefault(key(record), record)
            except (ValueError, KeyError, TypeError) as exc:
                raise ConfigError(
                    f"{target}: row after byte {good_end} is not a turneval row; cannot resume"
                ) from exc
            good_end += len(raw)
        handle.truncate(good_end)
    return rows

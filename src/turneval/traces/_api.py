"""The public functions of :mod:`turneval.traces`."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from os import PathLike
from pathlib import Path
from typing import Any, Literal

from turneval.dataset import EvaluationDataset
from turneval.errors import ConfigError
from turneval.jsonl import LENIENT_HINT, strict_json_problem
from turneval.messages import HumanMessage
from turneval.samples import MultiTurnSample, Sample
from turneval.traces import _genai as g
from turneval.traces._convert import PLACEHOLDER, convert, skip_reason
from turneval.traces._spans import (
    Span,
    Undecodable,
    documents,
    dumps_request,
    from_readable,
    is_contiguous,
    loads,
    spans_of_request,
)

GroupBy = Literal["trace", "session"]


def _session(spans: list[Span]) -> str | None:
    for span in spans:
        for key in g.SESSION_KEYS:
            value = span.attributes.get(key)
            if value:
                return str(value)
    return None


def trace_conversation(
    spans: list[Span], group: str, strict_traces: bool, skipped: dict[str, int] | None
) -> MultiTurnSample | None:
    """The sample of one trace (or session); None for a trace that is no conversation.

    A skipped group is counted in ``skipped`` by reason, once per trace; with
    ``strict_traces`` nothing is skipped (such a trace gives its error row).
    """
    reason = None if strict_traces else skip_reason(spans)
    if reason is None:
        return convert(spans, group)
    if skipped is not None:
        skipped[reason] = skipped.get(reason, 0) + len({span.trace_id for span in spans})
    return None


def _group(
    spans: Iterable[Span],
    group_by: GroupBy,
    strict_traces: bool = False,
    skipped: dict[str, int] | None = None,
) -> list[MultiTurnSample]:
    if group_by not in ("trace", "session"):
        raise ConfigError(f"group_by must be 'trace' or 'session', got {group_by!r}")
    traces: dict[str, list[Span]] = {}
    for span in spans:
        traces.setdefault(span.trace_id, []).append(span)
    groups: dict[str, list[Span]] = {}
    for trace_id, members in traces.items():
        key = (_session(members) if group_by == "session" else None) or f"trace:{trace_id}"
        groups.setdefault(key, []).extend(members)
    ordered = sorted(groups.values(), key=lambda members: min(span.start for span in members))
    converted = (
        trace_conversation(members, group_by, strict_traces, skipped) for members in ordered
    )
    return [sample for sample in converted if sample is not None]


def _dataset(samples: list[MultiTurnSample], skipped: dict[str, int]) -> EvaluationDataset:
    dataset = EvaluationDataset(samples)
    dataset.skipped_traces = skipped
    return dataset


def from_otel_spans(
    spans: Iterable[Any], *, group_by: GroupBy = "trace", strict_traces: bool = False
) -> EvaluationDataset:
    """Rebuild conversations from OpenTelemetry SDK spans (GenAI conventions or OpenInference).

    Args:
        spans: ``ReadableSpan`` objects, e.g. ``InMemorySpanExporter().get_finished_spans()``.
        group_by: One sample per trace (``"trace"``) or per conversation across traces
            (``"session"``: ``gen_ai.conversation.id`` or OpenInference ``session.id``; a trace
            without one is its own sample).
        strict_traces: Give a trace that records no model call an error row instead of
            skipping it.

    Returns:
        One :class:`~turneval.MultiTurnSample` per trace or session, in order of first span
        start. A trace with no LLM span (OpenLLMetry traces agent creation on its own) is no
        conversation: it is skipped and counted in the dataset's ``skipped_traces`` by reason
        (``{"no_llm_span": 1}``). A trace that cannot be converted still gives its row: a
        placeholder sample whose ``metadata["conversion_error"]`` names the trace, span and
        attribute; ``evaluate`` records that error for every metric.
    """
    skipped: dict[str, int] = {}
    readable = (from_readable(span) for span in spans)
    return _dataset(_group(readable, group_by, strict_traces, skipped), skipped)


def _bad_line(number: int, problem: str) -> MultiTurnSample:
    return MultiTurnSample(
        user_input=[HumanMessage(content=PLACEHOLDER)],
        metadata={"source": "otel", "conversion_error": f"line {number}: {problem}"},
    )


def _no_trace_row(number: int, span: Span) -> MultiTurnSample:
    """The error row of a span without a valid trace id (its id: the span's, for resume)."""
    sample = _bad_line(number, str(span.error))
    assert sample.metadata is not None
    sample.metadata["id"] = f"span {span.span_id}"
    return sample


def _requests(
    path: str | PathLike[str], lenient: bool = False
) -> Iterator[tuple[int, list[Span] | str]]:
    """Each request's spans by line, or why the line gives none (its error row's reason)."""
    for number, text in documents(path):
        if isinstance(text, Undecodable):
            yield number, text.problem
            continue
        problem = None if lenient else strict_json_problem(text)
        if problem is not None:
            yield number, f"not strict JSON: {problem} ({LENIENT_HINT})"
            continue
        try:
            yield number, list(spans_of_request(loads(text), number))
        except json.JSONDecodeError as exc:
            yield number, f"not valid JSON ({exc.msg}, column {exc.colno})"
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            yield number, f"not an OTLP/JSON ExportTraceServiceRequest ({exc})"


def iter_otlp_json(
    path: str | PathLike[str],
    *,
    ordered: bool | None = None,
    group_by: GroupBy = "trace",
    strict_traces: bool = False,
    skipped_traces: dict[str, int] | None = None,
    lenient_json: bool = False,
) -> Iterator[tuple[int, MultiTurnSample]]:
    """Stream ``(line, sample)`` pairs, one per trace (or session), from an OTLP/JSON file.

    The file holds one ``ExportTraceServiceRequest`` per line (the collector's file exporter)
    or one JSON document. When every trace's spans sit in one run of lines (``ordered=True``,
    or ``None``: checked by a cheap first scan of the trace ids), traces are converted one by
    one as the file is read, so memory is bounded by the largest trace; otherwise (the
    fallback) the whole file is grouped in memory first. Traces come in file order; a line
    that is not OTLP/JSON gives one error row.

    With ``group_by="session"`` the traces of one conversation (``gen_ai.conversation.id`` or
    OpenInference ``session.id``; a trace without one stays alone) become one sample, numbered
    by the line of its first trace: the whole file is grouped in memory, and the samples and
    error rows come in line order.

    A trace with no LLM span is no conversation: it gives no pair, and is counted by reason
    into ``skipped_traces`` when a dict is given (``{"no_llm_span": 1}``; complete once the
    iterator is exhausted); with ``strict_traces`` it gives its error row instead.

    A line that is not UTF-8, not JSON, or not strict JSON (a duplicate key or a number that
    is not finite, such as ``NaN`` or ``1e400``; ``lenient_json=True`` accepts those, as
    before) gives one error row naming the line, and the file too when it is not UTF-8. A span
    without a valid trace id (missing, not a string, not 32 hex digits, or all zeros) belongs
    to no trace: it gives an error row of its own (``span ... without a trace id``, its
    ``id`` ``"span <span id>"``), and its trace stays one row.
    """
    if group_by not in ("trace", "session"):
        raise ConfigError(f"group_by must be 'trace' or 'session', got {group_by!r}")
    if group_by == "session" or not (is_contiguous(path) if ordered is None else ordered):
        yield from _in_memory(path, group_by, strict_traces, skipped_traces, lenient_json)
        return
    current: list[Span] = []
    line = 0
    waiting: list[tuple[int, MultiTurnSample]] = []  # error rows on lines after the trace's
    for number, read in _requests(path, lenient_json):
        if isinstance(read, str):
            waiting.append((number, _bad_line(number, read)))
        else:
            for span in read:
                if not span.trace_id:  # no trace to join: its own error row
                    waiting.append((number, _no_trace_row(number, span)))
                    continue
                if current and span.trace_id != current[0].trace_id:
                    sample = trace_conversation(current, "trace", strict_traces, skipped_traces)
                    if sample is not None:
                        yield line, sample
                    current = []
                if not current:
                    yield from waiting  # each row at its line: after the trace before them
                    waiting = []
                    line = number
                current.append(span)
        if not current:
            yield from waiting
            waiting = []
    if current:
        sample = trace_conversation(current, "trace", strict_traces, skipped_traces)
        if sample is not None:
            yield line, sample
    yield from waiting


def _in_memory(
    path: str | PathLike[str],
    group_by: GroupBy,
    strict_traces: bool,
    skipped: dict[str, int] | None,
    lenient: bool = False,
) -> Iterator[tuple[int, MultiTurnSample]]:
    """:func:`iter_otlp_json`'s pairs from the whole file grouped in memory, in line order.

    A trace (or a session) is numbered by the line of its first span.
    """
    spans: list[Span] = []
    firsts: dict[str, int] = {}
    rows: list[tuple[int, MultiTurnSample]] = []
    for number, read in _requests(path, lenient):
        if isinstance(read, str):
            rows.append((number, _bad_line(number, read)))
            continue
        for span in read:
            if span.trace_id:
                firsts.setdefault(span.trace_id, number)
                spans.append(span)
            else:
                rows.append((number, _no_trace_row(number, span)))
    if group_by == "trace":  # in order of first appearance
        traces: dict[str, list[Span]] = {}
        for span in spans:
            traces.setdefault(span.trace_id, []).append(span)
        converted = (
            trace_conversation(m, "trace", strict_traces, skipped) for m in traces.values()
        )
        samples = [sample for sample in converted if sample is not None]
    else:
        samples = _group(spans, group_by, strict_traces, skipped)
    for sample in samples:
        meta = sample.metadata or {}
        trace_ids = meta.get("trace_ids") or [meta.get("trace_id")]
        rows.append((min(firsts.get(str(trace), 0) for trace in trace_ids), sample))
    rows.sort(key=lambda row: row[0])  # stable: samples starting on one line keep their order
    yield from rows


def from_otlp_json(
    path: str | PathLike[str],
    *,
    group_by: GroupBy = "trace",
    strict_traces: bool = False,
    lenient_json: bool = False,
) -> EvaluationDataset:
    """Rebuild conversations from an OTLP/JSON file (see :func:`iter_otlp_json`).

    Returns:
        One sample per trace (or session) in order of first span start, as
        :func:`from_otel_spans` (traces with no model call skipped and counted in the
        dataset's ``skipped_traces``, unless ``strict_traces``); a line that is not OTLP/JSON
        (or not UTF-8, or not strict JSON unless ``lenient_json``) gives one error row too, and
        so does a span without a valid trace id.
    """
    skipped: dict[str, int] = {}
    if group_by == "trace":
        pairs = iter_otlp_json(
            path, strict_traces=strict_traces, skipped_traces=skipped, lenient_json=lenient_json
        )
        rows = [sample for _, sample in pairs]
        return _dataset(sorted(rows, key=_start_key), skipped)
    spans: list[Span] = []
    bad: list[MultiTurnSample] = []
    for number, read in _requests(path, lenient_json):
        if isinstance(read, str):
            bad.append(_bad_line(number, read))
            continue
        for span in read:
            if span.trace_id:
                spans.append(span)
            else:
                bad.append(_no_trace_row(number, span))
    return _dataset(_group(spans, group_by, strict_traces, skipped) + bad, skipped)


def _start_key(sample: Sample) -> float:
    return float((sample.metadata or {}).get("start_time_unix_nano") or 0)


def write_otlp_json(spans: Iterable[Any], path: str | PathLike[str]) -> int:
    """Write SDK spans as OTLP/JSON, one request per trace and line; returns the span count.

    Handy in tests and to save in-memory spans for ``turneval evaluate --format otlp``.
    """
    traces: dict[str, list[Span]] = {}
    count = 0
    for span in spans:
        record = span if isinstance(span, Span) else from_readable(span)
        traces.setdefault(record.trace_id, []).append(record)
        count += 1
    with Path(path).open("w", encoding="utf-8") as handle:
        for members in traces.values():
            handle.write(dumps_request(members) + "\n")
    return count


def to_otel_events(result: Any, *, logger: Any = None) -> list[Any]:
    """One ``gen_ai.evaluation.result`` event per metric and trace-sourced conversation.

    Each event (an OpenTelemetry log record with ``event_name``) is parented to the root span
    of the trace it evaluated and carries ``gen_ai.evaluation.name``, ``...score.value`` (or
    ``error.type`` for a failed metric), ``...score.label`` (``pass``/``fail``) for a metric
    whose every score in ``result`` is 0 or 1, and ``...explanation`` (the reason). With
    ``logger`` (``LoggerProvider.get_logger(...)``) the events are also emitted, so scores show
    up next to the trace in the backend.

    Args:
        result: An ``EvaluationResult`` of samples built by this module.
        logger: An OpenTelemetry ``Logger`` to emit to, or None to only return the events.
    """
    from opentelemetry import trace
    from opentelemetry._logs import LogRecord

    events = []
    binary = {  # pass/fail metrics: every score in the result is 0 or 1 (scores are floats)
        name
        for name in result.metric_names
        if all(row.results[name].value in (0.0, 1.0) for row in result.rows if name in row.results)
    }
    for row in result.rows:
        metadata = (getattr(row.sample, "metadata", None) or {}) if row.sample else {}
        trace_id, span_id = metadata.get("trace_id"), metadata.get("root_span_id")
        if not trace_id or not span_id:
            continue
        context = trace.set_span_in_context(
            trace.NonRecordingSpan(
                trace.SpanContext(
                    int(trace_id, 16),
                    int(span_id, 16),
                    is_remote=True,
                    trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
                )
            )
        )
        for name in result.metric_names:
            attributes: dict[str, Any] = {g.EVALUATION_NAME: name}
            cell, failure = row.results.get(name), row.failures.get(name)
            if cell is not None:
                attributes[g.EVALUATION_SCORE_VALUE] = float(cell.value)
                if name in binary:
                    attributes[g.EVALUATION_SCORE_LABEL] = "pass" if cell.value else "fail"
                if cell.reason:
                    attributes[g.EVALUATION_EXPLANATION] = cell.reason
            elif failure is not None:
                attributes[g.ERROR_TYPE] = failure.error_type
                attributes[g.EVALUATION_EXPLANATION] = failure.message
            else:
                continue
            record = LogRecord(
                context=context, event_name=g.EVALUATION_EVENT, attributes=attributes
            )
            if logger is not None:
                logger.emit(record)
            events.append(record)
    return events

"""What a request to the receiver brings: its shape checked, its spans read, the new ones found.

A request is taken whole or not at all: :func:`read_request` reads every span of it and
raises :class:`BadRequestError` (a 400) on any that cannot be read, before the watcher looks
at its state; the watcher then finds which spans are new (a :class:`RequestPlan`) and takes
them only once their spool line is on disk.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from turneval.traces import Span, from_otlp_span, otlp_attributes

__all__ = [
    "BadRequestError",
    "BodyTooLargeError",
    "GroupBy",
    "Group",
    "QueueFullError",
    "RequestPlan",
    "SpoolUnavailableError",
    "read_request",
]

GroupBy = Literal["trace", "session"]


class QueueFullError(Exception):
    """More spans wait than the queue holds: the receiver answers 503 with ``Retry-After``."""


class BadRequestError(ValueError):
    """A body that is no ``ExportTraceServiceRequest``: the receiver answers 400 with the reason."""


class BodyTooLargeError(ValueError):
    """A body over the receiver's limit, as sent or once decompressed: answered 413."""


class SpoolUnavailableError(Exception):
    """The spool cannot be written (a full disk, say): answered 503 with ``Retry-After``.

    Nothing of the request was accepted: the exporter's retry is taken once the spool writes.
    """


@dataclass
class Group:
    """A conversation being assembled: its traces, and when its last span arrived."""

    traces: set[str] = field(default_factory=set)
    last: float = 0.0


@dataclass
class RequestPlan:
    """What a request brings, read and checked, before anything of it is taken."""

    spans: list[tuple[dict[str, Any], list[Any]]] = field(default_factory=list)
    """Per resource: its attributes (read) and its new spans as ``(raw, span)``."""
    resources: list[list[Any]] = field(default_factory=list)
    """Per resource: its attributes as received (written to the spool)."""
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def new(self) -> int:
        return sum(len(spans) for _, spans in self.spans)

    def line(self) -> dict[str, Any]:
        """The spool line: the new spans, by resource, as received."""
        return {
            "resourceSpans": [
                {
                    "resource": {"attributes": attributes},
                    "scopeSpans": [{"spans": [raw for raw, _ in spans]}],
                }
                for attributes, (_, spans) in zip(self.resources, self.spans, strict=True)
                if spans
            ]
        }


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _listed(owner: dict[str, Any], key: str, where: str) -> list[Any]:
    """``owner[key]``: a list (absent or null: empty); else a 400 naming the place."""
    value = owner.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadRequestError(f"{where}{key} must be a list, got {_kind(value)}")
    return value


def _objects(items: list[Any], where: str) -> Iterator[tuple[int, dict[str, Any]]]:
    for position, item in enumerate(items):
        if not isinstance(item, dict):
            raise BadRequestError(f"{where}[{position}] must be an object, got {_kind(item)}")
        yield position, item


def _request_spans(document: Any) -> list[tuple[list[Any], list[dict[str, Any]]]]:
    """A request's shape checked: per resource, its attributes and its spans (every scope's).

    The request is an ``ExportTraceServiceRequest`` in its OTLP/JSON form.

    Raises:
        BadRequestError: the document is not of that shape, naming the place
            (``resourceSpans[0].scopeSpans[1].spans[2] must be an object, got int``).
    """
    if not isinstance(document, dict):
        raise BadRequestError(
            f"expected an object with a 'resourceSpans' list, got {_kind(document)}"
        )
    out: list[tuple[list[Any], list[dict[str, Any]]]] = []
    for r, resource in _objects(_listed(document, "resourceSpans", ""), "resourceSpans"):
        where = f"resourceSpans[{r}]."
        inner = resource.get("resource")
        if inner is not None and not isinstance(inner, dict):
            raise BadRequestError(f"{where}resource must be an object, got {_kind(inner)}")
        attributes = _listed(inner or {}, "attributes", f"{where}resource.")
        spans: list[dict[str, Any]] = []
        for s, scope in _objects(_listed(resource, "scopeSpans", where), f"{where}scopeSpans"):
            spans_where = f"{where}scopeSpans[{s}]."
            items = _listed(scope, "spans", spans_where)
            spans += [span for _, span in _objects(items, f"{spans_where}spans")]
        out.append((attributes, spans))
    return out


def read_request(document: Any) -> list[tuple[list[Any], dict[str, Any], list[tuple[Any, Span]]]]:
    """Every span of a request read, no state looked at.

    Per resource: its attributes as received and as read, and its spans as ``(raw, span)``.

    Raises:
        BadRequestError: the request is not of the OTLP shape, or a span or an attribute
            cannot be read (the whole request is refused).
    """
    try:
        return [
            (
                raw_attributes,
                otlp_attributes(raw_attributes),
                [(r, from_otlp_span(r)) for r in raws],
            )
            for raw_attributes, raws in _request_spans(document)
        ]
    except BadRequestError:
        raise
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        raise BadRequestError(f"unreadable span: {type(exc).__name__}: {exc}") from exc

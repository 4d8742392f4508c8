"""What a streamed run reads: a source object holds the input and how to read it.

``evaluate_jsonl(data, ...)`` takes a path (its format told from its first bytes: OTLP/JSON
when it starts with ``{"resourceSpans"``, else JSONL samples) or a source naming the format
and its options: :class:`JsonlSource` (one sample per line; ``lenient_json``) or
:class:`OtlpSource` (OTLP/JSON traces; ``group_by``, ``strict``, ``lenient_json``). A source
reads its input into chunks of numbered lines (:mod:`turneval.stream._chunks`), which an engine
scores. The options once given to ``evaluate_jsonl`` itself (``input_format``, ``group_by``,
``strict_traces``, ``lenient_json``) are :func:`as_source`'s.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from turneval.errors import ConfigError, InvalidSampleError
from turneval.stream._chunks import Line, check_input_file, is_otlp, line_chunks, otlp_chunks

__all__ = ["JsonlSource", "OtlpSource", "Source", "as_source"]

GroupBy = Literal["trace", "session"]


@dataclass(frozen=True, init=False)
class Source(ABC):
    """A streamed run's input: a file, and how its lines become samples.

    Attributes:
        path: The input file.
    """

    path: Path
    traces: ClassVar[bool] = False
    """Whether rows come from traces: a resumed run keys them by ``(line, id)`` (a line of
    OTLP/JSON may hold several traces) and the summary counts the traces skipped."""

    def check(self) -> None:
        """Refuse an input that cannot be read, before anything runs.

        Raises:
            InvalidSampleError: the path is not an existing regular file (saying why).
            ConfigError: the file is compressed.
        """
        check_input_file(self.path)

    @abstractmethod
    def chunks(
        self,
        size: int,
        budget: int,
        skip: frozenset[Any] = frozenset(),
        skipped: dict[str, int] | None = None,
    ) -> Iterator[list[Line]]:
        """The input as chunks of numbered lines (``size`` lines, ``budget`` bytes at most).

        Args:
            size: Lines per chunk, at most.
            budget: Input bytes per chunk, at most (a longer line is a chunk of its own).
            skip: The lines a resumed run finished (their keys, see :attr:`traces`).
            skipped: Counts, by reason, the traces that were no conversation (trace sources).
        """


@dataclass(frozen=True, init=False)
class JsonlSource(Source):
    """A JSONL file of samples, one per line.

    Args:
        path: The file.
        lenient_json: Accept lines that are not strict JSON: duplicate keys (the last wins)
            and numbers that are not finite (``NaN``, ``Infinity``, ``1e400``). By default such
            a line is an error row naming the line and the key.
    """

    lenient_json: bool = False

    def __init__(self, path: str | os.PathLike[str], *, lenient_json: bool = False) -> None:
        """Read ``path`` as samples; nothing is opened before the run."""
        object.__setattr__(self, "path", Path(path))
        object.__setattr__(self, "lenient_json", bool(lenient_json))

    def chunks(
        self,
        size: int,
        budget: int,
        skip: frozenset[Any] = frozenset(),
        skipped: dict[str, int] | None = None,
    ) -> Iterator[list[Line]]:
        """Non-blank lines, each passed on as its bytes (see :func:`line_chunks`)."""
        return line_chunks(self.path, size, budget, skip, lenient=self.lenient_json)


@dataclass(frozen=True, init=False)
class OtlpSource(Source):
    """An OTLP/JSON file of traces (needs the ``otel`` extra): one sample per trace or session.

    Args:
        path: The file (one export a line, as a collector's file exporter writes).
        group_by: One sample per trace (``"trace"``), or per conversation across traces
            (``"session"``: traces sharing ``gen_ai.conversation.id`` or OpenInference
            ``session.id``; the file is grouped in memory first, each session numbered by the
            line of its first trace).
        strict: A trace that records no model call (no LLM span) is an error row; by default
            it is skipped and counted by reason in the result's ``skipped_traces``.
        lenient_json: Accept lines that are not strict JSON (duplicate keys, the last wins).

    Raises:
        ConfigError: ``group_by`` is neither ``"trace"`` nor ``"session"``.
    """

    group_by: GroupBy = "trace"
    strict: bool = False
    lenient_json: bool = False
    traces: ClassVar[bool] = True

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        group_by: GroupBy = "trace",
        strict: bool = False,
        lenient_json: bool = False,
    ) -> None:
        """Read ``path`` as traces; nothing is opened before the run."""
        if group_by not in ("trace", "session"):
            raise ConfigError(f"group_by must be 'trace' or 'session', got {group_by!r}")
        object.__setattr__(self, "path", Path(path))
        object.__setattr__(self, "group_by", group_by)
        object.__setattr__(self, "strict", bool(strict))
        object.__setattr__(self, "lenient_json", bool(lenient_json))

    def chunks(
        self,
        size: int,
        budget: int,
        skip: frozenset[Any] = frozenset(),
        skipped: dict[str, int] | None = None,
    ) -> Iterator[list[Line]]:
        """Samples rebuilt from the traces, as lines (see :func:`otlp_chunks`)."""
        return otlp_chunks(
            self.path,
            size,
            budget,
            skip,
            lenient=self.lenient_json,
            group_by=self.group_by,
            strict_traces=self.strict,
            skipped_traces=skipped,
        )


def as_source(
    data: str | os.PathLike[str] | Source,
    *,
    input_format: str = "auto",
    group_by: GroupBy = "trace",
    strict_traces: bool = False,
    lenient_json: bool = False,
) -> Source:
    """The source of ``data``: a source as it is, or a path read as its format says.

    A path is checked first (it must be an existing regular file). ``input_format`` is
    ``"jsonl"`` (samples), ``"otlp"`` (traces) or ``"auto"`` (OTLP/JSON when the file starts
    with ``{"resourceSpans"``); the other options are those of :class:`JsonlSource` and
    :class:`OtlpSource` (``strict_traces`` is ``OtlpSource(strict=...)``).

    Raises:
        InvalidSampleError: the path is not an existing regular file, or the format unknown.
        ConfigError: ``group_by="session"`` for a file of samples, or an unknown ``group_by``.
        TypeError: ``data`` is neither a path nor a source.
    """
    if isinstance(data, Source):
        return data
    if not isinstance(data, (str, os.PathLike)):
        raise TypeError(
            f"data must be a path or a source (JsonlSource, OtlpSource), got {type(data).__name__}"
        )
    path = Path(data)
    check_input_file(path)
    if input_format not in ("auto", "jsonl", "otlp"):
        raise InvalidSampleError(f"unknown input format {input_format!r}", field="format")
    if input_format == "otlp" or (input_format == "auto" and is_otlp(path)):
        return OtlpSource(path, group_by=group_by, strict=strict_traces, lenient_json=lenient_json)
    if group_by not in ("trace", "session"):
        raise ConfigError(f"group_by must be 'trace' or 'session', got {group_by!r}")
    if group_by == "session":
        raise ConfigError(
            f"group_by='session' groups the traces of an OTLP/JSON file; {path} holds samples "
            "(one conversation a line already)"
        )
    return JsonlSource(path, lenient_json=lenient_json)

"""One JSONL line to one sample: the per-line reader of streamed runs and of the batch core.

:func:`parse_line` reads a line given as raw bytes (validated straight from them: pydantic's
Rust parser, no decode unless something is wrong) or as text, and raises
:class:`~turneval.errors.InvalidSampleError` naming the 1-based line and, where it can, the
field or the duplicate key. A plain ``str`` or ``bytes`` line must be strict JSON (see
:func:`~turneval.jsonl.strict_json_problem`); a :class:`LenientLine` or :class:`LenientBytes`
need not be (``lenient_json=True``, or JSON turneval wrote itself). A line whose bytes are not
UTF-8 travels as an :class:`UnreadableLine`, which carries its decode error; a line
``{UNDECODABLE_ROW: why}`` stands for a row that could not be decoded upstream (a Parquet cell
that is not UTF-8, say). Both become an error naming the line.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from turneval.dataset import sample_from_dict
from turneval.errors import InvalidSampleError
from turneval.jsonl import LENIENT_HINT, jiter_from_json, orjson_loads, strict_json_problem
from turneval.samples import MultiTurnSample, Sample, SingleTurnSample

__all__ = [
    "LenientBytes",
    "LenientLine",
    "UNDECODABLE_ROW",
    "UnreadableLine",
    "decode_line",
    "parse_line",
    "unreadable_line",
]

UNDECODABLE_ROW = "__turneval_undecodable_row__"
"""A JSONL line ``{UNDECODABLE_ROW: why}`` stands for a row that could not be decoded (a
Parquet cell that is not UTF-8, say): it becomes an error row saying ``why``."""

_MULTI_TURN = re.compile(r'"user_input"\s*:\s*\[')
_MULTI_TURN_BYTES = re.compile(rb'"user_input"\s*:\s*\[')


class UnreadableLine(str):
    """A line whose bytes are not UTF-8: kept as text for the row, with the decode error.

    Made by :func:`unreadable_line`; ``error`` names the line (and the file, when the reader
    knows it) and the first bad byte.
    """

    __slots__ = ("error",)
    error: str

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled with its error (chunks go to worker processes and Ray actors)."""
        return (unreadable_line, (str(self), self.error))


def unreadable_line(text: str, error: str) -> UnreadableLine:
    """An :class:`UnreadableLine` holding ``text`` (the line, bad bytes escaped) and ``error``."""
    line = UnreadableLine(text)
    line.error = error
    return line


def decode_line(raw: bytes, number: int) -> str:
    """A raw line's text (a line not UTF-8: an :class:`UnreadableLine`; the reader tells most).

    A UTF-8 byte-order mark on line 1 is dropped.
    """
    if number == 1 and raw.startswith(b"\xef\xbb\xbf"):  # a UTF-8 byte-order mark
        raw = raw[3:]
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = f"byte 0x{raw[exc.start]:02x} at byte offset {exc.start}"
        return unreadable_line(
            raw.decode("utf-8", "backslashreplace"), f"line {number}: not valid UTF-8 ({where})"
        )


class LenientLine(str):
    """A line exempt from the strict-JSON check (``lenient_json``, or JSON turneval wrote)."""

    __slots__ = ()


class LenientBytes(bytes):
    """A raw line exempt from the strict-JSON check (``lenient_json=True``)."""

    __slots__ = ()


def parse_line(line: str | bytes, number: int) -> Sample:
    """The sample on input line ``number``; raises :class:`InvalidSampleError` naming the line.

    A plain ``str`` or ``bytes`` line must be strict JSON (no duplicate key, only finite
    numbers); :class:`LenientLine` and :class:`LenientBytes` lines need not be.
    """
    strict = type(line) is bytes or type(line) is str
    if isinstance(line, bytes):  # a raw line: validated straight from its bytes (Rust)
        raw = line[3:] if number == 1 and line.startswith(b"\xef\xbb\xbf") else line  # BOM
        kind = MultiTurnSample if _MULTI_TURN_BYTES.search(raw) else SingleTurnSample
        found = _strict_sample(raw, kind) if strict else _lenient_sample(raw, kind)
        if found is not None:
            return found
        line = decode_line(line, number)  # the text path below names the line, field or key
    if isinstance(line, UnreadableLine):
        raise InvalidSampleError(line.error, sample_id=number)
    try:
        return _parse_text(line, number, strict)
    except RecursionError as exc:
        raise InvalidSampleError(
            f"line {number}: JSON nested too deeply to parse", sample_id=number
        ) from exc


def _lenient_sample(raw: bytes, kind: type[Sample]) -> Sample | None:
    """The sample of a raw line, parsed and validated in one pass (Rust); None on any error."""
    try:
        return kind.model_validate_json(raw)
    except ValidationError:
        return None


def _strict_sample(raw: bytes, kind: type[Sample]) -> Sample | None:
    """The sample of a raw line that is strict JSON; None on any error or doubt.

    jiter parses once, refusing duplicate keys and ``NaN``/``Infinity``, and pydantic
    validates what it built (cheaper than parsing twice); orjson refuses numbers that overflow
    a double (``1e400``). Without jiter or orjson: :func:`strict_json_problem` after the
    one-pass parse. None sends the line to the text path, which tells why (or, should the
    two validation modes ever differ, reads it there).
    """
    if jiter_from_json is None or orjson_loads is None:  # pragma: no cover
        sample = _lenient_sample(raw, kind)
        return None if sample is None or strict_json_problem(raw) else sample
    try:
        document = jiter_from_json(
            raw, allow_inf_nan=False, catch_duplicate_keys=True, cache_mode=False
        )
        sample = kind.model_validate(document)
        orjson_loads(raw)
    except (ValueError, RecursionError):  # ValidationError, the parsers' errors, deep nesting
        return None
    return sample


def _refuse_loose_json(text: str | bytes, number: int) -> None:
    """Raise :class:`InvalidSampleError` unless ``text`` is strict JSON, naming line and key."""
    problem = strict_json_problem(text)
    if problem is not None:
        raise InvalidSampleError(
            f"line {number}: not strict JSON: {problem} ({LENIENT_HINT})", sample_id=number
        )


def _parse_text(line: str, number: int, strict: bool = True) -> Sample:
    kind = MultiTurnSample if _MULTI_TURN.search(line) else SingleTurnSample
    try:  # the fast path: pydantic parses and validates the JSON in one pass (Rust)
        sample = kind.model_validate_json(line)
    except ValidationError:
        pass  # the slow path below finds the error and names the line and field
    else:
        if strict:
            _refuse_loose_json(line, number)
        return sample
    try:
        row = json.loads(line.rstrip("\r\n"))  # the column then counts on this line alone
    except json.JSONDecodeError as exc:
        raise InvalidSampleError(
            f"line {number}: not valid JSON ({exc.msg}, column {exc.colno})", sample_id=number
        ) from exc
    if isinstance(row, dict) and len(row) == 1 and UNDECODABLE_ROW in row:
        raise InvalidSampleError(f"line {number}: {row[UNDECODABLE_ROW]}", sample_id=number)
    if strict:  # a duplicate key may be what makes the sample invalid: named first
        _refuse_loose_json(line, number)
    try:
        return sample_from_dict(row)
    except InvalidSampleError as exc:  # "sample (Kind): ..." -> "line N (Kind): ..."
        detail = str(exc).removeprefix("sample")
        raise InvalidSampleError(
            f"line {number}{detail}", sample_id=number, field=exc.field
        ) from exc

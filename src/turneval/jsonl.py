"""JSON Lines read strictly: compressed files refused, UTF-8 and strict JSON checked per line.

Every reader of a JSONL file (datasets, the streamed runner, traces, scenarios) goes through
these checks, so a bad line gets the same error wherever it is read: the file, the line and
the problem.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from os import PathLike
from pathlib import Path
from typing import Any

from turneval.errors import ConfigError, InvalidSampleError

__all__ = [
    "LENIENT_HINT",
    "first_undecodable",
    "json_line",
    "jsonl_rows",
    "refuse_compressed",
    "strict_json_problem",
    "utf8_problem",
]

jiter_from_json: Any
"""jiter's ``from_json`` (None without jiter): the fast strict parse."""
orjson_loads: Any
"""orjson's ``loads`` (None without orjson)."""
try:  # a dependency of openai's client, so present wherever langchain-openai is
    from jiter import from_json as jiter_from_json
except ImportError:  # pragma: no cover - exercised only without jiter
    jiter_from_json = None
try:  # the "fast" extra (also a langsmith dependency, so nearly always present)
    from orjson import loads as orjson_loads
except ImportError:  # pragma: no cover - exercised only without orjson
    orjson_loads = None


_COMPRESSED = ((b"\x1f\x8b", "gzip", "gunzip"), (b"\x28\xb5\x2f\xfd", "zstd", "unzstd"))
"""Magic bytes of the compressions a collector's file exporter (or a log rotation) writes."""


def refuse_compressed(path: str | PathLike[str], start: bytes | None = None) -> None:
    """Raise :class:`ConfigError` if ``path`` (whose first bytes are ``start``) is compressed.

    A gzip or zstd file read as text would give one unreadable row per "line"; the error
    names the compression and the command that undoes it.
    """
    if start is None:
        with Path(path).open("rb") as raw:
            start = raw.read(4)
    for magic, kind, tool in _COMPRESSED:
        if start.startswith(magic):
            raise ConfigError(f"{path}: a {kind}-compressed file; decompress it first ({tool})")


def utf8_problem(raw: bytes) -> str | None:
    """None if ``raw`` is UTF-8, else where it is not: ``"byte 0xff at byte offset 12"``."""
    if raw.isascii():  # the common case, checked at memory speed
        return None
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"byte 0x{raw[exc.start]:02x} at byte offset {exc.start}"
    return None


class _NotStrict(ValueError):
    """Raised inside :func:`strict_json_problem`'s parse: the first reason, naming the key."""


class _NonFinite(str):
    """A number literal that is not finite (``NaN``, ``-Infinity``, ``1e400``), as written."""

    __slots__ = ()


def _finite_float(text: str) -> float | _NonFinite:
    value = float(text)
    return _NonFinite(text) if value in (float("inf"), float("-inf")) else value


def _non_finite_in(value: Any) -> str | None:
    """The first non-finite literal in ``value`` or in its lists (objects check their own)."""
    if isinstance(value, _NonFinite):
        return str(value)
    if isinstance(value, list):
        for item in value:
            found = _non_finite_in(item)
            if found is not None:
                return found
    return None


def _strict_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for key, value in pairs:
        if key in seen:
            raise _NotStrict(f"duplicate key {key!r}")
        seen.add(key)
        found = _non_finite_in(value)
        if found is not None:
            raise _NotStrict(f"key {key!r} holds {found}, not a finite number")
    return dict(pairs)


def strict_json_problem(text: str | bytes) -> str | None:
    """Why ``text`` is not strict JSON, naming the key; None if it is (or is not JSON at all).

    Strict JSON has no duplicate key in an object (the stdlib and most parsers keep the last
    silently) and only finite numbers (no ``NaN``, ``Infinity``, ``-Infinity``, nor a number
    too large for a double such as ``1e400``). The check costs two parses in Rust (jiter
    finds duplicates and the named constants, orjson numbers that overflow); only a line they
    refuse is parsed again, by the stdlib, to name the key.
    """
    if jiter_from_json is not None and orjson_loads is not None:
        try:
            data = text.encode("utf-8") if isinstance(text, str) else text
            jiter_from_json(data, allow_inf_nan=False, catch_duplicate_keys=True, cache_mode=False)
            orjson_loads(data)
            return None
        except ValueError:  # UnicodeEncodeError (a lone surrogate) included
            pass  # not strict, or not JSON at all (or a huge integer): the stdlib tells which
    try:
        document = json.loads(
            text,
            object_pairs_hook=_strict_pairs,
            parse_constant=_NonFinite,
            parse_float=_finite_float,
        )
    except _NotStrict as exc:
        return str(exc)
    except (ValueError, RecursionError):
        return None  # not JSON: the caller's own parse names that
    found = _non_finite_in(document)
    return None if found is None else f"{found} is not a finite number"


LENIENT_HINT = "--lenient-json or lenient_json=True reads it as before"
"""How to accept a line that is not strict JSON: named in its error."""


def jsonl_rows(path: str | PathLike[str], lenient: bool = False) -> Iterator[tuple[int, Any]]:
    """``(line number, parsed JSON)`` per non-blank line; a bad line raises naming its number.

    A UTF-8 byte-order mark on line 1 is skipped, as the command line does. Lines must be
    strict JSON (:func:`strict_json_problem`) unless ``lenient``.
    """
    with Path(path).open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1:
                refuse_compressed(path, raw[:4])
                raw = raw.removeprefix(b"\xef\xbb\xbf")
            if not raw.strip():
                continue
            yield number, json_line(path, number, raw, lenient)


def json_line(path: str | PathLike[str], number: int, raw: bytes, lenient: bool = False) -> Any:
    """One JSONL line parsed; errors name the file, the line and the problem."""

    def bad(problem: str) -> InvalidSampleError:
        return InvalidSampleError(f"{path}: line {number} {problem}", sample_id=f"line {number}")

    where = utf8_problem(raw)
    if where is not None:
        raise bad(f"is not valid UTF-8 ({where})")
    text = raw.decode("utf-8").rstrip("\r\n")  # columns then count on this line alone
    try:
        row = json.loads(text)
    except json.JSONDecodeError as exc:
        raise bad(f"is not valid JSON ({exc.msg}, column {exc.colno})") from exc
    except RecursionError as exc:
        raise bad("holds JSON nested too deeply to parse") from exc
    problem = None if lenient else strict_json_problem(raw)
    if problem is not None:
        raise bad(f"is not strict JSON: {problem} ({LENIENT_HINT})")
    return row


def first_undecodable(path: str | PathLike[str]) -> InvalidSampleError:
    """The error naming the first line of ``path`` that is not UTF-8."""
    with Path(path).open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            where = utf8_problem(raw)
            if where is not None:
                return InvalidSampleError(
                    f"{path}: line {number} is not valid UTF-8 ({where})",
                    sample_id=f"line {number}",
                )
    return InvalidSampleError(f"{path}: not valid UTF-8", field="path")  # pragma: no cover

"""Text as arrays of code points, for the offline index: encode, decode, lower, classify.

A text is held as a numpy array of its code points in the narrowest dtype (uint8 for ASCII,
uint16 without astral characters, else uint32). ASCII is classified by arithmetic over the
whole array; other characters (few in most texts) by the ``str`` method, once per distinct
character.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Text", "char_class", "code_points", "decoded", "joined", "padded", "unique_values"]


def decoded(codes: np.ndarray) -> str:
    """The string whose code points are ``codes`` (the inverse of :func:`code_points`)."""
    encoding = {1: "latin-1", 2: "utf-16-le", 4: "utf-32-le"}[codes.itemsize]
    return codes.tobytes().decode(encoding)


def code_points(text: str) -> np.ndarray:
    """The text's code points, one array element per character, in the narrowest dtype."""
    if text.isascii():
        return np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    wide = text.encode("utf-16-le")
    if len(wide) == 2 * len(text):  # no surrogate pairs: one unit per character
        return np.frombuffer(wide, dtype=np.uint16)
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)


def _inverse(values: np.ndarray) -> tuple[list[int], np.ndarray]:
    """The distinct code points of ``values`` (sorted) and the index of each value among them."""
    if values.size > 4096:  # many: a table over the code points, no sort
        distinct = np.flatnonzero(np.bincount(values))
        table = np.zeros(int(distinct[-1]) + 1, dtype=np.intp)
        table[distinct] = np.arange(distinct.size)
        return distinct.tolist(), table[values]
    found, inverse = np.unique(values, return_inverse=True)
    return found.tolist(), inverse


def _per_distinct(
    values: np.ndarray, compute: Callable[[list[int]], Sequence[Any]], dtype: Any
) -> np.ndarray:
    """``compute`` of each of ``values`` (code points), called once per distinct value.

    ``compute`` takes the distinct code points (a sorted list) and returns their results.
    """
    distinct, inverse = _inverse(values)
    mapped: np.ndarray = np.asarray(compute(distinct), dtype=dtype)[inverse]
    return mapped


def char_class(codes: np.ndarray, kind: str) -> np.ndarray:
    """``getattr(c, kind)()`` for each character ``c`` whose code point is in ``codes``.

    ASCII by arithmetic over the whole array; other characters (few in most texts) by the
    ``str`` method, once per distinct character.
    """
    if kind == "isalnum":
        result = (codes - 97) < 26  # wraps below 'a'
        result |= (codes - 65) < 26
        result |= (codes - 48) < 10
    else:
        result = (codes - 97) < 26
    if codes.dtype != np.uint8:
        other = np.flatnonzero(codes > 127)
        if other.size:
            test = getattr(str, kind)
            result[other] = _per_distinct(
                codes[other], lambda points: [test(chr(p)) for p in points], bool
            )
    return result


_BOUNDARY = bytes(0 if chr(byte).isalnum() else 1 for byte in range(256))
"""For ``bytes.translate``: 1 for an ASCII byte that is not alphanumeric (and NUL), else 0."""


@dataclass(slots=True)
class Text:
    """A text's code points in three arrays of the same layout: one pad before, two after.

    ``source`` holds the text's code points, ``lowered`` those of the text lowered (same
    length; pads 0), ``boundary`` whether each lowered character is not alphanumeric (pads:
    True). Index ``i + 1`` is the text's character ``i``. ``special``: see :func:`joined`.
    """

    source: np.ndarray
    lowered: np.ndarray
    boundary: np.ndarray
    special: np.ndarray  # offsets (in the text) of characters lowered by context or into several


def _encoded(texts: Sequence[str]) -> tuple[list[tuple[bytes, Any]], Any]:
    """Each text encoded in the narrowest fixed-width form, and the widest dtype needed."""
    encoded: list[tuple[bytes, Any]] = []
    widest: Any = np.uint8
    for text in texts:
        if text.isascii():
            encoded.append((text.encode("ascii"), np.uint8))
            continue
        wide = text.encode("utf-16-le")
        if len(wide) == 2 * len(text):  # no surrogate pairs: one unit per character
            encoded.append((wide, np.uint16))
            widest = np.uint32 if widest is np.uint32 else np.uint16
        else:
            encoded.append((text.encode("utf-32-le"), np.uint32))
            widest = np.uint32
    return encoded, widest


def joined(texts: Sequence[str]) -> Text:
    """The texts joined by blank lines, encoded text by text (no joined string is built).

    Every character is lowered on its own: ASCII by ``bytes.lower`` or arithmetic, the others
    by ``str.lower`` once per distinct character. That is ``str.lower`` on the whole except
    where a character lowers by context (capital sigma: final or not) or into more than one
    character ("İ"): their offsets are returned, sorted, for the caller to lower the texts
    holding them with their context.
    """
    encoded, widest = _encoded(texts)
    if widest is np.uint8:  # ASCII: lowered and classified by bytes methods, no temporaries
        parts = [data for data, _ in encoded] or [b""]
        parts[0] = b"\0" + parts[0]
        parts[-1] += b"\0\0"
        data = b"\n\n".join(parts)
        return Text(
            np.frombuffer(data, dtype=np.uint8),
            np.frombuffer(data.lower(), dtype=np.uint8),
            np.frombuffer(data.translate(_BOUNDARY), dtype=bool),
            np.zeros(0, dtype=np.int64),
        )
    size = sum(len(text) for text in texts) + 2 * max(len(texts) - 1, 0)
    source = np.empty(size + 3, dtype=widest)
    source[0] = source[-2] = source[-1] = 0
    offset = 1
    for data, kind in encoded:
        if offset > 1:
            source[offset - 2 : offset] = ord("\n")
        values = np.frombuffer(data, dtype=kind)
        source[offset : offset + values.size] = values
        offset += values.size + 2
    scratch = np.subtract(source, 65)
    flags = np.less(scratch, 26)  # upper case ASCII (wraps below 'A')
    lowered = np.multiply(flags, widest(32), dtype=widest)
    lowered += source
    boundary = np.subtract(lowered, 97, out=scratch) < 26
    boundary |= np.less(np.subtract(lowered, 48, out=scratch), 10, out=flags)
    np.logical_not(boundary, out=boundary)
    other = np.flatnonzero(np.greater(source, 127, out=flags))
    special = np.zeros(0, dtype=np.int64)
    if other.size:
        values = source[other]
        distinct, inverse = _inverse(values)
        lowers = [chr(point).lower() for point in distinct]
        lowered[other] = np.array(
            [
                ord(low) if len(low) == 1 else point
                for point, low in zip(distinct, lowers, strict=True)
            ],
            dtype=widest,
        )[inverse]
        boundary[other] = np.array([not low.isalnum() for low in lowers], dtype=bool)[inverse]
        by_context = [len(low) != 1 or p == 0x3A3 for p, low in zip(distinct, lowers, strict=True)]
        if any(by_context):
            special = other[np.array(by_context, dtype=bool)[inverse]] - 1
    return Text(source, lowered, boundary, special)


def padded(codes: np.ndarray) -> Text:
    """A :class:`Text` for lowered code points (its source is the same)."""
    lowered = np.zeros(codes.size + 3, dtype=codes.dtype)
    lowered[1:-2] = codes
    boundary = np.ones(codes.size + 3, dtype=bool)
    boundary[1:-2] = ~char_class(codes, "isalnum")
    return Text(lowered, lowered, boundary, np.zeros(0, dtype=np.int64))


def unique_values(values: np.ndarray, *, is_sorted: bool = False) -> np.ndarray:
    """``numpy.unique(values)`` by sort and compare (faster here than its hash path)."""
    ordered = values if is_sorted else np.sort(values)
    if ordered.size < 2:
        return ordered
    keep = np.empty(ordered.size, dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]

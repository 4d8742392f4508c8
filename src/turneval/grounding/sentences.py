"""Sentences: where one ends, in the answer (its claims) and in the facts (their passages) alike.

The one rule: a sentence ends after a run of ".", "!" or "?", then any closing quotes or
brackets (``"')]``), then white space or the end of the text; and at every newline. A run that
starts with a period ends nothing after a known abbreviation ("Dr.", "e.g.", "R.M.S.") or a
single letter (an initial: "J. Smith"); a period inside a number ("3.5") has no white space
after it, so it ends nothing either.

:func:`sentence_starts` applies it to a text's code points (vectorised: the marks are found in
one pass, and only their neighbours are looked at); the offline index takes its passages from
it and :func:`split_claims` its claims.
"""

from __future__ import annotations

import numpy as np

from turneval.grounding.codepoints import char_class, code_points, unique_values

__all__ = ["sentence_starts", "split_claims"]

_ABBREVIATIONS = {
    "mr",
    "mrs",
    "ms",
    "dr",
    "prof",
    "sr",
    "jr",
    "st",
    "vs",
    "etc",
    "e.g",
    "i.e",
    "inc",
    "ltd",
    "co",
    "corp",
    "no",
    "fig",
    "approx",
    "dept",
    "est",
    "u.s",
    "u.k",
    "r.m.s",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
}
_LONGEST = max(map(len, _ABBREVIATIONS))


def _key(word: str) -> int:
    """A word of up to 8 ASCII characters as one integer: its last character in the low byte."""
    return sum(ord(char) << 8 * step for step, char in enumerate(reversed(word)))


_ABBREVIATION_KEYS = np.array(sorted(map(_key, _ABBREVIATIONS)), dtype=np.uint64)
_MARKS = ".!?"
_CLOSERS = "\"')]"


def _member(values: np.ndarray, chars: str) -> np.ndarray:
    found = np.zeros(values.size, dtype=bool)
    for char in chars:
        found |= values == ord(char)
    return found


def _after_closers(codes: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Each position moved past the closing quotes and brackets there (a copy)."""
    positions = positions.copy()
    active = np.flatnonzero(positions < codes.size)
    while active.size:
        active = active[_member(codes[positions[active]], _CLOSERS)]
        positions[active] += 1
        active = active[positions[active] < codes.size]
    return positions


def _after_abbreviation(codes: np.ndarray, periods: np.ndarray) -> np.ndarray:
    """Whether the word before each period is a known abbreviation or a single letter.

    The word is the letters, digits, underscores and periods right before it, case ignored.
    """
    length = np.zeros(periods.size, dtype=np.int64)
    key = np.zeros(periods.size, dtype=np.uint64)
    alive = np.ones(periods.size, dtype=bool)
    for step in range(1, _LONGEST + 2):
        where = periods - step
        alive &= where >= 0
        if not alive.any():
            break
        point = codes[np.maximum(where, 0)]
        wordish = char_class(point, "isalnum") | _member(point, "_.")
        alive &= wordish
        length += alive
        lowered = point.astype(np.uint64)
        lowered |= ((point - 65) < 26).astype(np.uint64) << np.uint64(5)  # ASCII capitals
        lowered[point > 127] = 0xFF  # in no abbreviation
        key |= np.where(alive, lowered << np.uint64(8 * (step - 1)), np.uint64(0))
    known = (length <= _LONGEST) & np.isin(key, _ABBREVIATION_KEYS)
    initial = (length == 1) & char_class(codes[np.maximum(periods - 1, 0)], "isalpha")
    found: np.ndarray = known | initial
    return found


def sentence_starts(
    codes: np.ndarray, marks: np.ndarray | None = None, newlines: np.ndarray | None = None
) -> np.ndarray:
    """Offsets where sentences start, in the text whose code points are ``codes``.

    Offset 0, the white space ending each sentence (see the module docs for the rule) and the
    offset after each newline, sorted. ``marks`` (the offsets of ".", "!" and "?", but one at
    the last offset) and ``newlines`` (those of newlines) may be given when the caller has them.
    """
    size = codes.size
    if marks is None:
        is_mark = _member(codes[:-1], _MARKS)
        marks = np.flatnonzero(is_mark)
    if newlines is None:
        newlines = np.flatnonzero(codes == ord("\n"))
    marks = marks.astype(np.int64)
    if marks.size:
        # runs of marks: each run's first and last mark
        gap = np.flatnonzero(np.diff(marks) != 1)
        firsts = marks[np.concatenate(([0], gap + 1))]
        lasts = marks[np.concatenate((gap, [marks.size - 1]))]
        ends = _after_closers(codes, lasts + 1)
        inside = ends < size
        firsts, ends = firsts[inside], ends[inside]
        spaced = char_class(codes[ends], "isspace")
        firsts, ends = firsts[spaced], ends[spaced]
        periods = codes[firsts] == ord(".")
        kept = np.ones(ends.size, dtype=bool)
        kept[periods] = ~_after_abbreviation(codes, firsts[periods])
        ends = ends[kept]
    else:
        ends = marks
    return unique_values(np.concatenate(([0], ends, newlines + 1)).astype(np.int64))


def split_claims(text: str) -> list[tuple[str, int, int]]:
    """Split ``text`` into sentences with character offsets ``(sentence, start, end)``.

    One sentence is one claim (see the module docs for where a sentence ends); white space
    around a sentence is left out, and a sentence of white space only is no claim.
    """
    starts = sentence_starts(code_points(text)).tolist()
    sentences = []
    for start, stop in zip(starts, [*starts[1:], len(text)], strict=True):
        chunk = text[start:stop]
        piece = chunk.strip()
        if piece:
            offset = start + chunk.index(piece)
            sentences.append((piece, offset, offset + len(piece)))
    return sentences

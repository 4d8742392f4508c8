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

from turneval.grounding._codepoints import code_points, unique_values

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
_SHIFTS = np.arange(0, 8 * (_LONGEST + 1), 8).astype(np.uint64)


def _key(word: str) -> int:
    """A word of up to 8 ASCII characters as one integer: its last character in the low byte."""
    return sum(ord(char) << 8 * step for step, char in enumerate(reversed(word)))


_ABBREVIATION_KEYS = np.array(sorted(map(_key, _ABBREVIATIONS)), dtype=np.uint64)
_ENDINGS = np.zeros(0x10000, dtype=bool)  # the last two characters of an abbreviation
_ENDINGS[[_key(word[-2:]) for word in _ABBREVIATIONS if len(word) > 1]] = True

_MARK, _CLOSER, _SPACE, _WORD, _LETTER = 1, 2, 4, 8, 16


def _flags_of(char: str) -> int:
    """What the rule asks of a character, as bits: a mark, a closer, white space, a word's."""
    return (
        _MARK * (char in ".!?")
        | _CLOSER * (char in "\"')]")
        | _SPACE * char.isspace()
        | _WORD * (char.isalnum() or char in "_.")  # re's [\w.]
        | _LETTER * char.isalpha()
    )


_FLAGS = np.array([_flags_of(chr(point)) for point in range(256)], dtype=np.uint8)
_LOWER16 = np.array(
    [ord(chr(point).lower()) if point < 128 else 0xFF for point in range(256)], dtype=np.uint16
)  # ASCII lowered; 0xFF (in no abbreviation) for the others
_LOWER = _LOWER16.astype(np.uint64)


def _bytes(points: np.ndarray) -> np.ndarray:
    """The code points, those past U+00FF as U+00FF (for the 256-entry tables)."""
    return points if points.dtype == np.uint8 else np.minimum(points, 255)


def _flags(points: np.ndarray) -> np.ndarray:
    """:func:`_flags_of` of each code point (past U+00FF by the ``str`` methods)."""
    if points.dtype == np.uint8:
        found: np.ndarray = _FLAGS[points]
        return found
    found = _FLAGS[np.minimum(points, 255)]
    wide = np.flatnonzero(points > 255)
    if wide.size:  # only the neighbours of marks are classified: few
        found[wide] = [_flags_of(chr(point)) for point in points[wide].tolist()]
    return found


def _after_closers(codes: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Each position (of a closing quote or bracket) moved past the closers there (a copy)."""
    positions = positions.copy()
    active = np.arange(positions.size)
    while active.size:
        positions[active] += 1
        active = active[positions[active] < codes.size]
        active = active[(_flags(codes[positions[active]]) & _CLOSER) != 0]
    return positions


def _after_abbreviation(codes: np.ndarray, periods: np.ndarray) -> np.ndarray:
    """Whether the word before each period is a known abbreviation or a single letter.

    ``periods`` are sorted. The word is the letters, digits, underscores and periods right
    before the period, ASCII case ignored. Most periods are ruled out by the word's last two
    characters (one table look-up); the others' words are read back character by character.
    """
    last, before = codes[periods - 1], codes[periods - 2]  # below offset 2: fixed just below
    last_flags, before_flags = _flags(last), _flags(before)
    if periods[0] < 2:
        before_flags[:2][periods[:2] < 2] = 0
        last_flags[:1][periods[:1] < 1] = 0
    word = (last_flags & _WORD) != 0
    before_word = (before_flags & _WORD) != 0
    found: np.ndarray = word & ~before_word & ((last_flags & _LETTER) != 0)  # an initial
    maybe = np.flatnonzero(word & before_word)
    pair = _LOWER16[_bytes(before[maybe])] << 8 | _LOWER16[_bytes(last[maybe])]
    maybe = maybe[_ENDINGS[pair]]
    key = np.zeros(maybe.size, dtype=np.uint64)
    length = np.zeros(maybe.size, dtype=np.int64)
    active = np.arange(maybe.size)
    for step in range(1, _LONGEST + 2):  # read the rest of their words back
        where = periods[maybe[active]] - step
        active, where = active[where >= 0], where[where >= 0]
        points = codes[where]
        word = (_flags(points) & _WORD) != 0
        active, points = active[word], points[word]
        if not active.size:
            break
        length[active] = step
        key[active] |= _LOWER[_bytes(points)] << _SHIFTS[step - 1]
    at = np.minimum(np.searchsorted(_ABBREVIATION_KEYS, key), _ABBREVIATION_KEYS.size - 1)
    found[maybe] |= (_ABBREVIATION_KEYS[at] == key) & (length <= _LONGEST)
    return found


_FEW = 16
"""Up to this many marks, they are read one by one (numpy's per-call cost would dominate)."""
_FLAG_LIST = _FLAGS.tolist()


def _flag(point: int) -> int:
    return _FLAG_LIST[point] if point < 256 else _flags_of(chr(point))


def _few_ends(codes: np.ndarray, marks: list[int]) -> list[int]:
    """The sentence ends after ``marks`` (a few), one run of marks at a time, in Python.

    The same rule as the vectorised path of :func:`sentence_starts` (the tests hold both to
    one reference).
    """
    size, ends = codes.size, []
    for number, mark in enumerate(marks):
        if number and marks[number - 1] == mark - 1:
            continue  # inside a run: its first mark decides
        end = mark + 1
        while end < size and _flag(int(codes[end])) & _MARK:
            end += 1
        while end < size and _flag(int(codes[end])) & _CLOSER:
            end += 1
        if end >= size or not _flag(int(codes[end])) & _SPACE:
            continue
        if codes[mark] == ord("."):
            word = codes[max(mark - _LONGEST - 1, 0) : mark].tolist()
            first = len(word)
            while first and _flag(word[first - 1]) & _WORD:
                first -= 1
            token = word[first:]
            if len(token) == 1 and _flag(token[0]) & _LETTER:
                continue  # an initial
            if max(token, default=0) < 128 and bytes(token).lower().decode() in _ABBREVIATIONS:
                continue
        ends.append(end)
    return ends


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
        marks = np.flatnonzero(_flags(codes[:-1]) & _MARK)
    if newlines is None:
        newlines = np.flatnonzero(codes == ord("\n"))
    if marks.size <= _FEW:
        ends = np.array(_few_ends(codes, marks.tolist()), dtype=np.int64)
    elif marks.size:
        # runs of marks: each run's first and last mark (the last is below the last offset)
        gap = np.flatnonzero(np.diff(marks) != 1)
        firsts = marks[np.concatenate(([0], gap + 1))]
        ends = marks[np.concatenate((gap, [marks.size - 1]))] + 1
        flags = _flags(codes[ends])
        closed = np.flatnonzero(flags & _CLOSER)
        if closed.size:  # past the closers: white space, the end (no sentence after) or other
            ends[closed] = _after_closers(codes, ends[closed])
            inside = ends[closed] < size
            flags[closed[~inside]] = 0
            flags[closed[inside]] = _flags(codes[ends[closed[inside]]])
        spaced = np.flatnonzero(flags & _SPACE)
        firsts, ends = firsts[spaced], ends[spaced]
        periods = np.flatnonzero(codes[firsts] == ord("."))
        if periods.size:
            kept = np.ones(ends.size, dtype=bool)
            kept[periods] = ~_after_abbreviation(codes, firsts[periods])
            ends = ends[kept]
    # three sorted runs: a stable sort (a merge) orders them in about linear time
    starts = np.sort(np.concatenate(([0], ends, newlines + 1)).astype(np.int64), kind="stable")
    return unique_values(starts, is_sorted=True)


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

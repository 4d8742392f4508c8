"""The offline index: the facts' passages (their sentences) and where a claim's tokens occur."""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence

import numpy as np

from turneval.grounding._codepoints import (
    char_class,
    code_points,
    decoded,
    joined,
    padded,
    unique_values,
)
from turneval.grounding._records import Fact
from turneval.grounding._sentences import sentence_starts
from turneval.grounding._tokens import Token
from turneval.grounding._values import Value, values

__all__ = ["Index"]


class Index:
    """The facts joined and lowered; passages are their sentences.

    A token's occurrences are found with numpy over the text's code points: the word starts
    (after a character that is not alphanumeric) are computed once with their first two
    characters; those of a token's first two are found in one scan (one for all the answer's
    tokens: :meth:`prepare`), then narrowed character by character; they are mapped to
    passages with ``numpy.searchsorted``. Cost follows the claim's tokens and their
    occurrences, never a tokenisation of every passage.
    """

    def __init__(self, facts: Sequence[Fact]) -> None:
        """Index ``facts`` (their passages, lowered code points and word starts)."""
        self.fact_starts: list[int] = []
        offset = 0
        for fact in facts:
            self.fact_starts.append(offset)
            offset += len(fact.text) + 2
        self.fact_offsets = np.array(self.fact_starts, dtype=np.int64)
        self._texts = [fact.text for fact in facts]
        self._original: str | None = None
        self._text: str | None = None
        # The facts' code points, lowered per character without building a string (equal to
        # lower() on the joined text: the tests compare them).
        text = joined(self._texts)
        size = text.source.size - 3
        # Characters lowered by context or into several: lower() on the fact holding them (the
        # separators are not cased, so it sees the context it sees in the whole).
        # Every other character of such a fact lowers as it does alone: only those change.
        facts_hit = np.searchsorted(self.fact_offsets, text.special, "right") - 1
        numbers = unique_values(facts_hit, is_sorted=True).tolist()
        bounds = np.searchsorted(facts_hit, numbers + [len(facts)]).tolist()
        patched = []
        for number, low, high in zip(numbers, bounds, bounds[1:], strict=False):
            fact = self._texts[number]
            lowered = fact.lower()
            if len(lowered) != len(fact):  # offsets move: lower() on every fact
                self._text = "\n\n".join(fact.lower() for fact in self._texts)
                text = padded(code_points(self._text))
                break
            patched.append(code_points(lowered)[text.special[low:high] - self.fact_starts[number]])
        else:
            if patched:
                codes = np.concatenate(patched)
                text.lowered[text.special + 1] = codes
                text.boundary[text.special + 1] = ~char_class(codes, "isalnum")
        # lower() keeps offsets for nearly every text; where it does not, case checks are off.
        self.case_aligned = text.lowered.size - 3 == size
        self._lowered, self._boundary = text.lowered, text.boundary
        self.source = text.source[1:-2]
        self.codes = text.lowered[1:-2]
        size = self.codes.size
        # Word starts: offset 0 and every offset after a character that is not alphanumeric
        # (the boundary array is one ahead: its entry i is the character before offset i).
        self._word_starts = np.flatnonzero(self._boundary[:size])
        # The character before each word start (but the first) is not alphanumeric: the marks
        # and newlines are among those.
        later = self._word_starts[1:]
        before = self._lowered[later]
        is_mark = before == ord(".")
        is_mark |= before == ord("!")
        is_mark |= before == ord("?")
        newlines = later[before == ord("\n")] - 1
        if self.codes[-1:].tolist() == [ord("\n")]:
            newlines = np.append(newlines, size - 1)
        self.starts = sentence_starts(self.codes, later[is_mark] - 1, newlines)
        # Each word start's first two characters (their low bytes; 0 past the end), for the
        # word starts of a two-letter prefix in one scan. Where the text has characters past
        # 0xFF, low bytes can coincide: the first two characters are then compared in full.
        first = self._lowered[1:][self._word_starts]
        second = self._lowered[2:][self._word_starts]
        self._folded = self.codes.dtype != np.uint8 and bool(self.codes.max(initial=0) > 0xFF)
        if self.codes.dtype != np.uint8:
            first, second = first & 0xFF, second & 0xFF
        self._pairs = np.left_shift(second, 8, dtype=np.uint16)
        self._pairs |= first
        self._limit = 0xFF if self.codes.dtype == np.uint8 else 0xFFFFFFFF  # searchable points
        self._groups: dict[int, np.ndarray] = {}
        self._found: dict[tuple[str, bool], tuple[np.ndarray, np.ndarray]] = {}
        self._cache: dict[tuple[str, bool, bool], np.ndarray] = {}
        self._values: dict[int, list[Value]] = {}

    @property
    def text(self) -> str:
        """The facts joined and lowered (what ``codes`` holds), built on demand."""
        if self._text is None:
            self._text = decoded(self.codes)
        return self._text

    @property
    def original(self) -> str:
        """The facts joined, built on demand."""
        if self._original is None:
            self._original = "\n\n".join(self._texts)
        return self._original

    def passage_values(self, passage: int) -> list[Value]:
        """The values a passage states (numbers, dates, names; parsed once per check)."""
        found = self._values.get(passage)
        if found is None:
            found = self._values[passage] = values(self.passage_text(passage))
        return found

    def fact_of(self, passage: int) -> int:
        """The number of the fact holding ``passage``."""
        return bisect.bisect_right(self.fact_starts, int(self.starts[passage])) - 1

    def passage_text(self, passage: int) -> str:
        """The passage as the facts write it (not lowered)."""
        start = int(self.starts[passage])
        stop = int(self.starts[passage + 1]) if passage + 1 < len(self.starts) else self.codes.size
        if self.case_aligned:  # offsets are the original's: decode its code points
            return decoded(self.source[start:stop])
        return self.original[start:stop]

    @staticmethod
    def _keys(token: Token) -> list[str]:
        keys = [token.key]
        if token.key.isdigit() and len(token.key) > 3:
            keys.append(f"{int(token.key):,}")  # 1500 also as 1,500
        if token.key.isdigit():
            keys += [f"{token.key}.0", f"{token.key}.00"]  # 19 also as 19.0 (a float's text)
        elif re.fullmatch(r"\d+\.\d", token.key):
            keys.append(f"{token.key}0")  # 1234.5 also as 1234.50 (amounts of money)
        return keys

    def _prefix(self, points: list[int]) -> tuple[int, int]:
        """The first two characters' low bytes as a pair value, and the mask to compare with."""
        if len(points) == 1:
            return points[0] & 0xFF, 0xFF
        return (points[0] & 0xFF) | (points[1] & 0xFF) << 8, 0xFFFF

    def _starting_with(self, points: list[int]) -> np.ndarray:
        """Sorted offsets of the word starts whose first two characters' low bytes match."""
        want, mask = self._prefix(points)
        group = self._groups.get(want | mask << 16)
        if group is None:
            pairs = self._pairs if mask == 0xFFFF else self._pairs & mask
            group = self._word_starts[np.flatnonzero(pairs == want)]
            self._groups[want | mask << 16] = group
        return group

    def prepare(self, tokens: Sequence[Token]) -> None:
        """Find the word starts of all the tokens' two-letter prefixes in one scan."""
        wanted = set()
        for token in tokens:
            for key in self._keys(token):
                points = [ord(char) for char in key]
                if len(points) > 1 and max(points) <= self._limit:
                    want, mask = self._prefix(points)
                    if want | mask << 16 not in self._groups:
                        wanted.add(want)
        if len(wanted) < 2:  # one scan either way
            return
        values = np.array(sorted(wanted), dtype=np.uint16)
        table = np.zeros(0x10000, dtype=bool)
        table[values] = True
        hits = np.flatnonzero(table[self._pairs])
        found = self._pairs[hits]
        order = np.argsort(found, kind="stable")  # each prefix's word starts stay ascending
        found, positions = found[order], self._word_starts[hits[order]]
        lows = np.searchsorted(found, values, side="left").tolist()
        highs = np.searchsorted(found, values, side="right").tolist()
        for want, low, high in zip(values.tolist(), lows, highs, strict=True):
            self._groups[want | 0xFFFF << 16] = positions[low:high]

    def _occurrences(self, key: str) -> np.ndarray:
        """Sorted offsets where ``key`` occurs at a word start."""
        codes, size = self.codes, self.codes.size
        points = [ord(char) for char in key]
        if not points or max(points) > self._limit:
            return np.zeros(0, dtype=np.int64)
        found = self._starting_with(points)
        found = found[found <= size - len(points)]
        for step, point in enumerate(points):
            if not found.size:
                break
            if step >= 2 or self._folded:
                found = found[codes[found + step] == point]
        return found

    def _joins_digits(self, positions: np.ndarray) -> np.ndarray:
        """Whether the text has a digit, then "." or ",", then a digit at each position."""
        lowered = self._lowered[1:]  # padded: before the start and past the end read 0
        found = np.zeros(positions.size, dtype=bool)
        for step, allowed in enumerate(("0123456789", ".,", "0123456789")):
            codes = lowered[positions + step]
            hit = np.zeros(positions.size, dtype=bool)
            for char in allowed:
                hit |= codes == ord(char)
            found = hit if step == 0 else found & hit
        return found

    def _written_lower(self, positions: np.ndarray) -> np.ndarray:
        """Whether the original character at each position is lower case (offsets aligned)."""
        return char_class(self.source[positions], "islower")

    def _matches(self, token: Token) -> tuple[np.ndarray, np.ndarray]:
        """Sorted offsets where the token starts a word, and the passage of each.

        Names and numbers must also end the word there (or add an "s").
        """
        cache_key = (token.key, token.critical)
        cached = self._found.get(cache_key)
        if cached is not None:
            return cached
        boundary, lowered = self._boundary[1:], self._lowered[1:]
        parts = []
        number = token.key[:1].isdigit()
        for key in self._keys(token):
            found = self._occurrences(key)
            if token.critical and found.size:
                after = found + len(key)  # padded: past the end reads as a boundary, code 0
                ends = boundary[after] | ((lowered[after] == ord("s")) & boundary[after + 1])
                found = found[ends]
            if number and found.size:  # not a part of a longer number: 12 is not in 0.12
                last = found + len(key) - 1
                found = found[~(self._joins_digits(found - 2) | self._joins_digits(last))]
            parts.append(found)
        positions = np.sort(np.concatenate(parts)) if len(parts) > 1 else parts[0]
        passages = np.searchsorted(self.starts, positions, side="right") - 1
        self._found[cache_key] = positions, passages
        return positions, passages

    def passages_with(self, token: Token, *, lowercase: bool = False) -> np.ndarray:
        """Sorted passage numbers where the token starts a word.

        Names and numbers must also end there (or add an "s"). ``lowercase=True`` counts only
        occurrences written in lower case (a common word, not part of a name: "starred" should
        not find "White Star Line").
        """
        cache_key = (token.key, token.critical, lowercase)
        cached = self._cache.get(cache_key)
        if cached is not None:
            return cached
        positions, passages = self._matches(token)
        if lowercase and self.case_aligned and positions.size:
            passages = passages[self._written_lower(positions)]
        found = unique_values(passages, is_sorted=True)  # positions are sorted, so are passages
        self._cache[cache_key] = found
        return found

    def masks(self, tokens: Sequence[Token], *, lowercase: bool = False) -> dict[int, int]:
        """``{passage: bitmask of the tokens it contains}``."""
        where: dict[int, int] = {}
        for bit, token in enumerate(tokens):
            for passage in self.passages_with(token, lowercase=lowercase).tolist():
                where[passage] = where.get(passage, 0) | (1 << bit)
        return where

    def mask_array(self, tokens: Sequence[Token], lowercase: bool) -> np.ndarray:
        """For each passage, the bitmask of the tokens it contains (see :meth:`masks`)."""
        masks = np.zeros(len(self.starts), dtype=np.uint64)
        for bit, token in enumerate(tokens):
            masks[self.passages_with(token, lowercase=lowercase)] |= np.uint64(1 << bit)
        return masks

    def best_overlaps(
        self, tokens: Sequence[Token], threshold: float, per_fact: int
    ) -> dict[int, list[tuple[float, int]]]:
        """``{fact: [(-share, passage), ...]}``: its ``per_fact`` passages sharing most tokens.

        The share is that of the tokens written in the passage in lower case; only passages
        with a share of at least ``threshold`` (and some token) count; best first, then by
        passage.
        """
        if len(tokens) > 63 or not hasattr(np, "bitwise_count"):
            by_fact: dict[int, list[tuple[float, int]]] = {}
            for passage, mask in self.masks(tokens, lowercase=True).items():
                share = bin(mask).count("1") / len(tokens)
                if share >= threshold:
                    by_fact.setdefault(self.fact_of(passage), []).append((-share, passage))
            return {fact: sorted(found)[:per_fact] for fact, found in by_fact.items()}
        counts = np.bitwise_count(self.mask_array(tokens, lowercase=True))
        # float64 division is Python's int / int here: both exact, one correctly rounded result
        passages = np.flatnonzero((counts / len(tokens) >= threshold) & (counts > 0))
        counts = counts[passages].astype(np.int64)
        facts = np.searchsorted(self.fact_offsets, self.starts[passages], side="right") - 1
        order = np.lexsort((passages, -counts, facts))  # by fact, most tokens, passage
        facts, counts, passages = facts[order], counts[order], passages[order]
        group_start = np.flatnonzero(np.concatenate(([True], facts[1:] != facts[:-1])))
        rank = np.arange(facts.size) - np.repeat(
            group_start, np.diff(np.append(group_start, facts.size))
        )
        keep = rank < per_fact
        best: dict[int, list[tuple[float, int]]] = {}
        for fact, count, passage in zip(
            facts[keep].tolist(), counts[keep].tolist(), passages[keep].tolist(), strict=True
        ):
            best.setdefault(fact, []).append((-(count / len(tokens)), passage))
        return best

    def first_passages(self, tokens: Sequence[Token]) -> dict[int, int]:
        """``{bitmask: the first passage whose tokens are exactly that mask}`` (mask not 0)."""
        if len(tokens) > 63:
            first: dict[int, int] = {}
            for passage, mask in self.masks(tokens).items():
                if mask not in first or passage < first[mask]:
                    first[mask] = passage
            return first
        masks = self.mask_array(tokens, lowercase=False)
        present = np.flatnonzero(masks)
        distinct, first_at = np.unique(masks[present], return_index=True)
        return dict(zip(distinct.tolist(), present[first_at].tolist(), strict=True))

"""A claim's tokens: its content words, names, numbers and dates, and the rules for words.

Stop words and filler are left out; names, numbers and dates are *critical* (they weigh double
and must be found); words are stemmed ("starred", "stars" and "star" agree); dotted acronyms
("U.S.") are read as one word.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "STOP",
    "Token",
    "claim_tokens",
    "needs_check",
    "number_key",
    "stem",
    "token_spans",
    "undotted",
]

STOP = frozenset(
    """a an the and or but if of to in on at by for with from as into onto over under about
    is are was were be been being am do does did done has have had having it its it's this that
    these those there here then than so such very just also too not no yes i you he she we they
    me him her us them my your his our their what which who whom whose when where why how all
    any each some more most other can could would should will shall may might must one ones
    again still even much many own same both few s t""".split()
)
"""Words that carry no content (left out of claims' tokens and of slots)."""


_SUFFIXES = ("ing", "ed", "es", "ly", "s")


def stem(word: str) -> str:
    """``word`` (lower case) without one common suffix: "starred", "stars" and "star" agree."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiou":
        word = word[:-1]  # starr -> star
    return word


_DOTTED = re.compile(r"(?<![\w.])[A-Z](?:\.[A-Z])+\.?(?!\w)")  # U.S., U.K.


def _undotted_one(match: re.Match[str]) -> str:
    text = match.group()
    return text.replace(".", "").ljust(len(text))


def undotted(text: str) -> str:
    """``text`` with dotted acronyms as one word, padded to keep every position.

    "U.S." is read as "US": the initials of "United States", not two one-letter names.
    """
    return _DOTTED.sub(_undotted_one, text) if "." in text else text


_FILLER = set(
    """here found let check sure okay ok ill i'll help helps hope following information answer
    question result results look looking see below above please thanks thank glad happy great
    know tell find search searched now well""".split()
)
_MONTHS = {
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
}
_TOKEN = re.compile(
    r"[^\W\d_]+\d[^\W_]*"  # an identifier, letters then digits: ORD1234, A320, Room0
    r"|\d+(?:[.,]\d+)*%?|[^\W\d_]+(?:['’][^\W\d_]+)?"
)


@dataclass(frozen=True, slots=True)
class Token:
    """One distinct token of a claim: what is searched for, and how much it weighs."""

    key: str  # what is searched for (a prefix for words)
    critical: bool  # a name, number or date: must be covered
    weight: float


def number_key(token: str) -> str:
    """A number's key: no percent sign, thousands separators or trailing decimal zeros."""
    token = token.rstrip("%")
    if re.fullmatch(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", token):
        token = token.replace(",", "")
    if re.fullmatch(r"\d+\.\d+", token):
        token = token.rstrip("0").rstrip(".")  # 21.50 is 21.5, 12.0 is 12
    return token


def token_spans(sentence: str) -> list[tuple[str, bool, int, int]]:
    """Every token of a claim ``(key, critical, start, end)``, in order, repeats included."""
    found = []
    sentence = undotted(sentence)
    for position, match in enumerate(_TOKEN.finditer(sentence)):
        raw = match.group()
        lower = raw.lower()
        if raw[0].isdigit():
            key, critical = number_key(raw), True
        elif not raw.isalpha():  # an identifier (ORD1234): a name, found whole as the facts have it
            key, critical = lower, True
        elif lower in STOP:
            continue
        elif lower in _MONTHS:
            key, critical = lower, True
        elif (raw[0].isupper() and position > 0) or (len(raw) > 1 and raw.isupper()):
            key, critical = lower, True  # a name or an acronym
        else:
            key, critical = stem(lower), False
        found.append((key, critical, match.start(), match.end()))
    return found


def claim_tokens(sentence: str) -> list[Token]:
    """The claim's distinct tokens, in order (a name, number or date weighs 2, a word 1)."""
    tokens: list[Token] = []
    seen: set[str] = set()
    for key, critical, _, _ in token_spans(sentence):
        if key in seen:
            continue
        seen.add(key)
        tokens.append(Token(key, critical, 2.0 if critical else 1.0))
    return tokens


def needs_check(tokens: Sequence[Token]) -> bool:
    """Whether a claim with these tokens asserts something ("Here is what I found." does not)."""
    return any(t.critical or t.key not in _FILLER for t in tokens if t.key not in _FILLER)

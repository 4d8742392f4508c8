"""Personal data out of production conversations, by rules: emails, phones, cards, names.

A :class:`Scrubber` replaces, in any text it is given, and the same way every time within
one scrubber (so a distilled scenario's facts still agree with each other):

* **emails** (``name@domain.tld``) with ``user1@example.com``, ``user2@example.com``, ...
  (addresses at the reserved ``example.com``/``.org``/``.net`` and ``.test``, ``.invalid``,
  ``.example`` domains are left as they are: they are nobody's);
* **card numbers**: 13 to 19 digits, single spaces or dashes between them allowed, that pass
  the Luhn check, with ``[CARD 1]``, ``[CARD 2]``, ...;
* **phone numbers**: 9 to 15 digits (7 or more after a ``+`` country code or with an area code
  in brackets, and then whatever the digits, a card number's too), single spaces, dots or
  dashes between them allowed, with fictional numbers ``+1 202-555-0100``,
  ``+1 202-555-0101``, ... (the 555-01xx range is reserved for fiction);
* **names**: each name given (``names=["Maria Garcia"]``), whole or any of its words of three
  letters or more, case-insensitive, and a name introduced by "my name is", "I am called" or
  "this is" followed by capitalised words, with stand-ins from a fixed list of made-up names
  (``Alex Morgan``; ``Maria`` alone becomes ``Alex``).

Limits (it is a rule-based scrubber, not a guarantee): postal addresses, dates of birth,
national, passport and account numbers (unless they look like a card or a phone number),
names nobody gave and no phrase introduces, nicknames and misspellings are **not** found; any
9-digit or longer number (an order number too) is taken for a phone number and replaced; a
card number that fails the Luhn check (a typo) is kept unless it looks like a phone number.
Review what it produced before you share it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial

__all__ = [
    "FAKE_NAMES",
    "Scrubber",
    "luhn_valid",
]

FAKE_NAMES = (
    "Alex Morgan",
    "Sam Taylor",
    "Jordan Lee",
    "Robin Clarke",
    "Casey Brooks",
    "Jamie Walsh",
    "Drew Parker",
    "Avery Quinn",
    "Riley Hayes",
    "Morgan Ellis",
)
"""Made-up names given in turn to the names a scrubber replaces (then ``Person 11``, ...)."""

_EMAIL = re.compile(r"(?<![\w.%+-])[A-Za-z0-9._%+-]+@(?:[A-Za-z0-9-]+\.)+[A-Za-z]{2,}(?![\w-])")
_RESERVED = re.compile(
    r"@(?:(?:[\w-]+\.)*example\.(?:com|org|net)|(?:[\w-]+\.)*(?:test|invalid|example))$", re.I
)
_CARD = re.compile(r"(?<![\w+])\d(?:[ -]?\d){12,18}(?![\w])")
_PHONE = re.compile(
    r"(?<![\w@+.])(?:\+\d{1,3}[ .-]?)?(?:\(\d{1,4}\)[ .-]?)?\d(?:[ .-]?\d){5,14}(?![\w@])"
)
_FICTIONAL_PHONE = re.compile(r"555[ .-]?01\d\d$")
_INTRODUCED = re.compile(
    r"\b(?:my name is|my name's|i am called|i'm called|this is)\s+"
    r"((?:[A-Z][a-z'’-]+)(?:\s+[A-Z][a-z'’-]+){0,2})"
)


def luhn_valid(digits: str) -> bool:
    """Whether a string of digits passes the Luhn check (card numbers do)."""
    total = 0
    for position, char in enumerate(reversed(digits)):
        number = int(char)
        if position % 2:
            number = number * 2 - 9 if number > 4 else number * 2
        total += number
    return total % 10 == 0


@dataclass
class Scrubber:
    """Replaces personal data with stand-ins, the same way every time (see the module docs).

    Call it on each text of one conversation (or one set that must stay consistent): the same
    email gets the same stand-in everywhere. What was replaced is kept in memory only, never
    written; :attr:`counts` says how many of each kind were found.

    Attributes:
        names: Names to replace (people's names your data holds, e.g. from a CRM).
        counts: Distinct values replaced so far, by kind (``email``, ``card``, ``phone``,
            ``name``).
    """

    names: Sequence[str] = ()
    counts: dict[str, int] = field(default_factory=dict)
    _seen: dict[tuple[str, str], str] = field(default_factory=dict, repr=False)
    _issued: set[str] = field(default_factory=set, repr=False)
    _people: dict[str, str] = field(default_factory=dict, repr=False)
    _pattern: re.Pattern[str] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        """Give each given name its stand-in now (in order), and each of its words theirs."""
        for name in self.names:
            self._person(name)

    def _stand_in(self, kind: str, original: str, make: str) -> str:
        key = (kind, original.casefold() if kind in ("email", "name") else original)
        if key not in self._seen:
            self._seen[key] = make
            self._issued.add(make)
            self.counts[kind] = self.counts.get(kind, 0) + 1
        return self._seen[key]

    def _person(self, name: str) -> None:
        words = name.split()
        whole = " ".join(words)
        if not words or ("name", whole.casefold()) in self._seen:
            return
        if any(whole.casefold() == stand.casefold() for stand in self._issued):
            return  # a stand-in given earlier, met again
        count = self.counts.get("name", 0)
        fake = FAKE_NAMES[count] if count < len(FAKE_NAMES) else f"Person {count + 1}"
        self._stand_in("name", " ".join(words), fake)
        fake_words = fake.split()
        for index, word in enumerate(words):
            if len(word) >= 3 and ("name", word.casefold()) not in self._seen:
                self._seen[("name", word.casefold())] = fake_words[min(index, len(fake_words) - 1)]
        people = {
            original: value for (kind, original), value in self._seen.items() if kind == "name"
        }
        self._people = people
        alternatives = sorted(people, key=len, reverse=True)
        self._pattern = re.compile(
            r"(?<!\w)(?:"
            + "|".join(re.escape(o).replace(r"\ ", r"\s+") for o in alternatives)
            + r")(?!\w)",
            re.IGNORECASE,
        )

    def _email(self, match: re.Match[str]) -> str:
        text = match.group(0)
        if _RESERVED.search(text) or text in self._issued:
            return text
        count = self.counts.get("email", 0)
        return self._stand_in("email", text, f"user{count + 1}@example.com")

    def _card(self, match: re.Match[str]) -> str:
        text = match.group(0)
        digits = re.sub(r"\D", "", text)
        if not luhn_valid(digits):
            return text
        count = self.counts.get("card", 0)
        return self._stand_in("card", digits, f"[CARD {count + 1}]")

    def _phone(self, match: re.Match[str], international_only: bool = False) -> str:
        text = match.group(0)
        digits = re.sub(r"\D", "", text)
        international = text.startswith("+") or "(" in text
        if international_only and not international:
            return text
        if len(digits) > 15 or len(digits) < (7 if international else 9):
            return text
        if text in self._issued or _FICTIONAL_PHONE.search(text):
            return text
        count = self.counts.get("phone", 0)
        return self._stand_in("phone", digits, f"+1 202-555-01{count % 100:02d}")

    def __call__(self, text: str) -> str:
        """``text`` with every email, card, phone number and known or introduced name replaced."""
        text = _EMAIL.sub(self._email, text)
        # a number after a country code is a phone number, whatever its digits: first
        text = _PHONE.sub(partial(self._phone, international_only=True), text)
        text = _CARD.sub(self._card, text)
        text = _PHONE.sub(self._phone, text)
        for introduced in _INTRODUCED.finditer(text):
            self._person(introduced.group(1))
        if self._pattern is None:
            return text
        people = self._people
        return self._pattern.sub(lambda m: people[" ".join(m.group(0).split()).casefold()], text)

"""Values in text, for the offline grounding backend: numbers, dates, amounts, quantities, names.

A compact hand-written reader for the few surface forms grounding needs (no date library is a
dependency). :func:`values` finds each value with its span and its *slot*; :func:`equal` and
:func:`conflicts` compare two values whatever their surface forms.

- **Dates**: "March 3, 2021", "Mar. 3rd 2021", "3 March 2021", "3rd of March, 2021", "2021-03-03",
  "2021/03/03", "March 3", "3 March", "March 2021", a capitalised month name alone ("in March";
  not "May", a modal verb and a name). "3/4/2021" is read both ways (March 4 or April 3) unless
  one number is above 12 ("13/3/2021" is March 13) or both are equal; a date written both ways
  equals either reading and conflicts only with a date matching neither. A date only partly
  given ("March 2021") equals a fuller one that agrees ("March 3, 2021" states it) but not the
  other way round; dates conflict when a part both give differs.
- **Numbers**: thousands separators and trailing decimal zeros do not count ("3,700,000",
  "3700000.00"), scale words multiply ("3.7 million" = 3,700,000; also thousand, billion,
  trillion). A plain integer from 1000 to 2999 is also a year: it equals a date of that year.
- **Percentages**: "12%", "12 %", "12 percent", "12 per cent".
- **Amounts of money**: a symbol or code before ("$21.50", "US$21.50", "€5", "£5", "¥5",
  "USD 21.50") or a code or name after ("21.50 USD", "21.50 dollars", "5 euros", "5 yen").
  "$" is the US dollar. After a currency sign, "k", "m" and "bn" are scales ("$3.7m").
- **Quantities**: a number and a unit of :data:`~turneval.grounding._quantities.UNITS` ("5 km", "5km", "5-kilometre",
  "5 kilometers"), converted within a system ("5 km" = "5000 m", "1 lb" = "16 oz") but never
  across systems (miles and kilometres, Celsius and Fahrenheit are not compared).
- **Names**: runs of capitalised words not opening the text ("Larry Page", "R.M.S. Titanic"
  gives "Titanic"), upper-case acronyms ("RMS") and identifiers of letters then digits
  ("ORD1234"); the opening word joins a name that follows it ("Larry Page founded ...").
  A name is stated by a name holding all its words ("Cameron" by "James Cameron", not the other
  way round) or by its initials ("US" by "United States", and the other way round). Two names
  conflict unless one states the other or they end in the same word ("Leo DiCaprio",
  "Leonardo DiCaprio": maybe one person, neither stated nor contradicted).

A plain number equals an amount or a quantity with the same number (its unit is unstated), never
a percentage. Spelled-out numbers ("eleven"), "pounds" (weight or sterling?) and units outside
the table are not read.

The **slot** of a value is the word it is said of: the nearest word before it that is not a stop
word or a qualifier ("about", "nearly"), with the preposition between them if there is one
("by", "of", "to", "for", "from", "with", "into", "as"; "in", "on" and "at" are one). A name
counts as that word, a number or date does not, and a preposition belongs to the value right
after it. In "founded by Larry Page and Sergey Brin in 1998" the names' slot is "found by" (a
value listed after ",", "and", "or" or "&" shares the slot of the one before when both are
names, dates and years, or amounts of one unit) and the year's is "brin in"; in "The price was
$10 in 2020 and $12 in 2021" both amounts' slot is "price"; in "Kate Winslet starred in Titanic" the
slot of "Titanic" is "star in", not the "star" of "Titanic stars Kate Winslet".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Literal

from turneval.grounding._dates import DateParts, date_regex, dates_agree, dates_differ, read_date
from turneval.grounding._quantities import number_regex, read_number
from turneval.grounding._tokens import STOP, stem, undotted

__all__ = ["Value", "conflicts", "equal", "values"]

_QUALIFIERS = frozenset(
    """approximately roughly around nearly almost exactly only least total precisely circa ca
    estimated est up less""".split()
)
_RELATIONS = {
    **dict.fromkeys(["in", "on", "at"], "in"),  # "opened in 2021", "opened on March 3, 2021"
    **{word: word for word in "by of to for from with into as".split()},
}
"""Prepositions that are part of a slot: "starred in Titanic" is not "stars Kate Winslet"."""


_WORD = re.compile(r"[^\W\d_]+\d[^\W_]*|[^\W\d_]+(?:['’][^\W\d_]+)*")
_LIST_GAP = re.compile(r"\s*(?:,\s*(?:and|or)?|and|or|&)\s*")
_NAME_GAP = re.compile(r" |-")  # "Larry Page", "Jean-Luc"
_TITLE_GAP = re.compile(r"\. ?")  # "Dr. Smith", "St. Louis": after a word of 2 or 3 letters


@dataclass(frozen=True, slots=True)
class Value:
    """One value found in a text.

    Attributes:
        kind: "number" (with percentages, amounts and quantities), "date" or "name".
        start: Its start offset in the text.
        end: Its end offset (exclusive).
        slot: The word it is said of (stemmed, lower case), None at the text's start.
        number: A number's value in its class's base unit (as written when it has no unit).
        written: A number's value as written (scale applied, unit not).
        unit: A number's unit class (a key's class in :data:`~turneval.grounding._quantities.UNITS`), None when it has none.
        year: For a plain integer from 1000 to 2999, that integer (it may be a year).
        dates: A date's readings (year, month, day; None where not given): one, or two for a
            date written with slashes that reads both ways.
        words: A name's words (lower case, without "'s" or stop words).
    """

    kind: Literal["number", "date", "name"]
    start: int
    end: int
    slot: str | None = None
    number: Decimal | None = None
    written: Decimal | None = None
    unit: str | None = None
    year: int | None = None
    dates: tuple[DateParts, ...] = ()
    words: tuple[str, ...] = field(default=())


def _spans_overlap(start: int, end: int, taken: list[tuple[int, int]]) -> bool:
    return any(start < high and low < end for low, high in taken)


def _names(text: str, taken: list[tuple[int, int]]) -> list[Value]:
    """Runs of name words outside ``taken`` spans (see the module docs)."""
    words = [m for m in _WORD.finditer(text) if not _spans_overlap(m.start(), m.end(), taken)]
    names: list[Value] = []
    run: list[re.Match[str]] = []

    def close() -> None:
        kept = tuple(  # an acronym is a name even when it spells a stop word ("US", "IT")
            w
            for w, acronym in (
                (re.sub(r"['’]s$", "", m.group().lower()), m.group().isupper()) for m in run
            )
            if acronym or w not in STOP
        )
        if kept:
            names.append(Value("name", run[0].start(), run[-1].end(), words=kept))
        run.clear()

    first_word = min((m.start() for m in _WORD.finditer(text)), default=-1)
    for number, match in enumerate(words):
        word = match.group()
        is_name = (len(word) > 1 and word[0].isupper()) or any(c.isdigit() for c in word)
        opening = match.start() == first_word
        if opening and word.isalpha() and not word.isupper():
            # The text's first word: a name only with a name word right after it.
            after = words[number + 1] if number + 1 < len(words) else None
            is_name = (
                is_name
                and after is not None
                and _NAME_GAP.fullmatch(text[match.end() : after.start()]) is not None
                and after.group()[0].isupper()
            )
        if not is_name:
            if run:
                close()
            continue
        if run:
            gap = text[run[-1].end() : match.start()]
            title = len(run) == 1 and len(run[0].group()) <= 3 and _TITLE_GAP.fullmatch(gap)
            if not title and _NAME_GAP.fullmatch(gap) is None:
                close()
        run.append(match)
    if run:
        close()
    return names


def values(text: str) -> list[Value]:
    """The values in ``text``, in order, each with its slot (see the module docs)."""
    text = undotted(text)
    found: list[Value] = []
    taken: list[tuple[int, int]] = []
    for match in date_regex().finditer(text):
        readings = read_date(match)
        if readings is not None:
            found.append(Value("date", match.start(), match.end(), dates=readings))
            taken.append(match.span())
    for match in number_regex().finditer(text):
        if _spans_overlap(match.start(), match.end(), taken):
            continue
        number, written, unit, year = read_number(match)
        found.append(Value("number", match.start(), match.end(), None, number, written, unit, year))
        taken.append(match.span())
    found += _names(text, taken)
    found.sort(key=lambda value: value.start)
    return _with_slots(text, found)


def _list_kind(value: Value) -> str:
    """What values listed together share: names, dates (and years), or one unit's amounts."""
    if value.kind == "name":
        return "name"
    if value.kind == "date" or (value.year is not None and value.unit is None):
        return "date"
    return value.unit or ""


def _with_slots(text: str, found: list[Value]) -> list[Value]:
    """``found`` with each value's slot (the word before it; see the module docs)."""
    result: list[Value] = []
    position, anchor, relation = 0, "", ""
    previous: Value | None = None
    for value in found:
        for word in _WORD.findall(text, position, value.start):
            low = word.lower().replace("’", "'")
            if low in _RELATIONS:
                relation = _RELATIONS[low]
            elif len(low) > 1 and low not in STOP and low not in _QUALIFIERS:
                anchor, relation = stem(re.sub(r"'s$", "", low)), ""
        listed = (
            previous is not None
            and _list_kind(previous) == _list_kind(value)
            and _LIST_GAP.fullmatch(text[previous.end : value.start]) is not None
        )
        if listed and previous is not None:
            slot = previous.slot
        else:
            slot = f"{anchor} {relation}".rstrip() if anchor else None
        value = replace(value, slot=slot)
        result.append(value)
        if value.kind == "name":
            anchor, relation = stem(value.words[-1]), ""
        else:  # "in" before "2020" is not said of what follows: "$10 in 2020 and $12 in 2021"
            relation = ""
        position, previous = value.end, value
    return result


def _as_dates(value: Value) -> tuple[DateParts, ...]:
    if value.kind == "date":
        return value.dates
    if value.year is not None:
        return ((value.year, None, None),)
    return ()


def _numbers_comparable(one: Value, other: Value) -> bool:
    if one.unit == other.unit:
        return True
    return (one.unit is None and other.unit != "%") or (other.unit is None and one.unit != "%")


def _initials(words: tuple[str, ...]) -> str:
    return "".join(word[0] for word in words) if len(words) > 1 else ""


def equal(claim: Value, fact: Value) -> bool:
    """Whether ``fact`` states the claim's value (in any surface form).

    A name is stated by a name holding all its words ("Cameron" by "James Cameron", not the
    other way round) or by its initials ("US" by "United States", and the other way round).
    """
    if claim.kind == "name" or fact.kind == "name":
        if claim.kind != fact.kind:
            return False
        return (
            set(claim.words) <= set(fact.words)
            or claim.words == (_initials(fact.words),)
            or fact.words == (_initials(claim.words),)
        )
    if claim.kind == "number" and fact.kind == "number":
        if not _numbers_comparable(claim, fact):
            return False
        if claim.unit == fact.unit:
            return claim.number == fact.number
        return claim.written == fact.written
    return any(dates_agree(c, f) for c in _as_dates(claim) for f in _as_dates(fact))


def conflicts(claim: Value, fact: Value) -> bool:
    """Whether the two values are of one kind and cannot both hold (see the module docs).

    Two names conflict unless one holds all the other's words, one is the other's initials, or
    they end in the same word ("Leo DiCaprio" and "Leonardo DiCaprio" may be one person).
    """
    if claim.kind == "name" or fact.kind == "name":
        return (
            claim.kind == fact.kind
            and not equal(claim, fact)
            and not equal(fact, claim)
            and claim.words[-1] != fact.words[-1]
        )
    if claim.kind == "number" and fact.kind == "number":
        if not _numbers_comparable(claim, fact):
            return False
        return not equal(claim, fact)
    ones, others = _as_dates(claim), _as_dates(fact)
    return bool(ones and others) and all(dates_differ(a, b) for a in ones for b in others)

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
- **Quantities**: a number and a unit of :data:`UNITS` ("5 km", "5km", "5-kilometre",
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
from functools import lru_cache
from typing import Literal

__all__ = ["UNITS", "Value", "conflicts", "equal", "stem", "undotted", "values"]

STOP = frozenset(
    """a an the and or but if of to in on at by for with from as into onto over under about
    is are was were be been being am do does did done has have had having it its it's this that
    these those there here then than so such very just also too not no yes i you he she we they
    me him her us them my your his our their what which who whom whose when where why how all
    any each some more most other can could would should will shall may might must one ones
    again still even much many own same both few s t""".split()
)
"""Words that carry no content (left out of claims' tokens and of slots)."""

_QUALIFIERS = frozenset(
    """approximately roughly around nearly almost exactly only least total precisely circa ca
    estimated est up less""".split()
)
_SUFFIXES = ("ing", "ed", "es", "ly", "s")
_RELATIONS = {
    **dict.fromkeys(["in", "on", "at"], "in"),  # "opened in 2021", "opened on March 3, 2021"
    **{word: word for word in "by of to for from with into as".split()},
}
"""Prepositions that are part of a slot: "starred in Titanic" is not "stars Kate Winslet"."""


def stem(word: str) -> str:
    """``word`` (lower case) without one common suffix: "starred", "stars" and "star" agree."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiou":
        word = word[:-1]  # starr -> star
    return word


# -- the unit table ----------------------------------------------------------------------------

_ONE = Decimal(1)


def _unit_table() -> dict[str, tuple[str, Decimal]]:
    """``{written unit (lower case): (class, factor to the class's base unit)}``."""
    table: dict[str, tuple[str, Decimal]] = {}
    groups: list[tuple[str, str, str]] = [
        # class, factor, spellings
        ("%", "1", "% percent per_cent"),
        ("USD", "1", "usd dollar dollars"),
        ("EUR", "1", "eur euro euros"),
        ("GBP", "1", "gbp"),
        ("JPY", "1", "jpy yen"),
        ("length/metric", "0.001", "mm millimetre millimetres millimeter millimeters"),
        ("length/metric", "0.01", "cm centimetre centimetres centimeter centimeters"),
        ("length/metric", "1", "m metre metres meter meters"),
        ("length/metric", "1000", "km kilometre kilometres kilometer kilometers"),
        ("length/imperial", "1", "inch inches"),
        ("length/imperial", "12", "ft foot feet"),
        ("length/imperial", "63360", "mi mile miles"),
        ("mass/metric", "0.001", "mg milligram milligrams"),
        ("mass/metric", "1", "g gram grams"),
        ("mass/metric", "1000", "kg kilogram kilograms kilo kilos"),
        ("mass/metric", "1000000", "tonne tonnes"),
        ("mass/imperial", "1", "oz ounce ounces"),
        ("mass/imperial", "16", "lb lbs"),
        ("time", "0.001", "ms millisecond milliseconds"),
        ("time", "1", "sec secs second seconds"),
        ("time", "60", "min mins minute minutes"),
        ("time", "3600", "h hr hrs hour hours"),
        ("time", "86400", "day days"),
        ("time", "604800", "week weeks"),
        ("volume/metric", "0.001", "ml millilitre millilitres milliliter milliliters"),
        ("volume/metric", "1", "l litre litres liter liters"),
        ("data", "1000", "kb kilobyte kilobytes"),
        ("data", "1000000", "mb megabyte megabytes"),
        ("data", "1000000000", "gb gigabyte gigabytes"),
        ("data", "1000000000000", "tb terabyte terabytes"),
        ("speed/metric", "1", "km/h kph"),
        ("speed/imperial", "1", "mph"),
        ("celsius", "1", "°c degrees_celsius degree_celsius celsius"),
        ("fahrenheit", "1", "°f degrees_fahrenheit degree_fahrenheit fahrenheit"),
        ("degree", "1", "° degree degrees"),
    ]
    for unit_class, factor, spellings in groups:
        for spelling in spellings.split():
            table[spelling.replace("_", " ")] = (unit_class, Decimal(factor))
    return table


UNITS = _unit_table()
"""The units read after a number: ``{spelling: (class, factor to the class's base unit)}``.

Values of one class compare after conversion ("5 km" = "5000 m"); of two classes, never.
"""

_SCALES = {"thousand": 3, "million": 6, "billion": 9, "trillion": 12}
_SHORT_SCALES = {"k": 3, "m": 6, "bn": 9}  # after a currency sign only ("$3.7m")
_CURRENCY_SIGNS = {"$": "USD", "us$": "USD", "€": "EUR", "£": "GBP", "¥": "JPY"}
_CURRENCY_CODES = {"usd": "USD", "eur": "EUR", "gbp": "GBP", "jpy": "JPY"}

# -- the patterns ------------------------------------------------------------------------------

_MONTH = (
    r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?"
    r"|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)\.?"
)
_MONTH_NUMBERS = {
    name: number
    for number, name in enumerate(
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"], 1
    )
}
_ORD = r"(?:st|nd|rd|th)?"
_DATE_PATTERN = (
    r"(?<![\w.,/-])(?:"
    r"(?P<iy>\d{4})[-/](?P<im>\d{1,2})[-/](?P<id>\d{1,2})(?!\d)"
    r"|(?P<sa>\d{1,2})/(?P<sb>\d{1,2})/(?P<sy>\d{4})(?![\d/])"
    rf"|(?P<m1>{_MONTH})\s+(?P<d1>\d{{1,2}}){_ORD},?\s+(?P<y1>\d{{4}})(?!\d)"
    rf"|(?P<d2>\d{{1,2}}){_ORD}\s+(?:of\s+)?(?P<m2>{_MONTH}),?\s+(?P<y2>\d{{4}})(?!\d)"
    rf"|(?P<m3>{_MONTH})\s+(?P<d3>\d{{1,2}}){_ORD}(?![\w.,]\d|\d)"
    rf"|(?P<d4>\d{{1,2}}){_ORD}\s+(?:of\s+)?(?P<m4>{_MONTH})(?![^\W\d_])"
    rf"|(?P<m5>{_MONTH}),?\s+(?P<y5>\d{{4}})(?!\d)"
    r"|(?P<m6>January|February|March|April|June|July|August|September|October|November"
    r"|December)(?![^\W\d_])"
    r")"
)
_UNIT_PATTERN = "|".join(
    re.escape(spelling).replace(r"\ ", r"\s+")
    for spelling in sorted([*UNITS, *_SHORT_SCALES], key=len, reverse=True)
)
_NUMBER_PATTERN = (
    r"(?<![\w.,$€£¥])"
    r"(?:(?P<sign>US\$|\$|€|£|¥)\s?|(?P<code>USD|EUR|GBP|JPY)\s?)?"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)(?!\d|[.,]\d)"
    r"(?:\s?(?P<scale>thousand|million|billion|trillion)(?![^\W\d_]))?"
    rf"(?:[\s-]?(?P<unit>(?i:{_UNIT_PATTERN}))(?![^\W\d_]))?"
)


@lru_cache(maxsize=1)
def _date_regex() -> re.Pattern[str]:
    return re.compile(_DATE_PATTERN)  # compiled on first use: importing stays cheap


@lru_cache(maxsize=1)
def _number_regex() -> re.Pattern[str]:
    return re.compile(_NUMBER_PATTERN)


_WORD = re.compile(r"[^\W\d_]+\d[^\W_]*|[^\W\d_]+(?:['’][^\W\d_]+)*")
_LIST_GAP = re.compile(r"\s*(?:,\s*(?:and|or)?|and|or|&)\s*")
_NAME_GAP = re.compile(r" |-")  # "Larry Page", "Jean-Luc"
_TITLE_GAP = re.compile(r"\. ?")  # "Dr. Smith", "St. Louis": after a word of 2 or 3 letters


# -- values ------------------------------------------------------------------------------------

DateParts = tuple[int | None, int | None, int | None]  # year, month, day


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
        unit: A number's unit class (a key's class in :data:`UNITS`), None when it has none.
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


def _month(text: str) -> int:
    return _MONTH_NUMBERS[text[:3].lower()]


def _date(match: re.Match[str]) -> tuple[DateParts, ...] | None:
    """The readings of a date match, None if no reading is a valid date."""
    group = match.group
    readings: list[DateParts]
    if group("iy"):
        readings = [(int(group("iy")), int(group("im")), int(group("id")))]
    elif group("sa"):
        first, second, year = int(group("sa")), int(group("sb")), int(group("sy"))
        readings = [(year, first, second), (year, second, first)]
        if first == second:
            readings = readings[:1]
    else:
        for n in "123456":
            if group(f"m{n}"):
                day_text = group(f"d{n}") if n in "1234" else None
                year_text = group(f"y{n}") if n in "125" else None
                readings = [
                    (
                        int(year_text) if year_text else None,
                        _month(group(f"m{n}")),
                        int(day_text) if day_text else None,
                    )
                ]
                break
    valid = tuple(
        (year, month, day)
        for year, month, day in readings
        if (month is None or 1 <= month <= 12) and (day is None or 1 <= day <= 31)
    )
    return valid or None


def _number(match: re.Match[str]) -> tuple[Decimal, Decimal, str | None, int | None]:
    """``(value in the base unit, value as written, unit class, year)`` of a number match."""
    group = match.group
    digits = group("num").replace(",", "")
    written = Decimal(digits)
    currency = None
    if group("sign"):
        currency = _CURRENCY_SIGNS[group("sign").lower()]
    elif group("code"):
        currency = _CURRENCY_CODES[group("code").lower()]
    unit_class, factor = None, _ONE
    exponent = _SCALES.get(group("scale") or "", 0)
    unit = re.sub(r"\s+", " ", (group("unit") or "").lower())
    if unit in _SHORT_SCALES and currency is not None and not exponent:
        exponent, unit = _SHORT_SCALES[unit], ""  # "$3.7m", "$5k", "$2bn"
    if unit in UNITS:  # ("k" or "bn" without a currency sign: not read)
        unit_class, factor = UNITS[unit]
    if exponent:
        written = written.scaleb(exponent)
    if currency is not None:
        unit_class, factor = currency, _ONE  # "$5 km": read as money
    year = None
    if unit_class is None and not exponent and re.fullmatch(r"[12]\d{3}", group("num")):
        year = int(digits)
    return written * factor, written, unit_class, year


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


_DOTTED = re.compile(r"(?<![\w.])[A-Z](?:\.[A-Z])+\.?(?!\w)")  # U.S., U.K.


def _undotted_one(match: re.Match[str]) -> str:
    text = match.group()
    return text.replace(".", "").ljust(len(text))


def undotted(text: str) -> str:
    """``text`` with dotted acronyms as one word, padded to keep every position.

    "U.S." is read as "US": the initials of "United States", not two one-letter names.
    """
    return _DOTTED.sub(_undotted_one, text) if "." in text else text


def values(text: str) -> list[Value]:
    """The values in ``text``, in order, each with its slot (see the module docs)."""
    text = undotted(text)
    found: list[Value] = []
    taken: list[tuple[int, int]] = []
    for match in _date_regex().finditer(text):
        readings = _date(match)
        if readings is not None:
            found.append(Value("date", match.start(), match.end(), dates=readings))
            taken.append(match.span())
    for match in _number_regex().finditer(text):
        if _spans_overlap(match.start(), match.end(), taken):
            continue
        number, written, unit, year = _number(match)
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


# -- comparing ---------------------------------------------------------------------------------


def _dates_agree(claim: DateParts, fact: DateParts) -> bool:
    """Every part the claim gives, the fact gives the same."""
    return all(c is None or c == f for c, f in zip(claim, fact, strict=True))


def _dates_differ(one: DateParts, other: DateParts) -> bool:
    """A part both give differs."""
    return any(a is not None and b is not None and a != b for a, b in zip(one, other, strict=True))


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
    return any(_dates_agree(c, f) for c in _as_dates(claim) for f in _as_dates(fact))


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
    return bool(ones and others) and all(_dates_differ(a, b) for a in ones for b in others)

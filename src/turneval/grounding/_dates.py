"""Dates, as the values reader sees them: the forms read, their readings, how two compare.

Read: "March 3, 2021", "Mar. 3rd 2021", "3 March 2021", "3rd of March, 2021", "2021-03-03",
"2021/03/03", "3/4/2021" (both readings unless one is impossible), "March 3", "3 March",
"March 2021" and a capitalised month name alone (see :mod:`turneval.grounding._values`).
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["DateParts", "date_regex", "dates_agree", "dates_differ", "read_date"]

DateParts = tuple[int | None, int | None, int | None]  # year, month, day

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


@lru_cache(maxsize=1)
def date_regex() -> re.Pattern[str]:
    """The dates' pattern, compiled on first use."""
    return re.compile(_DATE_PATTERN)  # compiled on first use: importing stays cheap


def _month(text: str) -> int:
    return _MONTH_NUMBERS[text[:3].lower()]


def read_date(match: re.Match[str]) -> tuple[DateParts, ...] | None:
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


def dates_agree(claim: DateParts, fact: DateParts) -> bool:
    """Every part the claim gives, the fact gives the same."""
    return all(c is None or c == f for c, f in zip(claim, fact, strict=True))


def dates_differ(one: DateParts, other: DateParts) -> bool:
    """A part both give differs."""
    return any(a is not None and b is not None and a != b for a, b in zip(one, other, strict=True))

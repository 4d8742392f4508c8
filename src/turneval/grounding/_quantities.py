"""Numbers, percentages, amounts of money and quantities with units, as the values reader sees them.

Thousands separators and trailing decimal zeros do not count ("3,700,000", "3700000.00"),
scale words multiply ("3.7 million"), a currency sign, code or name makes an amount, and a unit
of :data:`UNITS` a quantity (see :mod:`turneval.grounding._values`).
"""

from __future__ import annotations

import re
from decimal import Decimal
from functools import lru_cache

__all__ = ["UNITS", "number_regex", "read_number"]

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
def number_regex() -> re.Pattern[str]:
    """The numbers' pattern (with a currency, a scale, a unit), compiled on first use."""
    return re.compile(_NUMBER_PATTERN)


def read_number(match: re.Match[str]) -> tuple[Decimal, Decimal, str | None, int | None]:
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

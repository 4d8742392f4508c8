"""How compare names rows and counts in its notes and errors: a few, then "(+N more)"."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["LISTED", "count", "names", "names_in"]


LISTED = 10  # rows (or ids) named in a note or an error before "(+N more)"


def count(number: int, noun: str) -> str:
    """``number`` and ``noun``, plural unless one: ``"3 rows"``, ``"1 row"``."""
    return f"{number} {noun}{'s' if number != 1 else ''}"


def names(labels: Sequence[str | None], *, quoted: bool = False) -> str:
    """The first labels (``repr`` when ``quoted``), then ``(+N more)``."""
    shown = ", ".join(repr(label) if quoted else str(label) for label in labels[:LISTED])
    return shown + (f" (+{len(labels) - LISTED} more)" if len(labels) > LISTED else "")


def names_in(labels: Sequence[str]) -> str:
    """`` (the first labels)`` after a sentence, or nothing when there are none."""
    return f" ({names(labels)})" if labels else ""

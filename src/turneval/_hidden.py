"""Hidden characters: shown as ``<U+202E>`` in reports and on the terminal, never written.

Bidirectional controls can make ``evil.exe\u202etxt.py`` read as ``evil.exepy.txt``; NUL and
the other control characters can hide or garble the text around them. The HTML report marks
them (:mod:`turneval.report`); the command line prints them the same way (:func:`shown`).
"""

from __future__ import annotations

import re

__all__ = ["HIDDEN", "code", "shown", "text"]

HIDDEN = re.compile(
    "([\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069])"
)
"""Bidirectional controls, NUL, the other C0 controls (tab and line breaks excepted), DEL and
the C1 controls: characters that change how the text around them reads without being seen."""


def text(value: object) -> str:
    """``str(value)``, lone surrogates shown escaped (never an encoding error)."""
    result = str(value)
    try:
        result.encode("utf-8")
    except UnicodeEncodeError:
        result = result.encode("utf-8", "backslashreplace").decode("utf-8")
    return result


def code(char: str) -> str:
    """A hidden character as it is shown: ``<U+202E>``."""
    return f"<U+{ord(char):04X}>"


def shown(value: object) -> str:
    """``value`` for a terminal: hidden characters as ``<U+202E>``, lone surrogates escaped."""
    return HIDDEN.sub(lambda match: code(match.group()), text(value))

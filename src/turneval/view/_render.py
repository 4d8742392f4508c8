"""The viewer's HTML pieces: every stored value escaped, every long text cut with a link.

Whatever a stored run holds (an imported file's, or an older turneval's), it is shown as
text: :func:`turneval.report.escape_text` escapes it (control and bidirectional characters
as a marked ``<U+202E>``), :func:`figure` shows a value that should be a number but is not
as text, and :class:`Clipper` cuts each text at :data:`TEXT` characters (and a page's texts
at :data:`PAGE_TEXT` in all) with a link to the whole text, served as ``text/plain``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from turneval._html import cut, escape_attribute, escape_text, format_value

__all__ = [
    "PAGE_TEXT",
    "TEXT",
    "TURNS",
    "Clipper",
    "citations",
    "cut",
    "figure",
    "number",
    "turns",
    "votes",
]

TEXT = 10_000
"""Characters of one text a page shows; the rest is one click away."""

PAGE_TEXT = 200_000
"""Characters of text one page shows in all; later texts are cut shorter (to ``SHORT``)."""

SHORT = 300
"""Characters of a text shown once the page's budget is spent."""

TURNS = 200
"""Turns of a conversation one page shows."""


def figure(value: Any) -> str:
    """A value for a table cell, escaped: a number to three decimals, ``n/a`` for none.

    A value that should be a number but is not (an imported file's text, a list) is shown
    as the text it is, escaped, never formatted as a number.
    """
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return escape_text(str(value).lower())
    if isinstance(value, int):
        return escape_text(f"{value:,}")
    if isinstance(value, float):
        return escape_text(format_value(value) if math.isfinite(value) else str(value))
    if isinstance(value, str):
        return escape_text(cut(value, 80))
    return escape_text(cut(json.dumps(value, ensure_ascii=False, default=str), 80))


def number(value: Any) -> str:
    """A figure (a mean, an interval's end) to three decimals; another value as :func:`figure`."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return figure(float(value))
    return figure(value)


class Clipper:
    """Cuts a page's texts: each at :data:`TEXT` characters, all at :data:`PAGE_TEXT`.

    Each cut text ends with a link to the whole of it: ``link`` names where the text lies
    (``["sample", "user_input", 3, "content"]``), the page adds it to ``base`` (a row's
    ``.../text`` address) as ``?at=`` (JSON).
    """

    def __init__(self, base: str | None) -> None:
        """Cut texts whose whole is served under ``base`` (None: no link, the cut shown)."""
        self.base = base
        self.left = PAGE_TEXT

    def size(self) -> int:
        """How much of the next text may be shown."""
        return TEXT if self.left >= TEXT else max(self.left, SHORT)

    def link(self, at: Sequence[str | int]) -> str:
        """The address of the whole text at ``at``."""
        return f"{self.base}?at={quote(json.dumps(list(at)), safe='')}"

    def more(self, length: int, at: Sequence[str | int] | None) -> str:
        """What follows a cut text: the link to all of it (or how long it was)."""
        if at is None or self.base is None:
            return f"<span class='muted'> … ({length:,} characters in all)</span>"
        return (
            f" <a class='full' href='{escape_attribute(self.link(at))}'>… show all {length:,} "
            "characters</a>"
        )

    def text(self, value: object, at: Sequence[str | int] | None = None) -> str:
        """``value`` as escaped text, cut with a link to the whole."""
        text = str(value)
        size = self.size()
        self.left -= min(len(text), size)
        if len(text) <= size:
            return escape_text(text)
        return escape_text(text[:size]) + self.more(len(text), at)

    def marked(self, text: str, cited: Sequence[str], at: Sequence[str | int]) -> str:
        """:meth:`text`, the cited passages of the part shown wrapped in ``<mark>``."""
        size = self.size()
        self.left -= min(len(text), size)
        shown = text[:size]
        body = _marked(shown, cited)
        return body if len(text) <= size else body + self.more(len(text), at)

    def json(
        self, value: Any, at: Sequence[str | int] | None = None, indent: int | None = None
    ) -> str:
        """``value`` as JSON text (a str as it is), escaped and cut."""
        if isinstance(value, str):
            return self.text(value, at)
        return self.text(json.dumps(value, indent=indent, ensure_ascii=False, default=str), at)


def votes(record: Mapping[str, Any], clip: Clipper) -> str:
    """A judge's repeated votes (``details["repeats"]``), every value escaped."""
    parts = []
    for key, value in list(record.items())[:20]:
        if key in ("votes", "values") and isinstance(value, list):
            marks = " ".join(f"<span class='vote'>{figure(v)}</span>" for v in value[:50])
            parts.append(f"{escape_text(key)}: {marks}")
        else:
            shown = figure(value) if isinstance(value, (int, float)) else clip.json(value)
            parts.append(f"{clip.text(key)} {shown}")
    return " · ".join(parts)


def citations(record: Mapping[str, Any], names: Sequence[str]) -> list[str]:
    """Quoted text grounding metrics keep in their details (``citations``/``quotes``)."""
    found: list[str] = []

    def walk(node: Any, depth: int = 0) -> None:
        if depth > 4 or len(found) > 50:
            return
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("citations", "quotes", "cited", "evidence") and isinstance(value, list):
                    for item in value[:200]:
                        text = (
                            item.get("text") or item.get("quote")
                            if isinstance(item, dict)
                            else item
                        )
                        if isinstance(text, str) and 3 <= len(text) <= 2000:
                            found.append(text)
                else:
                    walk(value, depth + 1)
        elif isinstance(node, list):
            for value in node[:200]:
                walk(value, depth + 1)

    for name in names:
        walk(record.get(f"{name}_details"))
    return found


def _marked(text: str, cited: Sequence[str]) -> str:
    """Escaped ``text`` with each cited passage wrapped in ``<mark class="cite">``."""
    spans: list[tuple[int, int]] = []
    for passage in cited:
        start = text.find(passage)
        if start >= 0:
            spans.append((start, start + len(passage)))
    spans.sort()
    out, at = [], 0
    for start, end in spans:
        if start < at:
            continue
        out.append(
            escape_text(text[at:start])
            + f"<mark class='cite'>{escape_text(text[start:end])}</mark>"
        )
        at = end
    return "".join(out) + escape_text(text[at:])


def turns(
    sample: Any,
    cited: Sequence[str],
    clip: Clipper,
    *,
    line: int | None,
    first: int = 0,
    decisive: Mapping[int, str] | None = None,
) -> tuple[str, int | None]:
    """The sample's turns (human, ai with its tool calls, tool), every text escaped and cut.

    Shows :data:`TURNS` turns from turn ``first``; returns the HTML and the turn the next
    part starts at (None: no more). A sample that is a str is the input line as read, when
    it was not JSON (``line``: its number in the input). Each AI turn shows its agent (a tool
    result its caller's); a step an attribution names (``decisive``: turn index -> metric) is
    marked.
    """
    if isinstance(sample, str):
        where = f"input line {line}" if line is not None else "the input line"
        return (
            f"<p class='muted' id='unreadable'>{escape_text(where)} was not a JSON sample; "
            f"as it was read:</p><pre class='raw'>{clip.text(sample, ['sample'])}</pre>",
            None,
        )
    if not isinstance(sample, dict):
        return "<p class='muted'>the run did not keep this row's sample</p>", None
    messages = sample.get("user_input")
    if not isinstance(messages, list):  # a single-turn sample: its fields
        return (
            "".join(
                f"<div class='msg tool'><span class='role'>{clip.text(key)}</span>"
                + (
                    clip.marked(value, cited, ["sample", key])
                    if isinstance(value, str)
                    else clip.json(value, ["sample", key])
                )
                + "</div>"
                for key, value in list(sample.items())[:TURNS]
            ),
            None,
        )
    parts = []
    caller = _caller(messages[:first])  # the agent whose tool calls the next results answer
    shown = messages[first : first + TURNS]
    for number, turn in enumerate(shown, start=first):
        at: list[str | int] = ["sample", "user_input", number]
        if not isinstance(turn, dict):
            parts.append(f"<div class='msg'>{clip.json(turn, at)}</div>")
            caller = None
            continue
        kind = cut(str(turn.get("type", "?")), 40)
        if kind == "ai":
            caller = turn.get("name") if turn.get("tool_calls") else None
            agent = turn.get("name")
        elif kind == "tool":
            agent = caller
        else:
            agent, caller = None, None
        named = f" <span class='agent'>{clip.text(agent)}</span>" if agent else ""
        marked, mark = "", ""
        if decisive and number in decisive:
            marked = " decisive"
            mark = (
                f"<span class='decisive-mark' title='{escape_attribute(decisive[number])}'>"
                "decisive step</span>"
            )
        content = turn.get("content")
        body = (
            clip.marked(content, cited, [*at, "content"])
            if isinstance(content, str) and kind == "ai"
            else clip.json(content, [*at, "content"])
        )
        tool_calls = turn.get("tool_calls")
        calls = "".join(
            f"<div class='call'>{clip.text(call.get('name'), [*at, 'tool_calls', place, 'name'])}"
            f"({clip.json(call.get('args'), [*at, 'tool_calls', place, 'args'])})</div>"
            for place, call in enumerate(tool_calls[:100] if isinstance(tool_calls, list) else [])
            if isinstance(call, dict)
        )
        extra = (
            f" <span class='muted'>(call {clip.text(turn['tool_call_id'], [*at, 'tool_call_id'])})"
            "</span>"
            if turn.get("tool_call_id")
            else ""
        )
        parts.append(
            f"<div class='msg {escape_attribute(kind)}{marked}' id='turn-{number}'>{mark}"
            f"<span class='role'>{escape_text(kind)}</span>{named}{extra}{body}{calls}</div>"
        )
    following = first + TURNS if len(messages) > first + TURNS else None
    if following is None:
        for key in ("reference_tool_calls", "reference", "reference_topics"):
            value = sample.get(key)
            if value is not None:
                parts.append(
                    f"<div class='ref'><b>{escape_text(key)}</b><pre>"
                    f"{clip.json(value, ['sample', key])}</pre></div>"
                )
    return "".join(parts), following


def _caller(earlier: Sequence[Any]) -> Any:
    """The agent whose tool calls are still being answered after ``earlier`` turns."""
    caller: Any = None
    for turn in earlier:
        if not isinstance(turn, dict):
            caller = None
        elif turn.get("type") == "ai":
            caller = turn.get("name") if turn.get("tool_calls") else None
        elif turn.get("type") != "tool":
            caller = None
    return caller

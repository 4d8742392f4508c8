"""The HTML kit the report, the calibration page and the viewer share.

One style sheet, one page shell, and the pieces every page shows: escaped text (hidden
characters marked as ``<U+202E>``, see :mod:`turneval._hidden`), text cut short, figures, the
verdict colours, a histogram and the failure clusters. Nothing here is loaded from the
network: a page is one self-contained document whose only script is its own, nonce'd.
"""

from __future__ import annotations

import html
import math
import secrets
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from turneval._hidden import HIDDEN, code
from turneval._hidden import text as _text

if TYPE_CHECKING:
    import numpy as np

    from turneval.clusters.grouping import FailureCluster

__all__ = [
    "CLIP",
    "FULL",
    "STYLESHEET",
    "clipped",
    "clusters_table",
    "count",
    "cut",
    "document",
    "escape_attribute",
    "escape_text",
    "file_policy",
    "format_value",
    "histogram",
    "nonce",
    "run_figure",
    "shade",
]

STYLESHEET = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d2433;background:#fafbfc;max-width:1400px}
body.app{margin:0;max-width:none}main{padding:12px 16px;max-width:1200px}
header{background:#1d2433;color:#fff;padding:8px 16px}header a{color:#cfe0ff;margin-right:14px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}
.muted{color:#6b7385}table{border-collapse:collapse;background:#fff}
th,td{border:1px solid #dfe3ea;padding:4px 8px;text-align:left;vertical-align:top}th{background:#f0f3f8}
th[data-sort]{cursor:pointer;user-select:none}th[data-sort]:after{content:" \\2195";color:#9aa3b5}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.unstable{box-shadow:inset 0 0 0 2px #b7791f}.good{background:#e3f6e8}.mid{background:#fff4d6}.bad{background:#fde4e1}.err{background:#f3e8ff}
.neutral{background:#eef1f6}.refused{color:#a3261b;font-weight:600}.saved{color:#1d7a3a;font-weight:600}
form.filters{display:flex;flex-wrap:wrap;gap:8px;align-items:end;margin:8px 0}
form.filters label{display:flex;flex-direction:column;font-size:12px}
.hists{display:flex;flex-wrap:wrap;gap:16px}.hist{background:#fff;border:1px solid #dfe3ea;padding:8px}
.drill td{background:#f7f9fc}.msg{margin:4px 0;padding:6px 8px;border-radius:6px;border:1px solid #dfe3ea;white-space:pre-wrap;word-break:break-word}
.human{background:#e8f0fe}.ai{background:#eef7ee}.tool{background:#f4f4f4;font-family:monospace;font-size:12px}
.msg.human{border-left:4px solid #4f7cd8}.msg.ai{border-left:4px solid #3aa76d}.msg.tool{border-left:4px solid #b58a2a}
.system{background:#fff4d6}.call{font-family:ui-monospace,monospace;font-size:12px;background:#fff;border:1px dashed #c9d1de;padding:3px 6px;margin:3px 0}
.role{font-weight:600;margin-right:6px}.app .role{text-transform:uppercase;font-size:11px}
.grid{display:grid;grid-template-columns:minmax(0,3fr) minmax(0,2fr);gap:16px}
.metric{border:1px solid #dfe3ea;background:#fff;padding:6px 8px;margin-bottom:6px}.error{color:#8a1c1c;white-space:pre-wrap}
pre{white-space:pre-wrap;word-break:break-word;background:#fff;border:1px solid #dfe3ea;padding:6px}
button.open{font-size:12px}details.more summary{cursor:pointer;color:#4f5f85;font-size:12px}
#samples{width:100%;table-layout:fixed}#samples th{font-size:12px;overflow-wrap:break-word}
#samples td{overflow-wrap:anywhere}#samples col.line{width:86px}#samples col.id{width:24%}
#samples col.errors{width:72px}#samples td.id{white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.legend{display:flex;flex-wrap:wrap;gap:10px;margin:6px 0 10px;font-size:12px}
.legend span{border:1px solid #dfe3ea;padding:1px 8px}
th .toolname{display:block;font-weight:400;color:#4a5468}
.hidden-char{font:11px monospace;color:#8a1c1c;background:#fde4e1;border:1px solid #e5a39b;border-radius:3px;padding:0 2px}
.agent{font-weight:400;text-transform:none;color:#4a5468}.decisive{outline:3px solid #c0392b;outline-offset:1px}
.decisive-mark{color:#c0392b;font-weight:600;margin-right:6px}mark.cite{background:#ffe58a}
.keys kbd{border:1px solid #aaa;border-radius:3px;padding:0 4px;background:#fff}
a.full{font-style:italic;white-space:nowrap}
"""
"""The one style sheet of every page: the report, the calibration page and the viewer.

The viewer's pages (``<body class="app">``) have a header bar and no margin of their own.
"""

CLIP = 1_000
"""Characters of a text :func:`clipped` shows before "show all"."""

FULL = 200_000
"""Characters of a text :func:`clipped` keeps in the page at all (bounds a page's size)."""


def nonce() -> str:
    """A fresh nonce for a page's one script."""
    return secrets.token_urlsafe(16)


def file_policy(token: str) -> str:
    """The Content-Security-Policy of a page written to a file: only its own script runs."""
    return (
        f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'nonce-{token}'"
    )


def document(
    title: str,
    body: str,
    *,
    token: str,
    script: str = "",
    policy: str | None = None,
    meta: Mapping[str, str] | None = None,
    app: bool = False,
) -> str:
    """A whole page: the shell, the style sheet, ``body`` and one nonce'd script.

    ``title`` is escaped here; ``body`` and ``script`` are HTML and JavaScript as given.
    ``policy`` is written as a ``<meta http-equiv>`` (a file's page; the viewer sends its
    policy as a header instead); ``meta`` adds ``<meta name=... content=...>`` tags; ``app``
    marks a viewer page. The script ends by setting ``data-ready="1"`` on the body (what the
    browser tests wait for).
    """
    head = ['<meta charset="utf-8">']
    if policy is not None:
        head.append(f'<meta http-equiv="Content-Security-Policy" content="{policy}">')
    head += [
        f'<meta name="{escape_attribute(n)}" content="{escape_attribute(c)}">'
        for n, c in (meta or {}).items()
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head>'
        + "\n".join(head)
        + '\n<link rel="icon" href="data:,">'
        + f"<title>{escape_attribute(title)}</title><style>{STYLESHEET}</style></head>\n"
        + ('<body class="app">' if app else "<body>")
        + f'\n{body}\n<script nonce="{token}">{script}'
        + "document.body.setAttribute('data-ready','1');</script>\n</body></html>\n"
    )


def escape_text(value: object) -> str:
    """``value`` as escaped HTML text, hidden characters shown as a marked ``<U+202E>``.

    Lone surrogates are shown escaped; bidirectional controls, NUL and the other control
    characters (see :data:`turneval._hidden.HIDDEN`) are never written as such, so that they
    cannot reorder or hide the text around them, as a code review tool shows them.
    """
    text = _text(value)
    if HIDDEN.search(text) is None:
        return html.escape(text, quote=True)
    return "".join(
        f'<span class="hidden-char" title="hidden character">{html.escape(code(part))}</span>'
        if index % 2
        else html.escape(part, quote=True)
        for index, part in enumerate(HIDDEN.split(text))
    )


def escape_attribute(value: object) -> str:
    """``value`` escaped for an attribute or a ``<title>``: hidden characters as ``<U+202E>``."""
    return html.escape(HIDDEN.sub(lambda m: code(m.group()), _text(value)), quote=True)


def cut(text: object, size: int = 160) -> str:
    """``text`` (not escaped) cut to ``size`` characters with an ellipsis."""
    words = str(text)
    return words if len(words) <= size else words[: size - 1] + "…"


def clipped(value: object) -> str:
    """Escaped text, cut at :data:`CLIP` characters with the rest (up to :data:`FULL`) folded."""
    text = str(value)
    if len(text) <= CLIP:
        return escape_text(text)
    full = text[:FULL]
    note = f"\n[{len(text) - FULL:,} more characters not shown]" if len(text) > FULL else ""
    return (
        f"{escape_text(text[:CLIP])}<details class='more'><summary>show all {len(text):,} characters"
        f"</summary>{escape_text(full)}{escape_text(note)}</details>"
    )


def count(number: int, noun: str) -> str:
    """``1 metric``, ``2 metrics``."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def format_value(value: float | None, digits: int = 3) -> str:
    """A figure as the pages show it: ``digits`` decimals, ``n/a`` for a missing value."""
    return (
        "n/a"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else f"{value:.{digits}f}"
    )


def run_figure(value: float) -> str:
    """A run-level figure: whole numbers (counts: unstable rows, flaky scenarios) as such.

    Shares and rates keep three decimals.
    """
    return f"{value:.0f}" if float(value).is_integer() else format_value(value)


def shade(value: Any, neutral: bool = False) -> str:
    """The verdict colour of a value in [0, 1]: ``good`` (>= 0.8), ``mid`` (>= 0.5), ``bad``.

    "" for anything else (a bool, a text, NaN, a 1-5 score); ``neutral`` for a value that is
    no verdict (whether a tool was used, a cost to keep down).
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        return ""
    if neutral:
        return "neutral"
    return "good" if value >= 0.8 else "mid" if value >= 0.5 else "bad"


def histogram(name: str, values: np.ndarray, bins: int = 10) -> str:
    """An inline SVG histogram of a metric's scored values (no script, no external file)."""
    import numpy as np

    width, height, pad = 260, 110, 18
    if values.size == 0:
        return f'<div class="hist"><b>{escape_text(name)}</b><div class="muted">no scored rows</div></div>'
    low, high = (
        (0.0, 1.0)
        if values.min() >= 0 and values.max() <= 1
        else (float(values.min()), float(values.max()))
    )
    if high == low:
        high = low + 1.0
    counts, edges = np.histogram(values, bins=bins, range=(low, high))
    top = max(int(counts.max()), 1)
    bar = (width - 2 * pad) / bins
    rects = []
    for index, found in enumerate(counts):
        h = (height - 2 * pad) * int(found) / top
        x = pad + index * bar
        y = height - pad - h
        label = f"{edges[index]:.2f}–{edges[index + 1]:.2f}: {int(found)}"
        rects.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{bar - 2:.1f}" height="{h:.1f}" fill="#4f7cd8">'
            f"<title>{escape_attribute(label)}</title></rect>"
        )
    axis = (
        f'<text x="{pad}" y="{height - 4}" font-size="10">{low:g}</text>'
        f'<text x="{width - pad}" y="{height - 4}" font-size="10" text-anchor="end">{high:g}</text>'
        f'<text x="{pad}" y="12" font-size="10">tallest bar: {top} row{"s" if top != 1 else ""}</text>'
    )
    svg = (
        f'<svg width="{width}" height="{height}" role="img" aria-label="{escape_attribute(name)} histogram">'
        + "".join(rects)
        + axis
        + "</svg>"
    )
    return f'<div class="hist"><b>{escape_text(name)}</b><br>{svg}</div>'


def clusters_table(
    clusters: Sequence[FailureCluster], shown: int, link: str = "#sample-{index}"
) -> str:
    """The failure clusters of ``shown`` rows, largest first, with three example rows each.

    ``link`` is where an example row links to (``{index}``: the row's index); "" when there
    is no cluster.
    """
    if not clusters:
        return ""
    items = []
    for cluster in clusters:
        title = cluster.name or cluster.label or "(no words)"
        agents = ", ".join(f"{a} {n}" for a, n in cluster.agents.items())
        examples = "".join(
            f'<li><a href="{escape_attribute(link.format(index=r.index))}">row {r.index + 1}</a>: '
            f"{clipped(r.reason)}</li>"
            for r in cluster.examples(3)
        )
        items.append(
            f"<tr><td>{escape_text(title)}</td><td class='num'>{cluster.size}</td>"
            f"<td class='num'>{cluster.share:.0%}</td><td>{escape_text(agents)}</td>"
            f"<td><ul>{examples}</ul></td></tr>"
        )
    return (
        f'<h2>Failure clusters <span class="muted">(failed rows of the {shown} shown, grouped by '
        "why they failed; turneval clusters RUN for all of them)</span></h2>"
        '<table id="clusters"><thead><tr><th>cluster</th><th>rows</th><th>share</th>'
        f"<th>blamed</th><th>examples</th></tr></thead><tbody>{''.join(items)}</tbody></table>"
    )

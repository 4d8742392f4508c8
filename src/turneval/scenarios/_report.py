"""The generation report: coverage tables, the scenarios kept, those left out and why (HTML).

One self-contained page, no script: every text goes through
:func:`turneval.report.escape_text` (HTML-escaped, hidden characters shown).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from turneval.report import escape_text
from turneval.scenarios._quality import scenario_tools

if TYPE_CHECKING:
    from turneval.scenarios._engine import GenerationResult
    from turneval.simulation import Scenario

__all__ = [
    "generation_html",
]

_CSS = (
    "body{font:14px/1.45 system-ui,sans-serif;margin:16px;color:#1d2430}"
    "table{border-collapse:collapse;margin:6px 14px 10px 0;display:inline-table;"
    "vertical-align:top}td,th{border:1px solid #dde1e7;padding:3px 7px;text-align:left;"
    "vertical-align:top}th{background:#eef1f5}tr.gap td{background:#fbf0c9}"
    ".muted{color:#6b7380}details{margin:2px 0}pre{white-space:pre-wrap;margin:0}"
)


def _row(scenario: Scenario) -> str:
    record: dict[str, Any] = dict((scenario.metadata or {}).get("generated") or {})
    facts = "; ".join(f"{k}: {v}" for k, v in scenario.user_facts.items())
    calls = ", ".join(
        f"{c.name}({json.dumps(c.args, ensure_ascii=False)})"
        for c in scenario.reference_tool_calls or []
    )
    state = record.get("expected_end_state")
    extra = (
        "<details><summary>expected end state</summary><pre>"
        + escape_text(json.dumps(state, ensure_ascii=False, indent=1))
        + "</pre></details>"
        if state is not None
        else ""
    )
    return (
        f"<tr><td>{escape_text(scenario.id or '')}</td><td>{escape_text(scenario.goal)}"
        f"<div class='muted'>{escape_text(scenario.persona or '')}</div></td>"
        f"<td>{escape_text(record.get('kind', ''))}<br>{escape_text(record.get('source', ''))}</td>"
        f"<td>{escape_text(record.get('difficulty') or '')}<br>"
        f"{escape_text(record.get('persona_type') or '')}</td>"
        f"<td>{escape_text(', '.join(scenario_tools(scenario)))}</td>"
        f"<td>{escape_text(facts)}</td><td>{escape_text(calls)}{extra}</td></tr>"
    )


def generation_html(result: GenerationResult) -> str:
    """The report of a generation as one HTML page."""
    head = (
        "<tr><th>id</th><th>goal / persona</th><th>kind / source</th><th>difficulty / "
        "persona type</th><th>tools</th><th>facts</th><th>reference actions</th></tr>"
    )
    kept = "".join(_row(s) for s in result.scenarios)
    left = "".join(
        f"<tr><td>{escape_text(d.stage)}</td><td>{escape_text(d.scenario.goal)}</td>"
        f"<td>{escape_text(d.reason)}</td></tr>"
        for d in result.discarded
    )
    failed = "".join(
        f"<li>{escape_text(f.label)}: {escape_text(f.error)}</li>" for f in result.failed
    )
    skipped = "".join(f"<li>{escape_text(reason)}</li>" for reason in result.skipped)
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>generated scenarios</title><style>{_CSS}</style></head><body>"
        f"<h1>{len(result.scenarios)} generated scenarios</h1>"
        f"<p class='muted'>source {escape_text(result.source)}, seed {result.seed}, model "
        f"{escape_text(result.model or '')}; {result.requests} requests "
        f"({result.answered_before} answered before, {result.usage.calls} sent, "
        f"{result.usage.cached_calls} from the cache)</p>"
        f"<h2>Coverage</h2>{result.coverage.html()}"
        f"<h2>Scenarios</h2><table>{head}{kept}</table>"
        f"<h2>Left out ({len(result.discarded)})</h2>"
        f"<table><tr><th>why</th><th>goal</th><th>reason</th></tr>{left}</table>"
        + (f"<h2>Failed requests</h2><ul>{failed}</ul>" if failed else "")
        + (f"<h2>Skipped inputs</h2><ul>{skipped}</ul>" if skipped else "")
        + "</body></html>"
    )

"""A self-contained HTML report: no network, every piece of sample text escaped.

Escaping also shows hidden characters (bidirectional controls, NUL and other controls) as a
marked ``<U+202E>`` instead of writing them, so that they cannot reorder or hide what is shown.

The page carries a Content-Security-Policy that only allows its own nonce'd script, so even an
unescaped ``<script>`` could not run; escaping is the first defence, the policy the second.
"""

from __future__ import annotations

import html
import json
import math
import secrets
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import numpy as np

from turneval._hidden import HIDDEN as _HIDDEN
from turneval._hidden import code as _code
from turneval._hidden import text as _text
from turneval.aggregate import AGENT_PREFIX, BLAME_PREFIX, unstable
from turneval.clusters.grouping import FailureCluster, cluster_failures
from turneval.messages import AIMessage, ToolCall, ToolMessage, message_agents
from turneval.rows import AGENT_FIGURES
from turneval.samples import MultiTurnSample, SingleTurnSample
from turneval.usage import Usage

if TYPE_CHECKING:
    from turneval.aggregate import MetricSummary
    from turneval.results import EvaluationResult, SampleResult

__all__ = [
    "STYLESHEET",
    "agents_table_html",
    "clusters_html",
    "context_summary",
    "decisive_steps",
    "escape_attribute",
    "escape_text",
    "format_value",
    "histogram_html",
    "render_html",
    "render_report",
    "trials_grid_html",
]

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1d2433;background:#fafbfc}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}
.muted{color:#6b7385}table{border-collapse:collapse;background:#fff}
th,td{border:1px solid #dfe3ea;padding:4px 8px;text-align:left;vertical-align:top}
th[data-sort]{cursor:pointer;user-select:none;background:#f0f3f8}th[data-sort]:after{content:" \\2195";color:#9aa3b5}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.unstable{box-shadow:inset 0 0 0 2px #b7791f}.good{background:#e3f6e8}.mid{background:#fff4d6}.bad{background:#fde4e1}.err{background:#f3e8ff}
.hists{display:flex;flex-wrap:wrap;gap:16px}.hist{background:#fff;border:1px solid #dfe3ea;padding:8px}
.drill td{background:#f7f9fc}.conv{max-width:720px}.msg{margin:4px 0;padding:6px 8px;border-radius:6px;white-space:pre-wrap;word-break:break-word}
.human{background:#e8f0fe}.ai{background:#eef7ee}.tool{background:#f4f4f4;font-family:monospace;font-size:12px}
.system{background:#fff4d6}.call{font-family:monospace;font-size:12px;background:#fff;border:1px dashed #c9d1de;padding:3px 6px;margin:3px 0}
.role{font-weight:600;margin-right:6px}.grid{display:grid;grid-template-columns:minmax(300px,720px) minmax(260px,1fr);gap:16px}
.metric{border:1px solid #dfe3ea;background:#fff;padding:6px 8px;margin-bottom:6px}.error{color:#8a1c1c;white-space:pre-wrap}
button.open{font-size:12px}details.more summary{cursor:pointer;color:#4f5f85;font-size:12px}
body{max-width:1400px}#samples{width:100%;table-layout:fixed}
#samples th{font-size:12px;overflow-wrap:break-word}
#samples td{overflow-wrap:anywhere}#samples col.line{width:86px}#samples col.id{width:24%}
#samples col.errors{width:72px}#samples td.id{white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.grid{grid-template-columns:minmax(0,3fr) minmax(0,2fr)}.conv{max-width:none}
.legend{display:flex;flex-wrap:wrap;gap:10px;margin:6px 0 10px;font-size:12px}
.legend span{border:1px solid #dfe3ea;padding:1px 8px}.neutral{background:#eef1f6}
th .toolname{display:block;font-weight:400;color:#4a5468}
.hidden-char{font:11px monospace;color:#8a1c1c;background:#fde4e1;border:1px solid #e5a39b;border-radius:3px;padding:0 2px}
.agent{font-weight:400;color:#4a5468}.decisive{outline:3px solid #c0392b;outline-offset:1px}
.decisive-mark{color:#c0392b;font-weight:600;margin-right:6px}
"""
STYLESHEET = _CSS
"""The report's style sheet, which the other self-contained pages (calibration's) share."""

_JS = """
(function () {
  function sortBy(th) {
    var key = th.getAttribute('data-sort');
    var table = th.closest('table');
    var dir = th.getAttribute('data-dir') === 'asc' ? 'desc' : 'asc';
    th.setAttribute('data-dir', dir);
    var groups = Array.prototype.slice.call(table.querySelectorAll('tbody.sample'));
    groups.sort(function (a, b) {
      var x = parseFloat(a.getAttribute('data-' + key));
      var y = parseFloat(b.getAttribute('data-' + key));
      if (isNaN(x) && isNaN(y)) return 0;
      if (isNaN(x)) return 1;
      if (isNaN(y)) return -1;
      return dir === 'asc' ? x - y : y - x;
    });
    groups.forEach(function (g) { table.appendChild(g); });
  }
  function toggle(button, open) {
    var row = button.closest('tbody').querySelector('tr.drill');
    row.hidden = open === undefined ? !row.hidden : !open;
    button.setAttribute('aria-expanded', String(!row.hidden));
    button.textContent = row.hidden ? 'open' : 'close';
  }
  document.querySelectorAll('th[data-sort]').forEach(function (th) {
    th.addEventListener('click', function () { sortBy(th); });
  });
  document.querySelectorAll('button.open').forEach(function (b) {
    b.addEventListener('click', function () { toggle(b); });
  });
  var match = /^#sample-(\\d+)$/.exec(window.location.hash);
  if (match) {
    var target = document.getElementById('sample-' + match[1]);
    if (target) { toggle(target.querySelector('button.open'), true); target.scrollIntoView(); }
  }
  document.body.setAttribute('data-ready', '1');
})();
"""


_CLIP = 1_000  # characters of a text shown in a report cell before "show all"
_FULL = 200_000  # characters of the full value kept in the page (bounds the report's size)


def _count(number: int, noun: str) -> str:
    """``1 metric``, ``2 metrics``."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def escape_text(value: object) -> str:
    """``value`` as escaped HTML text, hidden characters shown as a marked ``<U+202E>``.

    Lone surrogates are shown escaped; bidirectional controls, NUL and the other control
    characters (see ``_HIDDEN``) are never written as such, so that they cannot reorder or
    hide the text around them, as a code review tool shows them.
    """
    text = _text(value)
    if _HIDDEN.search(text) is None:
        return html.escape(text, quote=True)
    return "".join(
        f'<span class="hidden-char" title="hidden character">{html.escape(_code(part))}</span>'
        if index % 2
        else html.escape(part, quote=True)
        for index, part in enumerate(_HIDDEN.split(text))
    )


def escape_attribute(value: object) -> str:
    """``value`` escaped for an attribute or a ``<title>``: hidden characters as ``<U+202E>``."""
    return html.escape(_HIDDEN.sub(lambda m: _code(m.group()), _text(value)), quote=True)


def _clip(value: object) -> str:
    """Escaped text, cut at ``_CLIP`` characters with the full value one click away."""
    text = str(value)
    if len(text) <= _CLIP:
        return escape_text(text)
    full = text[:_FULL]
    note = f"\n[{len(text) - _FULL:,} more characters not shown]" if len(text) > _FULL else ""
    return (
        f"{escape_text(text[:_CLIP])}<details class='more'><summary>show all {len(text):,} characters"
        f"</summary>{escape_text(full)}{escape_text(note)}</details>"
    )


def format_value(value: float | None, digits: int = 3) -> str:
    """A figure as the report shows it: ``digits`` decimals, ``n/a`` for a missing value."""
    return (
        "n/a"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else f"{value:.{digits}f}"
    )


def _figure(value: float) -> str:
    """A run-level figure: whole numbers (counts: unstable rows, flaky scenarios) as such.

    Shares and rates keep three decimals.
    """
    return f"{value:.0f}" if float(value).is_integer() else format_value(value)


def _shade(value: float | None, neutral: bool = False) -> str:
    if value is None or math.isnan(value) or not 0.0 <= value <= 1.0:
        return ""
    if neutral:  # not better-is-higher: shown without a verdict colour
        return "neutral"
    return "good" if value >= 0.8 else "mid" if value >= 0.5 else "bad"


_LEGEND = (
    '<div class="legend" id="legend"><span class="good">&ge; 0.8</span>'
    '<span class="mid">0.5 &ndash; 0.8</span><span class="bad">&lt; 0.5</span>'
    '<span class="err">error (the metric failed on this row)</span>'
    '<span class="neutral">neither good nor bad (e.g. whether a tool was used), or a cost to keep '
    "down (seconds, money, tokens)</span>"
    '<span class="unstable">~ unstable: the judge\'s votes fall on both sides of the pass '
    "threshold</span>"
    "<span>uncoloured: outside 0&ndash;1 (e.g. 1&ndash;5 rubric scores)</span></div>"
)


def _tool_names(rows: Sequence[SampleResult], names: Sequence[str]) -> dict[str, str]:
    """Metrics about one named tool (``details["tool_name"]``): name -> the tool."""
    tools: dict[str, str] = {}
    for row in rows:
        for name in names:
            result = row.results.get(name)
            if name not in tools and result is not None and "tool_name" in result.details:
                tools[name] = str(result.details["tool_name"])
        if len(tools) == len(names):
            break
    return tools


def _label(row: SampleResult) -> str:
    """The row's id: ``metadata["id"]`` or its first user message."""
    if row.sample is None:
        return ""
    from turneval.samples import sample_id

    return sample_id(row.sample, row.index)


def histogram_html(name: str, values: np.ndarray, bins: int = 10) -> str:
    """An inline SVG histogram of a metric's scored values (no script, no external file)."""
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
    for index, count in enumerate(counts):
        h = (height - 2 * pad) * int(count) / top
        x = pad + index * bar
        y = height - pad - h
        label = f"{edges[index]:.2f}–{edges[index + 1]:.2f}: {int(count)}"
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


def _call(call: ToolCall) -> str:
    args = json.dumps(call.args, ensure_ascii=False)
    return f'<div class="call">{escape_text(call.name)}({_clip(args)})</div>'


def decisive_steps(details: Mapping[str, Any]) -> dict[int, str]:
    """The steps attributions name: step -> the metric that named it.

    ``details`` holds each metric's result details by name (a row's, or a results.jsonl
    record's ``<name>_details``); an attribution is ``details["attribution"]["step"]``.
    """
    steps: dict[int, str] = {}
    for name, found in details.items():
        attribution = found.get("attribution") if isinstance(found, Mapping) else None
        if isinstance(attribution, Mapping) and isinstance(attribution.get("step"), int):
            steps.setdefault(attribution["step"], name)
    return steps


def _decisive_steps(row: SampleResult) -> dict[int, str]:
    return decisive_steps({name: result.details for name, result in row.results.items()})


def _conversation(sample: Any, decisive: Mapping[int, str] | None = None) -> str:
    if isinstance(sample, MultiTurnSample):
        parts = []
        owners = message_agents(sample.user_input)
        for index, message in enumerate(sample.user_input):
            body = _clip(message.content)
            calls = (
                "".join(_call(c) for c in message.tool_calls or [])
                if isinstance(message, AIMessage)
                else ""
            )
            extra = ""
            if isinstance(message, ToolMessage) and message.tool_call_id:
                extra = f' <span class="muted">(call {escape_text(message.tool_call_id)})</span>'
            owner = owners[index]
            agent = f' <span class="agent">{escape_text(owner)}</span>' if owner else ""
            marked, mark = "", ""
            if decisive and index in decisive:  # the step an attribution names
                marked = " decisive"
                mark = (
                    f'<span class="decisive-mark" title="{escape_attribute(decisive[index])}">'
                    "decisive step</span>"
                )
            parts.append(
                f'<div class="msg {message.type}{marked}" id="msg-{index}">{mark}'
                f'<span class="role">{escape_text(message.type)}{agent}</span>'
                f"{extra}{body}{calls}</div>"
            )
        if sample.reference_tool_calls is not None:
            parts.append(
                "<b>Reference tool calls</b>"
                + "".join(_call(c) for c in sample.reference_tool_calls)
            )
        for label, value in (
            ("Reference", sample.reference),
            ("Reference topics", sample.reference_topics),
        ):
            if value is not None:
                parts.append(f"<div><b>{label}:</b> {_clip(value)}</div>")
        return "".join(parts)
    if isinstance(sample, SingleTurnSample):
        fields = sample.model_dump(exclude_none=True)
        return "".join(
            f'<div class="msg tool"><span class="role">{escape_text(k)}</span>{_clip(v)}</div>'
            for k, v in fields.items()
        )
    return '<div class="muted">sample not kept</div>'


def context_summary(details: Mapping[str, Any] | None) -> str | None:
    """What the judge saw of a row, in one line (from ``details["context"]``), or None.

    ``context: windowed · 6 requests + 4 summaries · 35,102 prompt tokens (largest 5,087) ·
    items per request 16, 16, 8 · window 8,192 tokens (table), tiktoken:cl100k_base``.
    """
    seen = (details or {}).get("context")
    if not isinstance(seen, Mapping) or "context" not in seen:
        return None
    parts = [f"context: {seen['context']}"]
    requests = f"{seen.get('requests', 0)} request(s)"
    if seen.get("summaries"):
        requests += f" + {seen['summaries']} summaries"
    parts.append(requests)
    parts.append(
        f"{int(seen.get('prompt_tokens', 0)):,} prompt tokens "
        f"(largest {int(seen.get('largest_prompt', 0)):,})"
    )
    items = seen.get("items_per_request")
    if isinstance(items, list) and items:
        shown = ", ".join(str(n) for n in items[:12]) + (", ..." if len(items) > 12 else "")
        parts.append(f"items per request {shown}")
    if "context_tokens" in seen:
        parts.append(
            f"window {int(seen['context_tokens']):,} tokens ({seen.get('limits', '?')}), "
            f"{seen.get('counter', '?')}"
        )
    return " · ".join(parts)


def _drill(row: SampleResult, names: Sequence[str]) -> str:
    metrics = []
    for name in names:
        result, failure = row.results.get(name), row.failures.get(name)
        if result is not None:
            seen = context_summary(result.details)
            note = f'<div class="muted context">{escape_text(seen)}</div>' if seen else ""
            metrics.append(
                f'<div class="metric"><b>{escape_text(name)}</b> = {format_value(result.value)}<br>{_clip(result.reason)}{note}</div>'
            )
        elif failure is not None:
            trace = (
                "<details class='traceback'><summary>traceback</summary>"
                f'<pre class="error">{escape_text(failure.traceback)}</pre></details>'
                if failure.traceback
                else ""
            )
            metrics.append(
                f'<div class="metric err"><b>{escape_text(name)}</b> failed<div class="error">{_clip(failure)}</div>{trace}</div>'
            )
    return (
        f'<div class="grid"><div class="conv">{_conversation(row.sample, _decisive_steps(row))}</div>'
        f"<div>{''.join(metrics)}</div></div>"
    )


def _usage_line(
    usage: Usage | None, summaries: Mapping[str, MetricSummary], names: Sequence[str]
) -> str:
    """The run's judge requests, split so they add up to the per-metric counts."""
    if usage is None or not (usage.calls or usage.cached_calls):
        return ""
    usages = [summaries[n].usage for n in names]
    scored = sum(u.calls for u in usages if u is not None)
    other = usage.calls - scored
    split = f" ({scored} for scored rows + {other} for failed rows and retries)" if other else ""
    return (
        f" · judge: {usage.calls} requests{split}, {usage.cached_calls} cached, "
        f"{usage.input_tokens:,} input + {usage.output_tokens:,} output tokens"
    )


def trials_grid_html(result: EvaluationResult) -> str:
    """Simulated runs: one row per scenario, one cell per trial (stop reason, pass/fail marks)."""
    grid: dict[str, dict[int, SampleResult]] = {}
    for row in result.rows:
        if row.trial is not None:
            grid.setdefault(row.trial.scenario_id, {})[row.trial.index] = row
    if not grid:
        return ""
    names = result.metric_names
    trials = max(max(cells) for cells in grid.values()) + 1
    flaky: dict[str, list[str]] = {}  # per scenario: its metrics whose trials disagree
    for name in names if trials > 1 else ():
        for mixed in result.flaky_scenarios(name):
            entry = f"{name}: {str(mixed).partition(': ')[2]}"
            flaky.setdefault(mixed.scenario_id, []).append(entry)
    body = []
    for scenario, cells in grid.items():
        tds = []
        for trial in range(trials):
            cell = cells.get(trial)
            if cell is None:
                tds.append("<td></td>")
                continue
            marks = []
            for name in names:
                value = cell.results.get(name)
                if value is None:
                    marks.append(
                        f'<span class="err" title="{escape_attribute(name)}: failed">&#x2715;</span>'
                    )
                else:
                    ok = value.value >= result.success_threshold(name)
                    marks.append(
                        f'<span class="{"good" if ok else "bad"}" title="{escape_attribute(name)}={format_value(value.value)}">'
                        f"{'&#x2713;' if ok else '&#x2717;'}</span>"
                    )
            stop = cell.trial.stop_reason if cell.trial is not None else None
            reason = stop or "user model failed"  # no stop reason: the simulated user failed
            tds.append(
                f'<td class="trial"><a href="#sample-{cell.index}">{escape_text(reason)}</a> {"".join(marks)}</td>'
            )
        marked = "<br>".join(escape_text(entry) for entry in flaky.get(scenario, []))
        tds.append(f'<td class="flaky">{marked}</td>' if flaky else "")
        body.append(f"<tr><td>{escape_text(scenario)}</td>{''.join(tds)}</tr>")
    heads = "".join(f"<th>trial {t}</th>" for t in range(trials))
    if flaky:
        heads += '<th title="mixed outcomes: pass rate and 95% exact interval">flaky</th>'
    count = f"; {len(flaky)} flaky (mixed outcomes)" if flaky else ""
    legend = ", ".join(escape_text(n) for n in names)
    return (
        f'<h2>Trials <span class="muted">(marks per metric: {legend}; success = value at or '
        f"above its threshold{count})</span></h2>"
        f'<table id="trials"><thead><tr><th>scenario</th>{heads}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


_AGENT_HELP = {
    "latency_in_seconds": "seconds an agent run took (runs that succeeded)",
    "failure": "the failure rate: 1 for a run the agent failed, 0 else",
    "agent_total_tokens": "the agent's tokens, input and output (runs that succeeded)",
    "steps": "AI messages the agent produced (runs that succeeded)",
}


def _agent_table(summaries: Mapping[str, MetricSummary], names: Sequence[str]) -> str:
    """The agent figures of the summary (latency, failure rate, tokens, steps), if any."""
    rows = []
    for name in AGENT_FIGURES:
        s = summaries.get(name)
        if s is None or name in names:
            continue
        ci = "n/a" if s.ci_low is None else f"[{format_value(s.ci_low)}, {format_value(s.ci_high)}]"
        rows.append(
            f'<tr><td title="{escape_attribute(_AGENT_HELP[name])}">{escape_text(name)}</td>'
            f"<td class='num'>{format_value(s.mean)}</td><td class='num'>{ci}</td>"
            f"<td class='num'>{format_value(s.std)}</td><td class='num'>{s.count}</td>"
            f"<td class='num'>{s.failed}</td></tr>"
        )
    if not rows:
        return ""
    return (
        '<h2>Agent <span class="muted">(runs of the agent: latency, failure rate, tokens and '
        "steps; a failed run is left out of the other figures)</span></h2>"
        '<table id="agent"><thead><tr><th>figure</th><th>mean</th><th>95% CI</th><th>std</th>'
        "<th>runs</th><th>left out</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def agents_table_html(extras: Mapping[str, Mapping[str, float] | None]) -> str:
    """Metrics broken down by agent (``by_agent``) and the agents blamed (attributions).

    ``extras`` holds each metric's summary ``extra`` by name (the keys
    :func:`~turneval.aggregate.agent_figures` writes); "" when none has them.
    """
    rows = []
    for name, found in extras.items():
        extra = found or {}
        for prefix, what in ((AGENT_PREFIX, "mean"), (BLAME_PREFIX, "blamed")):
            cells = [
                f"{escape_text(key[len(prefix) :])}: "
                + (f"{value:.1%}" if prefix == BLAME_PREFIX else format_value(value))
                + f" <span class='muted'>({int(extra.get(f'{key}.rows', 0))} rows)</span>"
                for key, value in extra.items()
                if key.startswith(prefix) and not key.endswith(".rows")
            ]
            if cells:
                rows.append(
                    f"<tr><td>{escape_text(name)}</td><td>{what}</td><td>{' · '.join(cells)}</td></tr>"
                )
    if not rows:
        return ""
    return (
        '<h2>By agent <span class="muted">(each agent scored on its own share of the '
        "conversation, by_agent=True; the agents attributions blame)</span></h2>"
        '<table id="by-agent"><thead><tr><th>metric</th><th>figure</th><th>agents</th></tr>'
        f"</thead><tbody>{''.join(rows)}</tbody></table>"
    )


def clusters_html(
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
            f"{_clip(r.reason)}</li>"
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


def render_report(
    *,
    title: str,
    metric_names: Sequence[str],
    summaries: Mapping[str, MetricSummary],
    values: Mapping[str, np.ndarray],
    rows: Sequence[SampleResult],
    total_rows: int,
    usage: Usage | None = None,
    tools: Mapping[str, str] | None = None,
    trials_grid: str = "",
    lower_is_better: Collection[str] = (),
) -> str:
    """The report from its parts (the streaming CLI keeps only a bounded set of ``rows``).

    ``tools`` names the tool of metrics about one tool (``trajectory_single_tool_use``), for
    their headers and neutral colours; by default it is read from the rows' details.
    ``trials_grid`` is the per-scenario trials table of simulated runs (HTML), if any.
    ``lower_is_better`` names the metrics where a lower value is better (latency, cost): their
    values are shown without a verdict colour, as seconds and money are no share.
    ``summaries`` may hold the agent figures (:data:`~turneval.results.AGENT_FIGURES`) too:
    they are shown in a table of their own, and so are the metrics broken down by agent. When
    a row carries an attribution (:class:`~turneval.metrics.FailureAttribution`), the failed
    rows shown are grouped in failure clusters (:func:`turneval.clusters.cluster_failures`)
    and each conversation marks its decisive step.
    """
    nonce = secrets.token_urlsafe(16)
    names = list(metric_names)
    tools = {**_tool_names(rows, names), **(tools or {})}
    plain = set(tools) | set(lower_is_better)  # shown without a verdict colour
    summary_rows = []
    for name in names:
        s = summaries[name]
        ci = "n/a" if s.ci_low is None else f"[{format_value(s.ci_low)}, {format_value(s.ci_high)}]"
        tokens = (
            ""
            if s.usage is None
            else f"{s.usage.total_tokens:,} ({s.usage.calls} requests, {s.usage.cached_calls} cached)"
        )
        figures = " · ".join(f"{key} {_figure(value)}" for key, value in (s.extra or {}).items())
        summary_rows.append(
            f"<tr><td>{escape_text(name)}</td><td class='num {_shade(s.mean, name in plain)}'>{format_value(s.mean)}</td>"
            f"<td class='num'>{ci}</td><td class='num'>{format_value(s.std)}</td>"
            f"<td class='num'>{s.count}</td><td class='num'>{s.failed}</td><td>{escape_text(tokens)}</td>"
            f"<td>{escape_text(figures)}</td></tr>"
        )
    heads = "".join(
        f'<th data-sort="k{i}" title="{escape_attribute(n)}">{escape_text(n).replace("_", "_<wbr>")}'
        + (f'<span class="toolname">tool: {escape_text(tools[n])}</span>' if n in tools else "")
        + "</th>"
        for i, n in enumerate(names)
    )
    groups = []
    for row in rows:
        cells, attrs = [], [f'data-index="{row.index}"', f'data-failures="{len(row.failures)}"']
        for i, name in enumerate(names):
            result = row.results.get(name)
            if result is None:
                attrs.append(f'data-k{i}="NaN"')
                cells.append(
                    "<td class='num err'>error</td>" if name in row.failures else "<td></td>"
                )
            else:
                attrs.append(f'data-k{i}="{result.value!r}"')
                shade = _shade(result.value, name in plain)
                if unstable(result):  # repeated votes straddle the pass threshold
                    votes = ", ".join(f"{v:g}" for v in result.details["repeats"]["values"])
                    cells.append(
                        f"<td class='num {shade} unstable' title='unstable: votes {escape_text(votes)}'>"
                        f"{format_value(result.value)} ~</td>"
                    )
                    continue
                cells.append(f"<td class='num {shade}'>{format_value(result.value)}</td>")
        label = _label(row)
        groups.append(
            f'<tbody class="sample" id="sample-{row.index}" {" ".join(attrs)}>'
            f'<tr><td class="line"><button class="open" type="button" aria-expanded="false">open</button> '
            f"{row.line if row.line is not None else row.index + 1}</td>"
            f'<td class="id" title="{escape_attribute(label)}">{escape_text(label)}</td>'
            f"{''.join(cells)}<td class='num'>{len(row.failures)}</td></tr>"
            f'<tr class="drill" hidden><td colspan="{len(names) + 3}">{_drill(row, names)}</td></tr></tbody>'
        )
    shown = (
        f"{len(rows)} of {total_rows} rows shown"
        if len(rows) < total_rows
        else f"{total_rows} rows"
    )
    usage_line = _usage_line(usage, summaries, names)
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    csp = (
        f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'nonce-{nonce}'"
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape_attribute(title)}</title><style>{_CSS}</style></head>
<body>
<h1>{escape_text(title)}</h1>
<div class="muted">{_count(total_rows, "sample")} · {_count(len(names), "metric")}{escape_text(usage_line)} · generated {generated}</div>
<h2>Summary</h2>
<table id="summary"><thead><tr><th>metric</th><th>mean</th><th>95% CI</th><th>std</th><th>scored</th><th>failed</th><th>judge tokens</th><th title="pass^k and pass@k of simulated trials, pairwise win rates, ...">more figures</th></tr></thead>
<tbody>{"".join(summary_rows)}</tbody></table>
{_agent_table(summaries, names)}
{agents_table_html({name: summaries[name].extra for name in names})}
{clusters_html(_clusters(rows), len(rows))}
{trials_grid}
<h2>Distributions</h2>
<div class="hists">{"".join(histogram_html(n, values.get(n, np.empty(0))) for n in names)}</div>
<h2>Samples <span class="muted">({shown}; click a column to sort, "open" to see the conversation)</span></h2>
{_LEGEND}
<table id="samples"><colgroup><col class="line"><col class="id">{"<col>" * len(names)}<col class="errors"></colgroup>
<thead><tr><th data-sort="index" title="the sample's 1-based line in the input file (the line field of its results.jsonl row; the row number, 1-based, for a run not read from a file)">line</th><th>id / first user message</th>{heads}<th data-sort="failures">errors</th></tr></thead>
{"".join(groups)}</table>
<script nonce="{nonce}">{_JS}</script>
</body></html>
"""


def _clusters(rows: Sequence[SampleResult]) -> list[FailureCluster]:
    """The failure clusters of ``rows`` when an attribution was run on them, else none."""
    if not any(_decisive_steps(row) for row in rows):
        return []
    return cluster_failures(rows)


def render_html(
    result: EvaluationResult, *, title: str = "turneval report", max_rows: int = 5000
) -> str:
    """The report of an :class:`EvaluationResult` (at most ``max_rows`` sample rows)."""
    names = result.metric_names
    values = {
        name: np.asarray(
            [row.results[name].value for row in result.rows if name in row.results], dtype=float
        )
        for name in names
    }
    return render_report(
        title=title,
        metric_names=names,
        summaries=result.summary(),
        values=values,
        rows=result.rows[:max_rows],
        total_rows=len(result.rows),
        usage=result.usage,
        trials_grid=trials_grid_html(result),
        lower_is_better=[m.name for m in result.metrics if not m.higher_is_better],
    )

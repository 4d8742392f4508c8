"""A self-contained HTML report: no network, every piece of sample text escaped.

Escaping also shows hidden characters (bidirectional controls, NUL and other controls) as a
marked ``<U+202E>`` instead of writing them, so that they cannot reorder or hide what is shown.

The page carries a Content-Security-Policy that only allows its own nonce'd script, so even an
unescaped ``<script>`` could not run; escaping is the first defence, the policy the second.
The shell, the style sheet and the shared pieces (escaping, figures, the histogram, the
failure clusters) are :mod:`turneval._html`'s, as the calibration page's and the viewer's.

Longer than 400 lines: one page, its sections (summary, agent figures, clusters, trials,
distributions, samples with their conversations) in the order the page shows them.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import numpy as np

from turneval._html import STYLESHEET as _STYLESHEET
from turneval._html import clipped as _clip
from turneval._html import clusters_table, escape_attribute, escape_text, format_value, histogram
from turneval._html import count as _count
from turneval._html import document as _document
from turneval._html import file_policy as _file_policy
from turneval._html import nonce as _nonce
from turneval._html import run_figure as _figure
from turneval._html import shade as _shade
from turneval._rows import AGENT_FIGURES
from turneval.aggregate import AGENT_PREFIX, BLAME_PREFIX, unstable
from turneval.clusters.grouping import FailureCluster, cluster_failures
from turneval.messages import AIMessage, ToolCall, ToolMessage, message_agents
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

STYLESHEET = _STYLESHEET
"""The style sheet every page shares (the report, the calibration page, the viewer)."""

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
})();
"""


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
    return histogram(name, values, bins)


def clusters_html(
    clusters: Sequence[FailureCluster], shown: int, link: str = "#sample-{index}"
) -> str:
    """The failure clusters of ``shown`` rows, largest first, with three example rows each.

    ``link`` is where an example row links to (``{index}``: the row's index); "" when there
    is no cluster.
    """
    return clusters_table(clusters, shown, link)


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
    nonce = _nonce()
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
    body = f"""<h1>{escape_text(title)}</h1>
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
{"".join(groups)}</table>"""
    return _document(
        title,
        body,
        token=nonce,
        script=_JS,
        policy=_file_policy(nonce),
        meta={"viewport": "width=device-width, initial-scale=1"},
    )


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

"""The viewer's pages as HTML, from the queries' data: the runs list, a run, a comparison.

Every stored value is shown as text (:func:`turneval._html.escape_text`, figures through
:func:`turneval.view._render.figure`), whatever the store holds. A page here is a ``body``
for the shell (:func:`turneval._html.document`); the rows, a conversation and the labeling
page are in :mod:`turneval.view._row_pages`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from turneval._html import clusters_table, cut, escape_attribute, escape_text, histogram
from turneval.report import agents_table_html
from turneval.view._queries import FLIPS, FULL_RUN, METRICS, RUNS, integer
from turneval.view._render import figure, number

if TYPE_CHECKING:
    from turneval.clusters.grouping import FailureCluster
    from turneval.results import EvaluationResult
    from turneval.store import StoredRun, StoredSkip
    from turneval.view._compare import Compared
    from turneval.view._queries import DatasetVersion, Distributions, RunsListing, SummaryLine

__all__ = [
    "DELETE_SCRIPT",
    "Here",
    "compare_body",
    "compare_form",
    "distributions_html",
    "link_to",
    "pager",
    "run_head",
    "runs_body",
    "skipped_html",
    "summary_html",
    "trials_html",
]


@dataclass(frozen=True)
class Here:
    """The page asked for: its path and parameters, to link to itself with changes."""

    path: str
    params: Mapping[str, str]

    def link(self, **changes: Any) -> str:
        """This page's address with ``changes`` (a None removes the parameter)."""
        params = dict(self.params)
        for key, value in changes.items():
            if value is None:
                params.pop(key, None)
            else:
                params[key] = str(value)
        return f"{self.path}?{urlencode(params)}" if params else self.path


def link_to(path: str, **params: Any) -> str:
    """``path`` with ``params`` (those not None) as its query."""
    return f"{path}?{urlencode({k: str(v) for k, v in params.items() if v is not None})}"


def pager(here: Here, offset: int, shown: int, total: int, size: int) -> str:
    """Links to the previous and next page of a list paged by ``offset``."""
    links = []
    if offset > 0:
        back = here.link(offset=max(offset - size, 0) or None)
        links.append(f"<a id='previous' href='{escape_attribute(back)}'>← previous page</a>")
    if offset + shown < total:
        ahead = here.link(offset=offset + size)
        links.append(f"<a id='next' href='{escape_attribute(ahead)}'>next page →</a>")
    return f"<p>{' · '.join(links)}</p>" if links else ""


# -- runs ------------------------------------------------------------------------------------

DELETE_SCRIPT = (
    "document.querySelectorAll('form.delete').forEach(f=>f.addEventListener('submit',"
    "e=>{if(!confirm('Delete this run, its rows and its labels?'))e.preventDefault();}));"
)
"""The runs page's script: a delete asks first."""


def runs_body(listing: RunsListing, here: Here, offset: int, csrf: str) -> str:
    """The runs page: the filters as typed, the runs with a delete button each, the pages."""
    query = here.params
    options = "".join(f"<option value='{escape_attribute(m)}'>" for m in listing.metric_names[:200])
    typed = {key: query.get(key, "").strip() for key in ("q", "dataset", "metric", "model")}
    filters_form = (
        "<form class='filters' method='get' action='/'>"
        f"<label>search<input name='q' value='{escape_attribute(typed['q'])}'></label>"
        f"<label>dataset<input name='dataset' value='{escape_attribute(typed['dataset'])}'></label>"
        f"<label>metric<input name='metric' list='metric-names' "
        f"value='{escape_attribute(typed['metric'])}'><datalist id='metric-names'>{options}"
        f"</datalist></label><label>judge model<input name='model' "
        f"value='{escape_attribute(typed['model'])}'></label><label>from<input type='date' "
        f"name='since' value='{escape_attribute(query.get('since', ''))}'></label><label>to"
        f"<input type='date' name='until' value='{escape_attribute(query.get('until', ''))}'>"
        "</label><button>filter</button></form>"
    )
    rows = []
    for run in listing.runs:
        rid = escape_attribute(run.id)
        rows.append(
            f"<tr class='run' data-run='{rid}'><td><a href='/runs/{rid}'>"
            f"{escape_text(cut(run.name, 200))}</a><br><span class='muted'>"
            f"{escape_text(run.id[:12])}</span></td>"
            f"<td>{escape_text(run.created.strftime('%Y-%m-%d %H:%M'))}</td>"
            f"<td>{escape_text(run.status)}</td><td>{run.rows:,}</td>"
            f"<td>{escape_text(cut(run.dataset_path or '', 200))}</td>"
            f"<td>{escape_text(cut(', '.join(run.metric_names), 300))}</td>"
            f"<td>{escape_text(cut(run.judge_model or '', 100))}</td>"
            f"<td><form method='post' action='/runs/{rid}/delete' class='delete'>"
            f"<input type='hidden' name='csrf' value='{csrf}'>"
            "<button>delete</button></form></td></tr>"
        )
    table = (
        "<table id='runs'><thead><tr><th>run</th><th>started</th><th>status</th>"
        "<th>rows</th><th>dataset</th><th>metrics</th><th>judge</th><th></th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
        if rows
        else "<p class='muted'>no runs match</p>"
    )
    shown, total = len(listing.runs), listing.total
    span = f"{offset + 1:,}-{offset + shown:,} of " if shown and total > shown else ""
    count = f"<p class='muted' id='count'>{span}{total:,} runs</p>"
    return filters_form + count + table + pager(here, offset, shown, total, RUNS)


# -- one run ---------------------------------------------------------------------------------


def run_head(run: StoredRun, version: DatasetVersion | None) -> str:
    """A run's header: status, size, start, version, judge, dataset, error, links."""
    rid = escape_attribute(run.id)
    read = ""
    if version is not None:  # issue 49: the version the run read
        digest = escape_text(version.digest[:12])
        read = (
            f" · <span id='dataset-version'>sha256 {digest} (not in 'turneval datasets')</span>"
            if version.label is None
            else f" · <span id='dataset-version'>version {escape_text(version.label)} "
            f"(sha256 {digest})</span>"
        )
    return (
        f"<p>{escape_text(run.status)} · {run.rows:,} rows · started "
        f"{escape_text(run.created.strftime('%Y-%m-%d %H:%M:%S'))} · turneval "
        f"{escape_text(cut(run.turneval_version, 64))}"
        + (f" · commit {escape_text(run.git_commit[:12])}" if run.git_commit else "")
        + (f" · judge {escape_text(cut(run.judge_model, 200))}" if run.judge_model else "")
        + (f" · dataset {escape_text(cut(run.dataset_path, 500))}" if run.dataset_path else "")
        + read
        + "</p>"
        + (f"<pre class='error'>{escape_text(cut(run.error, 4000))}</pre>" if run.error else "")
        + f"<p><a href='/runs/{rid}/rows'>rows</a> · "
        f"<a href='/runs/{rid}/label'>label rows</a> · "
        f"<a href='/compare?a={rid}'>compare with another run</a> · "
        f"<a href='/runs/{rid}/labels.jsonl'>export labels</a></p>"
    )


def summary_html(
    run: StoredRun, lines: list[SummaryLine], metrics: int, extras: Mapping[str, Any]
) -> str:
    """The summary table: each metric's mean, interval, counts and judge usage."""
    rows = []
    calls = inputs = outputs = 0
    for line in lines:
        spent = ""
        if line.usage is not None:
            calls, inputs, outputs = (
                a + b for a, b in zip((calls, inputs, outputs), line.usage, strict=True)
            )
            spent = (
                f"{line.usage[0]:,} requests, {line.usage[1]:,} in + {line.usage[2]:,} out tokens"
            )
        interval = (
            f"[{number(line.ci_low)}, {number(line.ci_high)}]" if line.ci_low is not None else "n/a"
        )
        link = link_to(f"/runs/{run.id}/rows", metric=line.name, sort="value")
        rows.append(
            f"<tr><td><a href='{escape_attribute(link)}'>{escape_text(cut(line.name, 200))}</a>"
            f"</td><td>{number(line.mean)}</td><td>{interval}</td>"
            f"<td>{figure(line.count)}</td><td>{figure(line.failed)}</td>"
            f"<td>{escape_text(spent)}</td></tr>"
        )
    if not rows:
        return "<p class='muted'>no summary (the run has not finished)</p>"
    table = (
        "<h2>Summary</h2><table id='summary'><thead><tr><th>metric</th><th>mean</th>"
        "<th>95% CI</th><th>scored</th><th>failed</th><th>judge usage</th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )
    if metrics > METRICS:
        table += f"<p class='muted'>the first {METRICS} of {metrics:,} metrics</p>"
    if calls or inputs or outputs:
        table += (
            f"<p id='cost'>judge: {calls:,} requests, {inputs:,} input + {outputs:,} "
            "output tokens</p>"
        )
    return table + agents_table_html(extras)  # metrics by agent, agents blamed (issue 46)


def clusters_html(run: StoredRun, clusters: list[FailureCluster] | None) -> str:
    """The run's failure clusters (issue 46), each example linking to its row."""
    return clusters_table(clusters or [], run.rows, f"/runs/{run.id}/rows/{{index}}")


def distributions_html(found: Distributions) -> str:
    """Each metric's histogram, and a note for the values that are not numbers."""
    plots = "".join(histogram(name, values) for name, values in found.values.items())
    notes = [
        f"{count:,} rows of {name} hold a value that is not a number: left out"
        for name, count in found.not_numbers.items()
        if count
    ]
    return f"<h2>Distributions</h2><div class='hists'>{plots}</div>" + "".join(
        f"<p class='muted note'>{escape_text(cut(n, 300))}</p>" for n in notes
    )


def trials_html(run: StoredRun, result: EvaluationResult | Exception | None) -> str:
    """A simulated run's trials grid (None: too large to draw; an error: why there is none)."""
    from turneval.report import trials_grid_html

    if result is None:
        return f"<p class='muted'>the trials grid is drawn for runs of up to {FULL_RUN:,} rows</p>"
    if isinstance(result, Exception):
        return f"<p class='muted'>no trials grid: {escape_text(cut(result, 300))}</p>"
    grid = trials_grid_html(result)
    return grid.replace('href="#sample-', f'href="/runs/{escape_attribute(run.id)}/rows/')


def skipped_html(counts: Mapping[str, int], latest: list[StoredSkip]) -> str:
    """The conversations a ``turneval watch`` run skipped, and why (issue 43)."""
    if not counts:
        return ""
    shown = ", ".join(f"{escape_text(cut(r, 200))}: {n:,}" for r, n in counts.items())
    listed = "".join(
        f"<tr><td>{escape_text(cut(s.conversation, 200))}</td>"
        f"<td>{escape_text(cut(s.reason, 200))}</td>"
        f"<td>{escape_text(cut(s.detail or '', 1000))}</td>"
        f"<td>{escape_text(s.created.strftime('%Y-%m-%d %H:%M:%S') if s.created else '')}"
        "</td></tr>"
        for s in latest
    )
    return (
        f"<h2>Skipped conversations</h2><p id='skipped'>{shown}</p>"
        "<table id='skips'><thead><tr><th>conversation</th><th>reason</th><th>why</th>"
        f"<th>when (UTC)</th></tr></thead><tbody>{listed}</tbody></table>"
        f"<p class='muted'>the latest {min(20, sum(counts.values()))}</p>"
    )


# -- compare ---------------------------------------------------------------------------------


def compare_form(runs: list[StoredRun], first: str, second: str) -> str:
    """The two run pickers of the compare page."""

    def choose(field: str, picked: str) -> str:
        items = "".join(
            f"<option value='{escape_attribute(r.id)}'{' selected' if r.id == picked else ''}>"
            f"{escape_text(cut(r.name, 100))} · {escape_text(r.created.strftime('%Y-%m-%d %H:%M'))}"
            f" · {escape_text(r.id[:8])}</option>"
            for r in runs
        )
        return f"<label>{field}<select name='{field[0]}'>{items}</select></label>"

    return (
        "<form class='filters' method='get' action='/compare'>"
        f"{choose('a (baseline)', first)}{choose('b (candidate)', second)}"
        "<button>compare</button></form>"
    )


def compare_body(
    found: Compared, base: StoredRun, cand: StoredRun, change: str | None, here: Here
) -> str:
    """Two runs compared: each metric's means and paired test, then the rows that changed."""
    from turneval.view._compare import RESAMPLES

    lines = []
    fewer = 0
    for name, item in found.metrics.items():
        p = "n/a" if item.p_value is None else f"{item.p_value:.4f}"
        fewer = max(fewer, item.pairs if item.resamples < RESAMPLES else 0)
        lines.append(
            f"<tr><td>{escape_text(cut(name, 200))}</td><td>{number(item.baseline_mean)}</td>"
            f"<td>{number(item.candidate_mean)}</td><td>{number(item.difference)}</td>"
            f"<td class='p'>{p}</td><td>{item.pairs:,}</td><td>{len(item.regressions):,}</td>"
            f"<td>{len(item.improvements):,}</td></tr>"
        )
    offset = max(integer(here.params.get("offset")) or 0, 0)
    rows = []
    bid, cid = escape_attribute(base.id), escape_attribute(cand.id)
    for kind, name, position in found.flips[offset : offset + FLIPS]:
        before, after = found.values[name]
        sample_id = found.base_ids[position]
        rows.append(
            f"<tr class='flip {'bad' if kind != 'improvement' else 'good'}'>"
            f"<td>{escape_text(kind)}</td><td>{escape_text(cut(name, 200))}</td>"
            f"<td>{escape_text(cut(sample_id or '', 100))}</td>"
            f"<td><a href='/runs/{bid}/rows/{int(found.base_indexes[position])}'>"
            f"{_shown_value(before[position])}</a></td>"
            f"<td><a href='/runs/{cid}/rows/{int(found.cand_indexes[position])}'>"
            f"{_shown_value(after[position])}</a></td></tr>"
        )
    notes = found.pairing_notes() + [
        f"{count:,} rows of {name} hold a value that is not a number: left out"
        for name, count in found.not_numbers.items()
        if count
    ]
    if fewer:
        notes.append(
            f"p-values of metrics with more than 20,000 pairs ({fewer:,} here) come from "
            "fewer sign flips (1,000 at 200,000 pairs) than turneval compare's 10,000, "
            "so that the page answers in seconds"
        )
    paired_by = "id" if found.paired_by == "id" else "position (not every row has a distinct id)"
    total = len(found.flips)
    span = f" ({offset + 1:,}-{offset + len(rows):,} of {total:,})" if total > FLIPS else ""
    changed = (
        ""
        if change is None
        else f"<p class='err' id='dataset-change'>the runs read different datasets "
        f"({escape_text(change)})</p>"
    )
    return (
        f"<p>{escape_text(cut(base.name, 100))} ({escape_text(base.id[:8])}) → "
        f"{escape_text(cut(cand.name, 100))} ({escape_text(cand.id[:8])}); rows "
        f"paired by {paired_by}; p: two-sided paired permutation test</p>"
        + changed  # issue 49
        + "<table id='metrics'><thead><tr><th>metric</th><th>baseline</th><th>candidate</th>"
        "<th>difference</th><th>p-value</th><th>pairs</th><th>regressions</th>"
        f"<th>improvements</th></tr></thead><tbody>{''.join(lines)}</tbody></table>"
        + "".join(f"<p class='muted note'>{escape_text(n)}</p>" for n in notes)
        + f"<h2>Rows that changed (regressions first){span}</h2>"
        + (
            "<table id='flips'><thead><tr><th>change</th><th>metric</th><th>id</th>"
            f"<th>baseline</th><th>candidate</th></tr></thead><tbody>{''.join(rows)}"
            "</tbody></table>"
            if rows
            else "<p class='muted'>no row crossed the pass threshold</p>"
        )
        + pager(here, offset, len(rows), total, FLIPS)
    )


def _shown_value(value: float) -> str:
    return "n/a" if math.isnan(value) else number(float(value))

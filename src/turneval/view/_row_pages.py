"""The viewer's row pages as HTML: a run's rows, one row's conversation, the labeling page.

From the queries' data (:mod:`turneval.view._queries`, :mod:`turneval.view._labeling`); every
stored text escaped and cut with a link to the whole (:class:`turneval.view._render.Clipper`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from turneval._html import cut, escape_attribute, escape_text, shade
from turneval.report import context_summary, decisive_steps
from turneval.view._pages import Here, link_to
from turneval.view._queries import METRICS
from turneval.view._render import Clipper, citations, figure, number, turns, votes

if TYPE_CHECKING:
    from turneval.store import StoredLabel, StoredRow, StoredRun
    from turneval.view._labeling import LabelScale
    from turneval.view._row_queries import RowQuery, RowsPage

__all__ = [
    "LABEL_SCRIPT",
    "conversation_html",
    "label_done",
    "label_panel",
    "row_nav",
    "rows_body",
]


def rows_body(run: StoredRun, query: RowQuery, found: RowsPage, here: Here, plain: bool) -> str:
    """A page of a run's rows: the filters as set, each row's value and reason, the next page.

    ``plain``: lower is better for the metric (latency, cost), shown without a verdict colour.
    """
    params = here.params
    metric = query.metric
    options = "".join(
        f"<option value='{escape_attribute(n)}'{' selected' if n == metric else ''}>"
        f"{escape_text(cut(n, 200))}</option>"
        for n in run.metric_names[:METRICS]
    )
    sorts = "".join(
        f"<option value='{k}'{' selected' if k == query.sort else ''}>{label}</option>"
        for k, label in (("index", "row"), ("value", "value ↑"), ("-value", "value ↓"))
    )
    rid = escape_attribute(run.id)
    filters = (
        f"<form class='filters' method='get' action='/runs/{rid}/rows'>"
        f"<label>metric<select name='metric'>{options}</select></label>"
        f"<label>sort<select name='sort'>{sorts}</select></label>"
        f"<label>below<input name='below' size='5' "
        f"value='{escape_attribute(params.get('below', ''))}'></label><label>min<input "
        f"name='min' size='5' value='{escape_attribute(params.get('min', ''))}'></label>"
        f"<label>max<input name='max' size='5' value='{escape_attribute(params.get('max', ''))}'>"
        f"</label><label>failed<input type='checkbox' name='failed' value='1'"
        f"{' checked' if query.failed else ''}></label><label>unstable<input type='checkbox' "
        f"name='unstable' value='1'{' checked' if query.unstable else ''}></label>"
        f"<label>text in the conversation<input name='q' "
        f"value='{escape_attribute(query.search or '')}'></label><button>filter</button></form>"
    )
    body = []
    for row in found.rows:
        value = row.record.get(metric)
        error = row.record.get(f"{metric}_error") or row.record.get("agent_error")
        colour = "err" if error else "" if plain else shade(value)
        reason = error or row.record.get(f"{metric}_reason") or ""
        said = reason if isinstance(reason, str) else json.dumps(reason, default=str)
        body.append(
            f"<tr class='row' data-index='{row.index}'><td><a href='/runs/{rid}/rows/"
            f"{row.index}'>{row.index}</a></td><td>{escape_text(cut(row.sample_id or '', 100))}"
            f"</td><td class='{colour}'>{number(value) if value is not None else 'error'}</td>"
            f"<td>{escape_text(cut(said))}</td></tr>"
        )
    table = (
        f"<table id='rows'><thead><tr><th>row</th><th>id</th>"
        f"<th>{escape_text(cut(metric, 200))}</th><th>reason or error</th></tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table>"
        if body
        else "<p class='muted' id='rows'>no rows match</p>"
    )
    more = here.link(**found.more) if found.more is not None else ""
    nav = f"<p><a id='next' href='{escape_attribute(more)}'>next page →</a></p>" if more else ""
    head = f"<p><a href='/runs/{rid}'>← {escape_text(cut(run.name, 200))}</a></p>"
    muted = f"<p class='muted'>{escape_text(found.note)}</p>" if found.note else ""
    return head + filters + muted + table + nav


def conversation_html(
    run: StoredRun,
    row: StoredRow,
    sample: Any,
    plain: Mapping[str, bool],
    first: int = 0,
) -> str:
    """A row's conversation and, per metric, its value, reason, votes, details and error.

    Every text is escaped and cut (with a link to the whole); at most ``TURNS`` turns, from
    turn ``first``. ``plain``: the metrics where lower is better (no verdict colour).
    """
    clip = Clipper(f"/runs/{run.id}/rows/{row.index}/text")
    cited = citations(row.record, run.metric_names)
    decisive = decisive_steps({n: row.record.get(f"{n}_details") for n in run.metric_names})
    conversation, following = turns(
        sample, cited, clip, line=row.line, first=first, decisive=decisive
    )
    if first:
        back = link_to(f"/runs/{run.id}/rows/{row.index}", turns=max(first - 200, 0))
        conversation = (
            f"<p><a href='{escape_attribute(back)}'>← earlier turns</a></p>" + conversation
        )
    if following is not None:
        ahead = link_to(f"/runs/{run.id}/rows/{row.index}", turns=following)
        conversation += (
            f"<p><a id='more-turns' href='{escape_attribute(ahead)}'>later turns →</a></p>"
        )
    parts = [_metric(row.record, name, clip, plain.get(name, False)) for name in plain]
    agent = row.record.get("agent_error")
    if agent:
        parts.append(
            "<div class='metric'><b>agent error</b><pre class='error'>"
            f"{clip.json(agent, ['record', 'agent_error'])}</pre></div>"
        )
    figures = {
        k: row.record[k]
        for k in ("latency_in_seconds", "steps", "agent_input_tokens", "agent_output_tokens")
        if row.record.get(k) is not None
    }
    if figures:
        parts.append(
            "<p class='muted'>"
            + ", ".join(f"{escape_text(k)} {figure(v)}" for k, v in figures.items())
            + "</p>"
        )
    return (
        f"<div class='grid'><div class='conv' id='conversation'>{conversation}</div>"
        f"<div id='metrics'>{''.join(parts)}</div></div>"
    )


def _metric(record: Mapping[str, Any], name: str, clip: Clipper, plain: bool) -> str:
    """One metric of a row: value, reason, votes, the judge's context, error, details."""
    value = record.get(name)
    reason = record.get(f"{name}_reason")
    error = record.get(f"{name}_error")
    details = record.get(f"{name}_details")
    repeats = details.get("repeats") if isinstance(details, dict) else None
    text = (
        f"<div class='metric' data-metric='{escape_attribute(name)}'><b>"
        f"{escape_text(cut(name, 200))}</b> = "
        f"<span class='{'err' if error else '' if plain else shade(value)}'>"
        f"{number(value) if value is not None else 'failed'}</span>"
    )
    if reason:
        text += f"<div class='reason'>{clip.json(reason, ['record', f'{name}_reason'])}</div>"
    if isinstance(repeats, dict):
        text += "<div class='votes'><b>votes</b> " + votes(repeats, clip) + "</div>"
    # issue 47: the context policy the judge worked under (full, windowed, compacted)
    seen = context_summary(details if isinstance(details, dict) else None)
    if seen:
        text += f"<div class='context'>{escape_text(seen)}</div>"
    if error:
        text += f"<pre class='error'>{clip.json(error, ['record', f'{name}_error'])}</pre>"
        trace = record.get(f"{name}_traceback")
        if trace:  # where the metric raised, one click away
            text += (
                "<details class='traceback'><summary>traceback</summary><pre "
                f"class='error'>{clip.json(trace, ['record', f'{name}_traceback'])}</pre>"
                "</details>"
            )
    if isinstance(details, dict) and details:
        dump = clip.json(details, ["record", f"{name}_details"], indent=1)
        text += f"<details><summary>details</summary><pre>{dump}</pre></details>"
    return text + "</div>"


def row_nav(run: StoredRun, index: int) -> str:
    """Links from a row: back to the run's rows, the previous and the next row."""
    rid = escape_attribute(run.id)
    return (
        f"<p><a href='/runs/{rid}/rows'>← rows of {escape_text(cut(run.name, 200))}</a>"
        + (f" · <a href='/runs/{rid}/rows/{index - 1}'>previous</a>" if index else "")
        + f" · <a href='/runs/{rid}/rows/{index + 1}'>next</a></p>"
    )


# -- labeling --------------------------------------------------------------------------------


def label_head(run: StoredRun, metric: str, mode: str, here: Here) -> str:
    """The labeling page's head: the run, the metrics to label, the three queues."""
    picks = "".join(
        f"<a href='{escape_attribute(here.link(metric=metric, mode=key, pos=0))}'"
        f"{' class=current' if key == mode else ''}>{label}</a> "
        for key, label in (
            ("all", "all"),
            ("random", "random sample"),
            ("disagree", "disagreements first"),
        )
    )
    metric_links = " ".join(
        f"<a href='{escape_attribute(here.link(metric=n, pos=0))}'>{escape_text(cut(n, 100))}</a>"
        for n in run.metric_names[:METRICS]
    )
    return (
        f"<p><a href='/runs/{escape_attribute(run.id)}'>← {escape_text(cut(run.name, 200))}</a>"
        f" · metric: {metric_links} · queue: {picks}</p>"
    )


DONE_SCRIPT = (
    "document.addEventListener('keydown',e=>{if(e.key==='ArrowLeft')"
    "location.href=document.getElementById('done').dataset.prev;});"
)
"""The script of a finished queue: the left arrow goes back to its last row."""


def label_done(run: StoredRun, metric: str, total: int, back: str) -> str:
    """A finished queue: how many rows, the labels' export, the way back."""
    export = link_to(f"/runs/{run.id}/labels.jsonl", metric=metric)
    return (
        f"<p id='done' data-prev='{escape_attribute(back)}'>queue done ({total:,} rows). "
        f"<a href='{escape_attribute(export)}'>export the labels</a> · <kbd>←</kbd> the "
        "last row</p>"
    )


def label_panel(
    run: StoredRun,
    row: StoredRow,
    metric: str,
    scale: LabelScale,
    latest: StoredLabel | None,
    moves: Sequence[str],
    place: tuple[int, int],
) -> str:
    """The labeling panel of one row: its latest label, the keys of the scale, the note.

    ``moves``: the previous row's address ("" for none) and the next one's; ``place``: the
    row's position in the queue (0-based) and the queue's length.
    """
    previous, following = moves
    state = (
        f"labeled <b>{escape_text(cut(json.dumps(latest.label), 100))}</b>"
        + (f" ({escape_text(cut(latest.note, 300))})" if latest.note else "")
        if latest
        else "not labeled yet"
    )
    keys = scale.keys()
    legend = (
        " · ".join(
            f"<kbd>{escape_text(key)}</kbd> {escape_text(cut(scale.text(value), 120))}"
            for key, value in keys.items()
        )
        if scale.points is not None
        else "<kbd>0</kbd>–<kbd>9</kbd>"
    )
    note = escape_attribute(latest.note or "") if latest else ""
    return (
        f"<div id='labeling' data-run='{escape_attribute(run.id)}' data-index='{row.index}' "
        f"data-metric='{escape_attribute(metric)}' data-next='{escape_attribute(following)}' "
        f"data-prev='{escape_attribute(previous)}' "
        f"data-keys='{escape_attribute(json.dumps(keys))}' "
        f"data-allowed='{escape_attribute(scale.allowed())}'><p>row {place[0] + 1:,} of "
        f"{place[1]:,} · <span id='state'>{state}</span></p>"
        f"<p class='keys'>{legend}: label the row (saved at once, then the "
        "next row) · <kbd>←</kbd> <kbd>→</kbd> move · <kbd>n</kbd> the note</p>"
        f"<label>note <input id='note' size='60' value='{note}'></label></div>"
    )


LABEL_SCRIPT = (
    "const box=document.getElementById('labeling'),note=document.getElementById('note');"
    "const csrf=document.querySelector('meta[name=csrf-token]').content;"
    "async function save(label){const r=await fetch('/api/labels',{method:'POST',"
    "headers:{'Content-Type':'application/json','X-CSRF-Token':csrf},"
    "body:JSON.stringify({run:box.dataset.run,index:Number(box.dataset.index),"
    "metric:box.dataset.metric,label:label,note:note.value})});"
    "const s=document.getElementById('state');"
    "if(r.ok){s.textContent='saved '+label;s.className='saved';"
    "location.href=box.dataset.next;}else{s.className='refused';"
    "s.textContent='not saved: '+await r.text();}}"
    "document.addEventListener('keydown',e=>{if(e.target===note){if(e.key==='Escape'||"
    "e.key==='Enter'){note.blur();e.preventDefault();}return;}"
    "if(e.ctrlKey||e.metaKey||e.altKey)return;"
    "if(/^[0-9]$/.test(e.key)){e.preventDefault();const keys=JSON.parse(box.dataset.keys);"
    "if(Object.hasOwn(keys,e.key)){save(keys[e.key]);}else{const s="
    "document.getElementById('state');s.className='refused';s.textContent='key '+e.key+"
    "' is not on the scale of '+box.dataset.metric+': '+box.dataset.allowed;}}"
    "else if(e.key==='ArrowRight'){location.href=box.dataset.next;}"
    "else if(e.key==='ArrowLeft'&&box.dataset.prev){location.href=box.dataset.prev;}"
    "else if(e.key==='n'){e.preventDefault();note.focus();}});"
)
"""The labeling page's script: a digit saves a label on the scale (POST with the CSRF token)."""

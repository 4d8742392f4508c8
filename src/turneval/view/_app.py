"""The viewer's Starlette application: pages rendered on the server, every text escaped.

Safety: every page carries a Content-Security-Policy that only runs its own nonce'd script;
every piece of stored text goes through :func:`turneval.report.escape_text` (HTML-escaped, bidi and
control characters shown as ``<U+202E>``); a label or a delete is a POST that must carry the
process's CSRF token (a form field or the ``X-CSRF-Token`` header) and, when the browser sends
one, a same-origin ``Origin``; with ``token`` set, every request must carry it (the
``X-Turneval-Token`` header, or the cookie a first ``?token=`` visit sets).
"""

from __future__ import annotations

import getpass
import heapq
import json
import math
import random
import secrets
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from datetime import date
from time import monotonic
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from turneval.errors import ConfigError
from turneval.report import (
    agents_table_html,
    clusters_html,
    context_summary,
    decisive_steps,
    escape_attribute,
    escape_text,
    format_value,
    histogram_html,
)

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

    from turneval.store import RunStore, StoredRow, StoredRun

__all__ = ["create_app", "serve"]

_TOKEN_HEADER = "x-turneval-token"
_TOKEN_COOKIE = "turneval_token"
_CSRF_HEADER = "x-csrf-token"
_PAGE = 50  # rows a page shows
_SCAN = 1000  # rows read at a time when a filter needs the row's values
_SCAN_MAX = 20_000  # rows one filtered page reads at most before it stops and offers "more"
_FULL_RUN = 50_000  # runs up to this many rows get distributions and the trials grid
_QUEUE = 50  # rows a random labeling queue draws
_KEEP_RUN = 30.0  # seconds an ended run's record (its row count) is reused

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:#1d2430;background:#f7f8fa}
header{background:#1d2430;color:#fff;padding:8px 16px}header a{color:#cfe0ff;margin-right:14px}
main{padding:12px 16px;max-width:1200px}table{border-collapse:collapse;background:#fff}
td,th{border:1px solid #dde1e7;padding:4px 7px;text-align:left;vertical-align:top}
th{background:#eef1f5}.muted{color:#6b7380}.good{background:#d9f2df}.mid{background:#fbf0c9}
.bad{background:#f7d4d4}.err{background:#f3c1c1}.neutral{background:#e6e9ef}
form.filters{display:flex;flex-wrap:wrap;gap:8px;align-items:end;margin:8px 0}
form.filters label{display:flex;flex-direction:column;font-size:12px}
.msg{background:#fff;border:1px solid #dde1e7;border-radius:6px;padding:6px 9px;margin:6px 0;
white-space:pre-wrap;word-break:break-word}.msg.human{border-left:4px solid #4f7cd8}
.msg.ai{border-left:4px solid #3aa76d}.msg.tool{border-left:4px solid #b58a2a}
.role{font-weight:600;margin-right:6px;text-transform:uppercase;font-size:11px}
.call{font-family:ui-monospace,monospace;background:#f3f5f8;padding:3px 6px;margin-top:4px}
pre{white-space:pre-wrap;word-break:break-word;background:#fff;border:1px solid #dde1e7;
padding:6px}.hidden-char{background:#ffd24d;color:#000;font-family:monospace}
mark.cite{background:#ffe58a}.hist{display:inline-block;margin:4px 10px 4px 0}
.grid{display:grid;grid-template-columns:3fr 2fr;gap:14px}.keys kbd{border:1px solid #aaa;
border-radius:3px;padding:0 4px;background:#fff}.saved{color:#1d7a3a;font-weight:600}
.agent{font-weight:400;text-transform:none;color:#4a5468}
.msg.decisive{outline:3px solid #c0392b;outline-offset:1px}
.decisive-mark{color:#c0392b;font-weight:600;margin-right:6px;font-size:11px}
"""


def _nonce() -> str:
    return secrets.token_urlsafe(16)


class _Viewer:
    """The pages, bound to one store and this process's secrets."""

    def __init__(self, store: RunStore, token: str | None, annotator: str | None) -> None:
        self.store = store
        self.token = token
        self.csrf = secrets.token_urlsafe(32)
        self.annotator = annotator
        self.ended: dict[str, tuple[StoredRun, float]] = {}  # ended runs by the id asked for

    # -- page frame --------------------------------------------------------------------------

    def page(self, title: str, body: str, *, script: str = "", status: int = 200) -> Response:
        from starlette.responses import HTMLResponse

        nonce = _nonce()
        ready = "document.body.dataset.ready='1';"  # what the browser tests wait for
        tag = f'<script nonce="{nonce}">{script}{ready}</script>'
        text = (
            "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f'<meta name="csrf-token" content="{self.csrf}"><link rel="icon" href="data:,">'
            f"<title>{escape_attribute(title)} · turneval view</title><style>{_CSS}</style></head><body>"
            "<header><b>turneval view</b> &nbsp; <a href='/'>runs</a><a href='/compare'>compare</a>"
            f"</header><main><h1>{escape_text(title)}</h1>{body}</main>{tag}</body></html>"
        )
        policy = (
            "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
            f"script-src 'nonce-{nonce}'; connect-src 'self'; form-action 'self'; "
            "base-uri 'none'; frame-ancestors 'none'"
        )
        return HTMLResponse(
            text,
            status_code=status,
            headers={
                "Content-Security-Policy": policy,
                "X-Content-Type-Options": "nosniff",
                "Referrer-Policy": "no-referrer",
                "Cache-Control": "no-store",
            },
        )

    def error(self, message: str, status: int = 404) -> Response:
        return self.page(
            "Not found" if status == 404 else "Error",
            f"<p>{escape_text(message)}</p>",
            status=status,
        )

    def find_run(self, run_id: str) -> StoredRun:
        """The run ``run_id`` names; an ended run is kept 30 s (counting a large run's rows costs)."""
        known = self.ended.get(run_id)
        if known is not None and monotonic() - known[1] < _KEEP_RUN:
            return known[0]
        run = self.store.run(run_id)
        if run.status != "running":
            self.ended[run_id] = (run, monotonic())
        return run

    # -- runs --------------------------------------------------------------------------------

    def runs_page(self, request: Request) -> Response:
        query = request.query_params
        text, dataset = query.get("q", "").strip(), query.get("dataset", "").strip()
        metric, model = query.get("metric", "").strip(), query.get("model", "").strip()
        since, until = _day(query.get("since")), _day(query.get("until"))
        shown = []
        runs = self.store.runs()
        for run in runs:
            day = run.created.date()
            if text and text.lower() not in f"{run.id} {run.name}".lower():
                continue
            if dataset and dataset.lower() not in (run.dataset_path or "").lower():
                continue
            if metric and metric not in run.metric_names:
                continue
            if model and model.lower() not in (run.judge_model or "").lower():
                continue
            if (since and day < since) or (until and day > until):
                continue
            shown.append(run)
        metrics = sorted({name for run in runs for name in run.metric_names})
        options = "".join(
            f"<option value='{escape_attribute(m)}'{' selected' if m == metric else ''}>{escape_text(m)}</option>"
            for m in metrics
        )
        filters = (
            "<form class='filters' method='get' action='/'>"
            f"<label>search<input name='q' value='{escape_attribute(text)}'></label>"
            f"<label>dataset<input name='dataset' value='{escape_attribute(dataset)}'></label>"
            f"<label>metric<select name='metric'><option value=''>any</option>{options}</select>"
            f"</label><label>judge model<input name='model' value='{escape_attribute(model)}'></label>"
            f"<label>from<input type='date' name='since' value='{escape_attribute(query.get('since', ''))}'>"
            f"</label><label>to<input type='date' name='until' "
            f"value='{escape_attribute(query.get('until', ''))}'></label><button>filter</button></form>"
        )
        rows = []
        for run in shown:
            rows.append(
                f"<tr class='run' data-run='{escape_attribute(run.id)}'><td><a href='/runs/{escape_attribute(run.id)}'>"
                f"{escape_text(run.name)}</a><br><span class='muted'>{escape_text(run.id[:12])}</span></td>"
                f"<td>{escape_text(run.created.strftime('%Y-%m-%d %H:%M'))}</td><td>{escape_text(run.status)}</td>"
                f"<td>{run.rows:,}</td><td>{escape_text(run.dataset_path or '')}</td>"
                f"<td>{escape_text(', '.join(run.metric_names))}</td><td>{escape_text(run.judge_model or '')}</td>"
                f"<td><form method='post' action='/runs/{escape_attribute(run.id)}/delete' class='delete'>"
                f"<input type='hidden' name='csrf' value='{self.csrf}'>"
                "<button>delete</button></form></td></tr>"
            )
        table = (
            "<table id='runs'><thead><tr><th>run</th><th>started</th><th>status</th>"
            "<th>rows</th><th>dataset</th><th>metrics</th><th>judge</th><th></th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>"
            if rows
            else "<p class='muted'>no runs match</p>"
        )
        script = (
            "document.querySelectorAll('form.delete').forEach(f=>f.addEventListener('submit',"
            "e=>{if(!confirm('Delete this run, its rows and its labels?'))e.preventDefault();}));"
        )
        count = f"<p class='muted'>{len(shown)} of {len(runs)} runs</p>"
        return self.page("Runs", filters + count + table, script=script)

    async def delete_run(self, request: Request) -> Response:
        from starlette.concurrency import run_in_threadpool
        from starlette.responses import RedirectResponse

        form = await request.form()
        refused = self.refuse_post(request, str(form.get("csrf") or ""))
        if refused is not None:
            return refused
        run_id = str(request.path_params["run"])
        await run_in_threadpool(self.store.delete_run, run_id)
        self.ended.clear()
        return RedirectResponse("/", status_code=303)

    # -- one run -----------------------------------------------------------------------------

    def run_page(self, request: Request) -> Response:
        from turneval.report import trials_grid_html

        run = self.find_run(str(request.path_params["run"]))
        summary = run.summary or {}
        stats = summary.get("metrics") if isinstance(summary.get("metrics"), dict) else {}
        head = (
            f"<p>{escape_text(run.status)} · {run.rows:,} rows · started "
            f"{escape_text(run.created.strftime('%Y-%m-%d %H:%M:%S'))} · turneval "
            f"{escape_text(run.turneval_version)}"
            + (f" · commit {escape_text(run.git_commit[:12])}" if run.git_commit else "")
            + (f" · judge {escape_text(run.judge_model)}" if run.judge_model else "")
            + (f" · dataset {escape_text(run.dataset_path)}" if run.dataset_path else "")
            + "</p>"
            + (f"<pre class='error'>{escape_text(run.error)}</pre>" if run.error else "")
            + f"<p><a href='/runs/{escape_attribute(run.id)}/rows'>rows</a> · "
            f"<a href='/runs/{escape_attribute(run.id)}/label'>label rows</a> · "
            f"<a href='/compare?a={escape_attribute(run.id)}'>compare with another run</a> · "
            f"<a href='/runs/{escape_attribute(run.id)}/labels.jsonl'>export labels</a></p>"
        )
        lines = []
        calls = inputs = outputs = 0
        for name, item in (stats or {}).items():
            if not isinstance(item, dict):
                continue
            usage = item.get("usage") if isinstance(item.get("usage"), dict) else None
            spent = ""
            if usage:
                calls += int(usage.get("calls") or 0)
                inputs += int(usage.get("input_tokens") or 0)
                outputs += int(usage.get("output_tokens") or 0)
                spent = (
                    f"{int(usage.get('calls') or 0)} requests, "
                    f"{int(usage.get('input_tokens') or 0):,} in + "
                    f"{int(usage.get('output_tokens') or 0):,} out tokens"
                )
            low, high = item.get("ci_low"), item.get("ci_high")
            interval = f"[{format_value(low)}, {format_value(high)}]" if low is not None else "n/a"
            lines.append(
                f"<tr><td><a href='/runs/{escape_attribute(run.id)}/rows?metric={escape_attribute(name)}&amp;sort=value'>"
                f"{escape_text(name)}</a></td><td>{format_value(item.get('mean'))}</td><td>{interval}</td>"
                f"<td>{item.get('count', '')}</td><td>{item.get('failed', '')}</td>"
                f"<td>{escape_text(spent)}</td></tr>"
            )
        table = (
            "<h2>Summary</h2><table id='summary'><thead><tr><th>metric</th><th>mean</th>"
            "<th>95% CI</th><th>scored</th><th>failed</th><th>judge usage</th></tr></thead>"
            f"<tbody>{''.join(lines)}</tbody></table>"
            if lines
            else "<p class='muted'>no summary (the run has not finished)</p>"
        )
        if calls or inputs or outputs:
            table += (
                f"<p id='cost'>judge: {calls:,} requests, {inputs:,} input + {outputs:,} "
                "output tokens</p>"
            )
        table += agents_table_html(  # metrics by agent, agents blamed (issue 46)
            {n: i.get("extra") for n, i in (stats or {}).items() if isinstance(i, dict)}
        )
        extra = ""
        if run.rows <= _FULL_RUN:
            import numpy as np

            from turneval.clusters import cluster_failures

            result = self.store.result(run.id)
            plots = []
            for name in result.metric_names:
                values = np.asarray(
                    [r.results[name].value for r in result.rows if name in r.results], dtype=float
                )
                plots.append(histogram_html(name, values[np.isfinite(values)]))
            attributed = any(  # failure clusters, when an attribution was run (issue 46)
                "attribution" in r.details for row in result.rows for r in row.results.values()
            )
            clusters = cluster_failures(result.rows) if attributed else []
            extra = (
                clusters_html(clusters, len(result.rows), f"/runs/{run.id}/rows/{{index}}")
                + "<h2>Distributions</h2>"
                + "".join(plots)
                + trials_grid_html(result).replace(
                    'href="#sample-', f'href="/runs/{escape_attribute(run.id)}/rows/'
                )
            )
        else:
            extra = (
                f"<p class='muted'>distributions and the trials grid are drawn for runs of up "
                f"to {_FULL_RUN:,} rows</p>"
            )
        # issue 43: the conversations a `turneval watch` run skipped, and why (revision 0005)
        skipped = self.store.skipped_counts(run.id)
        if skipped:
            counts = ", ".join(f"{escape_text(r)}: {n:,}" for r, n in skipped.items())
            listed = "".join(
                f"<tr><td>{escape_text(s.conversation)}</td><td>{escape_text(s.reason)}</td>"
                f"<td>{escape_text(s.detail or '')}</td>"
                f"<td>{escape_text(s.created.strftime('%Y-%m-%d %H:%M:%S') if s.created else '')}"
                "</td></tr>"
                for s in self.store.skipped(run.id, limit=20)
            )
            extra += (
                f"<h2>Skipped conversations</h2><p id='skipped'>{counts}</p>"
                "<table id='skips'><thead><tr><th>conversation</th><th>reason</th><th>why</th>"
                f"<th>when (UTC)</th></tr></thead><tbody>{listed}</tbody></table>"
                f"<p class='muted'>the latest {min(20, sum(skipped.values()))}</p>"
            )
        return self.page(f"Run {run.name}", head + table + extra)

    # -- rows --------------------------------------------------------------------------------

    def rows_page(self, request: Request) -> Response:
        run = self.find_run(str(request.path_params["run"]))
        query = request.query_params
        names = run.metric_names
        metric = query.get("metric") or (names[0] if names else "")
        failed = query.get("failed") == "1"
        search = query.get("q", "").strip() or None
        below, low, high = (_number(query.get(k)) for k in ("below", "min", "max"))
        shaky = query.get("unstable") == "1"
        sort = query.get("sort", "index")
        after = _integer(query.get("after"))

        def keep(row: StoredRow) -> bool:
            value = row.record.get(metric)
            if below is not None and not (isinstance(value, (int, float)) and value < below):
                return False
            if low is not None and not (isinstance(value, (int, float)) and value >= low):
                return False
            if high is not None and not (isinstance(value, (int, float)) and value <= high):
                return False
            return not shaky or _unstable(row.record, metric)

        filtered = any(x is not None for x in (below, low, high)) or shaky
        note, more = "", ""
        if sort in ("value", "-value") and metric:
            start = _integer(query.get("offset")) or 0
            found = self._sorted(run.id, metric, sort == "value", start, failed, search, keep)
            page = found[:_PAGE]
            if len(found) > _PAGE:
                more = self._link(request, offset=start + _PAGE, after=None)
            note = "sorted by value: each page reads the run's rows once"
        elif filtered:
            page, last, scanned = self._filtered(run.id, after, failed, search, keep)
            if last is not None:
                more = self._link(request, after=last)
            if scanned >= _SCAN_MAX and len(page) < _PAGE:
                note = f"read {scanned:,} rows for these matches; more may follow"
        else:
            page = self.store.rows_page(
                run.id, after=after, limit=_PAGE, failed=True if failed else None, search=search
            )
            if len(page) == _PAGE:
                more = self._link(request, after=page[-1].index)
        options = "".join(
            f"<option value='{escape_attribute(n)}'{' selected' if n == metric else ''}>{escape_text(n)}</option>"
            for n in names
        )
        sorts = "".join(
            f"<option value='{k}'{' selected' if k == sort else ''}>{label}</option>"
            for k, label in (("index", "row"), ("value", "value ↑"), ("-value", "value ↓"))
        )
        filters = (
            f"<form class='filters' method='get' action='/runs/{escape_attribute(run.id)}/rows'>"
            f"<label>metric<select name='metric'>{options}</select></label>"
            f"<label>sort<select name='sort'>{sorts}</select></label>"
            f"<label>below<input name='below' size='5' value='{escape_attribute(query.get('below', ''))}'>"
            f"</label><label>min<input name='min' size='5' value='{escape_attribute(query.get('min', ''))}'>"
            f"</label><label>max<input name='max' size='5' value='{escape_attribute(query.get('max', ''))}'>"
            f"</label><label>failed<input type='checkbox' name='failed' value='1'"
            f"{' checked' if failed else ''}></label><label>unstable<input type='checkbox' "
            f"name='unstable' value='1'{' checked' if shaky else ''}></label>"
            f"<label>text in the conversation<input name='q' value='{escape_attribute(search or '')}'></label>"
            "<button>filter</button></form>"
        )
        body = []
        for row in page:
            value = row.record.get(metric)
            error = row.record.get(f"{metric}_error") or row.record.get("agent_error")
            shade = "err" if error else _shade(value)
            body.append(
                f"<tr class='row' data-index='{row.index}'><td><a href='/runs/{escape_attribute(run.id)}/rows/"
                f"{row.index}'>{row.index}</a></td><td>{escape_text(row.sample_id or '')}</td>"
                f"<td class='{shade}'>{format_value(value) if value is not None else 'error'}</td>"
                f"<td>{escape_text(_cut(error or row.record.get(f'{metric}_reason') or ''))}</td></tr>"
            )
        table = (
            f"<table id='rows'><thead><tr><th>row</th><th>id</th><th>{escape_text(metric)}</th>"
            f"<th>reason or error</th></tr></thead><tbody>{''.join(body)}</tbody></table>"
            if body
            else "<p class='muted' id='rows'>no rows match</p>"
        )
        nav = f"<p><a id='next' href='{escape_attribute(more)}'>next page →</a></p>" if more else ""
        head = f"<p><a href='/runs/{escape_attribute(run.id)}'>← {escape_text(run.name)}</a></p>"
        muted = f"<p class='muted'>{escape_text(note)}</p>" if note else ""
        return self.page(f"Rows of {run.name}", head + filters + muted + table + nav)

    def _filtered(
        self,
        run_id: str,
        after: int | None,
        failed: bool,
        search: str | None,
        keep: Callable[[StoredRow], bool],
    ) -> tuple[list[StoredRow], int | None, int]:
        """A page of the rows ``keep`` takes, read a batch at a time from ``after``.

        Returns the page, the index the next page starts after (None: no more rows) and how
        many rows were read; stops after ``_SCAN_MAX`` rows (the next page goes on from there).
        """
        page: list[StoredRow] = []
        last, scanned = after, 0
        while len(page) < _PAGE and scanned < _SCAN_MAX:
            chunk = self.store.rows_page(
                run_id, after=last, limit=_SCAN, failed=True if failed else None, search=search
            )
            for row in chunk:
                last = row.index
                if keep(row):
                    page.append(row)
                    if len(page) == _PAGE:
                        return page, last, scanned + len(chunk)
            scanned += len(chunk)
            if len(chunk) < _SCAN:
                return page, None, scanned
        return page, last, scanned

    def _sorted(
        self,
        run_id: str,
        metric: str,
        ascending: bool,
        start: int,
        failed: bool,
        search: str | None,
        keep: Callable[[StoredRow], bool],
    ) -> list[StoredRow]:
        """Rows ``start`` to ``start + _PAGE`` (and one more) by value: one pass, a small heap."""
        wanted = start + _PAGE + 1
        heap: list[tuple[float, int, StoredRow]] = []
        sign = 1.0 if ascending else -1.0
        for row in self._scan(run_id, failed, search):
            value = row.record.get(metric)
            if not isinstance(value, (int, float)) or math.isnan(value) or not keep(row):
                continue
            item = (-sign * float(value), -row.index, row)  # a max-heap of the smallest
            if len(heap) < wanted:
                heapq.heappush(heap, item)
            elif item > heap[0]:
                heapq.heapreplace(heap, item)
        ordered = sorted(heap, reverse=True)
        return [row for _, _, row in ordered][start:]

    def _scan(self, run_id: str, failed: bool, search: str | None) -> Iterator[StoredRow]:
        after: int | None = None
        while True:
            chunk = self.store.rows_page(
                run_id, after=after, limit=_SCAN, failed=True if failed else None, search=search
            )
            yield from chunk
            if len(chunk) < _SCAN:
                return
            after = chunk[-1].index

    @staticmethod
    def _link(request: Request, **changes: Any) -> str:
        params = dict(request.query_params)
        for key, value in changes.items():
            if value is None:
                params.pop(key, None)
            else:
                params[key] = str(value)
        return f"{request.url.path}?{urlencode(params)}"

    # -- a conversation ----------------------------------------------------------------------

    def _row(self, run_id: str, index: int) -> StoredRow | None:
        found = self.store.rows_page(run_id, after=index - 1 if index > 0 else None, limit=1)
        return found[0] if found and found[0].index == index else None

    def conversation(self, run: StoredRun, row: StoredRow) -> str:
        """A row's conversation and, per metric, its value, reason, votes, details and error."""
        sample = self.store.samples(run.id, [row.index]).get(row.index)
        cited = _citations(row.record, run.metric_names)
        decisive = decisive_steps({n: row.record.get(f"{n}_details") for n in run.metric_names})
        turns = _turns(sample, cited, decisive)
        parts = []
        for name in run.metric_names:
            value = row.record.get(name)
            reason = row.record.get(f"{name}_reason")
            error = row.record.get(f"{name}_error")
            details = row.record.get(f"{name}_details")
            votes = details.get("repeats") if isinstance(details, dict) else None
            text = (
                f"<div class='metric' data-metric='{escape_attribute(name)}'><b>{escape_text(name)}</b> = "
                f"<span class='{'err' if error else _shade(value)}'>"
                f"{format_value(value) if value is not None else 'failed'}</span>"
            )
            if reason:
                text += f"<div class='reason'>{escape_text(reason)}</div>"
            if isinstance(votes, dict):
                text += "<div class='votes'><b>votes</b> " + _votes(votes) + "</div>"
            # issue 47: the context policy the judge worked under (full, windowed, compacted)
            seen = context_summary(details if isinstance(details, dict) else None)
            if seen:
                text += f"<div class='context'>{escape_text(seen)}</div>"
            if error:
                text += f"<pre class='error'>{escape_text(error)}</pre>"
                trace = row.record.get(f"{name}_traceback")
                if trace:  # where the metric raised, one click away
                    text += (
                        "<details class='traceback'><summary>traceback</summary>"
                        f"<pre class='error'>{escape_text(trace)}</pre></details>"
                    )
            if isinstance(details, dict) and details:
                dump = json.dumps(details, indent=1, ensure_ascii=False, default=str)
                text += (
                    f"<details><summary>details</summary><pre>{escape_text(dump)}</pre></details>"
                )
            parts.append(text + "</div>")
        agent = row.record.get("agent_error")
        if agent:
            parts.append(
                f"<div class='metric'><b>agent error</b><pre class='error'>{escape_text(agent)}</pre></div>"
            )
        figures = {
            k: row.record[k]
            for k in ("latency_in_seconds", "steps", "agent_input_tokens", "agent_output_tokens")
            if row.record.get(k) is not None
        }
        if figures:
            parts.append(
                "<p class='muted'>"
                + escape_text(", ".join(f"{k} {v}" for k, v in figures.items()))
                + "</p>"
            )
        return (
            f"<div class='grid'><div class='conv' id='conversation'>{turns}</div>"
            f"<div id='metrics'>{''.join(parts)}</div></div>"
        )

    def row_page(self, request: Request) -> Response:
        run = self.find_run(str(request.path_params["run"]))
        index = int(request.path_params["index"])
        row = self._row(run.id, index)
        if row is None:
            return self.error(f"run {run.id[:12]} has no row {index}")
        title = f"Row {index}" + (f" ({row.sample_id})" if row.sample_id else "")
        nav = (
            f"<p><a href='/runs/{escape_attribute(run.id)}/rows'>← rows of {escape_text(run.name)}</a>"
            + (
                f" · <a href='/runs/{escape_attribute(run.id)}/rows/{index - 1}'>previous</a>"
                if index
                else ""
            )
            + f" · <a href='/runs/{escape_attribute(run.id)}/rows/{index + 1}'>next</a></p>"
        )
        return self.page(title, nav + self.conversation(run, row))

    # -- labeling ----------------------------------------------------------------------------

    def queue(self, run: StoredRun, metric: str, mode: str, seed: int) -> list[int]:
        """The row indexes to label, in order: ``all``, ``random`` or ``disagree`` first."""
        if mode == "random":
            return sorted(random.Random(seed).sample(range(run.rows), min(_QUEUE, run.rows)))
        if mode != "disagree":
            return []  # "all": walked with keyset pages, not listed
        given = {
            label.row_index: label.label
            for label in self.store.labels(run_id=run.id, metric=metric)
            if label.row_index is not None
        }
        first: list[int] = []
        rest: list[int] = []
        for row in self._scan(run.id, False, None):
            value = row.record.get(metric)
            human = _label_value(given.get(row.index))
            off = (
                human is not None
                and isinstance(value, (int, float))
                and (human >= 0.5) != (value >= 0.5)
            )
            (first if off or _unstable(row.record, metric) else rest).append(row.index)
            if len(first) + len(rest) >= _SCAN_MAX:
                break
        return first + rest

    def label_page(self, request: Request) -> Response:
        run = self.find_run(str(request.path_params["run"]))
        query = request.query_params
        names = run.metric_names
        metric = query.get("metric") or (names[0] if names else "")
        mode = query.get("mode", "all")
        seed = _integer(query.get("seed")) or 0
        position = _integer(query.get("pos")) or 0
        picks = "".join(
            f"<a href='{escape_attribute(self._link(request, metric=metric, mode=key, pos=0))}'"
            f"{' class=current' if key == mode else ''}>{label}</a> "
            for key, label in (
                ("all", "all"),
                ("random", "random sample"),
                ("disagree", "disagreements first"),
            )
        )
        metric_links = " ".join(
            f"<a href='{escape_attribute(self._link(request, metric=n, pos=0))}'>{escape_text(n)}</a>"
            for n in names
        )
        head = (
            f"<p><a href='/runs/{escape_attribute(run.id)}'>← {escape_text(run.name)}</a> · metric: {metric_links} · "
            f"queue: {picks}</p>"
        )
        if mode == "all":
            row = (
                self.store.rows_page(run.id, after=position - 1, limit=1)
                if position
                else self.store.rows_page(run.id, limit=1)
            )
            current = row[0] if row else None
            total = run.rows
            place = position if current is None else current.index
        else:
            order = self.queue(run, metric, mode, seed)
            total = len(order)
            current = self._row(run.id, order[position]) if position < total else None
            place = position
        if current is None:
            back = self._link(request, pos=max(position - 1, 0))
            return self.page(
                f"Label {metric}",
                head
                + f"<p id='done' data-prev='{escape_attribute(back)}'>queue done ({total} rows). "
                f"<a href='/runs/{escape_attribute(run.id)}/labels.jsonl?metric={escape_attribute(metric)}'>export the "
                "labels</a> · <kbd>←</kbd> the last row</p>",
                script="document.addEventListener('keydown',e=>{if(e.key==='ArrowLeft')"
                "location.href=document.getElementById('done').dataset.prev;});",
            )
        given = [
            label
            for label in self.store.labels(run_id=run.id, metric=metric)
            if label.row_index == current.index
        ]
        latest = given[-1] if given else None
        state = (
            f"labeled <b>{escape_text(json.dumps(latest.label))}</b>"
            + (f" ({escape_text(latest.note)})" if latest.note else "")
            if latest
            else "not labeled yet"
        )
        previous = self._link(request, pos=max(place - 1, 0)) if place else ""
        following = self._link(request, pos=place + 1)
        panel = (
            f"<div id='labeling' data-run='{escape_attribute(run.id)}' data-index='{current.index}' "
            f"data-metric='{escape_attribute(metric)}' data-next='{escape_attribute(following)}' "
            f"data-prev='{escape_attribute(previous)}'><p>row {place + 1} of {total} · "
            f"<span id='state'>{state}</span></p>"
            "<p class='keys'><kbd>0</kbd>–<kbd>9</kbd> label the row (saved at once, then the "
            "next row) · <kbd>←</kbd> <kbd>→</kbd> move · <kbd>n</kbd> the note</p>"
            f"<label>note <input id='note' size='60' value='{escape_attribute(latest.note or '') if latest else ''}'>"
            "</label></div>"
        )
        script = (
            "const box=document.getElementById('labeling'),note=document.getElementById('note');"
            "const csrf=document.querySelector('meta[name=csrf-token]').content;"
            "async function save(label){const r=await fetch('/api/labels',{method:'POST',"
            "headers:{'Content-Type':'application/json','X-CSRF-Token':csrf},"
            "body:JSON.stringify({run:box.dataset.run,index:Number(box.dataset.index),"
            "metric:box.dataset.metric,label:label,note:note.value})});"
            "const s=document.getElementById('state');"
            "if(r.ok){s.textContent='saved '+label;s.className='saved';"
            "location.href=box.dataset.next;}else{s.textContent='not saved: '+await r.text();}}"
            "document.addEventListener('keydown',e=>{if(e.target===note){if(e.key==='Escape'||"
            "e.key==='Enter'){note.blur();e.preventDefault();}return;}"
            "if(e.ctrlKey||e.metaKey||e.altKey)return;"
            "if(/^[0-9]$/.test(e.key)){e.preventDefault();save(Number(e.key));}"
            "else if(e.key==='ArrowRight'){location.href=box.dataset.next;}"
            "else if(e.key==='ArrowLeft'&&box.dataset.prev){location.href=box.dataset.prev;}"
            "else if(e.key==='n'){e.preventDefault();note.focus();}});"
        )
        return self.page(
            f"Label {metric}", head + panel + self.conversation(run, current), script=script
        )

    async def post_label(self, request: Request) -> Response:
        from starlette.concurrency import run_in_threadpool
        from starlette.responses import JSONResponse, PlainTextResponse

        refused = self.refuse_post(request, request.headers.get(_CSRF_HEADER, ""))
        if refused is not None:
            return refused
        try:
            body = await request.json()
            run_id, index, metric = str(body["run"]), int(body["index"]), str(body["metric"])
            label = body["label"]
            if not isinstance(label, (int, float, str, bool)) or isinstance(label, bool):
                label = str(label)
        except (ValueError, KeyError, TypeError):
            return PlainTextResponse(
                "expected JSON with run, index, metric and label", status_code=400
            )
        note = str(body.get("note") or "").strip() or None

        def add() -> int:
            if self._row(run_id, index) is None:
                raise ConfigError(f"run {run_id[:12]} has no row {index}")
            return self.store.add_label(
                metric=metric,
                label=label,
                run_id=run_id,
                row_index=index,
                note=note,
                annotator=self.annotator,
            )

        try:
            key = await run_in_threadpool(add)
        except ConfigError as exc:
            return PlainTextResponse(str(exc), status_code=404)
        return JSONResponse({"id": key})

    def labels_file(self, request: Request) -> Response:
        from starlette.responses import Response as Plain

        run = self.find_run(str(request.path_params["run"]))
        metric = request.query_params.get("metric") or None
        text = "".join(json.dumps(r) + "\n" for r in self.store.label_records(run.id, metric))
        name = f"labels-{run.id[:12]}{'-' + metric if metric else ''}.jsonl"
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        return Plain(
            text,
            media_type="application/jsonl",
            headers={"Content-Disposition": f'attachment; filename="{safe}"'},
        )

    # -- compare -----------------------------------------------------------------------------

    def compare_page(self, request: Request) -> Response:
        from turneval.compare import check_metric_configs, compare, pair_rows

        runs = self.store.runs()
        first, second = request.query_params.get("a", ""), request.query_params.get("b", "")

        def choose(field: str, picked: str) -> str:
            items = "".join(
                f"<option value='{escape_attribute(r.id)}'{' selected' if r.id == picked else ''}>"
                f"{escape_text(r.name)} · {escape_text(r.created.strftime('%Y-%m-%d %H:%M'))} · {r.id[:8]}</option>"
                for r in runs
            )
            return f"<label>{field}<select name='{field[0]}'>{items}</select></label>"

        form = (
            "<form class='filters' method='get' action='/compare'>"
            f"{choose('a (baseline)', first)}{choose('b (candidate)', second)}"
            "<button>compare</button></form>"
        )
        if not (first and second):
            return self.page("Compare two runs", form)
        allowed = request.query_params.get("allow_config_change") == "1"
        try:
            base, cand = self.find_run(first), self.find_run(second)
            if not allowed:
                try:
                    check_metric_configs(base.metrics, cand.metrics)
                except ConfigError as exc:  # the scores do not compare: say why, offer a way
                    anyway = self._link(request, allow_config_change=1)
                    return self.page(
                        "Compare two runs",
                        form + f"<p class='err' id='config-change'>{escape_text(exc)}</p>"
                        f"<p><a href='{escape_attribute(anyway)}'>compare anyway</a></p>",
                        status=409,
                    )
            before, after = self.store.result(base.id), self.store.result(cand.id)
            found = compare(before, after, allow_config_change=allowed)
            pairing = pair_rows(before, after)
        except ConfigError as exc:
            return self.page(
                "Compare two runs", form + f"<p class='err'>{escape_text(exc)}</p>", status=400
            )
        lines, flips = [], []
        for name, item in found.metrics.items():
            p = "n/a" if item.p_value is None else f"{item.p_value:.4f}"
            lines.append(
                f"<tr><td>{escape_text(name)}</td><td>{format_value(item.baseline_mean)}</td>"
                f"<td>{format_value(item.candidate_mean)}</td><td>{format_value(item.difference)}</td>"
                f"<td class='p'>{p}</td><td>{item.pairs}</td><td>{len(item.regressions)}</td>"
                f"<td>{len(item.improvements)}</td></tr>"
            )
            for kind, indexes in (
                ("regression", item.regressions),
                ("newly failed", item.newly_failed),
                ("unstable regression", item.unstable_regressions),
                ("improvement", item.improvements),
            ):
                for position in indexes:
                    flips.append((kind, name, position))
        order = {"regression": 0, "newly failed": 1, "unstable regression": 2, "improvement": 3}
        flips.sort(key=lambda f: (order[f[0]], f[2]))
        rows = []
        for kind, name, position in flips[:500]:
            brow, crow = before.rows[position], after.rows[int(pairing[position])]
            values = [r.results[name].value if name in r.results else None for r in (brow, crow)]
            rows.append(
                f"<tr class='flip {'bad' if kind != 'improvement' else 'good'}'>"
                f"<td>{escape_text(kind)}</td><td>{escape_text(name)}</td><td>{escape_text(brow.sample_id or '')}</td>"
                f"<td><a href='/runs/{escape_attribute(base.id)}/rows/{brow.index}'>{format_value(values[0])}</a></td>"
                f"<td><a href='/runs/{escape_attribute(cand.id)}/rows/{crow.index}'>{format_value(values[1])}</a></td>"
                "</tr>"
            )
        body = (
            form
            + f"<p>{escape_text(base.name)} ({base.id[:8]}) → {escape_text(cand.name)} ({cand.id[:8]}); rows "
            "paired by id (by position without ids); p: two-sided paired permutation test</p>"
            "<table id='metrics'><thead><tr><th>metric</th><th>baseline</th><th>candidate</th>"
            "<th>difference</th><th>p-value</th><th>pairs</th><th>regressions</th>"
            f"<th>improvements</th></tr></thead><tbody>{''.join(lines)}</tbody></table>"
            "<h2>Rows that changed (regressions first)</h2>"
            + (
                "<table id='flips'><thead><tr><th>change</th><th>metric</th><th>id</th>"
                f"<th>baseline</th><th>candidate</th></tr></thead><tbody>{''.join(rows)}"
                "</tbody></table>"
                if rows
                else "<p class='muted'>no row crossed the pass threshold</p>"
            )
        )
        return self.page("Compare two runs", body)

    # -- safety ------------------------------------------------------------------------------

    def refuse_post(self, request: Request, csrf: str) -> Response | None:
        """A 403 unless the POST carries this process's CSRF token and a same-origin Origin."""
        from starlette.responses import PlainTextResponse

        origin = request.headers.get("origin")
        if origin is not None:
            mine = f"{request.url.scheme}://{request.headers.get('host', '')}"
            if origin != mine:
                return PlainTextResponse("cross-origin request refused", status_code=403)
        if not secrets.compare_digest(csrf.encode(), self.csrf.encode()):
            return PlainTextResponse("missing or wrong CSRF token", status_code=403)
        return None


def _day(text: str | None) -> date | None:
    try:
        return date.fromisoformat(text) if text else None
    except ValueError:
        return None


def _number(text: str | None) -> float | None:
    try:
        value = float(text) if text not in (None, "") else None
    except ValueError:
        return None
    return value if value is None or math.isfinite(value) else None


def _integer(text: str | None) -> int | None:
    try:
        return int(text) if text not in (None, "") else None
    except ValueError:
        return None


def _shade(value: Any) -> str:
    if not isinstance(value, (int, float)) or not 0 <= value <= 1:
        return ""
    return "good" if value >= 0.8 else "mid" if value >= 0.5 else "bad"


def _cut(text: object, size: int = 160) -> str:
    words = str(text)
    return words if len(words) <= size else words[: size - 1] + "…"


def _unstable(record: Mapping[str, Any], metric: str) -> bool:
    details = record.get(f"{metric}_details")
    votes = details.get("repeats") if isinstance(details, dict) else None
    return isinstance(votes, dict) and bool(votes.get("unstable"))


def _label_value(label: Any) -> float | None:
    if label is None:
        return None
    if isinstance(label, bool):
        return float(label)
    if isinstance(label, (int, float)):
        return float(label)
    words = {"yes": 1.0, "pass": 1.0, "true": 1.0, "no": 0.0, "fail": 0.0, "false": 0.0}
    return words.get(str(label).lower())


def _votes(record: Mapping[str, Any]) -> str:
    parts = []
    for key, value in record.items():
        if key == "votes" and isinstance(value, list):
            marks = " ".join(
                f"<span class='vote'>{escape_text(format_value(v) if isinstance(v, float) else v)}</span>"
                for v in value
            )
            parts.append(f"votes: {marks}")
        else:
            parts.append(
                f"{escape_text(key)} {escape_text(format_value(value) if isinstance(value, float) else value)}"
            )
    return " · ".join(parts)


def _citations(record: Mapping[str, Any], names: Sequence[str]) -> list[str]:
    """Quoted text grounding metrics keep in their details (``citations``/``quotes``)."""
    found: list[str] = []

    def walk(node: Any, depth: int = 0) -> None:
        if depth > 4 or len(found) > 50:
            return
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("citations", "quotes", "cited", "evidence") and isinstance(value, list):
                    for item in value:
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
    for quote in cited:
        start = text.find(quote)
        if start >= 0:
            spans.append((start, start + len(quote)))
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


def _turns(sample: Any, cited: Sequence[str], decisive: Mapping[int, str] | None = None) -> str:
    """The sample's turns (human, ai with its tool calls, tool), every text escaped.

    Each AI turn shows its agent (a tool result its caller's); a step an attribution names
    (``decisive``: turn index -> metric) is marked.
    """
    if not isinstance(sample, dict):
        return "<p class='muted'>the run did not keep this row's sample</p>"
    turns = sample.get("user_input")
    if not isinstance(turns, list):  # a single-turn sample: its fields
        return "".join(
            f"<div class='msg tool'><span class='role'>{escape_text(key)}</span>"
            f"{_marked(value, cited) if isinstance(value, str) else escape_text(json.dumps(value))}</div>"
            for key, value in sample.items()
        )
    parts = []
    caller: Any = None  # the agent whose tool calls the next tool results answer
    for index, turn in enumerate(turns):
        if not isinstance(turn, dict):
            parts.append(f"<div class='msg'>{escape_text(turn)}</div>")
            continue
        kind = str(turn.get("type", "?"))
        if kind == "ai":
            caller = turn.get("name") if turn.get("tool_calls") else None
            agent = turn.get("name")
        elif kind == "tool":
            agent = caller
        else:
            agent, caller = None, None
        named = f" <span class='agent'>{escape_text(agent)}</span>" if agent else ""
        marked, mark = "", ""
        if decisive and index in decisive:
            marked = " decisive"
            mark = (
                f"<span class='decisive-mark' title='{escape_attribute(decisive[index])}'>"
                "decisive step</span>"
            )
        content = turn.get("content")
        text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
        body = _marked(text, cited) if kind == "ai" else escape_text(text)
        calls = "".join(
            f"<div class='call'>{escape_text(call.get('name'))}"
            f"({escape_text(json.dumps(call.get('args'), ensure_ascii=False))})</div>"
            for call in turn.get("tool_calls") or []
            if isinstance(call, dict)
        )
        extra = (
            f" <span class='muted'>(call {escape_text(turn['tool_call_id'])})</span>"
            if turn.get("tool_call_id")
            else ""
        )
        parts.append(
            f"<div class='msg {escape_attribute(kind)}{marked}' id='turn-{index}'>{mark}"
            f"<span class='role'>{escape_text(kind)}</span>{named}{extra}{body}{calls}</div>"
        )
    for key in ("reference_tool_calls", "reference", "reference_topics"):
        value = sample.get(key)
        if value is not None:
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            parts.append(
                f"<div class='ref'><b>{escape_text(key)}</b><pre>{escape_text(shown)}</pre></div>"
            )
    return "".join(parts)


def create_app(
    store: RunStore,
    *,
    token: str | None = None,
    annotator: str | None = None,
    allowed_hosts: Sequence[str] | None = None,
) -> Starlette:
    """The viewer's Starlette application over ``store``.

    Args:
        store: The run store to show.
        token: When given, every request must carry it: the ``X-Turneval-Token`` header, or
            the cookie a first visit with ``?token=...`` sets (HttpOnly, SameSite=Strict).
        annotator: The name labels are saved under.
        allowed_hosts: The ``Host`` headers accepted (None: any); ``serve`` passes the bound
            host and the loopback names, so a DNS-rebinding page cannot read the store.
    """
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.trustedhost import TrustedHostMiddleware
    from starlette.responses import PlainTextResponse, RedirectResponse
    from starlette.routing import Route

    viewer = _Viewer(store, token, annotator)

    def guarded(handler: Callable[[Request], Any]) -> Callable[[Request], Awaitable[Response]]:
        from starlette.concurrency import run_in_threadpool

        async def endpoint(request: Request) -> Response:
            try:
                result = handler(request)
                if hasattr(result, "__await__"):
                    response: Response = await result
                    return response
                return result  # type: ignore[no-any-return]
            except ConfigError as exc:
                return viewer.error(str(exc))

        async def threaded(request: Request) -> Response:
            try:
                response: Response = await run_in_threadpool(handler, request)
                return response
            except ConfigError as exc:
                return viewer.error(str(exc))

        import inspect

        return endpoint if inspect.iscoroutinefunction(handler) else threaded

    async def check_token(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        if token is None:
            return await call_next(request)
        given = request.query_params.get("token")
        if given is not None and secrets.compare_digest(given.encode(), token.encode()):
            params = {k: v for k, v in request.query_params.items() if k != "token"}
            target = request.url.path + (f"?{urlencode(params)}" if params else "")
            moved = RedirectResponse(target, status_code=303)
            moved.set_cookie(_TOKEN_COOKIE, token, httponly=True, samesite="strict")
            return moved
        carried = request.headers.get(_TOKEN_HEADER) or request.cookies.get(_TOKEN_COOKIE) or ""
        if not secrets.compare_digest(carried.encode(), token.encode()):
            return PlainTextResponse(
                "this viewer needs its token: open the URL turneval view printed (?token=...)",
                status_code=401,
            )
        return await call_next(request)

    from starlette.middleware.base import BaseHTTPMiddleware

    middleware = [Middleware(BaseHTTPMiddleware, dispatch=check_token)]
    if allowed_hosts is not None:
        middleware.insert(0, Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts)))
    routes = [
        Route("/", guarded(viewer.runs_page)),
        Route("/runs/{run}", guarded(viewer.run_page)),
        Route("/runs/{run}/delete", guarded(viewer.delete_run), methods=["POST"]),
        Route("/runs/{run}/rows", guarded(viewer.rows_page)),
        Route("/runs/{run}/rows/{index:int}", guarded(viewer.row_page)),
        Route("/runs/{run}/label", guarded(viewer.label_page)),
        Route("/runs/{run}/labels.jsonl", guarded(viewer.labels_file)),
        Route("/api/labels", guarded(viewer.post_label), methods=["POST"]),
        Route("/compare", guarded(viewer.compare_page)),
    ]
    return Starlette(routes=routes, middleware=middleware)


def _loopback(host: str) -> bool:
    return host in ("127.0.0.1", "localhost", "::1") or host.startswith("127.")


def serve(
    store: str | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    annotator: str | None = None,
) -> None:
    """Run the viewer on uvicorn until interrupted (``turneval view``).

    Raises:
        ConfigError: ``host`` is not a loopback address and no ``token`` is given, or the
            store cannot be opened.
    """
    try:
        import starlette  # noqa: F401
        import uvicorn
    except ImportError as exc:
        raise ImportError(
            f"turneval view needs the view extra: pip install 'turneval[view]' ({exc})"
        ) from exc

    from turneval.store import RunStore

    if not _loopback(host) and not token:
        raise ConfigError(
            f"--host {host} serves the store to other machines: give --token TOKEN too "
            "(every request must then carry it)"
        )
    opened = RunStore(store)
    if annotator is None:
        try:
            annotator = getpass.getuser()
        except Exception:  # no user name (a container): labels without one
            annotator = None
    hosts = None if host in ("0.0.0.0", "::") else [host, "127.0.0.1", "localhost"]
    app = create_app(opened, token=token, annotator=annotator, allowed_hosts=hosts)
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    address = f"http://{shown}:{port}/" + (f"?token={token}" if token else "")
    print(f"turneval view: {opened.url} on {address} (Ctrl-C stops)", flush=True)
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning")
    finally:
        opened.close()

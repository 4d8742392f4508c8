"""The viewer's Starlette application: pages rendered on the server, every value escaped.

Safety: every page carries a Content-Security-Policy that only runs its own nonce'd script;
every stored value goes through :mod:`turneval.view._render` (HTML-escaped, bidi and control
characters shown as ``<U+202E>``, a value that should be a number but is not shown as text,
long texts cut with a link to the whole); a label or a delete is a POST that must carry the
process's CSRF token (a form field or the ``X-CSRF-Token`` header) and, when the browser sends
one, a same-origin ``Origin``; with ``token`` set, every request must carry it (the
``X-Turneval-Token`` header, or the cookie a first ``?token=`` visit sets).

Size: every page is bounded, whatever the store holds. Lists are paged (runs, rows, the rows
two runs changed); a comparison and a histogram read the narrow columns they need
(:meth:`turneval.store.RunStore.columns`), never whole runs; a row's label is one indexed
lookup; a conversation shows at most :data:`~turneval.view._render.TURNS` turns and
:data:`~turneval.view._render.PAGE_TEXT` characters, each long text cut with a link to the
whole of it (``/runs/RUN/rows/N/text``, served as plain text).

Errors: a run or row that is not there is a 404 page; a store that cannot be read now (a
SQLite file locked by another process, a PostgreSQL server down) a 503 page saying so; any
other failure a 500 page naming it, never a bare error.
"""

from __future__ import annotations

import contextlib
import errno
import getpass
import json
import logging
import math
import random
import secrets
import socket
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from time import monotonic
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlencode

from turneval.errors import ConfigError
from turneval.report import (
    agents_table_html,
    clusters_html,
    context_summary,
    decisive_steps,
    escape_attribute,
    escape_text,
    histogram_html,
)
from turneval.view._judges import judge_config_routes
from turneval.view._render import Clipper, citations, cut, figure, number, turns, votes

if TYPE_CHECKING:
    import numpy as np
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

    from turneval.store import RunStore, StoredRow, StoredRun
    from turneval.view._compare import Compared

__all__ = ["create_app", "serve"]

_LOG = logging.getLogger("turneval.view")
_TOKEN_HEADER = "x-turneval-token"
_TOKEN_COOKIE = "turneval_token"
_CSRF_HEADER = "x-csrf-token"
_PAGE = 50  # rows a page shows
_RUNS = 50  # runs a page of the runs list shows
_FLIPS = 100  # changed rows a page of a comparison shows
_SCAN = 1000  # rows read at a time when a filter needs the row's values
_SCAN_MAX = 20_000  # rows one filtered page reads at most before it stops and offers "more"
_FULL_RUN = 50_000  # simulated runs up to this many rows get the trials grid
_METRICS = 100  # metrics a run's page summarises and draws at most
_QUEUE = 50  # rows a random labeling queue draws
_KEEP_RUN = 30.0  # seconds an ended run's record is reused
_KEEP_QUEUE = 600.0  # seconds a disagreements queue is reused while it is walked
_KEPT = 8  # comparisons, sort orders and histograms of ended runs kept (the latest)
_RETRY = 5  # seconds a 503 asks the browser to wait
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
.refused{color:#a3261b;font-weight:600}a.full{font-style:italic;white-space:nowrap}
"""


def _nonce() -> str:
    return secrets.token_urlsafe(16)


class _Kept(OrderedDict[Any, Any]):
    """The latest few results kept by key (computed orders, comparisons, histograms)."""

    def keep(self, key: Any, value: Any) -> Any:
        self[key] = value
        self.move_to_end(key)
        while len(self) > _KEPT:
            self.popitem(last=False)
        return value

    def find(self, key: Any) -> Any:
        found = self.get(key)
        if found is not None:
            self.move_to_end(key)
        return found


class _Viewer:
    """The pages, bound to one store and this process's secrets."""

    def __init__(self, store: RunStore, token: str | None, annotator: str | None) -> None:
        self.store = store
        self.token = token
        self.csrf = secrets.token_urlsafe(32)
        self.annotator = annotator
        self.ended: dict[str, tuple[StoredRun, float]] = {}  # ended runs by the id asked for
        self.scales: dict[tuple[str, str], _Scale] = {}  # (run id, metric): its labels' scale
        self.kept = _Kept()  # of ended runs: comparisons, sort orders, histograms
        self.queues: dict[tuple[str, str], tuple[list[int], float]] = {}  # disagreements

    # -- page frame --------------------------------------------------------------------------

    def page(
        self,
        title: str,
        body: str,
        *,
        script: str = "",
        status: int = 200,
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        from starlette.responses import HTMLResponse

        nonce = _nonce()
        ready = "document.body.dataset.ready='1';"  # what the browser tests wait for
        tag = f'<script nonce="{nonce}">{script}{ready}</script>'
        text = (
            "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
            f'<meta name="csrf-token" content="{self.csrf}"><link rel="icon" href="data:,">'
            f"<title>{escape_attribute(cut(title, 200))} · turneval view</title>"
            f"<style>{_CSS}</style></head><body>"
            "<header><b>turneval view</b> &nbsp; <a href='/'>runs</a><a href='/compare'>compare</a><a href='/judges'>judges</a>"
            f"</header><main><h1>{escape_text(cut(title, 200))}</h1>{body}</main>{tag}"
            "</body></html>"
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
                **(headers or {}),
            },
        )

    def error(self, message: str, status: int = 404) -> Response:
        titles = {404: "Not found", 400: "Bad request", 503: "Run store unavailable"}
        return self.page(
            titles.get(status, "Error"),
            f"<p id='error'>{escape_text(message)}</p>",
            status=status,
            headers={"Retry-After": str(_RETRY)} if status == 503 else None,
        )

    def failure(self, request: Request, exc: Exception) -> Response:
        """The page (or, for the API, the text) that says why a request failed.

        A run or row that is not there: 404. A store that cannot be read now (locked by
        another process's write, a server that does not answer): 503 with ``Retry-After``.
        Anything else: 500, naming the error (its traceback goes to the log).
        """
        from starlette.responses import PlainTextResponse

        status, message = _failure(exc, self.store.url)
        if status == 500:
            _LOG.error(
                "turneval view: %s %s failed", request.method, request.url.path, exc_info=exc
            )
        if request.url.path.startswith("/api/"):
            headers = {"Retry-After": str(_RETRY)} if status == 503 else None
            return PlainTextResponse(message, status_code=status, headers=headers)
        return self.error(message, status)

    def scale(self, run: StoredRun, metric: str) -> _Scale:
        """The scale labels of ``metric`` in ``run`` must lie on (worked out once per run)."""
        key = (run.id, metric)
        if key not in self.scales:
            if len(self.scales) > 256:
                self.scales.clear()
            self.scales[key] = _scale_of(run, metric)
        return self.scales[key]

    def find_run(self, run_id: str) -> StoredRun:
        """The run ``run_id`` names; an ended run is kept 30 s (counting a large run's rows costs)."""
        known = self.ended.get(run_id)
        if known is not None and monotonic() - known[1] < _KEEP_RUN:
            return known[0]
        run = self.store.run(run_id)
        if run.status != "running":
            if len(self.ended) > 1024:
                self.ended.clear()
            self.ended[run_id] = (run, monotonic())
        return run

    def ended_key(self, *runs: StoredRun) -> tuple[Any, ...] | None:
        """A key for results computed over ``runs`` (None while one is running: not kept)."""
        if any(run.status == "running" for run in runs):
            return None
        return tuple((run.id, run.finished, run.rows) for run in runs)

    # -- runs --------------------------------------------------------------------------------

    def runs_page(self, request: Request) -> Response:
        query = request.query_params
        text, dataset = query.get("q", "").strip(), query.get("dataset", "").strip()
        metric, model = query.get("metric", "").strip(), query.get("model", "").strip()
        since, until = _day(query.get("since")), _day(query.get("until"))
        offset = max(_integer(query.get("offset")) or 0, 0)
        filters: dict[str, Any] = {
            "text": text or None,
            "dataset": dataset or None,
            "metric": metric or None,
            "judge": model or None,
            "since": since,
            "until": until,
        }
        shown = self.store.runs(limit=_RUNS, offset=offset, **filters)
        total = self.store.count_runs(**filters)
        names = sorted({name for run in shown for name in run.metric_names})
        options = "".join(f"<option value='{escape_attribute(m)}'>" for m in names[:200])
        filters_form = (
            "<form class='filters' method='get' action='/'>"
            f"<label>search<input name='q' value='{escape_attribute(text)}'></label>"
            f"<label>dataset<input name='dataset' value='{escape_attribute(dataset)}'></label>"
            f"<label>metric<input name='metric' list='metric-names' "
            f"value='{escape_attribute(metric)}'><datalist id='metric-names'>{options}</datalist>"
            f"</label><label>judge model<input name='model' value='{escape_attribute(model)}'>"
            f"</label><label>from<input type='date' name='since' "
            f"value='{escape_attribute(query.get('since', ''))}'></label><label>to<input "
            f"type='date' name='until' value='{escape_attribute(query.get('until', ''))}'>"
            "</label><button>filter</button></form>"
        )
        rows = []
        for run in shown:
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
        span = f"{offset + 1:,}-{offset + len(shown):,} of " if shown and total > len(shown) else ""
        count = f"<p class='muted' id='count'>{span}{total:,} runs</p>"
        nav = self._pages(request, offset, len(shown), total, _RUNS)
        return self.page("Runs", filters_form + count + table + nav, script=script)

    def _pages(self, request: Request, offset: int, shown: int, total: int, size: int) -> str:
        """Links to the previous and next page of a list paged by ``offset``."""
        links = []
        if offset > 0:
            back = self._link(request, offset=max(offset - size, 0) or None)
            links.append(f"<a id='previous' href='{escape_attribute(back)}'>← previous page</a>")
        if offset + shown < total:
            ahead = self._link(request, offset=offset + size)
            links.append(f"<a id='next' href='{escape_attribute(ahead)}'>next page →</a>")
        return f"<p>{' · '.join(links)}</p>" if links else ""

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
        self.kept.clear()
        self.queues.clear()
        return RedirectResponse("/", status_code=303)

    # -- one run -----------------------------------------------------------------------------

    def run_page(self, request: Request) -> Response:
        run = self.find_run(str(request.path_params["run"]))
        rid = escape_attribute(run.id)
        head = (
            f"<p>{escape_text(run.status)} · {run.rows:,} rows · started "
            f"{escape_text(run.created.strftime('%Y-%m-%d %H:%M:%S'))} · turneval "
            f"{escape_text(cut(run.turneval_version, 64))}"
            + (f" · commit {escape_text(run.git_commit[:12])}" if run.git_commit else "")
            + (f" · judge {escape_text(cut(run.judge_model, 200))}" if run.judge_model else "")
            + (f" · dataset {escape_text(cut(run.dataset_path, 500))}" if run.dataset_path else "")
            + _dataset_version(self.store, run)  # issue 49: the version the run read
            + "</p>"
            + (f"<pre class='error'>{escape_text(cut(run.error, 4000))}</pre>" if run.error else "")
            + f"<p><a href='/runs/{rid}/rows'>rows</a> · "
            f"<a href='/runs/{rid}/label'>label rows</a> · "
            f"<a href='/compare?a={rid}'>compare with another run</a> · "
            f"<a href='/runs/{rid}/labels.jsonl'>export labels</a></p>"
        )
        body = self._summary(run) + self._clusters(run) + self._distributions(run)
        return self.page(f"Run {run.name}", head + body + self._skipped(run))

    def _clusters(self, run: StoredRun) -> str:
        """Failure clusters, when an attribution was run (issue 46); runs up to ``_FULL_RUN``."""
        if run.rows > _FULL_RUN:
            return ""
        key = self.ended_key(run)
        found = self.kept.find(("clusters", key)) if key is not None else None
        if found is not None:
            return str(found)
        from turneval.clusters import cluster_failures

        try:
            rows = self.store.result(run.id).rows
        except (ValueError, TypeError, KeyError):  # a stored row that is no results row
            return ""
        attributed = any("attribution" in r.details for row in rows for r in row.results.values())
        clusters = cluster_failures(rows) if attributed else []
        html = clusters_html(clusters, len(rows), f"/runs/{run.id}/rows/{{index}}")
        if key is not None:
            self.kept.keep(("clusters", key), html)
        return html

    def _skipped(self, run: StoredRun) -> str:
        """The conversations a ``turneval watch`` run skipped, and why (issue 43, revision 0005)."""
        skipped = self.store.skipped_counts(run.id)
        if not skipped:
            return ""
        counts = ", ".join(f"{escape_text(cut(r, 200))}: {n:,}" for r, n in skipped.items())
        listed = "".join(
            f"<tr><td>{escape_text(cut(s.conversation, 200))}</td>"
            f"<td>{escape_text(cut(s.reason, 200))}</td>"
            f"<td>{escape_text(cut(s.detail or '', 1000))}</td>"
            f"<td>{escape_text(s.created.strftime('%Y-%m-%d %H:%M:%S') if s.created else '')}"
            "</td></tr>"
            for s in self.store.skipped(run.id, limit=20)
        )
        return (
            f"<h2>Skipped conversations</h2><p id='skipped'>{counts}</p>"
            "<table id='skips'><thead><tr><th>conversation</th><th>reason</th><th>why</th>"
            f"<th>when (UTC)</th></tr></thead><tbody>{listed}</tbody></table>"
            f"<p class='muted'>the latest {min(20, sum(skipped.values()))}</p>"
        )

    def _summary(self, run: StoredRun) -> str:
        """The summary table: each metric's mean, interval, counts and judge usage."""
        summary = run.summary if isinstance(run.summary, dict) else {}
        stats = summary.get("metrics") if isinstance(summary.get("metrics"), dict) else {}
        lines = []
        calls = inputs = outputs = 0
        items = [
            (str(name), item) for name, item in (stats or {}).items() if isinstance(item, dict)
        ]
        for name, item in items[:_METRICS]:
            usage = item.get("usage") if isinstance(item.get("usage"), dict) else None
            spent = ""
            if usage:
                used = [_whole(usage.get(k)) for k in ("calls", "input_tokens", "output_tokens")]
                calls, inputs, outputs = calls + used[0], inputs + used[1], outputs + used[2]
                spent = f"{used[0]:,} requests, {used[1]:,} in + {used[2]:,} out tokens"
            low, high = item.get("ci_low"), item.get("ci_high")
            interval = f"[{number(low)}, {number(high)}]" if low is not None else "n/a"
            link = self._link_to(f"/runs/{run.id}/rows", metric=name, sort="value")
            lines.append(
                f"<tr><td><a href='{escape_attribute(link)}'>{escape_text(cut(name, 200))}</a></td>"
                f"<td>{number(item.get('mean'))}</td><td>{interval}</td>"
                f"<td>{figure(item.get('count', ''))}</td><td>{figure(item.get('failed', ''))}</td>"
                f"<td>{escape_text(spent)}</td></tr>"
            )
        if not lines:
            return "<p class='muted'>no summary (the run has not finished)</p>"
        table = (
            "<h2>Summary</h2><table id='summary'><thead><tr><th>metric</th><th>mean</th>"
            "<th>95% CI</th><th>scored</th><th>failed</th><th>judge usage</th></tr></thead>"
            f"<tbody>{''.join(lines)}</tbody></table>"
        )
        if len(items) > _METRICS:
            table += f"<p class='muted'>the first {_METRICS} of {len(items):,} metrics</p>"
        if calls or inputs or outputs:
            table += (
                f"<p id='cost'>judge: {calls:,} requests, {inputs:,} input + {outputs:,} "
                "output tokens</p>"
            )
        table += agents_table_html(  # metrics by agent, agents blamed (issue 46)
            {n: i.get("extra") for n, i in (stats or {}).items() if isinstance(i, dict)}
        )
        return table

    def _distributions(self, run: StoredRun) -> str:
        """Each metric's histogram (from its column of values) and, for simulated runs, trials."""
        import numpy as np

        key = self.ended_key(run)
        found = self.kept.find(("distributions", key)) if key is not None else None
        if found is not None:
            return str(found)
        names = run.metric_names[:_METRICS]
        columns = self.store.columns(run.id, names)
        plots, notes = [], []
        for name in names:
            values = columns.values[name]
            plots.append(histogram_html(name, values[np.isfinite(values)]))
            if columns.not_numbers[name]:
                notes.append(
                    f"{columns.not_numbers[name]:,} rows of {name} hold a value that is not a "
                    "number: left out"
                )
        html = "<h2>Distributions</h2>" + "".join(plots)
        html += "".join(f"<p class='muted note'>{escape_text(cut(n, 300))}</p>" for n in notes)
        if any(scenario is not None for scenario in columns.scenario_ids):
            html += self._trials(run)
        if key is not None:
            self.kept.keep(("distributions", key), html)
        return html

    def _trials(self, run: StoredRun) -> str:
        """A simulated run's trials grid (up to ``_FULL_RUN`` rows; else a note)."""
        from turneval.report import trials_grid_html

        if run.rows > _FULL_RUN:
            return (
                f"<p class='muted'>the trials grid is drawn for runs of up to {_FULL_RUN:,} "
                "rows</p>"
            )
        try:
            grid = trials_grid_html(self.store.result(run.id))
        except (ValueError, TypeError, KeyError) as exc:  # a stored row that is no results row
            return f"<p class='muted'>no trials grid: {escape_text(cut(exc, 300))}</p>"
        return grid.replace('href="#sample-', f'href="/runs/{escape_attribute(run.id)}/rows/')

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
            start = max(_integer(query.get("offset")) or 0, 0)
            order = self._order(
                run, metric, sort == "value", failed, search, below, low, high, shaky
            )
            page = self.store.rows_at(run.id, [int(i) for i in order[start : start + _PAGE]])
            if len(order) > start + _PAGE:
                more = self._link(request, offset=start + _PAGE, after=None)
            note = f"sorted by value: {len(order):,} rows have a value"
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
            f"<option value='{escape_attribute(n)}'{' selected' if n == metric else ''}>"
            f"{escape_text(cut(n, 200))}</option>"
            for n in names[:_METRICS]
        )
        sorts = "".join(
            f"<option value='{k}'{' selected' if k == sort else ''}>{label}</option>"
            for k, label in (("index", "row"), ("value", "value ↑"), ("-value", "value ↓"))
        )
        rid = escape_attribute(run.id)
        filters = (
            f"<form class='filters' method='get' action='/runs/{rid}/rows'>"
            f"<label>metric<select name='metric'>{options}</select></label>"
            f"<label>sort<select name='sort'>{sorts}</select></label>"
            f"<label>below<input name='below' size='5' "
            f"value='{escape_attribute(query.get('below', ''))}'></label><label>min<input "
            f"name='min' size='5' value='{escape_attribute(query.get('min', ''))}'></label>"
            f"<label>max<input name='max' size='5' value='{escape_attribute(query.get('max', ''))}'>"
            f"</label><label>failed<input type='checkbox' name='failed' value='1'"
            f"{' checked' if failed else ''}></label><label>unstable<input type='checkbox' "
            f"name='unstable' value='1'{' checked' if shaky else ''}></label>"
            f"<label>text in the conversation<input name='q' "
            f"value='{escape_attribute(search or '')}'></label><button>filter</button></form>"
        )
        body = []
        plain = _plain(metric)  # lower is better: no verdict colour (issue 49)
        for row in page:
            value = row.record.get(metric)
            error = row.record.get(f"{metric}_error") or row.record.get("agent_error")
            shade = "err" if error else "" if plain else _shade(value)
            reason = error or row.record.get(f"{metric}_reason") or ""
            body.append(
                f"<tr class='row' data-index='{row.index}'><td><a href='/runs/{rid}/rows/"
                f"{row.index}'>{row.index}</a></td><td>{escape_text(cut(row.sample_id or '', 100))}"
                f"</td><td class='{shade}'>{number(value) if value is not None else 'error'}</td>"
                f"<td>{escape_text(cut(reason if isinstance(reason, str) else json.dumps(reason, default=str)))}</td></tr>"
            )
        table = (
            f"<table id='rows'><thead><tr><th>row</th><th>id</th>"
            f"<th>{escape_text(cut(metric, 200))}</th><th>reason or error</th></tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>"
            if body
            else "<p class='muted' id='rows'>no rows match</p>"
        )
        nav = f"<p><a id='next' href='{escape_attribute(more)}'>next page →</a></p>" if more else ""
        head = f"<p><a href='/runs/{rid}'>← {escape_text(cut(run.name, 200))}</a></p>"
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

    def _order(
        self,
        run: StoredRun,
        metric: str,
        ascending: bool,
        failed: bool,
        search: str | None,
        below: float | None,
        low: float | None,
        high: float | None,
        shaky: bool,
    ) -> np.ndarray:
        """The indexes of the rows with a value of ``metric`` (and the filters), by value.

        Ties by row index. Worked out from the run's column of values (one pass, 8 bytes a
        row) and kept for an ended run, so every page after the first is a lookup.
        """
        import numpy as np

        ended = self.ended_key(run)
        key = ("order", ended, metric, ascending, failed, search, below, low, high, shaky)
        found = self.kept.find(key) if ended is not None else None
        if found is not None:
            return found  # type: ignore[no-any-return]
        columns = self.store.columns(
            run.id, [metric], failed=True if failed else None, search=search
        )
        values = columns.values[metric]
        wanted = np.isfinite(values)
        if below is not None:
            wanted &= values < below
        if low is not None:
            wanted &= values >= low
        if high is not None:
            wanted &= values <= high
        if shaky:
            wanted &= columns.unstable[metric]
        indexes, values = columns.indexes[wanted], values[wanted]
        order: np.ndarray = indexes[np.lexsort((indexes, values if ascending else -values))]
        return self.kept.keep(key, order) if ended is not None else order

    @staticmethod
    def _link(request: Request, **changes: Any) -> str:
        params = dict(request.query_params)
        for key, value in changes.items():
            if value is None:
                params.pop(key, None)
            else:
                params[key] = str(value)
        return f"{request.url.path}?{urlencode(params)}" if params else request.url.path

    @staticmethod
    def _link_to(path: str, **params: Any) -> str:
        return f"{path}?{urlencode({k: str(v) for k, v in params.items() if v is not None})}"

    # -- a conversation ----------------------------------------------------------------------

    def _row(self, run_id: str, index: int) -> StoredRow | None:
        found = self.store.rows_at(run_id, [index])
        return found[0] if found else None

    def conversation(self, run: StoredRun, row: StoredRow, first: int = 0) -> str:
        """A row's conversation and, per metric, its value, reason, votes, details and error.

        Every text is escaped and cut (with a link to the whole); at most ``TURNS`` turns,
        from turn ``first``.
        """
        clip = Clipper(f"/runs/{run.id}/rows/{row.index}/text")
        sample = self.store.samples(run.id, [row.index]).get(row.index)
        cited = citations(row.record, run.metric_names)
        decisive = decisive_steps({n: row.record.get(f"{n}_details") for n in run.metric_names})
        conversation, following = turns(
            sample, cited, clip, line=row.line, first=first, decisive=decisive
        )
        if first:
            back = self._link_to(f"/runs/{run.id}/rows/{row.index}", turns=max(first - 200, 0))
            conversation = (
                f"<p><a href='{escape_attribute(back)}'>← earlier turns</a></p>" + conversation
            )
        if following is not None:
            ahead = self._link_to(f"/runs/{run.id}/rows/{row.index}", turns=following)
            conversation += (
                f"<p><a id='more-turns' href='{escape_attribute(ahead)}'>later turns →</a></p>"
            )
        parts = []
        for name in run.metric_names[:_METRICS]:
            value = row.record.get(name)
            reason = row.record.get(f"{name}_reason")
            error = row.record.get(f"{name}_error")
            details = row.record.get(f"{name}_details")
            repeats = details.get("repeats") if isinstance(details, dict) else None
            text = (
                f"<div class='metric' data-metric='{escape_attribute(name)}'><b>"
                f"{escape_text(cut(name, 200))}</b> = "
                f"<span class='{'err' if error else '' if _plain(name) else _shade(value)}'>"
                f"{number(value) if value is not None else 'failed'}</span>"
            )
            if reason:
                text += (
                    f"<div class='reason'>{clip.json(reason, ['record', f'{name}_reason'])}</div>"
                )
            if isinstance(repeats, dict):
                text += "<div class='votes'><b>votes</b> " + votes(repeats, clip) + "</div>"
            # issue 47: the context policy the judge worked under (full, windowed, compacted)
            seen = context_summary(details if isinstance(details, dict) else None)
            if seen:
                text += f"<div class='context'>{escape_text(seen)}</div>"
            if error:
                text += f"<pre class='error'>{clip.json(error, ['record', f'{name}_error'])}</pre>"
                trace = row.record.get(f"{name}_traceback")
                if trace:  # where the metric raised, one click away
                    text += (
                        "<details class='traceback'><summary>traceback</summary><pre "
                        f"class='error'>{clip.json(trace, ['record', f'{name}_traceback'])}</pre>"
                        "</details>"
                    )
            if isinstance(details, dict) and details:
                dump = clip.json(details, ["record", f"{name}_details"], indent=1)
                text += f"<details><summary>details</summary><pre>{dump}</pre></details>"
            parts.append(text + "</div>")
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

    def row_page(self, request: Request) -> Response:
        run = self.find_run(str(request.path_params["run"]))
        index = int(request.path_params["index"])
        row = self._row(run.id, index)
        if row is None:
            return self.error(f"run {run.id[:12]} has no row {index}")
        first = max(_integer(request.query_params.get("turns")) or 0, 0)
        title = f"Row {index}" + (f" ({cut(row.sample_id, 100)})" if row.sample_id else "")
        rid = escape_attribute(run.id)
        nav = (
            f"<p><a href='/runs/{rid}/rows'>← rows of {escape_text(cut(run.name, 200))}</a>"
            + (f" · <a href='/runs/{rid}/rows/{index - 1}'>previous</a>" if index else "")
            + f" · <a href='/runs/{rid}/rows/{index + 1}'>next</a></p>"
        )
        return self.page(title, nav + self.conversation(run, row, first))

    def row_text(self, request: Request) -> Response:
        """The whole of one text of a row (what a page cut), as plain text.

        ``?at=`` names it as JSON: ``["sample", "user_input", 3, "content"]`` or
        ``["record", "judge_reason"]``. A str is served as it is, anything else as JSON.
        """
        from starlette.responses import Response as Plain

        run = self.find_run(str(request.path_params["run"]))
        index = int(request.path_params["index"])
        row = self._row(run.id, index)
        if row is None:
            return self.error(f"run {run.id[:12]} has no row {index}")
        try:
            path = json.loads(request.query_params.get("at", ""))
            if not isinstance(path, list) or not path:
                raise ValueError("not a list")
        except ValueError:
            return self.error('?at= names a text as a JSON list: ["sample", ...]', 400)
        node: Any = {"record": row.record}
        if path[0] == "sample":
            node = {"sample": self.store.samples(run.id, [index]).get(index)}
        for step in path:
            if isinstance(node, dict) and isinstance(step, str) and step in node:
                node = node[step]
            elif (
                isinstance(node, list)
                and isinstance(step, int)
                and not isinstance(step, bool)
                and 0 <= step < len(node)
            ):
                node = node[step]
            else:
                return self.error(f"row {index} of run {run.id[:12]} has no text at {path!r}")
        text = node if isinstance(node, str) else json.dumps(node, indent=1, ensure_ascii=False)
        return Plain(
            text,
            media_type="text/plain; charset=utf-8",
            headers={
                "X-Content-Type-Options": "nosniff",
                "Content-Security-Policy": "default-src 'none'; sandbox",
                "Cache-Control": "no-store",
                "Referrer-Policy": "no-referrer",
            },
        )

    # -- labeling ----------------------------------------------------------------------------

    def queue(self, run: StoredRun, metric: str, mode: str, seed: int) -> list[int]:
        """The row indexes to label, in order: ``random``, or ``disagree`` first.

        ``all`` walks rows with keyset pages: not listed (empty). The disagreements queue
        (rows whose latest label disagrees with the score, and unstable rows, then the others;
        the first ``_SCAN_MAX`` rows) is worked out when it is opened and kept while it is
        walked (``_KEEP_QUEUE`` seconds): a label given meanwhile does not reorder it.
        """
        if mode == "random":
            return sorted(random.Random(seed).sample(range(run.rows), min(_QUEUE, run.rows)))
        if mode != "disagree":
            return []
        key = (run.id, metric)
        known = self.queues.get(key)
        if known is not None and monotonic() - known[1] < _KEEP_QUEUE:
            return known[0]
        import numpy as np

        given = self.store.row_labels(run.id, metric)
        columns = self.store.columns(run.id, [metric], limit=_SCAN_MAX)
        values, unstable = columns.values[metric], columns.unstable[metric]
        first: list[int] = []
        rest: list[int] = []
        for index, value, shaky in zip(columns.indexes.tolist(), values, unstable, strict=True):
            human = _label_value(given.get(index))
            off = (
                human is not None and bool(np.isfinite(value)) and (human >= 0.5) != (value >= 0.5)
            )
            (first if off or shaky else rest).append(index)
        order = first + rest
        if len(self.queues) > 64:
            self.queues.clear()
        self.queues[key] = (order, monotonic())
        return order

    def label_page(self, request: Request) -> Response:
        run = self.find_run(str(request.path_params["run"]))
        query = request.query_params
        names = run.metric_names
        metric = query.get("metric") or (names[0] if names else "")
        mode = query.get("mode", "all")
        seed = _integer(query.get("seed")) or 0
        position = max(_integer(query.get("pos")) or 0, 0)
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
            f"<a href='{escape_attribute(self._link(request, metric=n, pos=0))}'>"
            f"{escape_text(cut(n, 100))}</a>"
            for n in names[:_METRICS]
        )
        rid = escape_attribute(run.id)
        head = (
            f"<p><a href='/runs/{rid}'>← {escape_text(cut(run.name, 200))}</a> · metric: "
            f"{metric_links} · queue: {picks}</p>"
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
            export = self._link_to(f"/runs/{run.id}/labels.jsonl", metric=metric)
            return self.page(
                f"Label {metric}",
                head
                + f"<p id='done' data-prev='{escape_attribute(back)}'>queue done ({total:,} rows). "
                f"<a href='{escape_attribute(export)}'>export the labels</a> · <kbd>←</kbd> the "
                "last row</p>",
                script="document.addEventListener('keydown',e=>{if(e.key==='ArrowLeft')"
                "location.href=document.getElementById('done').dataset.prev;});",
            )
        latest = self.store.latest_label(run.id, metric, current.index)
        state = (
            f"labeled <b>{escape_text(cut(json.dumps(latest.label), 100))}</b>"
            + (f" ({escape_text(cut(latest.note, 300))})" if latest.note else "")
            if latest
            else "not labeled yet"
        )
        previous = self._link(request, pos=max(place - 1, 0)) if place else ""
        following = self._link(request, pos=place + 1)
        scale = self.scale(run, metric)
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
        panel = (
            f"<div id='labeling' data-run='{rid}' data-index='{current.index}' "
            f"data-metric='{escape_attribute(metric)}' data-next='{escape_attribute(following)}' "
            f"data-prev='{escape_attribute(previous)}' "
            f"data-keys='{escape_attribute(json.dumps(keys))}' "
            f"data-allowed='{escape_attribute(scale.allowed())}'><p>row {place + 1:,} of "
            f"{total:,} · <span id='state'>{state}</span></p>"
            f"<p class='keys'>{legend}: label the row (saved at once, then the "
            "next row) · <kbd>←</kbd> <kbd>→</kbd> move · <kbd>n</kbd> the note</p>"
            f"<label>note <input id='note' size='60' value='{note}'></label></div>"
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
            if not isinstance(label, (int, float, str, bool)):
                raise TypeError("a label is a number, a bool or a word")
        except (ValueError, KeyError, TypeError):
            return PlainTextResponse(
                "expected JSON with run, index, metric and label (a number, a bool or a word)",
                status_code=400,
            )
        note = str(body.get("note") or "").strip() or None

        def add() -> int | str:
            run = self.find_run(run_id)
            if metric not in run.metric_names:
                names = ", ".join(repr(name) for name in run.metric_names) or "none"
                return f"run {run.id[:12]} has no metric {metric!r} (its metrics: {names})"
            problem = self.scale(run, metric).problem(label)
            if problem is not None:
                return problem
            if self._row(run.id, index) is None:
                raise ConfigError(f"run {run.id[:12]} has no row {index}")
            return self.store.add_label(
                metric=metric,
                label=label,
                run_id=run.id,
                row_index=index,
                note=note,
                annotator=self.annotator,
            )

        try:
            key = await run_in_threadpool(add)
        except ConfigError as exc:
            return PlainTextResponse(str(exc), status_code=404)
        if isinstance(key, str):  # refused: the label is not one of the metric's values
            return PlainTextResponse(key, status_code=400)
        return JSONResponse({"id": key})

    def labels_file(self, request: Request) -> Response:
        from starlette.responses import Response as Plain

        run = self.find_run(str(request.path_params["run"]))
        metric = request.query_params.get("metric") or None
        text = "".join(json.dumps(r) + "\n" for r in self.store.label_records(run.id, metric))
        name = f"labels-{run.id[:12]}{'-' + metric if metric else ''}.jsonl"
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:120]
        return Plain(
            text,
            media_type="application/jsonl",
            headers={"Content-Disposition": f'attachment; filename="{safe}"'},
        )

    # -- compare -----------------------------------------------------------------------------

    def compared(self, base: StoredRun, cand: StoredRun) -> Compared:
        """The two runs compared from their columns; kept while both have ended."""
        from turneval.view._compare import compare_columns

        key = self.ended_key(base, cand)
        found = self.kept.find(("compare", key)) if key is not None else None
        if found is not None:
            return found  # type: ignore[no-any-return]
        shared = [name for name in base.metric_names if name in cand.metric_names]
        result = compare_columns(
            self.store.columns(base.id, shared),
            self.store.columns(cand.id, shared),
            base.metric_names,
            cand.metric_names,
        )
        return self.kept.keep(("compare", key), result) if key is not None else result

    def compare_page(self, request: Request) -> Response:
        from turneval.compare import check_metric_configs
        from turneval.view._compare import RESAMPLES

        first, second = request.query_params.get("a", ""), request.query_params.get("b", "")
        listed = self.store.runs(limit=_RUNS)
        chosen = []
        for picked in (first, second):
            if picked and not any(run.id == picked for run in listed):
                with contextlib.suppress(ConfigError):
                    chosen.append(self.find_run(picked))
        runs = chosen + listed

        def choose(field: str, picked: str) -> str:
            items = "".join(
                f"<option value='{escape_attribute(r.id)}'{' selected' if r.id == picked else ''}>"
                f"{escape_text(cut(r.name, 100))} · {escape_text(r.created.strftime('%Y-%m-%d %H:%M'))}"
                f" · {escape_text(r.id[:8])}</option>"
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
            found = self.compared(base, cand)
        except ConfigError as exc:
            return self.page(
                "Compare two runs", form + f"<p class='err'>{escape_text(exc)}</p>", status=400
            )
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
        offset = max(_integer(request.query_params.get("offset")) or 0, 0)
        rows = []
        bid, cid = escape_attribute(base.id), escape_attribute(cand.id)
        for kind, name, position in found.flips[offset : offset + _FLIPS]:
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
        notes = [
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
        total = len(found.flips)
        span = f" ({offset + 1:,}-{offset + len(rows):,} of {total:,})" if total > _FLIPS else ""
        body = (
            form + f"<p>{escape_text(cut(base.name, 100))} ({escape_text(base.id[:8])}) → "
            f"{escape_text(cut(cand.name, 100))} ({escape_text(cand.id[:8])}); rows "
            "paired by id (by position without ids); p: two-sided paired permutation test</p>"
            + _dataset_change(self.store, base, cand)  # issue 49
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
            + self._pages(request, offset, len(rows), total, _FLIPS)
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


def _failure(exc: Exception, url: str) -> tuple[int, str]:
    """The status and one-line message a failed request answers with."""
    if isinstance(exc, ConfigError):
        return 404, " ".join(str(exc).split())
    from sqlalchemy.exc import DBAPIError, OperationalError
    from sqlalchemy.exc import TimeoutError as PoolTimeout

    if isinstance(exc, (OperationalError, PoolTimeout)) or (
        isinstance(exc, DBAPIError) and exc.connection_invalidated
    ):
        original = getattr(exc, "orig", None) or exc
        said = cut(" ".join(str(original).split()) or type(original).__name__, 300)
        why = (
            "another process holds its write lock (a run or a label being written, a "
            "migration) longer than this viewer waits"
            if "locked" in said.lower() or "busy" in said.lower()
            else "the database does not answer"
        )
        return 503, f"the run store {url} cannot be read now: {said}; {why}. Try again in a moment."
    said = cut(" ".join(str(exc).split()), 300)
    return 500, (
        f"this page failed: {type(exc).__name__}{': ' + said if said else ''}. The store is "
        "unchanged; the viewer's log has the traceback."
    )


def _shown_value(value: float) -> str:
    return "n/a" if math.isnan(value) else number(float(value))


def _whole(value: Any) -> int:
    """A count from a stored summary: an int, else 0 (an imported file's text never counts)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


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


def _dataset_version(store: RunStore, run: StoredRun) -> str:
    """`` · version support@3 (sha256 1a2b3c4d5e6f)``: the dataset version a run read."""
    if not run.dataset_digest:
        return ""
    found = store.dataset_of(run.dataset_digest)
    digest = escape_text(run.dataset_digest[:12])
    if found is None:
        return f" · <span id='dataset-version'>sha256 {digest} (not in 'turneval datasets')</span>"
    return (
        f" · <span id='dataset-version'>version {escape_text(found.label)} (sha256 {digest})</span>"
    )


def _dataset_change(store: RunStore, base: StoredRun, cand: StoredRun) -> str:
    """A note when two runs read different dataset versions, with the rows that changed."""
    if not (base.dataset_digest and cand.dataset_digest) or (
        base.dataset_digest == cand.dataset_digest
    ):
        return ""
    old, new = store.dataset_of(base.dataset_digest), store.dataset_of(cand.dataset_digest)
    if old is None or new is None:
        what = "rows not listed: keep both versions with 'turneval datasets add'"
    else:
        what = f"{old.label} → {new.label}: {store.diff_datasets(old.digest, new.digest).summary()}"
    return f"<p class='err' id='dataset-change'>the runs read different datasets ({escape_text(what)})</p>"


def _plain(metric: str) -> bool:
    """Whether lower is better for ``metric`` (latency, cost): shown without a verdict colour."""
    from turneval.compare import metric_directions

    return not metric_directions([metric])[metric]


def _shade(value: Any) -> str:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= 1:
        return ""
    return "good" if value >= 0.8 else "mid" if value >= 0.5 else "bad"


def _unstable(record: Mapping[str, Any], metric: str) -> bool:
    details = record.get(f"{metric}_details")
    repeats = details.get("repeats") if isinstance(details, dict) else None
    return isinstance(repeats, dict) and bool(repeats.get("unstable"))


def _label_value(label: Any) -> float | None:
    if label is None:
        return None
    if isinstance(label, bool):
        return float(label)
    if isinstance(label, (int, float)):
        return float(label)
    words = {"yes": 1.0, "pass": 1.0, "true": 1.0, "no": 0.0, "fail": 0.0, "false": 0.0}
    return words.get(str(label).lower())


@dataclass(frozen=True)
class _Scale:
    """The values labels of one metric may take: its scale's points (None: any score).

    The scale is the one ``turneval calibrate`` checks labels against: the built-in metric of
    that name, else the run's own metric class (as stored), else none.
    """

    metric: str
    points: tuple[float, ...] | None
    judge: Any = None  # the metric object that names the points (label_text), if any

    def text(self, value: float) -> str:
        """How a point reads, its value first: ``1 (yes)``, ``score 4 (...)``, ``1: CANDIDATE``."""
        number = f"{value:g}"
        if self.judge is not None:
            with contextlib.suppress(Exception):
                text = " ".join(str(self.judge.label_text(value)).split())
                if text.startswith((number, f"score {number}")):
                    return text
                return f"{number}: {text}"
        return number

    def allowed(self) -> str:
        """The allowed values, for a message: ``0 (no) or 1 (yes)``, ``1, 2, 3, 4 or 5``."""
        if self.points is None:
            return "a number, yes/no, true/false or pass/fail"
        shown = [self.text(v) for v in self.points]
        if any(len(text) > 80 for text in shown):  # a rubric's long sentences: the scores
            shown = [f"{v:g}" for v in self.points]
        return ", ".join(shown[:-1]) + " or " + shown[-1] if len(shown) > 1 else shown[0]

    def keys(self) -> dict[str, float]:
        """The digit keys of the labeling page and the value each gives.

        Each point that is a digit is its own key (``0``, ``1``; ``1``-``5``); a scale with
        other points (``0, 0.5, 1``, ``-2``-``2``) takes the keys ``1``, ``2``, ... in order.
        """
        if self.points is None:
            return {str(digit): float(digit) for digit in range(10)}
        if all(float(v).is_integer() and 0 <= v <= 9 for v in self.points):
            return {str(int(v)): float(v) for v in self.points}
        return {str(key): float(v) for key, v in enumerate(self.points[:9], start=1)}

    def problem(self, label: Any) -> str | None:
        """Why ``label`` is refused (naming the allowed values), None when it is on the scale."""
        from turneval.calibration.labels import coerce_label
        from turneval.calibration.scales import on_scale

        try:
            value = coerce_label(label, "label")
        except ConfigError:
            return (
                f"label {label!r} is not a score or a known word; {self.metric!r} takes "
                f"{self.allowed()}"
            )
        if not on_scale(value, self.points):
            return f"label {label!r} is not on the scale of {self.metric!r}: {self.allowed()}"
        return None


def _scale_of(run: StoredRun, metric: str) -> _Scale:
    """The scale of ``metric``'s labels in ``run`` (see :class:`_Scale`)."""
    import importlib

    from turneval.calibration.scales import metric_class, scale_of
    from turneval.metrics.base import Evaluator

    known: Any = metric_class(metric)
    if known is None:  # a metric named by the user: its stored class, when it is turneval's
        stored = next((m for m in run.metrics if m.get("name") == metric), None)
        qualified = str((stored or {}).get("class") or "")
        module, _, name = qualified.rpartition(".")
        if module.startswith("turneval."):
            with contextlib.suppress(Exception):
                found = getattr(importlib.import_module(module), name, None)
                if isinstance(found, type) and issubclass(found, Evaluator):
                    known = found
    try:
        points = scale_of(known)
        judge: Any = known
        if points and isinstance(judge, type):  # a built-in class: its default names the points
            judge = cast(Any, judge).model_validate({})
    except Exception:  # a class that cannot be built without its configuration: no scale
        points, judge = None, None
    return _Scale(metric, points, judge if points else None)


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
        allowed_hosts: The hosts a request's ``Host`` header may name, its port aside (None:
            any; an IPv6 address with or without brackets); ``serve`` passes the bound host
            and the loopback names, so a DNS-rebinding page cannot read the store.
    """
    import inspect

    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.middleware import Middleware
    from starlette.middleware.base import BaseHTTPMiddleware
    from starlette.responses import PlainTextResponse, RedirectResponse
    from starlette.routing import Route

    viewer = _Viewer(store, token, annotator)

    def guarded(handler: Callable[[Request], Any]) -> Callable[[Request], Awaitable[Response]]:
        """``handler`` whose failures are pages saying what happened (see ``_failure``)."""

        async def endpoint(request: Request) -> Response:
            try:
                response: Response = await handler(request)
                return response
            except Exception as exc:  # every failure is a page (or text) that names it
                return viewer.failure(request, exc)

        async def threaded(request: Request) -> Response:
            try:
                response: Response = await run_in_threadpool(handler, request)
                return response
            except Exception as exc:  # every failure is a page (or text) that names it
                return viewer.failure(request, exc)

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

    middleware = [Middleware(BaseHTTPMiddleware, dispatch=check_token)]
    if allowed_hosts is not None:
        middleware.insert(0, Middleware(_HostCheck, allowed=list(allowed_hosts)))
    routes = [
        Route("/", guarded(viewer.runs_page)),
        Route("/runs/{run}", guarded(viewer.run_page)),
        Route("/runs/{run}/delete", guarded(viewer.delete_run), methods=["POST"]),
        Route("/runs/{run}/rows", guarded(viewer.rows_page)),
        Route("/runs/{run}/rows/{index:int}", guarded(viewer.row_page)),
        Route("/runs/{run}/rows/{index:int}/text", guarded(viewer.row_text)),
        Route("/runs/{run}/label", guarded(viewer.label_page)),
        Route("/runs/{run}/labels.jsonl", guarded(viewer.labels_file)),
        Route("/api/labels", guarded(viewer.post_label), methods=["POST"]),
        Route("/compare", guarded(viewer.compare_page)),
        *judge_config_routes(viewer, guarded),  # a page of its own (turneval optimize)
    ]
    return Starlette(routes=routes, middleware=middleware)


_LOOPBACK = ("127.0.0.1", "localhost", "::1")
"""The loopback names every local viewer answers to (besides the host it is bound to)."""


def _bare(host: str) -> str:
    """A host as compared: lower case, an IPv6 address without its brackets."""
    host = host.strip().lower()
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def _loopback(host: str) -> bool:
    bare = _bare(host)
    return bare in _LOOPBACK or bare.startswith("127.")


def _allowed_hosts(host: str) -> list[str] | None:
    """The ``Host`` headers a viewer bound to ``host`` answers (None: any, on all interfaces)."""
    if _bare(host) in ("0.0.0.0", "::", ""):
        return None
    return list(dict.fromkeys([_bare(host), *_LOOPBACK]))


def _host_header(header: str) -> str | None:
    """The host a ``Host`` header names (bare, lower case), None when it is malformed.

    ``[::1]:8765`` is ``::1``: an IPv6 literal is bracketed, its port after the bracket.
    """
    if header.startswith("["):
        end = header.find("]")
        if end < 0:
            return None
        host, rest = header[1:end], header[end + 1 :]
    else:
        host, colon, port = header.partition(":")
        rest = colon + port
    if rest and not (rest.startswith(":") and rest[1:].isdigit()):
        return None
    return host.lower() or None


class _HostCheck:
    """Answer only requests whose ``Host`` is one of ``allowed`` (a DNS-rebinding guard).

    Starlette's own middleware compares an IPv6 literal with its brackets in some versions
    and without in others; here ``[::1]:8765`` is ``::1`` wherever it is written.
    """

    def __init__(self, app: Any, allowed: Sequence[str]) -> None:
        self.app = app
        self.allowed = {_bare(host) for host in allowed}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from starlette.datastructures import Headers
        from starlette.responses import PlainTextResponse

        if scope["type"] in ("http", "websocket"):
            host = _host_header(Headers(scope=scope).get("host", ""))
            if host is None or host not in self.allowed:
                answer = PlainTextResponse("Invalid host header", status_code=400)
                await answer(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port``; ConfigError (exit 2) when it cannot be."""
    family = socket.AF_INET6 if ":" in _bare(host) else socket.AF_INET
    sock: socket.socket | None = None
    try:
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((_bare(host), port))
    except (OSError, OverflowError) as exc:  # OverflowError: a port above 65535
        if sock is not None:
            sock.close()
        busy = isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE
        why = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
        hint = (
            "another process listens on it: give another --port"
            if busy
            else "give another --host or --port"
        )
        raise ConfigError(
            f"turneval view cannot listen on {_address(host, port)}: {' '.join(why.split())}; "
            f"{hint}"
        ) from None
    return sock


def _address(host: str, port: int) -> str:
    """``host:port`` as a URL writes it (``[::1]:8765``)."""
    bare = _bare(host)
    return f"[{bare}]:{port}" if ":" in bare else f"{bare}:{port}"


def serve(
    store: str | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    annotator: str | None = None,
) -> None:
    """Run the viewer on uvicorn until interrupted (``turneval view``).

    It answers requests whose ``Host`` is the bound address or a loopback name (``127.0.0.1``,
    ``localhost``, ``::1``); bound to every interface (``0.0.0.0``, ``::``), any.

    Raises:
        ConfigError: ``host`` is not a loopback address and no ``token`` is given, the
            address cannot be listened on (the port is in use, say), or the store cannot be
            opened.
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
    try:
        sock = _listen(host, port)  # before uvicorn: a busy port is one line and exit 2
    except ConfigError:
        opened.close()
        raise
    if annotator is None:
        try:
            annotator = getpass.getuser()
        except Exception:  # no user name (a container): labels without one
            annotator = None
    app = create_app(opened, token=token, annotator=annotator, allowed_hosts=_allowed_hosts(host))
    shown = "127.0.0.1" if _allowed_hosts(host) is None else _bare(host)
    address = f"http://{_address(shown, sock.getsockname()[1])}/" + (
        f"?token={token}" if token else ""
    )
    print(f"turneval view: {opened.url} on {address} (Ctrl-C stops)", flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # pragma: no cover - uvicorn handles the signal itself
        pass
    finally:
        sock.close()
        opened.close()

"""The viewer's Starlette application: its routes and the state it keeps.

Each handler reads the request's parameters, asks the queries (:mod:`turneval.view._queries`,
:mod:`turneval.view._labeling`: plain data from the store), hands their answers to the pages
(:mod:`turneval.view._pages`, :mod:`turneval.view._row_pages`: HTML) and answers with the
headers :mod:`turneval.view._security` sets. What is costly to work out is kept here for ended
runs: a run's record (30 s), sort orders, comparisons, histograms and clusters (the latest
few), a disagreements queue while it is walked.

Safety (:mod:`turneval.view._security`): every page carries a Content-Security-Policy that
only runs its own nonce'd script; every stored value goes through :mod:`turneval._html` and
:mod:`turneval.view._render` (escaped, hidden characters shown as ``<U+202E>``, long texts cut
with a link to the whole); a label or a delete is a POST that must carry the process's CSRF
token and, when the browser sends one, a same-origin ``Origin``; with ``token`` set, every
request must carry it.

Errors: a run or row that is not there is a 404 page; a store that cannot be read now (a
SQLite file locked by another process, a PostgreSQL server down) a 503 page saying so; any
other failure a 500 page naming it, never a bare error.
"""

from __future__ import annotations

import inspect
import json
import logging
import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from time import monotonic
from typing import TYPE_CHECKING, Any

from turneval._html import cut, document, escape_attribute, escape_text, nonce
from turneval.errors import ConfigError
from turneval.view import _pages as pages
from turneval.view import _queries as queries
from turneval.view import _row_pages as row_pages
from turneval.view import _row_queries as row_queries
from turneval.view._judges import judge_config_routes
from turneval.view._label_routes import LabelPages
from turneval.view._security import (
    RETRY,
    TEXT_HEADERS,
    HostCheck,
    failure,
    page_headers,
    refuse_post,
    token_check,
)

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response

    from turneval.store import RunStore, StoredRun

__all__ = ["create_app"]

_LOG = logging.getLogger("turneval.view")
_KEEP_RUN = 30.0  # seconds an ended run's record is reused

_KEPT = 8  # comparisons, sort orders and histograms of ended runs kept (the latest)
_NAV = (
    "<header><b>turneval view</b> &nbsp; <a href='/'>runs</a><a href='/compare'>compare</a>"
    "<a href='/judges'>judges</a></header>"
)


class _Kept(OrderedDict[Any, Any]):
    """The latest few results kept by key (computed orders, comparisons, histograms)."""

    def get_or(self, key: Any, make: Callable[[], Any]) -> Any:
        """The result kept for ``key``, else ``make()`` kept (``key`` None: made, not kept)."""
        if key is None:
            return make()
        if key in self:
            self.move_to_end(key)
            return self[key]
        self[key] = value = make()
        while len(self) > _KEPT:
            self.popitem(last=False)
        return value


def _here(request: Request) -> pages.Here:
    return pages.Here(request.url.path, dict(request.query_params))


class Viewer:
    """The handlers, bound to one store, this process's secrets and what it keeps."""

    def __init__(self, store: RunStore, annotator: str | None) -> None:
        self.store = store
        self.csrf = secrets.token_urlsafe(32)
        self.annotator = annotator
        self.ended: dict[str, tuple[StoredRun, float]] = {}  # ended runs by the id asked for
        self.kept = _Kept()  # of ended runs: comparisons, sort orders, histograms, clusters
        self.labeling = LabelPages(self)  # the labeling pages, their queues and scales

    # -- the frame and what is kept ----------------------------------------------------------

    def page(
        self,
        title: str,
        body: str,
        *,
        script: str = "",
        status: int = 200,
        headers: Mapping[str, str] | None = None,
    ) -> Response:
        """A page in the viewer's frame (header, title), with its security headers."""
        from starlette.responses import HTMLResponse

        token = nonce()
        text = document(
            f"{cut(title, 200)} · turneval view",
            f"{_NAV}<main><h1>{escape_text(cut(title, 200))}</h1>{body}</main>",
            token=token,
            script=script,
            meta={"csrf-token": self.csrf},
            app=True,
        )
        return HTMLResponse(
            text, status_code=status, headers={**page_headers(token), **(headers or {})}
        )

    def error(self, message: str, status: int = 404) -> Response:
        """A page saying what went wrong (a 503 asks the browser to retry)."""
        titles = {404: "Not found", 400: "Bad request", 503: "Run store unavailable"}
        return self.page(
            titles.get(status, "Error"),
            f"<p id='error'>{escape_text(message)}</p>",
            status=status,
            headers={"Retry-After": str(RETRY)} if status == 503 else None,
        )

    def failure(self, request: Request, exc: Exception) -> Response:
        """The page (or, for the API, the text) that says why a request failed."""
        from starlette.responses import PlainTextResponse

        status, message = failure(exc, self.store.url)
        if status == 500:
            _LOG.error(
                "turneval view: %s %s failed", request.method, request.url.path, exc_info=exc
            )
        if request.url.path.startswith("/api/"):
            headers = {"Retry-After": str(RETRY)} if status == 503 else None
            return PlainTextResponse(message, status_code=status, headers=headers)
        return self.error(message, status)

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

    @staticmethod
    def ended_key(*runs: StoredRun) -> tuple[Any, ...] | None:
        """A key for results computed over ``runs`` (None while one is running: not kept)."""
        if any(run.status == "running" for run in runs):
            return None
        return tuple((run.id, run.finished, run.rows) for run in runs)

    # -- runs --------------------------------------------------------------------------------

    def runs_page(self, request: Request) -> Response:
        query = request.query_params
        filters = {
            "text": query.get("q", "").strip() or None,
            "dataset": query.get("dataset", "").strip() or None,
            "metric": query.get("metric", "").strip() or None,
            "judge": query.get("model", "").strip() or None,
            "since": queries.day(query.get("since")),
            "until": queries.day(query.get("until")),
        }
        offset = max(queries.integer(query.get("offset")) or 0, 0)
        listing = queries.runs_listing(self.store, filters, offset)
        body = pages.runs_body(listing, _here(request), offset, self.csrf)
        return self.page("Runs", body, script=pages.DELETE_SCRIPT)

    async def delete_run(self, request: Request) -> Response:
        from starlette.concurrency import run_in_threadpool
        from starlette.responses import RedirectResponse

        form = await request.form()
        refused = refuse_post(request, str(form.get("csrf") or ""), self.csrf)
        if refused is not None:
            return refused
        await run_in_threadpool(self.store.delete_run, str(request.path_params["run"]))
        self.ended.clear()
        self.kept.clear()
        self.labeling.forget()
        return RedirectResponse("/", status_code=303)

    def run_page(self, request: Request) -> Response:
        run = self.find_run(str(request.path_params["run"]))
        store, key = self.store, self.ended_key(run)
        head = pages.run_head(run, queries.dataset_version(store, run))
        lines, count, extras = queries.summary_lines(run)
        clusters = self.kept.get_or(
            ("clusters", key) if key else None,
            lambda: pages.clusters_html(run, queries.failure_clusters(store, run)),
        )
        drawn = self.kept.get_or(
            ("distributions", key) if key else None, lambda: self._distributions(run)
        )
        body = pages.summary_html(run, lines, count, extras) + str(clusters) + str(drawn)
        skipped = pages.skipped_html(*queries.skipped(store, run))
        return self.page(f"Run {run.name}", head + body + skipped)

    def _distributions(self, run: StoredRun) -> str:
        found = queries.distributions(self.store, run)
        html = pages.distributions_html(found)
        if found.simulated:
            trials: Any = None
            if run.rows <= queries.FULL_RUN:
                try:
                    trials = queries.trials(self.store, run)
                except (ValueError, TypeError, KeyError) as exc:  # a row that is no results row
                    trials = exc
            html += pages.trials_html(run, trials)
        return html

    # -- rows --------------------------------------------------------------------------------

    def rows_page(self, request: Request) -> Response:
        run = self.find_run(str(request.path_params["run"]))
        query = row_queries.RowQuery.of(request.query_params, run.metric_names)
        ended = self.ended_key(run)
        where = replace(query, after=None, offset=0)  # the order is the same on every page
        key = None if ended is None else ("order", ended, where)

        def order() -> Any:  # by value; kept for an ended run, so later pages are a lookup
            return self.kept.get_or(key, lambda: row_queries.value_order(self.store, run, query))

        found = row_queries.rows_page(self.store, run, query, order)
        plain = row_queries.lower_is_better(query.metric)  # no verdict colour (issue 49)
        body = row_pages.rows_body(run, query, found, _here(request), plain)
        return self.page(f"Rows of {run.name}", body)

    # -- a row -------------------------------------------------------------------------------

    def conversation(self, run: StoredRun, index: int, first: int = 0) -> str | None:
        """Row ``index``'s conversation and metrics (None: the run has no such row)."""
        row = row_queries.row(self.store, run.id, index)
        if row is None:
            return None
        sample = self.store.samples(run.id, [index]).get(index)
        plain = {n: row_queries.lower_is_better(n) for n in run.metric_names[: queries.METRICS]}
        return row_pages.conversation_html(run, row, sample, plain, first)

    def row_page(self, request: Request) -> Response:
        run = self.find_run(str(request.path_params["run"]))
        index = int(request.path_params["index"])
        row = row_queries.row(self.store, run.id, index)
        if row is None:
            return self.error(f"run {run.id[:12]} has no row {index}")
        first = max(queries.integer(request.query_params.get("turns")) or 0, 0)
        title = f"Row {index}" + (f" ({cut(row.sample_id, 100)})" if row.sample_id else "")
        shown = self.conversation(run, index, first) or ""
        return self.page(title, row_pages.row_nav(run, index) + shown)

    def row_text(self, request: Request) -> Response:
        """The whole of one text of a row (what a page cut), as plain text.

        ``?at=`` names it as JSON: ``["sample", "user_input", 3, "content"]`` or
        ``["record", "judge_reason"]``. A str is served as it is, anything else as JSON.
        """
        from starlette.responses import Response as Plain

        run = self.find_run(str(request.path_params["run"]))
        index = int(request.path_params["index"])
        row = row_queries.row(self.store, run.id, index)
        if row is None:
            return self.error(f"run {run.id[:12]} has no row {index}")
        try:
            path = json.loads(request.query_params.get("at", ""))
            if not isinstance(path, list) or not path:
                raise ValueError("not a list")
        except ValueError:
            return self.error('?at= names a text as a JSON list: ["sample", ...]', 400)
        try:
            text = row_queries.row_text(self.store, run.id, row, path)
        except LookupError as exc:
            return self.error(str(exc.args[0]))
        return Plain(text, media_type="text/plain; charset=utf-8", headers=TEXT_HEADERS)

    # -- compare -----------------------------------------------------------------------------

    def compare_page(self, request: Request) -> Response:
        first, second = request.query_params.get("a", ""), request.query_params.get("b", "")
        runs = queries.compare_choices(self.store, (first, second), self.find_run)
        form = pages.compare_form(runs, first, second)
        if not (first and second):
            return self.page("Compare two runs", form)
        here = _here(request)
        try:
            base, cand = self.find_run(first), self.find_run(second)
            problem = None
            if request.query_params.get("allow_config_change") != "1":
                problem = queries.config_problem(base, cand)
            if problem is not None:  # the scores do not compare: say why, offer a way
                anyway = here.link(allow_config_change=1)
                return self.page(
                    "Compare two runs",
                    form + f"<p class='err' id='config-change'>{escape_text(problem)}</p>"
                    f"<p><a href='{escape_attribute(anyway)}'>compare anyway</a></p>",
                    status=409,
                )
            key = self.ended_key(base, cand)
            found = self.kept.get_or(
                ("compare", key) if key else None,
                lambda: queries.compared(self.store, base, cand),
            )
        except ConfigError as exc:
            return self.page(
                "Compare two runs", form + f"<p class='err'>{escape_text(exc)}</p>", status=400
            )
        change = queries.dataset_change(self.store, base, cand)  # issue 49
        return self.page(
            "Compare two runs", form + pages.compare_body(found, base, cand, change, here)
        )


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
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.middleware import Middleware
    from starlette.middleware.base import BaseHTTPMiddleware
    from starlette.routing import Route

    viewer = Viewer(store, annotator)

    def guarded(handler: Callable[[Request], Any]) -> Callable[[Request], Awaitable[Response]]:
        """``handler`` whose failures are pages saying what happened (see ``failure``)."""

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

    middleware = [Middleware(BaseHTTPMiddleware, dispatch=token_check(token))]
    if allowed_hosts is not None:
        middleware.insert(0, Middleware(HostCheck, allowed=list(allowed_hosts)))
    routes = [
        Route("/", guarded(viewer.runs_page)),
        Route("/runs/{run}", guarded(viewer.run_page)),
        Route("/runs/{run}/delete", guarded(viewer.delete_run), methods=["POST"]),
        Route("/runs/{run}/rows", guarded(viewer.rows_page)),
        Route("/runs/{run}/rows/{index:int}", guarded(viewer.row_page)),
        Route("/runs/{run}/rows/{index:int}/text", guarded(viewer.row_text)),
        *viewer.labeling.routes(guarded),  # /runs/RUN/label, /runs/RUN/labels.jsonl, /api/labels
        Route("/compare", guarded(viewer.compare_page)),
        *judge_config_routes(viewer, guarded),  # a page of its own (turneval optimize)
    ]
    return Starlette(routes=routes, middleware=middleware)

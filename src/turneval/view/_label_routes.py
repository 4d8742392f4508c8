"""The viewer's labeling pages: a queue walked row by row, each label saved by a POST.

``/runs/RUN/label`` shows one row of a queue (:mod:`turneval.view._labeling`: all rows,
a random sample, disagreements first) with the keys of the metric's scale; ``/api/labels``
saves a label (the CSRF token and a same-origin ``Origin`` required, the label checked
against the scale); ``/runs/RUN/labels.jsonl`` exports the labels.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from time import monotonic
from typing import TYPE_CHECKING, Any

from turneval.errors import ConfigError
from turneval.view import _labeling as labeling
from turneval.view import _queries as queries
from turneval.view import _row_pages as row_pages
from turneval.view import _row_queries as row_queries
from turneval.view._pages import Here
from turneval.view._security import CSRF_HEADER, refuse_post

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from turneval.store import StoredRun
    from turneval.view._app import Viewer

__all__ = ["LabelPages"]

_KEEP_QUEUE = 600.0  # seconds a disagreements queue is reused while it is walked


class LabelPages:
    """The labeling pages of one viewer, with the queues and scales they keep."""

    def __init__(self, viewer: Viewer) -> None:
        """Pages in ``viewer``'s frame, over its store."""
        self.viewer = viewer
        self.scales: dict[tuple[str, str], labeling.LabelScale] = {}  # (run id, metric)
        self.queues: dict[tuple[str, str], tuple[list[int], float]] = {}  # disagreements

    def forget(self) -> None:
        """Drop the queues kept (a run was deleted)."""
        self.queues.clear()

    def routes(self, guarded: Callable[[Callable[[Request], Any]], Any]) -> list[Route]:
        """The routes of the labeling pages, each handler ``guarded``."""
        from starlette.routing import Route

        return [
            Route("/runs/{run}/label", guarded(self.label_page)),
            Route("/runs/{run}/labels.jsonl", guarded(self.labels_file)),
            Route("/api/labels", guarded(self.post_label), methods=["POST"]),
        ]

    def scale(self, run: StoredRun, metric: str) -> labeling.LabelScale:
        """The scale labels of ``metric`` in ``run`` must lie on (worked out once per run)."""
        key = (run.id, metric)
        if key not in self.scales:
            if len(self.scales) > 256:
                self.scales.clear()
            self.scales[key] = labeling.scale_of(run, metric)
        return self.scales[key]

    def queue(self, run: StoredRun, metric: str, mode: str, seed: int) -> list[int] | None:
        """The row indexes to label in order (None: ``all`` rows, walked by keyset).

        The disagreements queue is kept while it is walked (``_KEEP_QUEUE`` seconds): a label
        given meanwhile does not reorder it.
        """
        if mode == "random":
            return labeling.random_queue(run, seed)
        if mode != "disagree":
            return None if mode == "all" else []
        key = (run.id, metric)
        known = self.queues.get(key)
        if known is not None and monotonic() - known[1] < _KEEP_QUEUE:
            return known[0]
        order = labeling.disagreement_queue(self.viewer.store, run, metric)
        if len(self.queues) > 64:
            self.queues.clear()
        self.queues[key] = (order, monotonic())
        return order

    def label_page(self, request: Request) -> Response:
        run = self.viewer.find_run(str(request.path_params["run"]))
        query = request.query_params
        names = run.metric_names
        metric = query.get("metric") or (names[0] if names else "")
        mode = query.get("mode", "all")
        seed = queries.integer(query.get("seed")) or 0
        position = max(queries.integer(query.get("pos")) or 0, 0)
        here = Here(request.url.path, dict(request.query_params))
        head = row_pages.label_head(run, metric, mode, here)
        order = self.queue(run, metric, mode, seed)
        current, total, place = labeling.queue_row(self.viewer.store, run, position, order)
        if current is None:
            back = here.link(pos=max(position - 1, 0))
            done = row_pages.label_done(run, metric, total, back)
            return self.viewer.page(f"Label {metric}", head + done, script=row_pages.DONE_SCRIPT)
        latest = self.viewer.store.latest_label(run.id, metric, current.index)
        moves = (here.link(pos=max(place - 1, 0)) if place else "", here.link(pos=place + 1))
        panel = row_pages.label_panel(
            run, current, metric, self.scale(run, metric), latest, moves, (place, total)
        )
        shown = self.viewer.conversation(run, current.index) or ""
        return self.viewer.page(
            f"Label {metric}", head + panel + shown, script=row_pages.LABEL_SCRIPT
        )

    async def post_label(self, request: Request) -> Response:
        from starlette.concurrency import run_in_threadpool
        from starlette.responses import JSONResponse, PlainTextResponse

        refused = refuse_post(request, request.headers.get(CSRF_HEADER, ""), self.viewer.csrf)
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
            run = self.viewer.find_run(run_id)
            if metric not in run.metric_names:
                names = ", ".join(repr(name) for name in run.metric_names) or "none"
                return f"run {run.id[:12]} has no metric {metric!r} (its metrics: {names})"
            problem = self.scale(run, metric).problem(label)
            if problem is not None:
                return problem
            if row_queries.row(self.viewer.store, run.id, index) is None:
                raise ConfigError(f"run {run.id[:12]} has no row {index}")
            return self.viewer.store.add_label(
                metric=metric,
                label=label,
                run_id=run.id,
                row_index=index,
                note=note,
                annotator=self.viewer.annotator,
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

        run = self.viewer.find_run(str(request.path_params["run"]))
        metric = request.query_params.get("metric") or None
        text = "".join(
            json.dumps(r) + "\n" for r in self.viewer.store.label_records(run.id, metric)
        )
        name = f"labels-{run.id[:12]}{'-' + metric if metric else ''}.jsonl"
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)[:120]
        return Plain(
            text,
            media_type="application/jsonl",
            headers={"Content-Disposition": f'attachment; filename="{safe}"'},
        )

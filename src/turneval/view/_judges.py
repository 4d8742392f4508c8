"""The viewer's judge configurations: what ``turneval optimize`` kept beside a run.

A small page of its own (``/judges``, ``/judges/{id}``): the configurations, newest first, and
for one of them the diff of its instructions against those it started from, with the
agreement before and after on the validation rows (intervals, the paired difference).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from turneval.report import escape_attribute, escape_text

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from turneval.store import StoredJudgeConfig

__all__ = ["judge_config_routes"]


def _number(value: Any) -> str:
    return "—" if not isinstance(value, (int, float)) else f"{value:.3f}"


def _interval(value: Any) -> str:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        return ""
    return f"[{_number(value[0])}, {_number(value[1])}]"


def _summary_row(kept: StoredJudgeConfig) -> str:
    report = kept.report or {}
    improved = report.get("improved")
    verdict = "improved" if improved else "not an improvement" if improved is False else ""
    run = (
        f"<a href='/runs/{escape_attribute(kept.run_id)}'>{escape_text(kept.run_id[:12])}</a>"
        if kept.run_id
        else ""
    )
    return (
        f"<tr><td><a href='/judges/{kept.id}'>{kept.id}</a></td>"
        f"<td>{escape_text(kept.metric)}</td><td>{run}</td>"
        f"<td>{escape_text(kept.created.strftime('%Y-%m-%d %H:%M'))}</td>"
        f"<td>{escape_text(str(report.get('statistic', '')))}</td>"
        f"<td>{_number(report.get('before'))} → {_number(report.get('after'))}</td>"
        f"<td class='{'good' if improved else 'muted'}'>{escape_text(verdict)}</td>"
        f"<td class='muted'>{escape_text(kept.digest[:19])}</td></tr>"
    )


def _diff(old: str, new: str) -> str:
    lines = []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=3):
        if line.startswith(("---", "+++")):
            continue
        kind = "good" if line.startswith("+") else "bad" if line.startswith("-") else "muted"
        lines.append(f"<div class='{kind}'>{escape_text(line) or '&nbsp;'}</div>")
    if not lines:
        return "<p class='muted'>The instructions did not change.</p>"
    return "<pre class='diff'>" + "".join(lines) + "</pre>"


def judge_config_routes(
    viewer: Any, guarded: Callable[[Callable[[Request], Any]], Any]
) -> list[Route]:
    """The routes of the judge configuration pages, for the viewer's application."""
    from starlette.routing import Route

    def listing(request: Request) -> Response:
        kept = viewer.store.judge_configs(run_id=request.query_params.get("run") or None)
        if not kept:
            body = (
                "<p>No judge configuration is kept yet: <code>turneval optimize --run RUN "
                "--metric NAME</code> keeps one beside its run.</p>"
            )
        else:
            body = (
                "<table><tr><th>id</th><th>metric</th><th>run</th><th>kept</th>"
                "<th>statistic</th><th>validation before → after</th><th>verdict</th>"
                "<th>digest</th></tr>" + "".join(_summary_row(k) for k in kept) + "</table>"
            )
        return viewer.page("Judge configurations", body)  # type: ignore[no-any-return]

    def detail(request: Request) -> Response:
        kept = viewer.store.judge_config(int(request.path_params["config"]))
        report = kept.report or {}
        config = kept.config
        rows = [
            ("starting judge", report.get("before"), report.get("before_ci")),
            ("optimised judge", report.get("after"), report.get("after_ci")),
            ("difference (paired)", report.get("difference"), report.get("difference_ci")),
            (
                "few-shot baseline difference",
                report.get("baseline_difference"),
                report.get("baseline_difference_ci"),
            ),
        ]
        table = "".join(
            f"<tr><td>{escape_text(name)}</td><td>{_number(value)}</td>"
            f"<td>{_interval(ci)}</td></tr>"
            for name, value, ci in rows
            if value is not None
        )
        body = (
            f"<p>{escape_text(kept.metric)} · {escape_text(kept.digest)}"
            + (f" · from {escape_text(kept.parent)}" if kept.parent else "")
            + "</p>"
            f"<p>{escape_text(str(report.get('verdict', '')))}</p>"
            f"<h2>Agreement on {escape_text(str(report.get('validation_rows', '?')))} validation "
            f"rows ({escape_text(str(report.get('statistic', '')))})</h2>"
            f"<table><tr><th>judge</th><th>value</th><th>95% interval</th></tr>{table}</table>"
            f"<p class='muted'>Training agreement (optimisation rows, not evidence): "
            f"{_number(report.get('training_before'))} → "
            f"{_number(report.get('training_after'))}; judge calls "
            f"{escape_text(str(report.get('judge_calls', '?')))}, reflection calls "
            f"{escape_text(str(report.get('reflection_calls', '?')))}.</p>"
            "<h2>Instructions (old → new)</h2>"
            + _diff(str(report.get("base_instructions") or ""), str(config.get("instructions", "")))
            + f"<p>{len(config.get('examples') or [])} worked examples.</p>"
        )
        return viewer.page(f"Judge configuration {kept.id}", body)  # type: ignore[no-any-return]

    return [
        Route("/judges", guarded(listing)),
        Route("/judges/{config:int}", guarded(detail)),
    ]

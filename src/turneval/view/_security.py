"""The viewer's safety: CSRF, the content policy, host checks, the token, failures told safely.

Threats: a page on another site posting a label or a delete (CSRF: every POST carries this
process's token, a form field or the ``X-CSRF-Token`` header, and a same-origin ``Origin`` when
the browser sends one); stored text that is script (every page runs only its own nonce'd
script, :func:`page_headers`); a DNS-rebinding page reading the store through the loopback
address (:class:`HostCheck`: only the bound host and the loopback names are answered); another
user of the machine or the network (``token``: every request carries it, the
``X-Turneval-Token`` header or the cookie a first ``?token=`` visit sets). A failure is told
in one line (:func:`failure`), its traceback only in the log.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from turneval._html import cut
from turneval.errors import ConfigError

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

__all__ = [
    "CSRF_HEADER",
    "LOOPBACK",
    "RETRY",
    "TEXT_HEADERS",
    "HostCheck",
    "allowed_hosts",
    "bare",
    "failure",
    "host_header",
    "loopback",
    "page_headers",
    "refuse_post",
    "token_check",
]

TOKEN_HEADER = "x-turneval-token"
TOKEN_COOKIE = "turneval_token"
CSRF_HEADER = "x-csrf-token"
RETRY = 5
"""Seconds a 503 asks the browser to wait."""

TEXT_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; sandbox",
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",
}
"""The headers of a text served whole (what a page cut): never run, never framed."""


def page_headers(nonce: str) -> dict[str, str]:
    """The headers of a page whose only script carries ``nonce``."""
    policy = (
        "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
        f"script-src 'nonce-{nonce}'; connect-src 'self'; form-action 'self'; "
        "base-uri 'none'; frame-ancestors 'none'"
    )
    return {
        "Content-Security-Policy": policy,
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }


def refuse_post(request: Request, csrf: str, expected: str) -> Response | None:
    """A 403 unless the POST carries the CSRF token ``expected`` and a same-origin Origin."""
    from starlette.responses import PlainTextResponse

    origin = request.headers.get("origin")
    if origin is not None:
        mine = f"{request.url.scheme}://{request.headers.get('host', '')}"
        if origin != mine:
            return PlainTextResponse("cross-origin request refused", status_code=403)
    if not secrets.compare_digest(csrf.encode(), expected.encode()):
        return PlainTextResponse("missing or wrong CSRF token", status_code=403)
    return None


def token_check(
    token: str | None,
) -> Callable[[Request, Callable[[Request], Awaitable[Response]]], Awaitable[Response]]:
    """The middleware that lets through only requests carrying ``token`` (None: every one).

    A first visit with ``?token=...`` is redirected without it, the token set as a cookie
    (HttpOnly, SameSite=Strict).
    """

    async def check(
        request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        from starlette.responses import PlainTextResponse, RedirectResponse

        if token is None:
            return await call_next(request)
        given = request.query_params.get("token")
        if given is not None and secrets.compare_digest(given.encode(), token.encode()):
            params = {k: v for k, v in request.query_params.items() if k != "token"}
            target = request.url.path + (f"?{urlencode(params)}" if params else "")
            moved = RedirectResponse(target, status_code=303)
            moved.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict")
            return moved
        carried = request.headers.get(TOKEN_HEADER) or request.cookies.get(TOKEN_COOKIE) or ""
        if not secrets.compare_digest(carried.encode(), token.encode()):
            return PlainTextResponse(
                "this viewer needs its token: open the URL turneval view printed (?token=...)",
                status_code=401,
            )
        return await call_next(request)

    return check


def failure(exc: Exception, url: str) -> tuple[int, str]:
    """The status and one-line message a failed request answers with.

    A run or row that is not there: 404. A store that cannot be read now (locked by another
    process's write, a server that does not answer): 503. Anything else: 500, naming the
    error (its traceback goes to the log, never to the page).
    """
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


LOOPBACK = ("127.0.0.1", "localhost", "::1")
"""The loopback names every local viewer answers to (besides the host it is bound to)."""


def bare(host: str) -> str:
    """A host as compared: lower case, an IPv6 address without its brackets."""
    host = host.strip().lower()
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address or name."""
    named = bare(host)
    return named in LOOPBACK or named.startswith("127.")


def allowed_hosts(host: str) -> list[str] | None:
    """The ``Host`` headers a viewer bound to ``host`` answers (None: any, on all interfaces)."""
    if bare(host) in ("0.0.0.0", "::", ""):
        return None
    return list(dict.fromkeys([bare(host), *LOOPBACK]))


def host_header(header: str) -> str | None:
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


class HostCheck:
    """Answer only requests whose ``Host`` is one of ``allowed`` (a DNS-rebinding guard).

    Starlette's own middleware compares an IPv6 literal with its brackets in some versions
    and without in others; here ``[::1]:8765`` is ``::1`` wherever it is written.
    """

    def __init__(self, app: Any, allowed: Sequence[str]) -> None:
        """Wrap ``app``, answering only the hosts ``allowed``."""
        self.app = app
        self.allowed = {bare(host) for host in allowed}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """Refuse a request naming another host (400), pass the others on."""
        from starlette.datastructures import Headers
        from starlette.responses import PlainTextResponse

        if scope["type"] in ("http", "websocket"):
            host = host_header(Headers(scope=scope).get("host", ""))
            if host is None or host not in self.allowed:
                answer = PlainTextResponse("Invalid host header", status_code=400)
                await answer(scope, receive, send)
                return
        await self.app(scope, receive, send)

"""Judge HTTP clients that belong to the event loop they run in.

langchain-openai shares one ``httpx.AsyncClient`` per base URL across the process, and its pooled
connections belong to the event loop that opened them: used from a second loop (a second sync
``evaluate``, a second ``asyncio.run``, the CLI's next chunk) they fail with "Event loop is
closed". A judge's model therefore never talks through that shared client: its async OpenAI
client is replaced by a :class:`_ScopedClient`, which resolves, on each use, to a copy with a
private HTTP client opened inside the current *client scope* (a run, or one judge call outside a
run) and closed when that scope ends, in the loop that opened it.

Models whose async client the user supplied (``http_async_client=``) are used as they are, and
so are models of other providers.
"""

from __future__ import annotations

import contextvars
import functools
import importlib
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio

__all__ = ["client_scope", "loop_bound"]


class _Scope:
    """The private HTTP clients opened during one run (or one judge call)."""

    def __init__(self) -> None:
        self.clients: dict[int, tuple[Any, Any]] = {}  # id(shared root) -> (root, private copy)
        self.http: list[Any] = []

    def client_for(self, root: Any) -> Any:
        entry = self.clients.get(id(root))
        if entry is None:
            import openai

            http = openai.DefaultAsyncHttpxClient(**_shared_tls())
            self.http.append(http)
            entry = (root, root.with_options(http_client=http))
            self.clients[id(root)] = entry
        return entry[1]

    async def aclose(self) -> None:
        with anyio.CancelScope(shield=True):
            for http in self.http:
                await http.aclose()
        self.http.clear()
        self.clients.clear()


def _shared_tls() -> dict[str, Any]:
    """``verify=`` with this process's default TLS context, built once (not once per run).

    Loading the system's certificates costs tens of milliseconds, paid before a run's first
    request; the context itself holds no connection and no event loop, so every private client
    can share it. It is rebuilt when ``SSL_CERT_FILE``/``SSL_CERT_DIR`` change; an HTTP library
    without ``create_ssl_context`` gets its own default.
    """
    context = _tls_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    return {} if context is None else {"verify": context}


@functools.lru_cache(maxsize=4)
def _tls_context(cert_file: str | None, cert_dir: str | None) -> Any:
    import openai

    base = openai.DefaultAsyncHttpxClient.__mro__[1]  # httpx's AsyncClient, whichever package
    create = getattr(
        importlib.import_module(base.__module__.split(".")[0]), "create_ssl_context", None
    )
    return None if create is None else create()


_SCOPE: contextvars.ContextVar[_Scope | None] = contextvars.ContextVar(
    "turneval_client_scope", default=None
)


@asynccontextmanager
async def client_scope() -> AsyncIterator[None]:
    """Judge HTTP clients opened inside are private to this scope and closed when it ends.

    Nested scopes share the outermost one.
    """
    if _SCOPE.get() is not None:
        yield
        return
    scope = _Scope()
    token = _SCOPE.set(scope)
    try:
        yield
    finally:
        _SCOPE.reset(token)
        await scope.aclose()


class _ScopedClient:
    """Stands in for a shared async OpenAI client (or one of its resources, ``path``)."""

    def __init__(self, root: Any, path: tuple[str, ...] = ()) -> None:
        self._root = root
        self._path = path

    def _target(self) -> Any:
        scope = _SCOPE.get()
        target = self._root if scope is None else scope.client_for(self._root)
        for name in self._path:
            target = getattr(target, name)
        return target

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target(), name)

    def __repr__(self) -> str:
        return f"<loop-bound {self._root!r}{''.join('.' + p for p in self._path)}>"


def loop_bound(llm: Any) -> Any:
    """``llm`` itself, or a copy whose async OpenAI client is private to each client scope."""
    root = getattr(llm, "root_async_client", None)
    if (
        root is None
        or isinstance(root, _ScopedClient)
        or not hasattr(root, "with_options")
        or getattr(llm, "http_async_client", None) is not None
    ):
        return llm
    copy = llm.model_copy()
    scoped = _ScopedClient(root)
    object.__setattr__(copy, "root_async_client", scoped)
    if getattr(llm, "async_client", None) is not None:
        object.__setattr__(copy, "async_client", _ScopedClient(root, ("chat", "completions")))
    return copy

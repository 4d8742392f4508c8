"""Judge HTTP clients that belong to the event loop they run in (OpenAI and Anthropic models).

langchain-openai shares one ``httpx.AsyncClient`` per base URL across the process, and its pooled
connections belong to the event loop that opened them: used from a second loop (a second sync
``evaluate``, a second ``asyncio.run``, the CLI's next chunk) they fail with "Event loop is
closed". A judge's model therefore never talks through that shared client: its async OpenAI
client is replaced by a :class:`_ScopedClient`, which resolves, on each use, to a copy with a
private HTTP client opened inside the current *client scope* (a run, or one judge call outside a
run) and closed when that scope ends, in the loop that opened it.

Models whose async client the user supplied (``http_async_client=``) are used as they are, and
so are models of other providers.

Requests through a scope's private clients also take *turns* to be sent (:func:`sending`). On one
event loop, concurrent requests otherwise interleave their client work (building the request in
LangChain and the OpenAI SDK, encoding it in the HTTP stack) step by step between awaits, so a
wave of N requests started together leaves together only once all N are built, and comes back
together: every request pays N times the client CPU of one, wave after wave. With turns, a
request is built and written in one go while the next waits: requests leave one after another
and their answers come back spread out, so the client work of one hides behind the others'
latency instead of adding up. A turn ends when the request's body has been handed to the
connection (or the request failed); a request never waits more than ``_TURN_WAIT`` seconds for
one (a slow connection set-up, e.g. a TLS handshake, does not hold the others back longer).
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

__all__ = ["client_scope", "loop_bound", "sending"]

# Seconds a request waits at most for the request before it to be written.
_TURN_WAIT = 0.02


class _Turn:
    """One request's turn to be sent, held until its body is written (released once)."""

    __slots__ = ("_gate", "held")

    def __init__(self, gate: anyio.Semaphore) -> None:
        self._gate = gate
        self.held = True

    def release(self) -> None:
        if self.held:
            self.held = False
            self._gate.release()


_TURN: contextvars.ContextVar[_Turn | None] = contextvars.ContextVar(
    "turneval_send_turn", default=None
)


class _Scope:
    """The private HTTP clients opened during one run (or one judge call)."""

    def __init__(self) -> None:
        self.clients: dict[int, tuple[Any, Any]] = {}  # id(shared root) -> (root, private copy)
        self.http: list[Any] = []
        self.gate = anyio.Semaphore(1)  # whose turn it is to send

    def client_for(self, root: Any) -> Any:
        entry = self.clients.get(id(root))
        if entry is None:
            # The SDK's own default HTTP client (OpenAI's or Anthropic's: each has its own).
            sdk = importlib.import_module(type(root).__module__.split(".")[0])
            http = sdk.DefaultAsyncHttpxClient(
                **_shared_tls(), event_hooks={"request": [_end_turn_when_written]}
            )
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


async def _end_turn_when_written(request: Any) -> None:
    """Request hook of the private clients: the turn ends once the body has been written."""
    turn = _TURN.get()
    if turn is not None and turn.held:
        request.stream = _written_stream_class(type(request).__module__.split(".")[0])(
            request.stream, turn
        )


@functools.lru_cache(maxsize=2)
def _written_stream_class(package: str) -> Any:
    """An ``AsyncByteStream`` of ``package`` (httpx or httpx2) that ends a turn when drained."""
    base: Any = importlib.import_module(package).AsyncByteStream

    class WrittenStream(base):  # type: ignore[misc]
        def __init__(self, inner: Any, turn: _Turn) -> None:
            self._inner = inner
            self._turn = turn

        async def __aiter__(self) -> AsyncIterator[bytes]:
            async for chunk in self._inner:
                yield chunk
            self._turn.release()  # every byte handed to the connection

        async def aclose(self) -> None:
            await self._inner.aclose()

    return WrittenStream


@asynccontextmanager
async def sending(llm: Any) -> AsyncIterator[None]:
    """Build and write one request of ``llm`` in its turn (see the module's docstring).

    A no-op outside a client scope and for models that do not talk through a scope's private
    clients (their requests could not tell when they are written).
    """
    scope = _SCOPE.get()
    if scope is None or not isinstance(getattr(llm, "root_async_client", None), _ScopedClient):
        yield
        return
    turn = None
    with anyio.move_on_after(_TURN_WAIT):
        await scope.gate.acquire()
        turn = _Turn(scope.gate)
    token = _TURN.set(turn)
    try:
        yield
    finally:
        _TURN.reset(token)
        if turn is not None:
            turn.release()


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
    """``llm`` itself, or a copy whose async OpenAI client is private to each client scope.

    A ``ChatAnthropic`` gets the same treatment: langchain-anthropic also shares one HTTP
    client per base URL across the process (its ``_async_client``).
    """
    if type(llm).__name__ == "ChatAnthropic" and "_async_client" in dir(type(llm)):
        root = llm._async_client
        if isinstance(root, _ScopedClient) or not hasattr(root, "with_options"):
            return llm
        copy = llm.model_copy()
        copy.__dict__["_async_client"] = _ScopedClient(root)  # the cached property's slot
        return copy
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

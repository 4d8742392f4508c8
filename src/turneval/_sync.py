"""Run async turneval code from sync code: one long-lived event loop shared by every sync call.

A leaf module (it imports only :mod:`turneval.errors`), so every layer may use it. asyncio is
imported by the first sync call, not with the module (it is a good share of an import's cost).
"""

from __future__ import annotations

import atexit
import functools
import os
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from turneval.errors import SyncInAsyncContextError

if TYPE_CHECKING:
    import asyncio

__all__ = ["run_sync", "sync_form"]

T = TypeVar("T")
P = ParamSpec("P")


class _Loop:
    """The process's long-lived event loop for sync calls, running in a daemon thread.

    Every sync wrapper runs its coroutine here, so objects bound to an event loop (HTTP
    clients of judges and agents) stay usable from one sync call to the next.
    """

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread: threading.Thread | None = None
        self.lock = threading.Lock()
        self.pid = 0

    def get(self) -> asyncio.AbstractEventLoop:
        import asyncio

        with self.lock:
            if self.loop is None or self.pid != os.getpid() or self.loop.is_closed():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="turneval-sync-loop", daemon=True
                )
                thread.start()
                self.loop, self.thread, self.pid = loop, thread, os.getpid()
            return self.loop

    def close(self) -> None:
        with self.lock:
            loop, thread, self.loop, self.thread = self.loop, self.thread, None, None
            if loop is None or thread is None or self.pid != os.getpid():
                return
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        if not thread.is_alive():
            loop.close()


_SYNC_LOOP = _Loop()
atexit.register(_SYNC_LOOP.close)


def run_sync(function: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run an async function to completion from sync code, on the process's sync-call loop.

    The coroutine runs in one long-lived event loop (a daemon thread) shared by every sync call
    of the process, with the caller's context variables; an interrupt cancels it.

    Raises:
        SyncInAsyncContextError: when called inside a running event loop.
    """
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        target = getattr(function, "func", function)  # a functools.partial names its function
        raise SyncInAsyncContextError(
            "a sync turneval call was made inside a running event loop; await "
            f"{getattr(target, '__qualname__', target)!s}(...) instead"
        )

    async def call() -> T:
        return await function(*args)

    future = asyncio.run_coroutine_threadsafe(call(), _SYNC_LOOP.get())
    try:
        return future.result()
    except BaseException:
        future.cancel()  # e.g. KeyboardInterrupt: stop the coroutine too
        raise


def sync_form(function: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, T]:
    """The sync form of an async function (or method): same parameters, one body.

    ``evaluate = sync_form(aevaluate)`` runs ``aevaluate`` with the arguments given, through
    :func:`run_sync`; the signature (for ``inspect``, type checkers and ``help()``) is
    ``aevaluate``'s, so the options are declared once, on the async form. The docstring says
    which function it is the sync form of. Keywords the async form renamed
    (:func:`~turneval._deprecation.renamed_keywords`) are renamed by the sync form too, before
    the call, so their warning points at the caller's line.
    """
    renamed = getattr(function, "__renamed__", None)
    body: Callable[P, Coroutine[Any, Any, T]] = (
        function if renamed is None else function.__wrapped__  # type: ignore[attr-defined]
    )

    @functools.wraps(function)
    def sync(*args: P.args, **kwargs: P.kwargs) -> T:
        return run_sync(functools.partial(body, *args, **kwargs))

    head, dot, _ = function.__qualname__.rpartition(".")
    sync.__name__ = function.__name__.removeprefix("a")  # aevaluate -> evaluate
    sync.__qualname__ = f"{head}{dot}{sync.__name__}"
    sync.__doc__ = f"Sync form of :func:`{function.__name__}` (same arguments)."
    if renamed is None:
        return sync
    from turneval._deprecation import renamed_keywords

    renames, why = renamed
    return renamed_keywords(renames, why=why)(sync)

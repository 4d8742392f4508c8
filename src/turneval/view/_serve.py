"""``turneval view``: the viewer served on uvicorn, on a socket bound before it starts.

A busy port or an address that cannot be bound is one line and exit 2 (a ``ConfigError``),
before uvicorn starts; a host other than the loopback needs a token
(:mod:`turneval.view._security`).
"""

from __future__ import annotations

import errno
import getpass
import socket

from turneval.errors import ConfigError
from turneval.view._app import create_app
from turneval.view._security import allowed_hosts, bare, loopback

__all__ = ["serve"]


def _listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port``; ConfigError (exit 2) when it cannot be."""
    family = socket.AF_INET6 if ":" in bare(host) else socket.AF_INET
    sock: socket.socket | None = None
    try:
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((bare(host), port))
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
    named = bare(host)
    return f"[{named}]:{port}" if ":" in named else f"{named}:{port}"


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

    if not loopback(host) and not token:
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
    app = create_app(opened, token=token, annotator=annotator, allowed_hosts=allowed_hosts(host))
    shown = "127.0.0.1" if allowed_hosts(host) is None else bare(host)
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

"""A throwaway PostgreSQL server for the run store's tests, from Debian's binaries.

``initdb`` and ``pg_ctl`` (``/usr/lib/postgresql/<version>/bin``) set up a cluster in a
temporary folder, listening on a free port of 127.0.0.1 only, with ``trust`` authentication.
PostgreSQL refuses to run as root: as root, the cluster belongs to the ``postgres`` system
user (the Debian package creates it) and the binaries run through ``runuser``.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path


def binaries() -> Path | None:
    """The newest installed PostgreSQL's bin folder (None when none is installed)."""
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda path: int(Path(path).parent.parent.name),
    )
    return Path(found[-1]).parent if found else None


_STARTS = 5
"""Starts tried, each on a newly probed free port, before a server that fails to start fails."""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PostgresServer:
    """A running cluster; :meth:`database` makes a fresh database and returns its URL."""

    def __init__(self, bin_dir: Path) -> None:
        self.bin_dir = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="turneval-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.user = "turneval"
        self._as: list[str] = []
        if os.geteuid() == 0:  # initdb refuses root
            shutil.chown(self.root, "postgres", "postgres")
            self._as = ["runuser", "-u", "postgres", "--"]
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            self.user,
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
            "--no-instructions",
        )
        # The port was free when probed, but another process (an xdist worker starting its own
        # server, another test run on the machine) may take it before the server binds it:
        # then the server is started again on another free port.
        for attempt in range(_STARTS):
            logged = self._log_size()
            try:
                self._start()
                break
            except subprocess.CalledProcessError:
                if attempt == _STARTS - 1 or not self._port_was_taken(since=logged):
                    raise
                self.port = _free_port()

    def _start(self) -> None:
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off"
        )
        self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-o",
            options,
            "-l",
            str(self.root / "log"),
            "-w",
            "start",
        )

    def _log_size(self) -> int:
        log = self.root / "log"
        return log.stat().st_size if log.exists() else 0

    def _port_was_taken(self, since: int) -> bool:
        """Whether the last start failed because its port was in use (its log, from ``since``)."""
        path = self.root / "log"
        if not path.exists():
            return False
        with open(path, "rb") as log:
            log.seek(since)
            return b"Address already in use" in log.read()

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run(
            [*self._as, str(self.bin_dir / tool), *args],
            check=True,
            capture_output=True,
            cwd=self.root,
        )

    def url(self, database: str = "postgres") -> str:
        """The URL of a database of the cluster."""
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def database(self) -> str:
        """A new, empty database; its URL."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(
            f"host=127.0.0.1 port={self.port} user={self.user} dbname=postgres", autocommit=True
        ) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        """Stop the server and delete its folder."""
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

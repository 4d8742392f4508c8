"""The suite's own setup, as it runs in CI: on xdist workers, several test runs at once.

Property tests draw the same examples on every run in CI (each worker loads the profile the
conftest registers), and a PostgreSQL server whose probed port was taken in the meantime
(another worker's server, another run on the machine) starts on another one.
"""

import os
import socket
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from . import _postgres

IN_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.mark.skipif(not IN_CI, reason="random exploration outside CI (CI=true selects 'ci')")
def test_in_ci_property_tests_draw_the_same_examples_on_every_run() -> None:
    drawn: list[list[int]] = []

    @settings(max_examples=30)
    @given(st.lists(st.integers()))
    def probe(values: list[int]) -> None:
        drawn[-1].append(hash(tuple(values)))

    for _ in range(2):
        drawn.append([])
        probe()
    current = settings()  # the loaded profile's values
    assert current.derandomize and current.database is None
    assert len(drawn[0]) >= 10 and drawn[0] == drawn[1]


def test_a_postgres_server_whose_port_was_taken_starts_on_another(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import psycopg

    found = _postgres.binaries()
    if found is None:
        if IN_CI:
            pytest.fail("CI needs PostgreSQL's binaries (apt-get install postgresql)")
        pytest.skip("PostgreSQL is not installed (/usr/lib/postgresql/*/bin)")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = int(taken.getsockname()[1])
        probes = iter([busy])
        free = _postgres._free_port
        monkeypatch.setattr(_postgres, "_free_port", lambda: next(probes, None) or free())
        server: Any = _postgres.PostgresServer(found)
        try:
            assert server.port != busy
            with psycopg.connect(server.database(), autocommit=True) as connection:
                assert connection.execute("SELECT 1").fetchone() == (1,)
        finally:
            server.stop()

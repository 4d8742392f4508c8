"""The store's tests run on SQLite and on a real PostgreSQL server (tests/conftest.py's)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        (tmp_path / "store").mkdir()
        return str(tmp_path / "store" / "runs.db")
    server = request.getfixturevalue("postgres_server")
    return str(server.database())

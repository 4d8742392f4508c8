import inspect
from typing import Any

import pytest

pytest_plugins = ["pytester"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: Any) -> None:
    # Async tests run under anyio without a marker on each; marked before parametrization.
    if name.startswith("test") and inspect.iscoroutinefunction(obj):
        pytest.mark.anyio(obj)


@pytest.fixture(scope="session")
def openai_stub_server() -> Any:
    from ._openai_stub import OpenAIStub

    stub = OpenAIStub()
    yield stub
    stub.close()


@pytest.fixture
def openai_stub(openai_stub_server: Any) -> Any:
    openai_stub_server.reset()
    return openai_stub_server


@pytest.fixture(scope="session")
def postgres_server() -> Any:
    """A throwaway PostgreSQL server (Debian's binaries); skipped without them, but not in CI."""
    import os

    from ._postgres import PostgresServer, binaries

    found = binaries()
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI needs PostgreSQL's binaries (apt-get install postgresql)")
        pytest.skip("PostgreSQL is not installed (/usr/lib/postgresql/*/bin)")
    server = PostgresServer(found)
    yield server
    server.stop()

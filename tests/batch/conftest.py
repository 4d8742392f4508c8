"""One batch stub server for the batch tests, reset before each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .._batch_stub import BatchStub


@pytest.fixture(scope="package")
def stub_server() -> Iterator[BatchStub]:
    server = BatchStub()
    yield server
    server.close()


@pytest.fixture
def stub(stub_server: BatchStub) -> BatchStub:
    stub_server.reset()
    return stub_server

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
    stub_server.inject = lambda custom_id: None
    stub_server.hold = stub_server.expire_next = stub_server.refuse_next = False
    stub_server.submitted.clear()
    stub_server.sync_requests = 0
    return stub_server

"""Two watch receivers sharing one store: traces split between them by id, some sent to both."""

from pathlib import Path

import pytest

from turneval.metrics import StepBudget
from turneval.store import RunStore
from turneval.watch import Watcher

from ._helpers import conversation, post, protobuf, serving, trace_id, wait_for


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "runs.db")
    return str(request.getfixturevalue("postgres_server").database())


def test_two_receivers_score_each_conversation_once(tmp_path: Path, store_url: str) -> None:
    traces = [conversation(1 + k % 2) for k in range(10)]
    both = traces[:3]  # a Collector retrying against the other receiver, say
    stores = [RunStore(store_url), RunStore(store_url)]  # as two processes would open it
    watchers = [
        Watcher([StepBudget(max_steps=1)], tmp_path / name, idle=0.1, store=store)
        for name, store in zip(("a", "b"), stores, strict=True)
    ]
    with serving(watchers[0]) as port_a, serving(watchers[1]) as port_b:
        ports = (port_a, port_b)
        for spans in traces:  # the load-balancing exporter routes by trace id
            targets = (
                ports if any(spans is s for s in both) else [ports[int(trace_id(spans), 16) % 2]]
            )
            for port in targets:
                assert post(port, protobuf(spans))[0] == 200
        wait_for(
            lambda: (
                sum(w.counts["conversations_scored"] for w in watchers) == 10
                and sum(w.skipped["elsewhere"] for w in watchers) == 3
            )
        )
    for store in stores:
        store.close()
    with RunStore(store_url) as store:
        runs = store.runs()
        ids = [record["id"] for run in runs for record in store.records(run.id)]
    assert len(runs) == 2
    assert sorted(ids) == sorted(trace_id(spans) for spans in traces)

"""Skipped conversations reach the run store with their reason (schema revision 0005), so a
team reading the shared store, or the viewer, sees what ``watch`` left unscored and why."""

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

from turneval.metrics import StepBudget
from turneval.store import RunStore, StoredSkip
from turneval.watch import Watcher, sampled

from ._helpers import conversation, post, protobuf, serving, trace_id, wait_for


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "runs.db")
    return str(request.getfixturevalue("postgres_server").database())


def _watch_run(store: RunStore) -> str:
    recorder = store.start_run(name="watch", metrics=[StepBudget(max_steps=1)])
    return recorder.run_id


def test_the_store_keeps_skips_once_newest_first_with_counts_by_reason(store_url: str) -> None:
    start = datetime(2026, 11, 26, 9, 0, tzinfo=timezone.utc)
    with RunStore(store_url) as store:
        run = _watch_run(store)
        other = _watch_run(store)
        store.add_skipped(
            run,
            [
                StoredSkip("trace:a", "sampled_out", "not in the 0.1 sample", ("a",), start),
                StoredSkip("trace:b", "filtered", "no service.name=checkout", ("b",), start),
                StoredSkip(
                    "session:s", "sampled_out", None, ("c", "d"), start + timedelta(minutes=1)
                ),
            ],
        )
        # recorded again (a tick retried after a failed ledger write): kept as it was
        store.add_skipped(run[:8], [StoredSkip("trace:a", "budget", "again", ("a",))])
        store.add_skipped(other, [StoredSkip("trace:a", "elsewhere")])  # another run's own
        assert store.skipped_counts(run) == {"sampled_out": 2, "filtered": 1}
        found = store.skipped(run)
        assert [(s.conversation, s.reason, s.detail, s.trace_ids) for s in found] == [
            ("session:s", "sampled_out", None, ("c", "d")),
            ("trace:a", "sampled_out", "not in the 0.1 sample", ("a",)),
            ("trace:b", "filtered", "no service.name=checkout", ("b",)),
        ]
        assert found[0].created == start + timedelta(minutes=1)
        assert [s.conversation for s in store.skipped(run, reason="sampled_out", limit=1)] == [
            "session:s"
        ]
        assert store.skipped_counts(other) == {"elsewhere": 1}
        store.delete_run(run)  # a run's skips go with it
        assert store.skipped_counts(other) == {"elsewhere": 1}
        with store.engine.connect() as connection:
            from sqlalchemy import func, select

            from turneval.store._schema import watch_skips

            assert connection.execute(select(func.count()).select_from(watch_skips)).scalar() == 1


def test_a_watch_records_each_skip_in_the_store_with_why(tmp_path: Path, store_url: str) -> None:
    traces = [conversation(1, service="shop" if k % 3 else "other") for k in range(12)]
    with RunStore(store_url) as store:
        watcher = Watcher(
            [StepBudget(max_steps=1)],
            tmp_path / "state",
            idle=0,
            store=store,
            sample=0.5,
            filters=[("service.name", "shop")],
        )
        for spans in traces:
            watcher.accept(MessageToDict(encode_spans(spans)))
        watcher.accept(MessageToDict(encode_spans(conversation(0))))  # no model call in it
        watcher.tick()
        watcher.close()
        run = store.runs()[0].id
        recorded = {skip.conversation: skip for skip in store.skipped(run, limit=None)}
        counts = store.skipped_counts(run)
    expected = {}
    for k, spans in enumerate(traces):
        key = f"trace:{trace_id(spans)}"
        if k % 3 == 0:
            expected[key] = ("filtered", "no service.name=shop")
        elif not sampled(trace_id(spans), 0.5):
            expected[key] = ("sampled_out", "not in the 0.5 sample")
    assert {k: (s.reason, s.detail) for k, s in recorded.items() if k in expected} == expected
    (empty,) = [s for k, s in recorded.items() if k not in expected]
    assert (empty.reason, empty.detail) == ("no_conversation", "no_genai_span in 1 spans")
    assert counts == {
        reason: n
        for reason, n in sorted(
            {
                "filtered": 4,
                "sampled_out": sum(1 for r, _ in expected.values() if r == "sampled_out"),
                "no_conversation": 1,
            }.items(),
            key=lambda item: (-item[1], item[0]),
        )
    }
    assert counts == {r: n for r, n in watcher.skipped.items() if n}  # as /metrics counts them
    assert all(s.trace_ids == (k.split(":", 1)[1],) for k, s in recorded.items())


def test_a_conversation_another_receiver_scored_is_recorded_as_elsewhere(
    tmp_path: Path, store_url: str
) -> None:
    spans = conversation(1)
    stores = [RunStore(store_url), RunStore(store_url)]
    watchers = [
        Watcher([StepBudget(max_steps=1)], tmp_path / name, idle=0.05, store=store)
        for name, store in zip("ab", stores, strict=True)
    ]
    with serving(watchers[0]) as first:
        assert post(first, protobuf(spans))[0] == 200
        wait_for(lambda: watchers[0].counts["conversations_scored"] == 1)
    with serving(watchers[1]) as second:
        assert post(second, protobuf(spans))[0] == 200
        wait_for(lambda: watchers[1].skipped["elsewhere"] == 1)
    run_b = watchers[1]._recorder.run_id
    (skip,) = stores[0].skipped(run_b)
    assert (skip.conversation, skip.reason) == (f"trace:{trace_id(spans)}", "elsewhere")
    assert skip.detail == "claimed by another watch sharing the store"
    for store in stores:
        store.close()


def test_an_older_store_gains_the_skips_table_and_can_go_back(store_url: str) -> None:
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine, inspect

    from turneval.store._engine import MIGRATIONS

    raw = store_url if "://" in store_url else f"sqlite:///{store_url}"
    engine = create_engine(raw.replace("postgresql://", "postgresql+psycopg://"))
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:  # the store as revision 0004 left it
        config.attributes["connection"] = connection
        command.upgrade(config, "0004")
    assert "watch_skips" not in inspect(engine).get_table_names()
    with RunStore(store_url) as store:
        # upgraded to the head (revision 0005 added the table; later ones follow it)
        from alembic.script import ScriptDirectory

        assert store.schema_revision() == ScriptDirectory.from_config(config).get_current_head()
        run = _watch_run(store)
        store.add_skipped(run, [StoredSkip("trace:x", "budget", "estimated 2 USD")])
        assert store.skipped_counts(run) == {"budget": 1}
    assert "watch_skips" in inspect(engine).get_table_names()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0004")
    assert "watch_skips" not in inspect(engine).get_table_names()
    engine.dispose()


def test_the_viewer_shows_a_runs_skipped_conversations(tmp_path: Path) -> None:
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from turneval.view import create_app

    with RunStore(tmp_path / "runs.db") as store:
        run = _watch_run(store)
        store.add_skipped(
            run,
            [
                StoredSkip("trace:1", "sampled_out", "not in the 0.05 sample"),
                StoredSkip("trace:2", "budget", "<b>estimated</b> 0.2 USD"),
                StoredSkip("trace:3", "sampled_out", "not in the 0.05 sample"),
            ],
        )
        quiet = _watch_run(store)
        client = TestClient(create_app(store))
        page = client.get(f"/runs/{run}").text
        assert "<p id='skipped'>sampled_out: 2, budget: 1</p>" in page
        assert (
            "<td>trace:2</td><td>budget</td><td>&lt;b&gt;estimated&lt;/b&gt; 0.2 USD</td>" in page
        )
        assert "Skipped conversations" not in client.get(f"/runs/{quiet}").text

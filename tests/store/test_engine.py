"""The store's database: URLs and paths, errors naming them, migrations at open, two writers."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turneval.cli import main
from turneval.errors import ConfigError
from turneval.store import RunStore

pytest.importorskip("sqlalchemy")


WRITER = textwrap.dedent(
    """
    import sys
    from turneval.store import RunStore

    store = RunStore(sys.argv[1], batch_rows=1)  # one transaction a row: the most contention
    recorder = store.start_run(name=sys.argv[2])
    for index in range(150):
        recorder.add_record(f'{{"index": {index}}}', {"index": index})
    recorder.finish({"samples": 150})
    """
)


def test_two_processes_writing_one_sqlite_store_lose_no_row(tmp_path: Path) -> None:
    url = str(tmp_path / "shared.db")  # created by whichever process comes first
    env = {"PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, url, name], env=env, stderr=subprocess.PIPE, text=True
        )
        for name in ("a", "b")
    ]
    for writer in writers:
        _, errors = writer.communicate(timeout=120)
        assert writer.returncode == 0, errors
    with RunStore(url) as store:
        runs = {run.name: run for run in store.runs()}
        assert sorted(runs) == ["a", "b"]
        for run in runs.values():
            assert (run.status, run.rows) == ("finished", 150)
            assert [r["index"] for r in store.records(run.id, batch=40)] == list(range(150))


def test_bad_stores_and_runs_are_one_line_errors(
    tmp_path: Path, capsys: Any, postgres_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = str(tmp_path / "runs.db")
    RunStore(url).close()
    from sqlalchemy import create_engine, text

    engine = create_engine(f"sqlite:///{url}")
    with engine.begin() as connection:  # as a newer turneval would leave it
        connection.execute(text("UPDATE alembic_version SET version_num = 'f00d'"))
    engine.dispose()
    with pytest.raises(ConfigError, match="schema revision f00d, made by a newer turneval"):
        RunStore(url)
    assert main(["store", "list", "--store", url]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "newer turneval" in error
    (tmp_path / "junk.db").write_text("not a database " * 100)
    with pytest.raises(ConfigError, match="cannot open the run store .*junk.db: file is not a"):
        RunStore(tmp_path / "junk.db")
    with pytest.raises(ConfigError, match="'mysql://...': expected a file in an existing folder"):
        RunStore("mysql://user:secret@host/db")
    closed = postgres_server.url("nowhere").replace(str(postgres_server.port), "1")
    with pytest.raises(ConfigError, match=r"cannot open the run store postgresql://.*:1/nowhere"):
        RunStore(closed.replace("turneval@", "turneval:secret@"))
    with monkeypatch.context() as patch:  # without the store extra's packages
        patch.setitem(sys.modules, "psycopg", None)
        with pytest.raises(ConfigError, match=r"needs psycopg 3: pip install 'turneval\[store\]'"):
            RunStore(postgres_server.url())
        patch.setitem(sys.modules, "alembic", None)
        with pytest.raises(ConfigError, match="needs Alembic"):
            RunStore(tmp_path / "other.db")
    good = str(tmp_path / "good.db")
    assert main(["store", "export", "abc123", "--out", str(tmp_path / "x"), "--store", good]) == 2
    assert "run 'abc123' is not in the run store" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="not in the run store"):
        RunStore(good).run("not-hex")


def test_an_older_store_upgrades_itself_and_keeps_its_runs(store_url: str) -> None:
    from alembic import command
    from alembic.autogenerate import compare_metadata
    from alembic.config import Config
    from alembic.runtime.migration import MigrationContext
    from sqlalchemy import create_engine, inspect, text

    from turneval.store._engine import MIGRATIONS
    from turneval.store._schema import metadata

    raw = store_url if "://" in store_url else f"sqlite:///{store_url}"
    engine = create_engine(raw.replace("postgresql://", "postgresql+psycopg://"))
    if "://" not in store_url:
        Path(store_url).parent.mkdir(exist_ok=True)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:  # the store as the first release left it
        config.attributes["connection"] = connection
        command.upgrade(config, "0001")
        connection.execute(
            text(
                "INSERT INTO runs (id, name, created, turneval_version, metrics, status) "
                "VALUES ('ab12', 'old', CURRENT_TIMESTAMP, '0.0.9', '[]', 'finished')"
            )
        )
        connection.execute(
            text(
                "INSERT INTO rows (run_id, idx, failed, record) "
                "VALUES ('ab12', 0, false, '{\"index\": 0}'), ('ab12', 1, false, '{\"index\": 1}')"
            )
        )
    assert "ix_rows_run_failed" not in {i["name"] for i in inspect(engine).get_indexes("rows")}
    with RunStore(store_url) as store:
        assert store.schema_revision() == "0008"
        assert [(run.id, run.name, run.turneval_version, run.rows) for run in store.runs()] == [
            ("ab12", "old", "0.0.9", 2)
        ]
        with engine.connect() as connection:  # revision 0006 counted the ended run's rows
            assert connection.execute(text("SELECT row_count FROM runs")).scalar() == 2
        assert "ix_labels_run_metric_row" in {
            i["name"] for i in inspect(engine).get_indexes("labels")
        }
        store.delete_run("ab")
        assert store.runs() == []
    assert "ix_rows_failed" in {i["name"] for i in inspect(engine).get_indexes("rows")}
    with engine.connect() as connection:  # the migrations build exactly the tables declared
        assert compare_metadata(MigrationContext.configure(connection), metadata) == []
    engine.dispose()


# -- item 20: a mistyped store is an error, never a new folder ---------------------------------

_MISSING = "no-such-folder"


_NAMES = st.text(
    alphabet=st.characters(exclude_categories=["Cs"], exclude_characters="/\x00"),
    min_size=1,
    max_size=12,
)


_SCHEMES = st.from_regex(r"[A-Za-z][A-Za-z0-9+.-]{1,9}", fullmatch=True)


_KNOWN = {"sqlite", "postgresql", "postgres", "postgresql+psycopg"}


@st.composite
def _malformed_stores(draw: st.DrawFn, root: str) -> tuple[str, str]:
    """``(store spec, what its error must name)``: a spec no store may be made from."""
    name = draw(_NAMES)
    kind = draw(st.integers(0, 7))
    if kind == 0:  # a relative path under a folder that does not exist
        spec = f"{_MISSING}/{name}/runs.db"
    elif kind == 1:  # an absolute one
        spec = f"{root}/{_MISSING}/{name}.db"
    elif kind == 2:  # a URL without its "//": sqlite:/runs.db, postgresql:host/db
        spec = f"{draw(_SCHEMES)}:{draw(st.sampled_from(['', '/']))}{name}"
    elif kind == 3:  # sqlite:/// in a folder that does not exist
        spec = f"sqlite:///{root}/{_MISSING}/{name}/runs.db"
    elif kind == 4:  # sqlite:// with a host and no file
        spec = f"sqlite://{name}"
    elif kind == 5:  # another database's URL (only its scheme is named: it may hold a password)
        scheme = draw(_SCHEMES.filter(lambda s: s.lower() not in _KNOWN))
        return f"{scheme}://user:secret@{name}/db", f"{scheme}://..."
    elif kind == 6:  # an existing folder
        spec = draw(st.sampled_from([root, ".", f"sqlite:///{root}"]))
    else:
        spec = ""
    return spec, spec


def _tree(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*")}


@pytest.mark.parametrize("name", ["runs?x.db", "runs#x.db", "a b%20.db"])
def test_a_store_path_is_a_path_not_a_url(tmp_path: Path, name: str) -> None:
    # Found by the property test below: 'no-such-folder/?/runs.db' was read as a URL whose
    # query began at '?', so its missing folder went unnoticed.
    with pytest.raises(ConfigError, match="does not exist"):
        RunStore(tmp_path / "no-such-folder" / "?" / name)
    with RunStore(tmp_path / name) as store:
        assert store.url == str(tmp_path / name)
    assert (tmp_path / name).is_file()


def test_a_malformed_store_is_one_line_naming_it_and_makes_no_folder(tmp_path: Path) -> None:
    import contextlib
    import io
    import os

    from turneval._hidden import shown

    root = tmp_path / "work"
    root.mkdir()
    before = _tree(tmp_path)
    here = os.getcwd()
    os.chdir(root)  # relative specs land here, if anywhere
    try:

        @settings(max_examples=80, deadline=None)
        @given(_malformed_stores(str(root)))
        def check(case: tuple[str, str]) -> None:
            spec, named = case
            with pytest.raises(ConfigError) as raised:
                RunStore(spec)
            message = str(raised.value)
            assert "\n" not in message and "\r" not in message, message
            assert repr(shown(named)) in message, message
            assert "expected a file in an existing folder, or a URL like sqlite:///PATH" in message
            if spec:  # (--store "" is no --store: the default store)
                err = io.StringIO()
                with contextlib.redirect_stderr(err):
                    assert main(["store", "list", "--store", spec]) == 2
                assert err.getvalue().count("\n") == 1, err.getvalue()
            assert _tree(tmp_path) == before  # no folder (nor file) made

        check()
    finally:
        os.chdir(here)


def test_the_default_store_makes_its_folder_and_an_existing_folder_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TURNEVAL_STORE", raising=False)
    with RunStore() as store:
        assert Path(store.url).resolve() == tmp_path / ".turneval" / "runs.db"
    assert main(["store", "list"]) == 0
    (tmp_path / "team").mkdir()
    with RunStore(tmp_path / "team" / "runs.db") as store:  # a new file in an existing folder
        assert store.runs() == []
    with RunStore(f"sqlite:///{tmp_path / 'team' / 'other.db'}") as store:
        assert store.runs() == []
    # the two reproductions: nothing made, the CLI says what is wrong
    capsys.readouterr()
    missing = tmp_path / "nonexistent" / "dir"
    assert main(["store", "list", "--store", str(missing / "runs.db")]) == 2
    error = capsys.readouterr().err
    assert error == (
        f"turneval: error: run store '{missing / 'runs.db'}': its folder '{missing}' "
        "does not exist: expected a file in an existing folder, or a URL like sqlite:///PATH "
        "or postgresql://...\n"
    )
    assert not (tmp_path / "nonexistent").exists()
    assert main(["store", "list", "--store", "sqlite:/runs.db"]) == 2
    assert "looks like a URL without its '//'" in capsys.readouterr().err
    assert not (tmp_path / "sqlite:").exists()

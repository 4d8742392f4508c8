"""A judge cache in a folder (or a file) the process cannot write, made read-only for real.

The suite runs as root in CI, and root ignores permission bits: each check runs in a forked
child that first drops to the ``nobody`` user (uid 65534) when it is root, so the kernel
refuses its writes as it would a user's. The folders live under a temporary folder anyone can
traverse (pytest's own is private to its user).
"""

import json
import os
import shutil
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from turneval.errors import ConfigError
from turneval.judge import SQLiteCache

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

NOBODY = 65534


def as_another_user(check: Callable[[], Any]) -> dict[str, Any]:
    """Run ``check`` in a forked child as ``nobody`` (when root): its result, or its error.

    The warnings it raised come back under ``warnings``.
    """
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():  # Python 3.12 warns about fork when threads exist
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child: never returns to pytest
        outcome: dict[str, Any]
        try:
            os.close(read_end)
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(NOBODY)
                os.setuid(NOBODY)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    outcome = {"result": check()}
                except Exception as exc:
                    outcome = {"error": type(exc).__name__, "message": str(exc)}
            outcome["warnings"] = [f"{w.category.__name__}: {w.message}" for w in caught]
            os.write(write_end, json.dumps(outcome).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    deadline = time.monotonic() + 60
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the child process hung")
        time.sleep(0.01)
    with os.fdopen(read_end, "rb") as pipe:
        answer: dict[str, Any] = json.loads(pipe.read() or b'{"error": "no answer"}')
    return answer


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A fresh folder every user can traverse; removed afterwards (permissions restored)."""
    root = Path(tempfile.mkdtemp(prefix="turneval-ro-"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        for folder, _, _ in os.walk(root):
            Path(folder).chmod(0o755)
        shutil.rmtree(root)


def filled_cache(folder: Path, **answers: str) -> Path:
    """A cache (as this process writes one) holding ``answers``, closed; its path."""
    folder.mkdir()
    path = folder / "cache.sqlite"
    cache = SQLiteCache(path)
    for key, raw in answers.items():
        cache.set(key, {"raw": raw})
    cache.close()
    return path


def reading(path: Path, *keys: str) -> Callable[[], dict[str, Any]]:
    """A check that opens the cache at ``path``, reads ``keys`` and tries to store one."""

    def check() -> dict[str, Any]:
        cache = SQLiteCache(path)
        found = {key: cache.get(key) for key in keys}
        cache.set("new", {"raw": "n"})  # must neither raise nor warn a second time
        return {
            "found": found,
            "writable": cache.writable,
            "readable": cache.readable,
            "count": len(cache),
            "new": cache.get("new"),
        }

    return check


def test_an_existing_cache_in_a_read_only_folder_is_read(shared_dir: Path) -> None:
    folder = shared_dir / "ro"
    path = filled_cache(folder, a="first", b="second")
    assert sorted(p.name for p in folder.iterdir()) == ["cache.sqlite"]  # WAL closed cleanly
    folder.chmod(0o555)
    outcome = as_another_user(reading(path, "a", "b", "c"))
    assert outcome.get("result") == {
        "found": {"a": {"raw": "first"}, "b": {"raw": "second"}, "c": None},
        "writable": False,
        "readable": True,
        "count": 2,
        "new": None,
    }, outcome
    [warning] = outcome["warnings"]  # one warning, naming the path and the read-only folder
    assert warning.startswith(
        f"CacheWarning: judge cache {path} cannot be written (its folder {folder} is read-only"
    )
    assert "answers already in it are read, new ones are not stored" in warning
    assert sorted(p.name for p in folder.iterdir()) == ["cache.sqlite"]  # nothing written


def test_a_cache_written_by_another_process_is_read_with_its_latest_answers(
    shared_dir: Path,
) -> None:
    """A connected writer keeps ``-wal`` and ``-shm`` files: the reader sees its last answer."""
    folder = shared_dir / "ro"
    path = filled_cache(folder, a="first")
    writer = SQLiteCache(path)
    try:
        writer._connection.execute("PRAGMA wal_autocheckpoint=0")  # the answer stays in -wal
        writer.set("b", {"raw": "in the wal"})
        assert (folder / "cache.sqlite-wal").stat().st_size > 0
        folder.chmod(0o555)
        outcome = as_another_user(reading(path, "a", "b"))
    finally:
        writer.close()
    result = outcome.get("result", {})
    assert result.get("found") == {"a": {"raw": "first"}, "b": {"raw": "in the wal"}}, outcome
    assert result["writable"] is False and result["new"] is None
    [warning] = outcome["warnings"]
    assert f"(its folder {folder} is read-only" in warning


def test_a_read_only_file_in_a_writable_folder_is_read(shared_dir: Path) -> None:
    folder = shared_dir / "rw"
    path = filled_cache(folder, a="first")
    path.chmod(0o444)
    folder.chmod(0o777)
    outcome = as_another_user(reading(path, "a"))
    result = outcome.get("result", {})
    assert result.get("found") == {"a": {"raw": "first"}} and not result["writable"], outcome
    [warning] = outcome["warnings"]
    assert warning.startswith(
        f"CacheWarning: judge cache {path} cannot be written (the file is read-only"
    )


def test_a_new_cache_in_a_read_only_folder_is_an_error_naming_the_folder(
    shared_dir: Path,
) -> None:
    folder = shared_dir / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    path = folder / "cache.sqlite"
    outcome = as_another_user(lambda: repr(SQLiteCache(path)))
    assert outcome.get("error") == "ConfigError", outcome
    assert outcome["message"].startswith(
        f"judge cache {path} does not exist and cannot be created: its folder {folder} "
        "is read-only ("
    )
    assert outcome["warnings"] == []
    assert list(folder.iterdir()) == []


def test_a_cache_no_one_may_read_is_an_error(shared_dir: Path) -> None:
    folder = shared_dir / "rw"
    path = filled_cache(folder, a="first")
    path.chmod(0o000)
    outcome = as_another_user(lambda: repr(SQLiteCache(path)))
    assert outcome.get("error") == "ConfigError", outcome
    assert outcome["message"].startswith(f"judge cache {path} cannot be read (")
    assert "not a readable SQLite database" not in outcome["message"]  # not called corrupt


def test_a_cache_that_cannot_be_created_is_an_error_before_the_run(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")  # a file where the cache's folder should be
    with pytest.raises(ConfigError) as raised:
        SQLiteCache(blocker / "c.sqlite")
    assert str(raised.value).startswith(
        f"judge cache {blocker / 'c.sqlite'} does not exist and cannot be created: "
        f"its folder {blocker} cannot be made ("
    )


def test_a_corrupt_cache_is_still_called_corrupt(tmp_path: Path) -> None:
    path = tmp_path / "cache.sqlite"
    path.write_bytes(b"not a database at all" * 100)
    with pytest.raises(ConfigError, match=r"is not a readable SQLite database \(file is not"):
        SQLiteCache(path)

"""The sync forms: one async body, the sync function made from it (``sync_form``)."""

from __future__ import annotations

import inspect
import threading
import warnings
from collections.abc import Callable
from typing import Any

import pytest

from turneval import AIMessage, EvalTask, aevaluate, evaluate
from turneval._deprecation import renamed_keywords
from turneval._sync import sync_form
from turneval.pipeline import ascore_batch, score_batch
from turneval.simulation import ScriptedUser, asimulate, simulate


@renamed_keywords({"old": "new"}, why="old meant something else")
async def _twice(value: int, *, new: int = 1) -> tuple[int, str]:
    """Twice ``value`` plus ``new``, and the thread that ran it."""
    return 2 * value + new, threading.current_thread().name


_sync_twice = sync_form(_twice)


def test_the_sync_form_runs_the_async_body_on_the_shared_loop() -> None:
    assert _sync_twice(3, new=4) == (10, "turneval-sync-loop")
    assert _sync_twice.__name__ == "_twice"  # no "a" prefix to drop


def test_the_sync_form_has_the_async_forms_signature() -> None:
    pairs: list[tuple[Callable[..., Any], Callable[..., Any]]] = [
        (evaluate, aevaluate),
        (score_batch, ascore_batch),
        (simulate, asimulate),
        (EvalTask.evaluate, EvalTask.aevaluate),
    ]
    for sync, body in pairs:
        assert inspect.signature(sync) == inspect.signature(body), sync
        assert sync.__name__ == body.__name__.removeprefix("a")


def test_a_renamed_keyword_warns_once_at_the_callers_line_of_the_sync_form() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        assert _sync_twice(3, old=4) == (10, "turneval-sync-loop")  # type: ignore[call-arg]
    assert [str(w.message) for w in caught] == [
        "_twice(old=...) is deprecated: pass new=... (old meant something else)"
    ]
    assert (caught[0].filename, caught[0].lineno) == (__file__, line)
    with pytest.raises(TypeError, match="both old= .* and new="):
        _sync_twice(3, old=4, new=4)  # type: ignore[call-arg]


def test_simulate_warns_for_timeout_at_the_callers_line() -> None:
    # simulate is sync_form(asimulate): the rename is simulate's own, warned in this thread
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
        data = simulate(_ok, [{"goal": "g"}], user=ScriptedUser(["hi"]), timeout=5.0)  # type: ignore[call-arg]
    assert [str(w.message).split(" is ")[0] for w in caught] == ["simulate(timeout=...)"]
    assert (caught[0].filename, caught[0].lineno) == (__file__, line)
    assert (data[0].metadata or {})["turns"] == 1


async def _ok(messages: list[object]) -> list[AIMessage]:
    return [AIMessage(content="ok")]

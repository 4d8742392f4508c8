"""One front-end signature: the run options are declared once (``turneval.options.RunOptions``).

Every front end takes the options that apply to it by the same names, with the same defaults,
and honours them alike.
"""

from __future__ import annotations

import argparse
import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from turneval import distributed, pytest_plugin, runner, simulation, stream, testing
from turneval.agents import EvalTask
from turneval.cli import build_parser
from turneval.dataset import EvaluationDataset
from turneval.errors import EvaluationAbortedError
from turneval.options import RunOptions, option_default
from turneval.results import SampleResult

from ._builders import call, conversation

SCORING = {
    "max_concurrency",
    "max_llm_concurrency",
    "timeout",
    "fail_on_error",
    "on_row",
    "show_progress",
    "details",
    "cache",
    "rate_limit",
    "aggregates",
    "store",
    "sinks",
}
# Each front end: its functions (a class's constructor and run method together) and the run
# options it must take. evaluate_on_ray builds its judge in each worker (llm_factory, no llm);
# a simulation scores nothing (no judge options), and its ``timeout`` limits a conversation.
FRONT_ENDS: dict[str, tuple[list[Callable[..., Any]], set[str]]] = {
    "evaluate": ([runner.evaluate], SCORING | {"llm"}),
    "aevaluate": ([runner.aevaluate], SCORING | {"llm"}),
    "EvalTask.evaluate": ([EvalTask.__init__, EvalTask.evaluate], SCORING | {"llm", "seed"}),
    "EvalTask.aevaluate": ([EvalTask.__init__, EvalTask.aevaluate], SCORING | {"llm", "seed"}),
    "evaluate_jsonl": ([stream.evaluate_jsonl], SCORING | {"llm"}),
    "evaluate_on_ray": ([distributed.evaluate_on_ray], SCORING),
    "simulate": ([simulation.simulate], {"max_concurrency", "timeout", "cache", "seed"}),
    "asimulate": ([simulation.asimulate], {"max_concurrency", "show_progress", "rate_limit"}),
    "assert_scores": ([testing.assert_scores], {"llm", "cache"}),
}
OLD_NAMES = {"sample_concurrency", "llm_concurrency", "progress"}


def keywords(functions: list[Callable[..., Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for function in functions:
        for parameter in inspect.signature(function).parameters.values():
            if parameter.kind is parameter.KEYWORD_ONLY:
                found[parameter.name] = parameter.default
    return found


@pytest.mark.parametrize("front_end", sorted(FRONT_ENDS))
def test_every_front_end_takes_the_shared_options_by_name_with_the_shared_defaults(
    front_end: str,
) -> None:
    functions, required = FRONT_ENDS[front_end]
    taken = keywords(functions)
    assert required <= set(RunOptions.model_fields)  # the table names run options only
    assert sorted(required - set(taken)) == []
    assert sorted(OLD_NAMES & set(taken)) == []  # no front end spells an option its own way
    shared = {name: default for name, default in taken.items() if name in RunOptions.model_fields}
    assert shared == {name: option_default(name) for name in shared}


def test_the_cli_flags_are_the_options_names_with_their_defaults() -> None:
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    basic = {"max_concurrency", "max_llm_concurrency", "cache"}
    for command, required in (("evaluate", basic | {"timeout", "details"}), ("watch", basic)):
        flags = {
            flag.removeprefix("--").replace("-", "_"): action.default
            for action in commands.choices[command]._actions
            for flag in action.option_strings
        }
        shared = {name: flags[name] for name in flags if name in RunOptions.model_fields}
        assert sorted(required - set(shared)) == []
        # The CLI writes no details unless --details: its files hold millions of rows.
        shared.pop("details", None)
        assert shared == {name: option_default(name) for name in shared}


def test_the_pytest_plugin_flag_is_the_cache_option() -> None:
    added: list[tuple[str, Any]] = []

    class Group:
        def addoption(self, flag: str, **kwargs: Any) -> None:
            added.append((flag, kwargs.get("default")))

    class Parser:
        def getgroup(self, name: str) -> Group:
            return Group()

    pytest_plugin.pytest_addoption(Parser())  # type: ignore[arg-type]
    assert ("--turneval-cache", option_default("cache")) in added


def lines() -> list[str]:
    """Four samples; the second has no reference calls, so tool_call_f1 fails on it."""
    samples = [conversation([call("a")], reference=[call("a"), call("b")]) for _ in range(4)]
    samples[1] = conversation([call("a")])
    return [sample.model_dump_json(exclude_none=True) for sample in samples]


def seen(rows: list[SampleResult]) -> list[tuple[int, Any, str | None]]:
    return sorted(
        (
            row.index,
            row.results["tool_call_f1"].value if "tool_call_f1" in row.results else None,
            row.failures["tool_call_f1"].error_type if "tool_call_f1" in row.failures else None,
        )
        for row in rows
    )


def test_evaluate_jsonl_calls_on_row_as_evaluate_does(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(line + "\n" for line in lines()))
    in_memory: list[SampleResult] = []
    streamed: list[SampleResult] = []
    runner.evaluate(
        EvaluationDataset.from_list([json.loads(line) for line in lines()]),
        ["tool_call_f1"],
        on_row=in_memory.append,
    )
    stream.evaluate_jsonl(
        data, ["tool_call_f1"], tmp_path / "out", workers=1, chunk_size=3, on_row=streamed.append
    )
    # precision 1/1, recall 1/2: F1 = 2/3; the second row fails on its missing reference
    expected = [(0, 2 / 3, None), (1, None, "InvalidSampleError"), (2, 2 / 3, None)]
    assert seen(in_memory) == seen(streamed) == [*expected, (3, 2 / 3, None)]
    assert [row.index for row in streamed] == [0, 1, 2, 3]  # in input order, as written


def test_an_on_row_that_raises_stops_every_front_end_with_its_own_error(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(line + "\n" for line in lines()))

    def broken(row: SampleResult) -> None:
        raise RuntimeError(f"on_row broke at row {row.index}")

    with pytest.raises(RuntimeError, match="on_row broke") as memory:  # not an ExceptionGroup
        runner.evaluate(
            EvaluationDataset.from_list([json.loads(line) for line in lines()]),
            ["tool_call_f1"],
            on_row=broken,
        )
    with pytest.raises(RuntimeError, match="on_row broke") as streamed:
        stream.evaluate_jsonl(data, ["tool_call_f1"], tmp_path / "out", workers=1, on_row=broken)
    assert type(memory.value) is type(streamed.value) is RuntimeError


def test_evaluate_jsonl_stops_on_error_as_evaluate_does(tmp_path: Path) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text("".join(line + "\n" for line in lines()))
    with pytest.raises(EvaluationAbortedError, match="fail_on_error=True: 1 of ") as memory:
        runner.evaluate(
            EvaluationDataset.from_list([json.loads(line) for line in lines()]),
            ["tool_call_f1"],
            fail_on_error=True,
            max_concurrency=1,
        )
    assert memory.value.result is not None
    assert seen(memory.value.result.rows)[:2] == [(0, 2 / 3, None), (1, None, "InvalidSampleError")]
    out = tmp_path / "out"
    with pytest.raises(EvaluationAbortedError, match=r"1 of 2 rows failed; .*line 2") as streamed:
        stream.evaluate_jsonl(
            data, ["tool_call_f1"], out, workers=1, chunk_size=2, fail_on_error=True
        )
    assert streamed.value.result is not None  # the rows written: the first chunk's
    assert seen(streamed.value.result.rows) == [(0, 2 / 3, None), (1, None, "InvalidSampleError")]
    assert len((out / "results.jsonl").read_text().splitlines()) == 2
    assert not (out / "summary.json").exists()
    # a fraction: 1 failed of 4 is not more than half
    kept = stream.evaluate_jsonl(data, ["tool_call_f1"], out, workers=1, fail_on_error=0.5)
    assert kept.total_rows == 4 and kept.failed_rows == 1


class FakeRay:
    """Stands for Ray where the test stops before any actor: it is already initialised."""

    def is_initialized(self) -> bool:
        return True


def test_evaluate_on_ray_passes_the_shared_options_and_maps_the_old_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text(lines()[0] + "\n")
    given: list[dict[str, Any]] = []

    def local(path: Any, metrics: Any, target: Any, **options: Any) -> Any:
        given.append(options)
        return None

    monkeypatch.setattr(distributed, "_ray", FakeRay)
    monkeypatch.setattr(distributed, "_engine", lambda ray, **options: None)
    monkeypatch.setattr(distributed, "evaluate_jsonl", local)
    distributed.evaluate_on_ray(data, ["tool_call_f1"], output=tmp_path / "a")
    assert {name: given[0][name] for name in ("details", "fail_on_error", "on_row")} == {
        "details": True,
        "fail_on_error": False,
        "on_row": None,
    }
    rows: list[SampleResult] = []
    distributed.evaluate_on_ray(
        data,
        ["tool_call_f1"],
        output=tmp_path / "b",
        max_concurrency=3,
        max_llm_concurrency=2,
        show_progress=True,
        fail_on_error=0.25,
        on_row=rows.append,
        details=False,
    )
    with pytest.warns(DeprecationWarning) as warned:
        distributed.evaluate_on_ray(
            data,
            ["tool_call_f1"],
            output=tmp_path / "c",
            sample_concurrency=3,
            llm_concurrency=2,
            progress=True,
            fail_on_error=0.25,
            on_row=rows.append,
            details=False,
        )
    assert [str(w.message).split(" is ")[0] for w in warned] == [
        "evaluate_on_ray(sample_concurrency=...)",
        "evaluate_on_ray(llm_concurrency=...)",
        "evaluate_on_ray(progress=...)",
    ]
    assert given[1] == given[2]  # the old names mean what the shared ones do
    picked = ("max_concurrency", "max_llm_concurrency", "show_progress", "fail_on_error", "details")
    assert [given[1][name] for name in picked] == [3, 2, True, 0.25, False]
    assert given[1]["on_row"] == rows.append
    with pytest.raises(TypeError, match=r"both sample_concurrency= .* and max_concurrency="):
        distributed.evaluate_on_ray(
            data, ["tool_call_f1"], output=tmp_path / "d", sample_concurrency=4, max_concurrency=8
        )

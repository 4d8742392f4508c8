"""One front-end signature: options are declared once, and every front end takes them so.

The run options are declared once (``turneval.options.RunOptions``): every front end takes
those that apply to it by the same names, with the same defaults, and honours them alike.
``timeout`` is the scoring limit wherever it is taken; ``agent_timeout`` the agent's. The
streamed front end's own options are :class:`~turneval.stream.StreamJob`'s; an engine's
settings are its own fields (``turneval.engines``), set on the command line by the flags
``turneval.cli._engines.ENGINE_FLAGS`` names; the input's options are the source's.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from turneval import distributed, pytest_plugin, runner, simulation, stream, testing
from turneval.agents import EvalTask
from turneval.cli import build_parser
from turneval.cli._engines import ENGINE_FLAGS
from turneval.dataset import EvaluationDataset
from turneval.engines import ENGINES, Engine, Local, Ray
from turneval.errors import EvaluationAbortedError
from turneval.options import RunOptions, option_default
from turneval.results import SampleResult
from turneval.stream import StreamJob
from turneval.stream._evaluate import ENGINE_SETTINGS, SOURCE_OPTIONS

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
# a simulation scores nothing (no scoring option): its agent_timeout limits a conversation.
FRONT_ENDS: dict[str, tuple[list[Callable[..., Any]], set[str]]] = {
    "evaluate": ([runner.evaluate], SCORING | {"llm"}),
    "aevaluate": ([runner.aevaluate], SCORING | {"llm"}),
    "EvalTask.evaluate": (
        [EvalTask.__init__, EvalTask.evaluate],
        SCORING | {"llm", "seed", "agent_timeout"},
    ),
    "EvalTask.aevaluate": (
        [EvalTask.__init__, EvalTask.aevaluate],
        SCORING | {"llm", "seed", "agent_timeout"},
    ),
    "evaluate_jsonl": ([stream.evaluate_jsonl], SCORING | {"llm"}),
    "evaluate_on_ray": ([distributed.evaluate_on_ray], SCORING),
    "simulate": ([simulation.simulate], {"max_concurrency", "agent_timeout", "cache", "seed"}),
    "asimulate": (
        [simulation.asimulate],
        {"max_concurrency", "agent_timeout", "show_progress", "rate_limit"},
    ),
    "assert_scores": ([testing.assert_scores], {"llm", "cache"}),
}
OLD_NAMES = {"sample_concurrency", "llm_concurrency", "progress"}
# The streamed front end's own options, beside the run options: StreamJob's fields (the
# engine is the object the job is given to).
STREAM_OPTIONS = {"engine", "report_rows", "title", "name", "resume", "overwrite", "stop"}
# Engine settings the command line does not set, and why.
PYTHON_ONLY = {
    ("local", "chunk_size"),  # --chunk-mb bounds a chunk; 1,000 lines a chunk is the default
    ("ray", "chunk_size"),
    ("ray", "num_cpus"),  # a cluster's shape: Python callers size their actors
    ("ray", "max_retries"),
    ("ray", "output_format"),  # Parquet output is for Python callers reading it with Ray
    ("ray", "llm_factory"),  # built from the judge flags (--judge-model, ...) by the CLI
}


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
        data,
        ["tool_call_f1"],
        tmp_path / "out",
        engine=Local(workers=1, chunk_size=3),
        on_row=streamed.append,
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
        stream.evaluate_jsonl(
            data, ["tool_call_f1"], tmp_path / "out", engine=Local(workers=1), on_row=broken
        )
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
            data, ["tool_call_f1"], out, engine=Local(workers=1, chunk_size=2), fail_on_error=True
        )
    assert streamed.value.result is not None  # the rows written: the first chunk's
    assert seen(streamed.value.result.rows) == [(0, 2 / 3, None), (1, None, "InvalidSampleError")]
    assert len((out / "results.jsonl").read_text().splitlines()) == 2
    assert not (out / "summary.json").exists()
    # a fraction: 1 failed of 4 is not more than half
    kept = stream.evaluate_jsonl(
        data, ["tool_call_f1"], out, engine=Local(workers=1), fail_on_error=0.5
    )
    assert kept.total_rows == 4 and kept.failed_rows == 1


def test_evaluate_on_ray_is_evaluate_jsonl_with_the_ray_engine_and_maps_the_old_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data.jsonl"
    data.write_text(lines()[0] + "\n")
    given: list[dict[str, Any]] = []

    def local(source: Any, metrics: Any, target: Any, **options: Any) -> Any:
        given.append({"source": source, "out": target, **options})
        return None

    monkeypatch.setattr(distributed, "evaluate_jsonl", local)  # no Ray is started
    with pytest.warns(DeprecationWarning, match=r"evaluate_on_ray is deprecated: use evaluate_j"):
        distributed.evaluate_on_ray(data, ["tool_call_f1"], output=tmp_path / "a")
    assert {name: given[0][name] for name in ("details", "fail_on_error", "on_row")} == {
        "details": True,
        "fail_on_error": False,
        "on_row": None,
    }
    assert given[0]["engine"] == Ray() and given[0]["out"] == tmp_path / "a"
    assert given[0]["source"] == stream.JsonlSource(data)
    rows: list[SampleResult] = []
    common: dict[str, Any] = {
        "output": tmp_path / "b",
        "fail_on_error": 0.25,
        "on_row": rows.append,
        "details": False,
        "batch_size": 10,
        "concurrency": 3,
        "num_cpus": 1.0,
        "address": "ray://x:1",
        "lenient_json": True,
    }
    with pytest.warns(DeprecationWarning, match="evaluate_on_ray is deprecated"):
        distributed.evaluate_on_ray(
            data,
            ["tool_call_f1"],
            max_concurrency=3,
            max_llm_concurrency=2,
            show_progress=True,
            **common,
        )
    # its engine settings are Ray's, under their names there
    assert given[1]["engine"] == Ray(chunk_size=10, workers=3, num_cpus=1.0, address="ray://x:1")
    assert given[1]["source"] == stream.JsonlSource(data, lenient_json=True)
    with pytest.warns(DeprecationWarning) as warned:
        distributed.evaluate_on_ray(
            data, ["tool_call_f1"], sample_concurrency=3, llm_concurrency=2, progress=True, **common
        )
    assert [str(w.message).split(" is ")[0] for w in warned] == [
        "evaluate_on_ray",
        "evaluate_on_ray(sample_concurrency=...)",
        "evaluate_on_ray(llm_concurrency=...)",
        "evaluate_on_ray(progress=...)",
    ]
    assert given[1] == given[2]  # the old names mean what the shared ones do
    picked = ("max_concurrency", "max_llm_concurrency", "show_progress", "fail_on_error", "details")
    assert [given[1][name] for name in picked] == [3, 2, True, 0.25, False]
    assert given[1]["on_row"] == rows.append
    with (
        pytest.warns(DeprecationWarning, match="evaluate_on_ray is deprecated"),
        pytest.raises(TypeError, match=r"both sample_concurrency= .* and max_concurrency="),
    ):
        distributed.evaluate_on_ray(
            data, ["tool_call_f1"], output=tmp_path / "d", sample_concurrency=4, max_concurrency=8
        )


def test_evaluate_on_ray_takes_the_ray_engines_settings_with_its_defaults() -> None:
    taken = keywords([distributed.evaluate_on_ray])
    fields = Ray.model_fields
    for old, new in distributed.RAY_SETTINGS.items():
        assert taken[old] == fields[new].get_default(), old
    assert sorted(set(fields) - set(distributed.RAY_SETTINGS.values())) == ["chunk_bytes"]


def test_the_streamed_front_end_takes_run_options_and_its_own_only() -> None:
    taken = keywords([stream.evaluate_jsonl])
    assert set(taken) == SCORING | {"llm"} | STREAM_OPTIONS
    # engine settings and input options are the engine's and the source's (old names: moved)
    assert not (set(ENGINE_SETTINGS) | set(SOURCE_OPTIONS)) & set(taken)
    # its own options' defaults are the job's (declared once, in StreamJob)
    job = {field.name: field.default for field in dataclasses.fields(StreamJob)}
    assert {name: taken[name] for name in STREAM_OPTIONS - {"engine"}} == {
        name: job[name] for name in STREAM_OPTIONS - {"engine"}
    }
    assert taken["engine"] is None  # Local()


@pytest.mark.parametrize("name", sorted(ENGINES))
def test_an_engine_declares_only_its_own_settings(name: str) -> None:
    engine = ENGINES[name]
    assert issubclass(engine, Engine) and engine.name == name
    front_end = set(keywords([stream.evaluate_jsonl]))
    # no run option or front-end option is declared again as an engine's setting
    assert not set(engine.model_fields) & (set(RunOptions.model_fields) | front_end)
    engine()  # every setting has a default: the engine by its name alone is a valid one


def test_the_cli_engines_are_the_engine_objects_and_their_flags_the_settings() -> None:
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    evaluate = {action.dest: action for action in commands.choices["evaluate"]._actions}
    assert tuple(evaluate["engine"].choices) == tuple(ENGINES)  # one to one
    assert evaluate["engine"].default == "local" and ENGINES["local"] is Local
    for name, engine in ENGINES.items():
        fields = engine.model_fields
        flags = ENGINE_FLAGS[name]
        assert set(flags) <= set(fields), name
        for setting, dest in flags.items():
            default = evaluate[dest].default
            if dest == "chunk_mb":
                default = int(default * 2**20)
            # a flag not given leaves the engine's default
            assert default is None or default == fields[setting].get_default(), (name, setting)
        unset = {(name, setting) for setting in fields if setting not in flags}
        assert unset <= PYTHON_ONLY, f"settings of {name} neither on the CLI nor declared"


def test_timeout_is_the_scoring_limit_wherever_it_is_taken() -> None:
    # agent steps take agent_timeout; timeout= there is the old name, moved with a warning
    for agent_step in (EvalTask.__init__, simulation.simulate, simulation.asimulate):
        taken = keywords([agent_step])
        assert "agent_timeout" in taken and "timeout" not in taken, agent_step
    for scoring in (runner.evaluate, EvalTask.evaluate, stream.evaluate_jsonl):
        assert "timeout" in keywords([scoring]) and "agent_timeout" not in keywords([scoring])
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    timeout = next(a for a in commands.choices["evaluate"]._actions if a.dest == "timeout")
    assert timeout.help is not None and "score" in timeout.help

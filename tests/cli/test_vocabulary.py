"""One CLI vocabulary: a flag means the same thing in every command, checked against one table.

The declaration is ``turneval.cli._vocabulary.FLAGS``; every command's parser is walked and each
flag is held to it (dest, type, action, metavar, and a help that starts with the declared
meaning). Every command that calls a judge takes the same judge, limit and price flags and
``--quiet``. Spellings of earlier versions still work, with a deprecation warning on stderr.
The commands are run as a user runs them (``main(argv)``), judges against the stub server.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from turneval import AIMessage, HumanMessage, MultiTurnSample, ToolCall, evaluate
from turneval.cli import build_parser, main
from turneval.cli._arguments import whole_number
from turneval.cli._vocabulary import (
    DEPRECATED,
    FLAGS,
    JUDGE_COMMANDS,
    OWN_MEANINGS,
    SCORING_COMMANDS,
    Flag,
    add_flag,
    judge_group_flags,
    share,
)
from turneval.metrics import AgentGoalAccuracyWithoutReference
from turneval.results import EvaluationResult, MetricResult, SampleResult
from turneval.store import RunStore

from .._openai_stub import OpenAIStub, Reply

ALIASES = {alias: flag for flag in FLAGS.values() for alias in flag.names}


def commands(parser: argparse.ArgumentParser, path: str = "") -> Iterator[tuple[str, Any]]:
    """Each command (``labels export``, ``judge-bench who-and-when``) and its parser."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                full = f"{path} {name}".strip()
                if not any(isinstance(a, argparse._SubParsersAction) for a in sub._actions):
                    yield full, sub
                yield from commands(sub, full)


def options(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for action in parser._actions:
        if action.option_strings and not isinstance(
            action, (argparse._HelpAction, argparse._VersionAction)
        ):
            yield action


def kind(action: argparse.Action) -> str:
    return {
        argparse._StoreTrueAction: "store_true",
        argparse._AppendAction: "append",
        argparse._StoreAction: "store",
    }.get(type(action), type(action).__name__)


def departures(where: str, action: argparse.Action, flag: Flag) -> list[str]:
    """How one command's flag departs from its declaration (dest, type, action, help)."""
    found = []
    if tuple(action.option_strings) != flag.names:
        found.append(f"{where}: spelled {action.option_strings}, not {flag.names}")
    if action.dest != flag.dest:
        found.append(f"{where}: dest {action.dest!r}, not {flag.dest!r}")
    if action.type is not flag.type:
        found.append(f"{where}: type {action.type!r}, not {flag.type!r}")
    if kind(action) != flag.action:
        found.append(f"{where}: action {kind(action)}, not {flag.action}")
    if flag.metavar is not None and flag.action != "store_true":
        if action.metavar != flag.metavar:
            found.append(f"{where}: metavar {action.metavar!r}, not {flag.metavar!r}")
    if not (action.help or "").startswith(flag.meaning):
        found.append(f"{where}: help {action.help!r} does not mean {flag.meaning!r}")
    return found


def drift(parser: argparse.ArgumentParser) -> list[str]:
    """Every way the parser's commands depart from the declared vocabulary, one line each."""
    found: list[str] = []
    users: dict[str, set[str]] = defaultdict(set)
    for command, sub in commands(parser):
        for action in options(sub):
            for spelling in action.option_strings:
                if (command, spelling) in DEPRECATED:
                    instead = DEPRECATED[command, spelling]
                    if not (action.help or "").startswith("deprecated:") or instead not in (
                        action.help or ""
                    ):
                        found.append(f"{command} {spelling}: deprecated, its help must say so")
                    if instead.startswith("--") and instead not in sub._option_string_actions:
                        found.append(f"{command} {spelling}: {instead} is not a flag there")
                    continue
                users[spelling].add(command)
                flag = ALIASES.get(spelling)
                if flag is not None:
                    found += departures(f"{command} {spelling}", action, flag)
    for spelling, used in sorted(users.items()):
        if len(used) > 1 and spelling not in ALIASES and spelling not in OWN_MEANINGS:
            found.append(f"{spelling}: taken by {sorted(used)} but declared nowhere")
    return found


def test_every_flag_of_every_command_is_as_declared() -> None:
    assert drift(build_parser()) == []


def test_drift_fails_the_check() -> None:
    """A command taking --sample as a row count, or --out as a file, is drift."""
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    first, second = sub.add_parser("one"), sub.add_parser("two")
    add_flag(first, "--sample")
    second.add_argument("--sample", type=int, help="rows re-scored")
    add_flag(first, "--out")
    second.add_argument("--out", metavar="FILE", help="the file to write")
    first.add_argument("--colour")
    second.add_argument("--colour")
    found = drift(parser)
    assert "two --sample: type <class 'int'>, not " + repr(share) in found
    assert "two --out: metavar 'FILE', not 'DIR'" in found
    assert (
        "two --sample: help 'rows re-scored' does not mean " + repr(FLAGS["--sample"].meaning)
        in found
    )
    assert "--colour: taken by ['one', 'two'] but declared nowhere" in found
    assert not [line for line in found if line.startswith("one ")]


def test_the_vocabulary_words() -> None:
    """``--sample`` a share, ``--limit`` a count; ``--out`` a folder, ``--output`` a file."""
    assert FLAGS["--sample"].type is share and FLAGS["--sample"].metavar == "SHARE"
    assert FLAGS["--limit"].type is whole_number and FLAGS["--limit"].metavar == "N"
    assert FLAGS["--out"].metavar == "DIR" and "folder" in FLAGS["--out"].meaning
    assert FLAGS["--output"].metavar == "FILE" and "file" in FLAGS["--output"].meaning
    for text, value in (("0.25", 0.25), ("1", 1.0), ("6", 6.0)):
        assert share(text) == value  # above 1: the command decides (a deprecated form)
    for text in ("0", "-0.5", "nan", "inf", "half"):
        with pytest.raises(argparse.ArgumentTypeError, match=r"share in \(0, 1\]"):
            share(text)


def test_each_own_meaning_is_still_shared_and_not_declared() -> None:
    """A flag two commands use in their own ways is listed with why, and the list is not stale."""
    users: dict[str, set[str]] = defaultdict(set)
    for command, sub in commands(build_parser()):
        for action in options(sub):
            for spelling in action.option_strings:
                if (command, spelling) not in DEPRECATED:
                    users[spelling].add(command)
    for spelling in OWN_MEANINGS:
        assert spelling not in ALIASES
        assert len(users[spelling]) > 1, f"{spelling} is taken by one command now: drop it"


@pytest.mark.parametrize("command", JUDGE_COMMANDS)
def test_every_judge_command_takes_the_judge_limit_and_price_flags(command: str) -> None:
    parsers = dict(commands(build_parser()))
    taken = set(parsers[command]._option_string_actions)
    wanted = set(judge_group_flags(scoring=command in SCORING_COMMANDS))
    assert sorted(wanted - taken) == []
    for name in ("--judge-model", "--rpm", "--tpm", "--timeout", "--repeats", "--quiet"):
        assert name in wanted or command not in SCORING_COMMANDS


def test_every_command_that_calls_a_judge_is_listed() -> None:
    """A command with --judge-model and any progress to show is a judge command (or batch, demo).

    ``batch`` asks the judge only for the sync fallback of a submitted run and ``demo`` only
    with a key: they take the judge flags, not the limits.
    """
    judged = {
        command
        for command, sub in commands(build_parser())
        if "--judge-model" in sub._option_string_actions
    }
    assert judged == set(JUDGE_COMMANDS) | {"batch", "demo"}


def test_declared_flags_are_unique_and_named_by_their_first_spelling() -> None:
    seen: set[str] = set()
    for name, flag in FLAGS.items():
        assert isinstance(flag, Flag) and flag.names[0] == name
        assert not seen & set(flag.names)
        seen |= set(flag.names)
        assert flag.meaning and flag.meaning[0].islower()


# -- as a user runs them --------------------------------------------------------------------


def _judge(url: str) -> Any:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model="old-judge", base_url=url, api_key="k")


def _stored_run(tmp_path: Path, stub: OpenAIStub, rows: int) -> tuple[str, str]:
    samples = [
        MultiTurnSample(
            user_input=[HumanMessage(content=f"book table {k}"), AIMessage(content=f"done {k}")]
        )
        for k in range(rows)
    ]
    url = str(tmp_path / "runs.db")
    stub.reset(default=Reply(from_schema=True), schema_seed=1)
    with RunStore(url) as store:
        old = evaluate(
            samples,
            [AgentGoalAccuracyWithoutReference(repeat_temperature=0.7)],
            llm=_judge(stub.url),
            store=store,
            show_progress=False,
        )
    assert old.store_run is not None
    stub.reset(default=Reply(from_schema=True), schema_seed=2)
    return old.store_run, url


def test_regrade_takes_the_judge_groups_limits_and_repeats(
    tmp_path: Path, openai_stub: OpenAIStub, capsys: pytest.CaptureFixture[str]
) -> None:
    run, url = _stored_run(tmp_path, openai_stub, 4)
    command = ["regrade", run[:8], "--store", url, "--judge-model", "new"]
    command += ["--judge-base-url", openai_stub.url, "--rpm", "6000", "--tpm", "1000000"]
    command += ["--max-in-flight", "2", "--timeout", "30", "--quiet", "--limit", "3"]
    assert main([*command, "--repeats", "2"]) == 0
    assert "3 rows" in capsys.readouterr().out
    assert len(openai_stub.requests) == 3 * 2  # 3 rows, 2 votes each
    openai_stub.reset(default=Reply(from_schema=True), schema_seed=2)
    with pytest.raises(SystemExit):  # a count of votes is at least 1
        main([*command, "--repeats", "0"])
    assert "argument --repeats: must be at least 1, got 0" in capsys.readouterr().err
    assert openai_stub.requests == []


def test_the_limits_reach_the_run_options(
    tmp_path: Path, openai_stub: OpenAIStub, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    """regrade and judge-bench hand --rpm/--tpm/--max-in-flight/--timeout to the run."""
    import turneval.runner
    import turneval.watch

    seen: dict[str, Any] = {}

    def regrade(*args: Any, **kwargs: Any) -> Any:
        seen["regrade"] = kwargs["options"]
        raise RuntimeError("seen")

    def bench(*args: Any, **kwargs: Any) -> Any:
        seen["judge-bench"] = kwargs
        raise RuntimeError("seen")

    monkeypatch.setattr(turneval.watch, "regrade", regrade)
    monkeypatch.setattr(turneval.runner, "evaluate", bench)
    run, url = _stored_run(tmp_path, openai_stub, 2)
    limits = ["--rpm", "120", "--tpm", "9000", "--max-in-flight", "3", "--timeout", "12"]
    judge = ["--judge-model", "m", "--judge-base-url", openai_stub.url]
    assert main(["regrade", run[:8], "--store", url, *judge, *limits]) == 2
    assert main(["judge-bench", "who-and-when", "--limit", "1", *judge, *limits, "--quiet"]) == 2
    options = seen["regrade"]
    limiter = options.rate_limit.rate_limit
    quota = (limiter.requests_per_minute, limiter.tokens_per_minute, limiter.max_in_flight)
    assert quota == (120, 9000, 3)
    assert options.timeout == 12
    bench_limit = seen["judge-bench"]["rate_limit"]
    benched = (bench_limit.requests_per_minute, bench_limit.tokens_per_minute)
    assert (*benched, bench_limit.max_in_flight) == (120, 9000, 3)
    assert seen["judge-bench"]["timeout"] == 12 and seen["judge-bench"]["show_progress"] is False


def test_regrade_sample_share_limit_and_the_deprecated_row_count(
    tmp_path: Path, openai_stub: OpenAIStub, capsys: pytest.CaptureFixture[str]
) -> None:
    run, url = _stored_run(tmp_path, openai_stub, 4)
    base = ["regrade", run[:8], "--store", url, "--judge-model", "new"]
    base += ["--judge-base-url", openai_stub.url]
    for chosen, rows in ((["--sample", "0.5"], 2), (["--limit", "1"], 1), (["--sample", "3"], 3)):
        openai_stub.reset(default=Reply(from_schema=True), schema_seed=2)
        assert main([*base, *chosen]) == 0
        err = capsys.readouterr().err
        assert len(openai_stub.requests) == rows
        warned = "turneval: warning: regrade --sample 3 as a row count is deprecated: use --limit 3"
        assert (warned in err) == (chosen[1] == "3")
    assert main([*base, "--sample", "0.5", "--limit", "2"]) == 2
    assert "give --sample SHARE or --limit N, not both" in capsys.readouterr().err
    assert main([*base, "--sample", "1.5"]) == 2
    assert "--sample must be a share of the rows in (0, 1], got 1.5" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*base, "--sample", "0"])
    assert "must be a share in (0, 1], got 0" in capsys.readouterr().err


def test_watch_sample_above_one_is_deprecated(capsys: pytest.CaptureFixture[str]) -> None:
    watch = ["watch", "--metric", "tool_call_f1", "--listen", "nowhere"]
    assert main([*watch, "--sample", "2"]) == 2  # warned, then the bad --listen stops it
    err = capsys.readouterr().err
    assert "turneval: warning: watch --sample 2 (above 1, read as 1) is deprecated" in err
    assert "--listen 'nowhere' is not HOST:PORT" in err
    assert main([*watch, "--sample", "0.5"]) == 2
    assert "warning" not in capsys.readouterr().err


def _failed_run(tmp_path: Path) -> Path:
    rows = []
    for index in range(4):
        row = SampleResult(index, None)
        row.results["goal"] = MetricResult("goal", 0.0, f"the agent forgot the date {index}")
        rows.append(row)
    folder = tmp_path / "run"
    folder.mkdir()
    EvaluationResult(rows, ["goal"]).to_jsonl(folder / "results.jsonl")
    return folder


def test_clusters_names_with_the_judge_group_and_its_old_spellings(
    tmp_path: Path, openai_stub: OpenAIStub, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _failed_run(tmp_path)
    answer = {"reason": "each forgot the date", "name": "Dates forgotten"}
    openai_stub.reset(default=Reply(content=json.dumps(answer)))
    judge = ["--judge-model", "m", "--judge-base-url", openai_stub.url, "--rpm", "6000"]
    out = tmp_path / "c.json"
    assert main(["clusters", str(folder), "--name-clusters", *judge, "--output", str(out)]) == 0
    printed, err = capsys.readouterr()
    assert "Dates forgotten" in printed and "warning" not in err
    assert json.loads(out.read_text())[0]["name"] == "Dates forgotten"
    calls = len(openai_stub.requests)
    assert calls >= 1
    old = tmp_path / "old.json"
    assert main(["clusters", str(folder), "--name", *judge, "--json", str(old)]) == 0
    printed, err = capsys.readouterr()
    assert "Dates forgotten" in printed
    assert "turneval: warning: clusters --name is deprecated: use --name-clusters" in err
    assert f"turneval: warning: clusters --json {old} is deprecated: use --output {old}" in err
    assert json.loads(old.read_text()) == json.loads(out.read_text())
    assert main(["clusters", str(folder), "--json", str(old), "--output", str(out)]) == 2
    assert "give --output FILE, not --json" in capsys.readouterr().err
    assert main(["clusters", str(folder), "--name-clusters", *judge, "--tpm", "1000"]) == 2
    assert "clusters cannot hold to --tpm" in capsys.readouterr().err


def test_scenarios_write_output_files_and_still_take_out(
    tmp_path: Path, openai_stub: OpenAIStub, capsys: pytest.CaptureFixture[str]
) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(
        json.dumps(
            [
                {
                    "type": "function",
                    "function": {
                        "name": "weather",
                        "description": "the weather in a city",
                        "parameters": {
                            "type": "object",
                            "properties": {"city": {"type": "string"}},
                            "required": ["city"],
                        },
                    },
                }
            ]
        )
    )
    openai_stub.reset(default=Reply(from_schema=True), schema_seed=3)
    base = ["scenarios", "generate", "--from", "tools", str(tools), "-n", "2", "--no-dedup"]
    base += ["--judge-model", "gen", "--judge-base-url", openai_stub.url, "--quiet"]
    new, old = tmp_path / "new.jsonl", tmp_path / "old.jsonl"
    assert main([*base, "--output", str(new)]) == 0
    assert "warning" not in capsys.readouterr().err and new.exists()
    assert main([*base, "--out", str(old)]) == 0
    err = capsys.readouterr().err
    assert f"scenarios generate --out {old} is deprecated: use --output {old}" in err
    assert old.read_text() == new.read_text()  # the same file, the answers from the stub again


def test_evaluate_names_its_run_in_run_json_the_store_and_store_list(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two runs of one file, told apart by --name; an unnamed run is named after its file."""
    data = tmp_path / "data.jsonl"
    sample = MultiTurnSample(
        user_input=[HumanMessage(content="hi"), AIMessage(tool_calls=[ToolCall(name="a")])],
        reference_tool_calls=[ToolCall(name="a")],
    )
    data.write_text(sample.model_dump_json() + "\n")
    url = str(tmp_path / "runs.db")
    for out, name in (("a", "baseline prompt"), ("b", "new prompt"), ("c", None)):
        named = [] if name is None else ["--name", name]
        run = ["evaluate", str(data), "--metric", "tool_call_f1", "--out", str(tmp_path / out)]
        assert main([*run, "--store", url, "--quiet", *named]) == 0
        manifest = json.loads((tmp_path / out / "run.json").read_text())
        assert manifest.get("name") == name
    capsys.readouterr()
    assert main(["store", "list", "--store", url]) == 0
    listed = capsys.readouterr().out
    assert "baseline prompt" in listed and "new prompt" in listed and "data.jsonl" in listed
    with RunStore(url) as store:
        assert sorted(run.name for run in store.runs()) == [
            "baseline prompt",
            "data.jsonl",
            "new prompt",
        ]
    # a named folder brought into another store keeps its name
    other = str(tmp_path / "other.db")
    assert main(["store", "import", str(tmp_path / "a"), "--store", other]) == 0
    with RunStore(other) as store:
        assert [run.name for run in store.runs()] == ["baseline prompt"]

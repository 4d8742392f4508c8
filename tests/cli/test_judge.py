"""The CLI's judge set-up (the same for evaluate and demo) and comparators by name."""

import argparse
from pathlib import Path

import pytest

from turneval import AIMessage, HumanMessage, MultiTurnSample, ToolCall, evaluate
from turneval.cli import DEFAULT_JUDGE_MODEL, UsageError, build_parser, main, parse_metric
from turneval.cli._judge_flags import judge_from_flags
from turneval.metrics import NonLLMStringSimilarity, ToolCallAccuracy


def options(command: str, *flags: str) -> argparse.Namespace:
    extra = ["x.jsonl", "--metric", "tool_call_f1"] if command == "evaluate" else []
    return build_parser().parse_args([command, *extra, *flags])


@pytest.mark.parametrize("command", ["evaluate", "demo"])
def test_an_api_key_alone_gives_the_default_judge(
    command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("TURNEVAL_JUDGE_MODEL", raising=False)
    judge = judge_from_flags(options(command))
    assert judge.model_name == DEFAULT_JUDGE_MODEL == "gpt-4o-mini"
    monkeypatch.setenv("TURNEVAL_JUDGE_MODEL", "gpt-4.1-mini")
    assert judge_from_flags(options(command)).model_name == "gpt-4.1-mini"
    assert judge_from_flags(options(command), needed=False) is None  # no judged metric: no client


@pytest.mark.parametrize("command", ["evaluate", "demo"])
def test_judge_flags_and_their_errors_name_cli_flags(
    command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert judge_from_flags(options(command)) is None
    local = judge_from_flags(
        options(command, "--judge-base-url", "http://127.0.0.1:9/v1", "--judge-model", "m")
    )
    assert local.model_name == "m" and str(local.openai_api_base) == "http://127.0.0.1:9/v1"
    with pytest.raises(UsageError, match="--judge-base-url needs --judge-model"):
        judge_from_flags(options(command, "--judge-base-url", "http://127.0.0.1:9/v1"))
    with pytest.raises(UsageError, match=r"--judge-model m needs an API key in \$OPENAI_API_KEY"):
        judge_from_flags(options(command, "--judge-model", "m"))
    # A variable named on purpose but unset is an error (with a local server too), not a
    # silent "unused" key; without a judged metric nothing is read.
    monkeypatch.delenv("NOPE_KEY", raising=False)
    named = ["--judge-api-key-env", "NOPE_KEY", "--judge-model", "m"]
    server = ["--judge-base-url", "http://127.0.0.1:9/v1"]
    with pytest.raises(UsageError, match=r"--judge-api-key-env NOPE_KEY: \$NOPE_KEY is not set"):
        judge_from_flags(options(command, *named, *server))
    assert judge_from_flags(options(command, *named, *server), needed=False) is None
    monkeypatch.setenv("NOPE_KEY", "sk-named")
    assert (
        judge_from_flags(options(command, *named)).openai_api_key.get_secret_value() == "sk-named"
    )


def test_a_judged_metric_without_a_judge_names_the_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    data = tmp_path / "d.jsonl"
    data.write_text('{"user_input": [{"type": "human", "content": "hi"}]}\n')
    assert main(["evaluate", str(data), "--metric", "topic_adherence", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "topic_adherence needs an LLM judge: set $OPENAI_API_KEY" in err
    assert "--judge-model MODEL" in err and "llm=" not in err
    # A dry run needs no judge, and estimates topic adherence from the requests a run sends.
    capsys.readouterr()
    data.write_text(
        '{"user_input": [{"type": "human", "content": "hi"}, {"type": "ai", "content": "hello"}],'
        ' "reference_topics": ["greetings"]}\n'
    )
    assert main(["evaluate", str(data), "--metric", "topic_adherence", "--dry-run"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("topic_adherence"))
    assert row.split()[1] == "1"  # one judge call for the one sample
    assert "not estimated" not in out


def test_a_dry_run_with_a_judge_counts_the_requests_of_offline_fallbacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    data = tmp_path / "d.jsonl"
    data.write_text(
        '{"user_input": [{"type": "human", "content": "weather?"}, {"type": "ai", "content": "",'
        ' "tool_calls": [{"name": "weather", "args": {}}]}, {"type": "tool", "content": "sunny"},'
        ' {"type": "ai", "content": "It is sunny."}]}\n'
    )
    run = ["evaluate", str(data), "--metric", "tool_output_groundedness", "--dry-run"]

    def calls() -> str:
        out = capsys.readouterr().out
        return next(line for line in out.splitlines() if line.startswith("tool_output")).split()[1]

    assert main(run) == 0 and calls() == "0"  # no judge: grounded offline, nothing to pay
    judge = ["--judge-model", "m", "--judge-base-url", "http://127.0.0.1:9/v1"]
    assert main([*run, *judge]) == 0 and calls() == "1"  # one answer, one request, as a run


def test_comparators_are_chosen_by_name() -> None:
    metric = parse_metric("tool_call_accuracy:arg_comparison_metric=levenshtein")
    assert isinstance(metric, ToolCallAccuracy)
    assert metric.arg_comparison_metric == NonLLMStringSimilarity()
    sample = MultiTurnSample(
        user_input=[
            HumanMessage(content="weather?"),
            AIMessage(tool_calls=[ToolCall(name="weather", args={"city": "Pariss"})]),
        ],
        reference_tool_calls=[ToolCall(name="weather", args={"city": "Paris"})],
    )
    # Levenshtein distance 1 over max length 6: similarity 5/6.
    assert evaluate([sample], [metric])["tool_call_accuracy"] == [pytest.approx(5 / 6)]
    jaro = parse_metric("tool_call_f1:arg_comparison_metric=jaro_winkler,match_threshold=0.5")
    assert evaluate([sample], [jaro])["tool_call_f1"] == [1.0]
    with pytest.raises(UsageError, match="unknown arg_comparison_metric 'cosine'; known names"):
        parse_metric("tool_call_accuracy:arg_comparison_metric=cosine")

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from turneval.cli import main, parse_metric
from turneval.demo import DOMAINS, build_rows
from turneval.metrics import RougeScore

from .._builders import call, conversation

ROOT = Path(__file__).resolve().parents[2]


def data_file(tmp_path: Path) -> Path:
    samples = [
        conversation([call("a"), call("b")], reference=[call("a"), call("b")]),
        conversation([call("b")], reference=[call("a"), call("b")]),
    ]
    path = tmp_path / "data.jsonl"
    path.write_text("".join(s.model_dump_json(exclude_none=True) + "\n" for s in samples))
    return path


def test_evaluate_writes_outputs_and_prints_the_summary(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    code = main(
        [
            "evaluate",
            str(data_file(tmp_path)),
            "--metric",
            "tool_call_f1",
            "--metric",
            "trajectory_single_tool_use:tool_name=b",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "tool_call_f1" in printed and "0.8333" in printed  # (1 + 2/3) / 2
    assert {p.name for p in out.iterdir()} == {
        "results.jsonl",
        "summary.json",
        "report.html",
        "run.json",
    }
    summary = json.loads((out / "summary.json").read_text())
    assert summary["metrics"]["trajectory_single_tool_use"]["mean"] == 1.0


def test_fail_under_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "evaluate",
        str(data_file(tmp_path)),
        "--metric",
        "tool_call_f1",
        "--out",
        str(tmp_path / "o"),
        "--quiet",
    ]
    assert main([*args, "--fail-under", "tool_call_f1=0.8"]) == 0
    assert main([*args, "--overwrite", "--fail-under", "tool_call_f1=0.9"]) == 1
    assert "FAIL: tool_call_f1 mean 0.8333 < 0.9" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--metric", "tool_call_f2"],
            "unknown metric 'tool_call_f2'; did you mean 'tool_call_f1', 'tool_call_valid' or "
            "'tool_call_efficiency'? run 'turneval metrics' for the list",
        ),
        (["--metric", "rouge_scor"], "did you mean 'rouge_score' or 'bleu_score'?"),
        (
            ["--metric", "agent_goal_accuracy"],
            "'agent_goal_accuracy' is ragas' name for agent_goal_accuracy_with_reference and "
            "agent_goal_accuracy_without_reference: name one of them",
        ),
        (["--metric", "tool_call_f1", "--fail-under", "recall=0.5"], "--fail-under names 'recall'"),
        (
            ["--metric", "tool_call_f1", "--fail-under", "tool_call_f1=high"],
            "'high' is not a number",
        ),
        (
            ["--metric", "trajectory_single_tool_use"],
            "needs its option 'tool_name': --metric trajectory_single_tool_use:tool_name=VALUE",
        ),
        (["--metric", "tool_call_f1:match_threshold=3"], "less than or equal to 1"),
        (["--metric", "topic_adherence"], "needs an LLM judge"),
    ],
)
def test_bad_usage_exits_2_with_a_clear_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    assert main(["evaluate", str(data_file(tmp_path)), "--out", str(tmp_path / "o"), *extra]) == 2
    assert message in capsys.readouterr().err


def test_missing_file_and_argparse_errors_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["evaluate", str(tmp_path / "nope.jsonl"), "--metric", "tool_call_f1"]) == 2
    assert "no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["evaluate", "x.jsonl"])  # --metric is required
    assert info.value.code == 2
    capsys.readouterr()
    for option, value, message in [
        (
            "--concurrency",
            "0",
            "argument --max-concurrency/--concurrency: must be at least 1, got 0",
        ),
        ("--workers", "two", "argument --workers: expected a whole number, got 'two'"),
        ("--chunk-mb", "0", "argument --chunk-mb: must be above 0, got 0"),
    ]:
        with pytest.raises(SystemExit) as info:
            main(["evaluate", "x.jsonl", "--metric", "tool_call_f1", option, value])
        assert info.value.code == 2 and message in capsys.readouterr().err


def test_metrics_lists_every_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics"]) == 0
    lines = capsys.readouterr().out.splitlines()
    names = [line.split()[0] for line in lines]
    assert (
        "tool_call_f1" in names and "trajectory_single_tool_use" in names and names == sorted(names)
    )
    assert any(
        line.startswith("topic_adherence") and line.endswith("[LLM judge]") for line in lines
    )


def test_compare_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = data_file(tmp_path)
    assert (
        main(
            [
                "evaluate",
                str(data),
                "--metric",
                "tool_call_f1",
                "--out",
                str(tmp_path / "a"),
                "--quiet",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "compare",
                str(tmp_path / "a" / "results.jsonl"),
                str(tmp_path / "a" / "results.jsonl"),
            ]
        )
        == 0
    )
    assert (
        "| tool_call_f1 | 0.8333 | 0.8333 | +0.0000 | 1.0000 | 0 | 0 |" in capsys.readouterr().out
    )


def test_demo_datasets_are_committed_as_generated() -> None:
    for domain in DOMAINS:
        rows = build_rows(domain)
        assert len(rows) >= 30
        committed = (ROOT / "examples" / "data" / f"{domain.name}.jsonl").read_text().splitlines()
        assert [json.loads(line) for line in committed] == json.loads(json.dumps(rows))
        assert all(row["reference_tool_calls"] and row["reference_topics"] for row in rows)


def test_demo_command_runs_offline(tmp_path: Path) -> None:
    env_free = {k: v for k, v in __import__("os").environ.items() if k != "OPENAI_API_KEY"}
    out = subprocess.run(
        [sys.executable, "-m", "turneval.cli", "demo", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env_free,
        check=True,
    ).stdout
    assert "on_device: 32 samples" in out and "customer_support: 32 samples" in out
    assert "tool_call_accuracy_unordered" in out and "set OPENAI_API_KEY" in out
    assert "team (a supervisor, a flights and a hotels agent): 24 samples" in out
    for domain in DOMAINS:
        assert (tmp_path / domain.name / "report.html").stat().st_size > 10_000


def test_behaviour_metrics_and_json_options_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Sample 1 calls a, b; sample 2 calls b: b and c denied -> (1/2 + 0/1) / 2 = 0.25.
    # With a's args ignored and any extra rule, F1 is unchanged: (1 + 2/3) / 2.
    code = main(
        [
            "evaluate",
            str(data_file(tmp_path)),
            "--metric",
            'tool_permission:denied=["b","c"]',
            "--metric",
            'tool_call_f1:arg_rules={"a":{"*":"ignore","x":"numeric"}},match_threshold=1.0',
            "--metric",
            "agent_loop_detection",
            "--out",
            str(tmp_path / "out"),
            "--quiet",
        ]
    )
    assert code == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())["metrics"]
    assert summary["tool_permission"]["mean"] == 0.25
    assert summary["tool_call_f1"]["mean"] == pytest.approx((1 + 2 / 3) / 2)
    assert summary["agent_loop_detection"]["mean"] == 1.0
    assert main(["metrics"]) == 0
    names = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert {"tool_permission", "agent_loop_detection", "tool_call_efficiency"} <= set(names)
    assert "step_budget" in names


def test_version_has_one_source(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    import turneval

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"turneval {turneval.__version__}\n"
    # the installed metadata's version is read from turneval.__version__ (pyproject: dynamic)
    assert version("turneval") == turneval.__version__


def test_help_says_what_the_package_docstring_says() -> None:
    from turneval import cli

    description = cli.build_parser().description
    assert description and (cli.__doc__ or "").splitlines()[0].endswith(f": {description}.")


def test_ragas_metric_names_are_accepted(tmp_path: Path) -> None:
    assert parse_metric("bleu_score") == "bleu"
    rouge = parse_metric("rouge_score:rouge_type=rouge1")
    assert isinstance(rouge, RougeScore) and rouge.rouge_type == "rouge1"
    data = tmp_path / "single.jsonl"
    data.write_text('{"response": "the cat sat", "reference": "the cat sat"}\n')
    out = tmp_path / "o"
    assert (
        main(["evaluate", str(data), "--metric", "bleu_score", "--out", str(out), "--quiet"]) == 0
    )
    assert json.loads((out / "summary.json").read_text())["metrics"]["bleu"]["mean"] == 1.0


def test_python_dash_m_turneval_runs_the_command_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "turneval", "metrics"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    assert done.returncode == 0, done.stderr
    assert "tool_call_f1" in done.stdout.split()


def test_cli_table_and_report_show_the_agent_figures_of_traces(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Two traces: 2 s and 4 s long, 15 and 30 tokens, one AI message each.
    from opentelemetry import trace

    from turneval.traces import write_otlp_json

    from ..traces._spans import Recorder, assistant, chat, user

    r = Recorder()
    start = 1_700_000_000_000_000_000
    for seconds, tokens in ((2, 10), (4, 20)):
        root = r.tracer.start_span(
            "agent", attributes={"gen_ai.operation.name": "invoke_agent"}, start_time=start
        )
        with trace.use_span(root, end_on_exit=False):
            chat(
                r,
                [user("hi")],
                [assistant("done")],
                gen_ai__usage__input_tokens=tokens,
                gen_ai__usage__output_tokens=tokens // 2,
            )
        root.end(end_time=start + seconds * 10**9)
    path = tmp_path / "traces.jsonl"
    write_otlp_json(r.spans(), path)
    out = tmp_path / "out"
    spec = "trajectory_single_tool_use:tool_name=f"
    assert main(["evaluate", str(path), "--metric", spec, "--out", str(out), "--quiet"]) == 0
    table = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line.split() for line in table if line.strip()}
    assert rows["latency_in_seconds"][1] == "3.0000"  # (2 + 4) / 2
    assert rows["failure"][1] == "0.0000"
    assert rows["agent_total_tokens"][1] == "22.5000"  # (15 + 30) / 2
    assert rows["steps"][1] == "1.0000"
    assert table[1].startswith("latency_in_seconds")  # first, as in the text summary
    page = (out / "report.html").read_text(encoding="utf-8")
    assert '<table id="agent">' in page and "<td class='num'>22.500</td>" in page


def test_ragas_metric_names_work_wherever_a_metric_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "single.jsonl"
    data.write_text(
        '{"response": "the cat sat", "reference": "the cat sat"}\n'
        '{"response": "a dog ran", "reference": "the cat sat"}\n'
    )
    run = ["evaluate", str(data), "--metric", "bleu_score", "--quiet", "--out"]
    # bleu is 1 and 0: a bar of 0.6 on the mean 0.5 fails (exit 1), named either way
    assert main([*run, str(tmp_path / "a"), "--fail-under", "bleu_score=0.6"]) == 1
    assert main([*run, str(tmp_path / "b"), "--fail-under", "bleu=0.6"]) == 1
    assert main([*run, str(tmp_path / "c"), "--fail-under", "bleu_score=0.4"]) == 0
    capsys.readouterr()
    assert main(["plan", str(tmp_path / "a"), "--metric", "bleu_score", "--mde", "0.1"]) == 0
    assert "| bleu | 2 |" in capsys.readouterr().out
    both = [str(tmp_path / "a"), str(tmp_path / "b")]
    assert main(["compare", *both, "--fail-on-regression", "bleu_score=0"]) == 0
    assert main(["compare", *both, "--pass-threshold", "bleu_score=2"]) == 0
    from turneval.cli._compare import _pass_thresholds

    assert _pass_thresholds(["bleu_score=0.7", "rouge_score=0.2"]) == (
        0.5,
        {"bleu": 0.7, "rouge": 0.2},
    )

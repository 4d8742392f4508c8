"""Report content that needs no browser: tool names, neutral colours, request counts, ids."""

import json
from pathlib import Path

from turneval import EvaluationResult, SampleResult
from turneval.cli import main
from turneval.judge import Usage
from turneval.report import render_html
from turneval.results import MetricResult

from ._builders import call, conversation


def test_cli_report_names_the_tool_without_details(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text(conversation([call("lookup")]).model_dump_json() + "\n")
    spec = "trajectory_single_tool_use:tool_name=lookup"
    assert main(["evaluate", str(data), "--metric", spec, "--out", str(tmp_path), "--quiet"]) == 0
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert '<span class="toolname">tool: lookup</span>' in page
    assert "<td class='num neutral'>1.000</td>" in page  # used: neither good nor bad
    assert '<td class="id" title="please help">please help</td>' in page


def test_header_request_count_adds_up_to_the_per_metric_counts() -> None:
    scored = MetricResult("judge_a", 1.0, usage=Usage(100, 10, calls=3))
    rows = [SampleResult(0, conversation([call("a")]), {"judge_a": scored})]
    # The run made 5 requests: 3 for the scored row, 2 on a row that then failed.
    page = render_html(EvaluationResult(rows, ["judge_a"], Usage(180, 20, calls=5)))
    assert "judge: 5 requests (3 for scored rows + 2 for failed rows and retries)" in page
    assert "110 (3 requests, 0 cached)" in page  # the metric's own line
    assert "tallest bar: 1 row<" in page and 'id="legend"' in page
    same = render_html(EvaluationResult(rows, ["judge_a"], Usage(100, 10, calls=3)))
    assert "judge: 3 requests, 0 cached" in same


def test_header_counts_are_singular_for_one() -> None:
    one = [SampleResult(0, conversation([call("a")]), {"m": MetricResult("m", 1.0)})]
    assert "1 sample · 1 metric · generated" in render_html(EvaluationResult(one, ["m"]))
    two = [*one, SampleResult(1, conversation([call("a")]), {"m": MetricResult("m", 0.0)})]
    page = render_html(EvaluationResult(two, ["m", "n"]))
    assert "2 samples · 2 metrics · generated" in page


def test_cli_report_names_the_same_lines_as_results_jsonl(tmp_path: Path) -> None:
    # A blank line 2 holds no sample: the second row is line 3 in results.jsonl and the report.
    line = conversation([call("lookup")]).model_dump_json()
    data = tmp_path / "d.jsonl"
    data.write_text(f"{line}\n\n{line}\n")
    spec = "trajectory_single_tool_use:tool_name=lookup"
    assert main(["evaluate", str(data), "--metric", spec, "--out", str(tmp_path), "--quiet"]) == 0
    rows = (tmp_path / "results.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(row)["line"] for row in rows] == [1, 3]
    page = (tmp_path / "report.html").read_text(encoding="utf-8")
    opened = 'aria-expanded="false">open</button> '
    assert [part.split("<")[0] for part in page.split(opened)[1:]] == ["1", "3"]
    # the column's tooltip says what the number is: the input line, not results.jsonl's
    assert "title=\"the sample's 1-based line in the input file" in page
    assert "the line of results.jsonl" not in page

"""Report content that needs no browser: tool names, neutral colours, request counts, ids."""

import json
import re
from pathlib import Path

from turneval import EvaluationResult, HumanMessage, SampleResult, SingleTurnSample
from turneval.cli import main
from turneval.judge import Usage
from turneval.report import render_html
from turneval.results import AgentRun, MetricFailure, MetricResult

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


HIDDEN = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c\x00\x01\x1b\x7f"


def test_hidden_characters_are_shown_marked_never_written() -> None:
    # Bidirectional controls reorder the text around them ("evil\u202etxt.exe" reads as
    # "evilexe.txt"); NUL and other controls vanish or break tools reading the page.
    rlo = "evil\u202etxt.exe"
    sample = conversation([call("look\u202eup", q=rlo)], with_outputs=True)
    sample = sample.model_copy(
        update={
            "user_input": [
                HumanMessage(content=f"please {HIDDEN} help"),
                *sample.user_input[1:],
            ],
            "metadata": {"id": f"case\u2066{rlo}"},
        }
    )
    single = SingleTurnSample(user_input="q\x00", response=rlo, metadata={"note": rlo})
    failed = MetricFailure("m", 1, "ValueError", f"bad\x00{rlo}")
    rows = [
        SampleResult(0, sample, {"m": MetricResult("m", 1.0, reason=f"because {rlo}")}),
        SampleResult(1, single, failures={"m": failed}),
    ]
    page = render_html(EvaluationResult(rows, ["m"]), title=f"run {rlo}")
    assert [char for char in HIDDEN if char in page] == []
    mark = '<span class="hidden-char" title="hidden character">&lt;U+202E&gt;</span>'
    for shown in ("evil" + mark + "txt.exe", "look" + mark + "up"):
        assert shown in page
    # call arguments, reason, failure, response, the id cell and the heading
    assert page.count("evil" + mark) == 6
    assert "evil\\u202etxt.exe" in page  # metadata is shown as a dict, whose repr escapes it
    assert '<span class="hidden-char" title="hidden character">&lt;U+0000&gt;</span>' in page
    for code in ("202A", "2069", "200E", "061C", "0001", "001B", "007F"):
        assert f"&lt;U+{code}&gt;</span>" in page
    # attributes and the page title get the same code as text, without markup
    assert 'title="case&lt;U+2066&gt;evil&lt;U+202E&gt;txt.exe"' in page
    assert "<title>run evil&lt;U+202E&gt;txt.exe</title>" in page
    assert "please " in page and " help" in page


def test_report_shows_the_agent_figures_of_the_summary() -> None:
    # Two runs that succeeded (1 s, 100 tokens, 2 steps; 3 s, 300 tokens, 4 steps) and one
    # that failed (left out of latency, tokens and steps): failure rate 1/3, latency 2 s.
    sample = conversation([call("a")])
    one = MetricResult("m", 1.0)
    rows = [
        SampleResult(0, sample, {"m": one}, agent=AgentRun([], 1.0, None, Usage(60, 40), 2)),
        SampleResult(1, sample, {"m": one}, agent=AgentRun([], 3.0, None, Usage(200, 100), 4)),
        SampleResult(2, sample, agent=AgentRun([], 9.0, "RuntimeError: down", Usage(5, 5), 1)),
    ]
    page = render_html(EvaluationResult(rows, ["m"]))
    agent = page.split('<table id="agent">')[1].split("</table>")[0]
    cells = [
        [re.sub("<[^>]*>", "", cell) for cell in row.split("</td>")[:-1]]
        for row in agent.split("<tbody>")[1].split("</tr>")[:-1]
    ]
    assert cells == [
        ["latency_in_seconds", "2.000", "[1.000, 3.000]", "1.414", "2", "1"],
        ["failure", "0.333", "[0.000, 1.000]", "0.577", "3", "0"],
        ["agent_total_tokens", "200.000", "[100.000, 300.000]", "141.421", "2", "1"],
        ["steps", "3.000", "[2.000, 4.000]", "1.414", "2", "1"],
    ]
    plain = render_html(EvaluationResult([SampleResult(0, sample, {"m": one})], ["m"]))
    assert 'id="agent"' not in plain  # no agent run, no agent table

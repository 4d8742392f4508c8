"""The HTML report in headless Chromium (Debian's package, installed by `make test`)."""

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from turneval import AIMessage, HumanMessage, MultiTurnSample, ToolCall, ToolMessage, evaluate

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None and os.environ.get("CI"):
    raise RuntimeError(
        "CI needs Chromium for the report tests: make test installs Debian's chromium"
    )
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (make test installs it)"
)

PAYLOAD = (
    '<script>document.body.setAttribute("data-pwned", "script")</script>'
    "<img src=x onerror=\"document.body.setAttribute('data-pwned', 'img')\">"
)


@pytest.fixture(scope="module")
def browser(report: Path, wide_report: Path) -> Iterator[Any]:
    # Depends on ``report``: Playwright's sync API runs an event loop in this thread, inside
    # which the sync ``evaluate`` (rightly) refuses to run, so the report is built first.
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        yield instance
        instance.close()


def open_page(browser: Any, path: Path, fragment: str = "") -> tuple[Any, list[str]]:
    page = browser.new_page()
    problems: list[str] = []
    page.on(
        "console",
        lambda message: (
            problems.append(message.text) if message.type in {"error", "warning"} else None
        ),
    )
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.goto(path.as_uri() + fragment)
    page.wait_for_selector("body[data-ready='1']")
    return page, problems


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    hostile = MultiTurnSample(
        user_input=[
            HumanMessage(content=PAYLOAD),
            AIMessage(
                content="",
                tool_calls=[
                    ToolCall(name="lookup", args={"q": "</div><script>alert(1)</script>"}, id="c1")
                ],
            ),
            ToolMessage(content="<b>bold?</b> evil\u202etxt.exe\x00", tool_call_id="c1"),
            AIMessage(content="done"),
        ],
        reference_tool_calls=[ToolCall(name="lookup", args={"q": "x"})],
    )
    plain = MultiTurnSample(
        user_input=[
            HumanMessage(content="hi"),
            AIMessage(tool_calls=[ToolCall(name="lookup", args={"q": "x"})]),
        ],
        reference_tool_calls=[ToolCall(name="lookup", args={"q": "x"})],
    )
    missing = MultiTurnSample(user_input=[HumanMessage(content="no reference")])
    result = evaluate([hostile, plain, missing], ["tool_call_f1", "trajectory_precision"])
    path = tmp_path_factory.mktemp("report") / "report.html"
    result.to_html(path)
    return path


def test_the_detector_sees_script_errors(browser: Any, tmp_path: Path) -> None:
    broken = tmp_path / "broken.html"
    broken.write_text(
        "<html><body><script>document.body.setAttribute('data-ready','1'); undefinedThing();</script></body></html>"
    )
    _, problems = open_page(browser, broken)
    assert any("undefinedThing" in problem for problem in problems)


def test_loads_without_console_errors_and_injected_markup_stays_text(
    browser: Any, report: Path
) -> None:
    page, problems = open_page(browser, report)
    assert problems == []
    assert page.evaluate("document.body.getAttribute('data-pwned')") is None
    assert page.locator("script").count() == 1  # only the report's own
    assert page.locator("img").count() == 0


def test_drill_down_opens_and_renders_the_conversation(browser: Any, report: Path) -> None:
    page, problems = open_page(browser, report)
    drill = page.locator("#sample-0 tr.drill")
    assert drill.is_hidden()
    page.click("#sample-0 button.open")
    assert drill.is_visible()
    text = drill.inner_text()
    assert PAYLOAD in text and "</div><script>alert(1)</script>" in text and "<b>bold?</b>" in text
    assert "evil<U+202E>txt.exe<U+0000>" in text  # hidden characters shown, not obeyed
    assert "tool_call_f1 = 0.000" in text and "precision=0/1=0.000" in text
    page.click("#sample-2 button.open")
    assert "InvalidSampleError" in page.locator("#sample-2 tr.drill").inner_text()
    assert page.evaluate("document.body.getAttribute('data-pwned')") is None and problems == []


def test_a_fragment_opens_a_sample_and_columns_sort(browser: Any, report: Path) -> None:
    page, problems = open_page(browser, report, "#sample-1")
    assert page.locator("#sample-1 tr.drill").is_visible()

    def order() -> Any:
        return page.eval_on_selector_all("tbody.sample", "els => els.map(e => e.id)")

    page.click("th[data-sort='k0']")  # tool_call_f1 ascending: 0.0, 1.0, then the failed row
    assert order() == ["sample-0", "sample-1", "sample-2"]
    page.click("th[data-sort='k0']")  # descending; failures stay last
    assert order() == ["sample-1", "sample-0", "sample-2"]
    assert problems == []


def test_calibration_report_shows_kappa_and_the_confusion_heatmap(
    browser: Any, tmp_path: Path
) -> None:
    from turneval.calibration import agreement, render_agreement_html
    from turneval.results import EvaluationResult, MetricResult, SampleResult

    judge, human = [1, 1, 2, 3, 3], [1, 2, 2, 3, 3]
    rows = []
    for index, value in enumerate(judge):
        row = SampleResult(index, None)
        row.results["<fluency>"] = MetricResult("<fluency>", float(value))
        rows.append(row)
    report = agreement(EvaluationResult(rows, ["<fluency>"]), human)
    path = tmp_path / "calibration.html"
    path.write_text(render_agreement_html(report, title="Can I trust <fluency>?"))
    page, problems = open_page(browser, path)
    assert problems == []
    assert page.locator("h1").inner_text() == "Can I trust <fluency>?"
    low, high = report.weighted_kappa_ci or (0.0, 0.0)
    assert page.locator("#headline").inner_text() == (
        f"weighted kappa = {report.weighted_kappa:.3f} (95% CI [{low:.3f}, {high:.3f}])"
    )
    counts = page.eval_on_selector_all(
        "#confusion td.cell", "cells => cells.map(c => Number(c.dataset.count))"
    )
    assert counts == [1, 0, 0, 1, 1, 0, 0, 0, 2]  # rows: human 1, 2, 3; columns: judge
    shades = page.eval_on_selector_all(
        "#confusion td.cell", "cells => cells.map(c => getComputedStyle(c).backgroundColor)"
    )
    assert shades[8] != shades[1]  # the heatmap is shaded by count


SCREENSHOT = Path(__file__).resolve().parents[1] / "docs" / "images" / "report.png"


@pytest.fixture(scope="module")
def wide_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Many metrics with long names, as a real run has them: the report must still fit."""
    from turneval.metrics import ToolCallAccuracy, TrajectorySingleToolUse

    samples = [
        MultiTurnSample(
            user_input=[
                HumanMessage(content=f"Please book a table for {n} people tonight at eight"),
                AIMessage(tool_calls=[ToolCall(name="lookup", args={"q": "x" * 80})]),
                ToolMessage(content="found"),
                AIMessage(content="Booked."),
            ],
            reference_tool_calls=[
                ToolCall(name="lookup" if n % 2 else "book", args={"q": "x" * 80})
            ],
            metadata={"id": f"booking-{n}"} if n == 3 else None,
        )
        for n in range(1, 7)
    ]
    metrics: list[str | ToolCallAccuracy | TrajectorySingleToolUse] = [
        "tool_call_f1",
        "tool_call_accuracy",
        ToolCallAccuracy(name="tool_call_accuracy_unordered", strict_order=False),
        "trajectory_exact_match",
        "trajectory_in_order_match",
        "trajectory_any_order_match",
        "trajectory_precision",
        "trajectory_recall",
        "tool_parameter_key_match",
        "tool_parameter_kv_match",
        TrajectorySingleToolUse(tool_name="book"),
    ]
    path = tmp_path_factory.mktemp("wide") / "report.html"
    evaluate(samples, metrics).to_html(path, title="turneval demo: bookings")
    return path


def test_the_report_fits_1280_pixels_and_reads_without_help(
    browser: Any, wide_report: Path
) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(wide_report.as_uri())
    page.wait_for_selector("body[data-ready='1']")
    widths = page.evaluate(
        "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert widths[0] <= widths[1] <= 1280  # no horizontal scroll
    box = page.locator("#sample-0 button.open").bounding_box()
    assert box is not None and 0 <= box["x"] and box["x"] + box["width"] <= 1280
    first = page.locator("#sample-0 tr").first.locator("td")
    assert first.nth(0).inner_text().split()[-1] == "1"  # 1-based, as results.jsonl's lines
    assert first.nth(1).inner_text() == "Please book a table for 1 people toni..."  # 40 chars
    assert page.locator("#sample-2 td.id").inner_text() == "booking-3"
    assert page.locator("#legend").is_visible()
    header = page.locator("#samples th").filter(has_text="trajectory_single_tool_use")
    assert "tool: book" in header.inner_text()
    errors_head = page.locator("#samples th").last
    assert errors_head.inner_text().startswith("errors")
    lines_of_text = (  # the header's text on one line, not broken as "error s"
        "(th) => { const r = document.createRange(); r.selectNodeContents(th);"
        " return r.getClientRects().length; }"
    )
    assert page.evaluate(lines_of_text, errors_head.element_handle()) == 1
    single = first.nth(2 + 10)  # line, id, then the metrics in order: the 11th
    assert single.get_attribute("class") == "num neutral"  # 0 is not "bad" here
    assert first.nth(2).get_attribute("class") == "num good"  # tool_call_f1 = 1 on sample 0
    page.click("#sample-0 button.open")
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    page.click("#sample-0 button.open")
    page.screenshot(path=str(wide_report.with_suffix(".png")))
    if os.environ.get("TURNEVAL_UPDATE_SCREENSHOTS"):  # refreshes the docs' screenshot
        SCREENSHOT.parent.mkdir(exist_ok=True)
        shutil.copyfile(wide_report.with_suffix(".png"), SCREENSHOT)
    page.close()

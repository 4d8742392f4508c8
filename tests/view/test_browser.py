"""``turneval view`` end to end in headless Chromium: browse, filter, a conversation, compare,
label with the keyboard, export the labels and calibrate the judge from them.

``TURNEVAL_UPDATE_SCREENSHOTS=1`` refreshes the how-to's screenshots (docs/images/view-*.png).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from turneval import MultiTurnSample, evaluate
from turneval.cli import main
from turneval.metrics import ToolCallF1

pytest.importorskip("sqlalchemy")
pytest.importorskip("uvicorn")

from turneval.store import RunStore
from turneval.view import create_app

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None and os.environ.get("CI"):
    raise RuntimeError(
        "CI needs Chromium for the viewer tests: make test installs Debian's chromium"
    )
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed (make test installs it)"
)

IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
JUDGED = "agent_goal_accuracy_with_reference"  # calibrate checks judged metrics: a judge's name
PAYLOAD = "<img src=x onerror=\"document.body.setAttribute('data-pwned', '1')\">"
CALL = {"name": "refund", "args": {"order": "A-17", "amount": 20}}
WRONG = {"name": "refund", "args": {"order": "A-17", "amount": 200}}
QUESTIONS = [
    "Please refund the 20 euros for order A-17.",
    "My parcel A-17 arrived broken, I want my 20 euros back.",
    "Refund A-17 (20 EUR) " + PAYLOAD,
    "Can you give back the 20 euros of A-17?",
    "A-17: refund 20 please.",
    "Refund twenty euros, order A-17.",
]


def _sample(number: int, good: bool) -> MultiTurnSample:
    return MultiTurnSample.model_validate(
        {
            "user_input": [
                {"type": "human", "content": QUESTIONS[number]},
                {
                    "type": "ai",
                    "content": "Let me refund that.",
                    "tool_calls": [CALL if good else WRONG],
                },
                {"type": "tool", "content": '{"status": "refunded"}', "tool_call_id": "r1"},
                {"type": "ai", "content": "Done: the refund is on its way."},
            ],
            "reference_tool_calls": [CALL],
            "metadata": {"id": f"order-{number}"},
        }
    )


BASELINE = [True, True, True, False, True, True]
CANDIDATE = [True, False, True, False, False, True]  # rows 1 and 4 regress


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, RunStore, dict[str, str]]]:
    store = RunStore(tmp_path / "runs.db")
    runs: dict[str, str] = {}
    for name, pattern in (("baseline", BASELINE), ("candidate", CANDIDATE)):
        samples = [_sample(i, good) for i, good in enumerate(pattern)]
        result = evaluate(samples, [ToolCallF1(name=JUDGED), "tool_call_f1"], store=store)
        assert result.store_run is not None
        store.rename_run(result.store_run, name)
        runs[name] = result.store_run
    with _serving(store) as base:
        yield base, store, runs
    store.close()


@contextlib.contextmanager
def _serving(store: RunStore) -> Iterator[str]:
    """The viewer over ``store`` on a free port of 127.0.0.1 (its base URL), then stopped."""
    import uvicorn

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    app = create_app(store, annotator="ana", allowed_hosts=["127.0.0.1"])
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def _chromium(playwright: Any) -> Any:
    return playwright.chromium.launch(
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


def test_browse_compare_label_export_and_calibrate(
    served: tuple[str, RunStore, dict[str, str]], tmp_path: Path, capsys: Any
) -> None:
    from playwright.sync_api import sync_playwright

    base, store, runs = served
    problems: list[str] = []
    shots: list[Path] = []

    def shot(page: Any, name: str) -> None:
        path = tmp_path / f"view-{name}.png"
        page.screenshot(path=str(path))
        shots.append(path)

    with sync_playwright() as playwright:
        browser = _chromium(playwright)
        page = browser.new_page(viewport={"width": 1100, "height": 640}, accept_downloads=True)
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda error: problems.append(str(error)))

        def visit(path: str) -> None:
            page.goto(base + path)
            page.wait_for_selector("body[data-ready='1']")

        # runs: both listed; a search keeps one
        visit("/")
        assert page.locator("tr.run").count() == 2
        shot(page, "runs")
        page.fill("input[name=q]", "candidate")
        page.click("form.filters button")
        page.wait_for_selector("body[data-ready='1']")
        assert page.locator("tr.run").count() == 1
        page.click("tr.run a")
        page.wait_for_selector("#summary")
        assert "0.500\t[0.167, 0.833]" in page.locator("#summary").inner_text()  # 3 of 6 right
        shot(page, "run")

        # rows below 0.5: the two wrong refunds and row 3; then one conversation
        visit(f"/runs/{runs['candidate']}/rows?metric={JUDGED}&below=0.5")
        indexes = page.eval_on_selector_all("tr.row", "els => els.map(e => e.dataset.index)")
        assert indexes == ["1", "3", "4"]
        visit(f"/runs/{runs['candidate']}/rows/2")
        text = page.locator("#conversation").inner_text()
        assert PAYLOAD in text  # shown as text, never run
        assert page.evaluate("document.body.getAttribute('data-pwned')") is None
        assert page.locator("#conversation img").count() == 0
        visit(f"/runs/{runs['candidate']}/rows/1")
        assert '"amount": 200' in page.locator("#conversation").inner_text()
        shot(page, "conversation")

        # compare: the two regressions first, the paired p-value
        visit(f"/compare?a={runs['baseline']}&b={runs['candidate']}")
        flips = page.locator("#flips tr.flip").all_inner_texts()
        assert len(flips) == 4 and all(f.startswith("regression\t") for f in flips)
        assert [f.split("\t")[2] for f in flips] == ["order-1", "order-1", "order-4", "order-4"]
        shot(page, "compare")

        # label the candidate's rows with the keyboard: a note on row 0, then digits
        visit(f"/runs/{runs['candidate']}/label?metric={JUDGED}")
        page.keyboard.press("n")
        page.keyboard.type("checked the amount")
        page.keyboard.press("Enter")
        shot(page, "label")
        page.keyboard.press("7")  # a yes/no judge: 7 is refused on the page, nothing saved
        assert page.locator("#state").inner_text() == (
            f"key 7 is not on the scale of {JUDGED}: 0 (no) or 1 (yes)"
        )
        assert page.locator("#labeling").get_attribute("data-index") == "0"
        assert store.labels(run_id=runs["candidate"]) == []
        human = [1, 0, 1, 1, 0, 1]  # the person finds row 3 right, where the metric said 0
        for index, label in enumerate(human):
            assert page.locator("#labeling").get_attribute("data-index") == str(index)
            page.keyboard.press(str(label))
            page.wait_for_url(f"**pos={index + 1}*")
            page.wait_for_selector("body[data-ready='1']")
        assert page.locator("#done").count() == 1
        page.keyboard.press("ArrowLeft")  # back to the last row: its label is shown
        page.wait_for_selector("#labeling[data-index='5']")
        assert "labeled 1" in page.locator("#state").inner_text()
        with page.expect_download() as download:
            visit(f"/runs/{runs['candidate']}")
            page.click("text=export labels")
        exported = tmp_path / "labels.jsonl"
        download.value.save_as(exported)
        assert problems == []
        browser.close()

    records = [json.loads(line) for line in exported.read_text().splitlines()]
    assert records[0] == {"index": 0, "metric": JUDGED, "label": 1, "reason": "checked the amount"}
    assert [r["label"] for r in records] == human and [r["index"] for r in records] == list(
        range(6)
    )
    capsys.readouterr()
    url = str(store.url)
    args = ["calibrate", "--store", url, "--run", runs["candidate"], "--metric", JUDGED]
    assert main([*args, "--html", str(tmp_path / "c.html")]) == 0
    report = capsys.readouterr().out
    assert "5/6" in report or "0.833" in report  # the person agrees with 5 of 6 scores
    folder = tmp_path / "candidate"
    store.export_run(runs["candidate"], folder)
    assert main(["calibrate", str(folder), str(exported), "--html", str(tmp_path / "d.html")]) == 0
    assert capsys.readouterr().out.splitlines()[:-1] == report.splitlines()[:-1]

    for path in shots:
        assert path.stat().st_size < 150_000, f"{path.name} is {path.stat().st_size:,} bytes"
        if os.environ.get("TURNEVAL_UPDATE_SCREENSHOTS"):  # refreshes the how-to's screenshots
            IMAGES.mkdir(exist_ok=True)
            shutil.copyfile(path, IMAGES / path.name)


def test_a_hostile_import_renders_as_text_and_never_navigates(tmp_path: Path) -> None:
    """The attack's reproduction: an imported run's texts tried to redirect the browser."""
    from playwright.sync_api import sync_playwright

    evil = "http://evil.invalid/pwned"
    refresh = f'<meta http-equiv="refresh" content="0;url={evil}">'
    image = "<img src=x onerror=\"document.body.setAttribute('data-pwned', '1')\">"
    folder = tmp_path / "hostile"
    folder.mkdir()
    record = {
        "index": 0,
        "id": refresh,
        refresh: 1.0,
        f"{refresh}_reason": image,
        f"{refresh}_error": None,
    }
    (folder / "results.jsonl").write_text(json.dumps(record) + "\n")
    summary: dict[str, Any] = {"metrics": {refresh: {"mean": 1.0, "count": 1, "failed": 0}}}
    (folder / "summary.json").write_text(json.dumps(summary))
    (folder / "run.json").write_text(
        json.dumps({"judge": {"model": refresh}, "dataset": {"path": image}})
    )
    url = str(tmp_path / "runs.db")
    assert main(["store", "import", str(folder), "--name", refresh, "--store", url]) == 0
    # a summary whose numbers are markup is refused at the door
    summary["metrics"][refresh]["count"] = refresh
    (folder / "summary.json").write_text(json.dumps(summary))
    assert main(["store", "import", str(folder), "--store", url]) == 2
    with RunStore(url) as store, _serving(store) as base, sync_playwright() as playwright:
        (run,) = store.runs()
        # a run stored before imports were checked (the attack's: its count was the markup)
        older = store.start_run(name="older", configs=[{"name": "j", "class": None}])
        older.finish({"metrics": {"j": {"mean": 1.0, "count": refresh, "failed": refresh}}})
        browser = _chromium(playwright)
        page = browser.new_page()
        page.set_default_timeout(10_000)
        asked: list[str] = []
        page.on("request", lambda request: asked.append(request.url))
        paths = ["/", f"/runs/{run.id}", f"/runs/{run.id}/rows", f"/runs/{run.id}/rows/0"]
        for path in [f"/runs/{older.run_id}", *paths]:
            page.goto(base + path)
            page.wait_for_selector("body[data-ready='1']")
            page.wait_for_timeout(700)  # a refresh of 0 s would have gone by now
            assert page.url == base + path
            assert refresh in page.locator("main").inner_text()  # shown as text
            assert page.evaluate("document.body.getAttribute('data-pwned')") is None
            assert page.locator("main meta, main img").count() == 0
        assert all(u.startswith(base) for u in asked), [u for u in asked if not u.startswith(base)]
        assert image in page.locator("#metrics").inner_text()
        browser.close()

"""Every Python block in the README and docs runs, and so does the quickstart script."""

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ._openai_stub import OpenAIStub

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def blocks() -> list[tuple[str, str]]:
    found = []
    for path in DOCS:
        for number, match in enumerate(BLOCK.finditer(path.read_text()), start=1):
            found.append((f"{path.relative_to(ROOT)}#{number}", match.group(1)))
    return found


@pytest.mark.parametrize(("where", "code"), blocks(), ids=[where for where, _ in blocks()])
def test_doc_block_runs(
    where: str, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Run from a scratch folder that sees the repository's examples/ (blocks read
    # examples/data/...), so files a block writes (a judge cache, reports) stay out of the tree.
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    if "Instrumentor" in code:
        # Tracing instrumentations stay partly active after uninstrument() (OpenLLMetry's keeps
        # a LangChain callback and trace headers): such a block gets a process of its own.
        done = subprocess.run(
            [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True
        )
        assert done.returncode == 0, f"{where} failed:\n{done.stderr}"
        return
    monkeypatch.chdir(tmp_path)
    if "turneval.batch" in code:
        # The batch API of a local server (tests/_batch_stub.py): batches end at the first
        # poll, so the block's wait() returns at once.
        from ._batch_stub import BatchStub

        server = BatchStub()
        server.instant = True
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        try:
            exec(compile(code, where, "exec"), {"__name__": "__doc_example__"})
        finally:
            server.close()
        assert server.submitted and server.sync_requests == 0  # every answer from a batch
        return
    exec(compile(code, where, "exec"), {"__name__": "__doc_example__"})


def test_there_are_doc_blocks() -> None:
    assert len(blocks()) >= 6


def test_quickstart_example_prints_each_seed_score() -> None:
    output = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert (
        "tool_call_f1                 0.800  precision=2/3=0.667, recall=2/2=1.000, F1=0.800"
        in output
    )
    assert "tool_call_accuracy           1.000" in output
    assert "trajectory_precision         0.500  precision=1/2=0.500" in output
    assert "trajectory_precision         mean=0.250" in output


def test_langgraph_example_evaluates_a_real_agent() -> None:
    env = {k: v for k, v in __import__("os").environ.items() if k != "OPENAI_API_KEY"}
    output = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "langgraph_agent.py")],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    ).stdout
    assert "failure                      mean=0.000" in output
    # The scripted model's bug (it does not recognise "air conditioning") shows up on sample 4.
    assert (
        "#4 failure=0 steps=3 tool_call_f1=0.500  precision=1/2=0.500, recall=1/2=0.500" in output
    )
    assert "#1 failure=0 steps=3 tool_call_f1=1.000" in output


SUPPORT_FIGURES = [
    "agent_goal_accuracy_with_reference   success=0.733  pass^3=0.600  pass@3=0.800",
    "tool_call_f1                         success=0.733  pass^3=0.600  pass@3=0.800",
    "refund          user_done:goal=1,f1=1.00 user_done:goal=0,f1=0.00 user_done:goal=1,f1=1.00",
    "cancel_shipped  user_done:goal=0,f1=0.67 user_done:goal=0,f1=0.67 user_done:goal=0,f1=0.67",
]


def run_support_example(*args: str) -> str:
    env = {k: v for k, v in __import__("os").environ.items() if k != "OPENAI_API_KEY"}
    return subprocess.run(
        [sys.executable, str(ROOT / "examples" / "simulated_support.py"), *args],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    ).stdout


def test_simulated_support_example_reports_pass_k_offline() -> None:
    output = run_support_example()
    for line in SUPPORT_FIGURES:
        assert line in output


def test_simulated_support_example_with_an_openai_compatible_endpoint(
    openai_stub: OpenAIStub,
) -> None:
    """--judge-base-url: the user and the judge are ChatOpenAI, served by the local stub."""
    import runpy

    from langchain_core.messages import HumanMessage, SystemMessage

    from ._openai_stub import Reply

    example = runpy.run_path(str(ROOT / "examples" / "simulated_support.py"))

    def respond(body: dict[str, Any]) -> Reply:
        system, prompt = body["messages"][0]["content"], body["messages"][-1]["content"]
        messages = [SystemMessage(content=system), HumanMessage(content=prompt)]
        policy = (
            example["user_policy"] if "You play a human user" in system else example["judge_policy"]
        )
        return Reply(content=policy(messages))

    openai_stub.reset(responder=respond)
    output = run_support_example("--judge-base-url", openai_stub.url)
    for line in SUPPORT_FIGURES:
        assert line in output
    models = {request["model"] for request in openai_stub.requests}
    assert models == {"gpt-4o-mini"} and len(openai_stub.requests) > 50


def test_examples_data_is_what_the_package_writes(tmp_path: Path) -> None:
    # The docs tell users without a clone to write examples/data/ with write_datasets.
    from turneval.demo import write_datasets

    written = write_datasets(tmp_path)
    shipped = sorted((ROOT / "examples" / "data").glob("*.jsonl"))
    assert [path.name for path in sorted(written)] == [path.name for path in shipped]
    for path in written:
        assert path.read_bytes() == (ROOT / "examples" / "data" / path.name).read_bytes()


def test_tool_world_example_grades_end_state_trajectory_and_judge(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import runpy

    runpy.run_path(str(ROOT / "examples" / "tool_world.py"))["main"]()  # in-process: fast
    output = capsys.readouterr().out
    # Five scenarios, three trials. End state: only the partial refund ends wrong (the agent
    # refunds the whole order), 4/5 in every trial. Trajectory: the address change always
    # makes exactly the reference calls; cancelling (no look-up first) and the partial refund
    # never do; a refund does unless a rate limit made the agent retry.
    assert "end_state_match                      mean=0.800  pass^3=0.800" in output
    assert "state_assertions                     mean=1.000" in output
    refund = re.search(r"^  refund +(.+)$", output, re.MULTILINE)
    assert refund is not None
    trials = re.findall(r"end=(\d),traj=(\d),goal=1,faults=(\d)", refund.group(1))
    assert len(trials) == 3 and {end for end, _, _ in trials} == {"1"}
    assert [traj == "1" for _, traj, _ in trials] == [faults == "0" for _, _, faults in trials]
    assert {faults == "0" for _, _, faults in trials} == {True, False}  # seed 1: both kinds
    clean = sum(faults == "0" for _, _, faults in trials)
    assert f"trajectory_exact_match               mean={(3 + clean) / 15:.3f}" in output


def test_grow_test_set_example_generates_runs_and_grows_near_misses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import runpy

    runpy.run_path(str(ROOT / "examples" / "grow_test_set.py"))["main"](tmp_path)  # in-process
    output = capsys.readouterr().out
    # Ten briefs (four tools alone, six pairs): seven sets of reference actions succeed on the
    # order desk; three fail there (a shipped order cancelled or refunded, an address changed
    # after a cancel) and are left out with the world's error.
    assert "generated 7 scenarios from world (seed 7, model ScriptedChatModel)" in output
    assert "left out: 3 whose reference actions failed on the world, 0 near duplicates" in output
    assert "order E500 is shipped and cannot be cancelled" in output
    assert "tool pair (3/6 pairs):" in output
    # The scripted agent refunds the whole order when asked for part of it, and only looks up
    # when the opening message is a question: 4 of the 7 end states are right.
    assert "end_state_match          mean=0.571" in output
    assert "near misses from 2 failure group(s): 5 kept" in output
    kept = [line.split() for line in output.splitlines() if line.startswith("  failures-7-")]
    assert [row[1] for row in kept] == [
        "harder_persona",
        "changed_constraint",
        "tool_fault",
        "harder_persona",
        "tool_fault",
    ]
    lines = (tmp_path / "scenarios.jsonl").read_text().splitlines()
    assert len(lines) == 7 and (tmp_path / "scenarios.html").exists()
    assert len((tmp_path / "near_misses.jsonl").read_text().splitlines()) == 5

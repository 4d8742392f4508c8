"""The run folder: one process at a time works on it, it is the run of one input, and a
process stopped while planning leaves nothing the same command cannot start again.

The processes here are real (``python -c``), talking to the stub on 127.0.0.1.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from turneval import EvaluationDataset
from turneval.batch import BatchRun, submit
from turneval.cli import main
from turneval.errors import ConfigError

from .._batch_stub import BatchStub
from .test_batch_cli import flags
from .test_openai_batch import judge, once_submitted, samples

POLLER = """
import sys, time
from pathlib import Path
from langchain_openai import ChatOpenAI
from turneval.batch import BatchRun

folder, url, signals, me = sys.argv[1:5]
llm = ChatOpenAI(model="gpt-4o-mini", base_url=url, api_key="k", max_retries=0)
run = BatchRun.open(folder, llm=llm)
Path(signals, "ready-" + me).touch()
while not Path(signals, "go").exists():
    time.sleep(0.005)
print(run.wait(progress=False, poll_interval=0.02))
"""


def wait_for(paths: list[Path], processes: list[subprocess.Popen[str]]) -> None:
    """Until every path exists; a process that ended first fails the test with its stderr."""
    deadline = time.monotonic() + 90
    while not all(path.exists() for path in paths):
        for process in processes:
            if process.poll() is not None:
                pytest.fail(f"a child process ended early: {process.communicate()[1]}")
        assert time.monotonic() < deadline, "the child processes never got ready"
        time.sleep(0.01)


def test_two_processes_polling_one_folder_send_each_round_once(
    stub: BatchStub, tmp_path: Path
) -> None:
    # A quarter of the first attempts error: a second round follows the first. Creating that
    # round takes a second, during which the other process polls the same folder.
    folder = tmp_path / "run"
    submit(samples(16), ["fluency"], llm=judge(stub), out=folder).close()
    first = list(stub.submitted)
    failing = set(sorted(first)[::4])  # chosen before any answer: the stub answers on polling
    stub.inject = lambda cid: "error" if cid in failing else None
    retried = sorted(c[:-2] + "-2" for c in failing)
    assert len(first) == 16 and len(retried) == 4
    stub.create_delay = 1.0
    signals = tmp_path / "signals"
    signals.mkdir()
    pollers = [
        subprocess.Popen(
            [sys.executable, "-c", POLLER, str(folder), stub.url, str(signals), name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    try:
        wait_for([signals / "ready-a", signals / "ready-b"], pollers)
        (signals / "go").touch()
        outputs = [poller.communicate(timeout=120) for poller in pollers]
    finally:
        for poller in pollers:
            poller.kill()
    assert [poller.returncode for poller in pollers] == [0, 0], outputs
    assert sorted(stub.submitted[16:]) == retried  # the second round, sent once
    assert len(set(stub.submitted)) == len(stub.submitted)
    assert len(stub.batches) == 2
    for out, _ in outputs:
        assert "16/16 answered, 0 failed, 0 waiting; 2 batch(es) in 2 round(s)" in out
    # The process that found the folder taken said what it waited for.
    assert any("turneval: waiting for process" in err for _, err in outputs)
    again = BatchRun.open(folder, llm=judge(stub))
    assert again.status().usage.calls == 16 + len(retried)
    assert not any(row.failures for row in again.collect().rows)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_rerun_on_another_input_is_refused_naming_both_files_and_digests(
    stub: BatchStub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    EvaluationDataset(samples(4)).to_jsonl(first)
    EvaluationDataset(samples(5)).to_jsonl(second)
    out = tmp_path / "out"

    def argv(data: Path) -> list[str]:
        argv = ["evaluate", str(data), "--metric", "fluency", "--quiet", "--engine", "batch"]
        return [*argv, "--out", str(out), "--poll-interval", "0", *flags(stub)]

    assert main(argv(first)) == 0
    capsys.readouterr()
    assert main(argv(second)) == 2  # not the old run collected as if it were this input's
    err = capsys.readouterr().err
    assert str(first.resolve()) in err and digest(first) in err
    assert str(second) in err and digest(second) in err
    assert len((out / "results.jsonl").read_text().splitlines()) == 4
    assert len(stub.submitted) == 4
    assert main(argv(first)) == 0  # the same input again: the run, collected again
    # The same path edited in place is another input too.
    before = digest(first)
    EvaluationDataset(samples(4)[::-1]).to_jsonl(first)
    capsys.readouterr()
    assert main(argv(first)) == 2
    err = capsys.readouterr().err
    assert before in err and digest(first) in err
    with pytest.raises(ConfigError, match=f"sha256 {digest(second)}"):
        BatchRun.open(out, llm=judge(stub), data=second)
    # The folder keeps a byte copy of the input: the recorded digest is the input's.
    assert digest(out / "samples.jsonl") == before
    assert BatchRun.open(out, llm=judge(stub)).input == {
        "path": str(first.resolve()),
        "sha256": before,
    }


PAUSED_WHILE_PLANNING = """
import os, sys, time
from pathlib import Path
import turneval.batch._run as batch_run

planned = batch_run.plan_requests

def paused(*args, **kwargs):
    Path(os.environ["PLANNING_MARK"]).touch()
    time.sleep(120)  # SIGTERM arrives here, while the run is being planned
    return planned(*args, **kwargs)

batch_run.plan_requests = paused
from turneval.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_sigterm_while_planning_leaves_a_folder_the_same_command_runs(
    stub: BatchStub, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data.jsonl"
    EvaluationDataset(samples(6)).to_jsonl(data)
    out = tmp_path / "out"
    argv = ["evaluate", str(data), "--metric", "fluency", "--quiet", "--engine", "batch"]
    argv += ["--out", str(out), "--poll-interval", "0", *flags(stub)]
    mark = tmp_path / "planning"
    env = {**os.environ, "PLANNING_MARK": str(mark)}
    child = subprocess.Popen(
        [sys.executable, "-c", PAUSED_WHILE_PLANNING, *argv],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for([mark], [child])
        child.send_signal(signal.SIGTERM)
        _, err = child.communicate(timeout=30)
    finally:
        child.kill()
    assert child.returncode == -signal.SIGTERM, err
    assert stub.submitted == []
    assert main(argv) == 0  # the same command plans the run again and runs it
    assert len(stub.submitted) == 6
    once_submitted(stub)
    assert len((out / "results.jsonl").read_text().splitlines()) == 6
    assert not list(out.glob("state.sqlite.part*"))  # the stopped planning left nothing
    assert "6/6 answered" in capsys.readouterr().out


def test_a_planning_that_fails_leaves_no_run_and_the_folder_plans_again(
    stub: BatchStub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import turneval.batch._run as batch_run
    from turneval.batch._plan import plan_requests as real

    def interrupted(*args: object, **kwargs: object) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(batch_run, "plan_requests", interrupted)
    with pytest.raises(KeyboardInterrupt):
        submit(samples(3), ["fluency"], llm=judge(stub), out=tmp_path / "run")
    assert not (tmp_path / "run" / "state.sqlite").exists()
    assert not list((tmp_path / "run").glob("state.sqlite.part*"))
    with pytest.raises(ConfigError, match="holds no batch run"):
        BatchRun.open(tmp_path / "run")
    monkeypatch.setattr(batch_run, "plan_requests", real)
    run = submit(samples(3), ["fluency"], llm=judge(stub), out=tmp_path / "run")
    assert run.wait(progress=False, poll_interval=0).answered == 3

"""The pytest plugin: score assertions, datasets as test cases, a session cache and report."""

from pathlib import Path

import pytest

import turneval._scripted
import turneval.report  # noqa: F401
from turneval import EvaluationDataset, HumanMessage, MultiTurnSample
from turneval.errors import ConfigError
from turneval.metrics import ToolCallF1
from turneval.testing import ScoreAssertionError, assert_scores, parametrize_dataset, sample_id

from ._builders import call, conversation

GOOD = conversation([call("a")], reference=[call("a")])
HALF = conversation([call("a"), call("x")], reference=[call("a")])  # F1 2/3, accuracy 1/2


def test_assert_scores_passes_and_returns_the_result() -> None:
    result = assert_scores(GOOD, ["tool_call_f1", "tool_call_accuracy"], 1.0)
    assert result["tool_call_f1"] == [1.0]


def test_assert_scores_lists_each_failed_check_with_value_threshold_and_reason() -> None:
    missing = conversation([call("a")])  # no reference: the metric fails
    with pytest.raises(ScoreAssertionError) as caught:
        assert_scores([GOOD, HALF, missing], ToolCallF1(), {"tool_call_f1": 0.8})
    message = str(caught.value)
    assert message.startswith("2 of 3 score checks failed:")
    assert "sample 1 (please help): tool_call_f1 = 0.6667 < 0.8: precision=1/2=0.500" in message
    assert "sample 2 (please help): tool_call_f1 failed: InvalidSampleError: " in message
    assert caught.value.failures[0].startswith("sample 1")
    assert_scores(HALF, "tool_call_f1")  # default threshold 0.5: 0.667 passes
    with pytest.raises(ConfigError, match=r"thresholds name metrics that were not run: \['f1'\]"):
        assert_scores(GOOD, "tool_call_f1", {"f1": 1.0})
    with pytest.raises(ConfigError, match="thresholds must be a number or a"):
        assert_scores(GOOD, "tool_call_f1", "high")  # type: ignore[arg-type]


def test_sample_ids_are_readable() -> None:
    long = MultiTurnSample(user_input=[HumanMessage(content="  book a\n table " + "x" * 50)])
    assert sample_id(long, 3) == "book a table " + "x" * 24 + "..."
    assert len(sample_id(long, 3)) == 40
    named = MultiTurnSample(user_input=[HumanMessage(content="hi")], metadata={"id": "case-7"})
    assert sample_id(named, 0) == "case-7"


def write_dataset(path: Path) -> None:
    EvaluationDataset(
        [
            GOOD.model_copy(update={"metadata": {"id": "good"}}),
            HALF,
        ]
    ).to_jsonl(path)


def test_parametrize_dataset_gives_one_case_per_sample(tmp_path: Path) -> None:
    write_dataset(tmp_path / "cases.jsonl")
    mark = parametrize_dataset(tmp_path / "cases.jsonl", argname="case")
    assert mark.args[0] == "case" and mark.args[1] == [
        GOOD.model_copy(update={"metadata": {"id": "good"}}),
        HALF,
    ]
    assert mark.kwargs["ids"] == ["good", "please help"]


def test_repeated_ids_are_numbered_in_file_order(tmp_path: Path) -> None:
    # four samples opening with the same message, then one whose own id looks like a number
    same = [HALF] * 4 + [GOOD.model_copy(update={"metadata": {"id": "please help#2"}})]
    EvaluationDataset(same).to_jsonl(tmp_path / "cases.jsonl")
    ids = parametrize_dataset(tmp_path / "cases.jsonl").kwargs["ids"]
    # the 4th case is not the bare name (which reads as the first), and no id is taken twice
    assert ids[:4] == ["please help#1", "please help#3", "please help#4", "please help#5"]
    assert ids[4] == "please help#2" and len(set(ids)) == 5


INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\n"

PLUGIN_TESTS = """
import pytest
from turneval.testing import assert_scores, parametrize_dataset

@pytest.mark.turneval_dataset("cases.jsonl")
def test_marked(sample):
    assert_scores(sample, ["tool_call_f1"], 0.9)

@parametrize_dataset("cases.jsonl", argname="case")
def test_decorated(case):
    assert_scores(case, "tool_call_f1", 0.5)
"""


def test_marker_runs_each_sample_and_the_report_covers_the_session(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(INI)
    write_dataset(pytester.path / "cases.jsonl")
    pytester.makepyfile(test_cases=PLUGIN_TESTS)
    pytester.chdir()
    result = pytester.runpytest("-p", "no:cacheprovider", "-v", "--turneval-report=out/r.html")
    result.assert_outcomes(passed=3, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_marked?good? PASSED*",
            "*test_marked?please help? FAILED*",
            "*test_decorated?good? PASSED*",
            "*sample 0: tool_call_f1 = 0.6667 < 0.9: precision=1/2*",
            "turneval: report of 4 scored samples: out/r.html",
        ]
    )
    html = (pytester.path / "out" / "r.html").read_text(encoding="utf-8")
    # the case first: the id column cuts long ids at the end, the test's path and name are
    # the same for every case of a dataset
    assert ">good · test_cases.py::test_marked</td>" in html
    assert ">please help · test_cases.py::test_decorated</td>" in html


def test_marker_errors_name_the_missing_argument(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    write_dataset(pytester.path / "cases.jsonl")
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.turneval_dataset("cases.jsonl")
        def test_no_argument(case):
            pass
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*test_no_argument has no argument 'sample'*argname=*"])


def test_an_unreadable_dataset_is_one_failed_case_and_the_session_goes_on(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(INI)
    write_dataset(pytester.path / "cases.jsonl")
    (pytester.path / "broken.jsonl").write_text('{"user_input": [}\n')
    pytester.makepyfile(
        test_datasets="""
        import pytest

        @pytest.mark.turneval_dataset("broken.jsonl")
        def test_broken(sample):
            pass

        @pytest.mark.turneval_dataset("missing.jsonl")
        def test_missing(sample):
            pass

        @pytest.mark.turneval_dataset("cases.jsonl")
        def test_fine(sample):
            assert sample is not None

        def test_other():
            pass
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "-v", "--strict-markers")
    result.assert_outcomes(passed=3, errors=2)  # not a collection error stopping the session
    result.stdout.fnmatch_lines(
        [
            "*test_broken?unreadable? ERROR*",
            "*turneval_dataset: InvalidSampleError: *broken.jsonl: line 1 is not valid JSON*",
            "*turneval_dataset: FileNotFoundError: *missing.jsonl*",
        ]
    )


JUDGED_TESTS = """
import pytest
from turneval import HumanMessage, AIMessage, MultiTurnSample
from turneval.metrics import AgentGoalAccuracyWithReference
from turneval.testing import ScriptedChatModel, aassert_scores, assert_scores

VERDICT = '{"end_state": "booked", "reason": "the table was booked", "achieved": true}'
JUDGE = ScriptedChatModel(responses=[VERDICT])
SAMPLE = MultiTurnSample(
    user_input=[HumanMessage(content="book a table"), AIMessage(content="booked")],
    reference="a table is booked",
)

def metric():
    return AgentGoalAccuracyWithReference(llm=JUDGE)

def test_first():
    assert_scores(SAMPLE, metric(), 1.0)
    assert JUDGE.calls == 1

def test_second_reuses_the_session_cache():
    assert_scores(SAMPLE, metric(), 1.0)
    assert JUDGE.calls == 1

def test_answered_from_a_kept_cache_file():
    assert_scores(SAMPLE, metric(), 1.0)
    assert JUDGE.calls == 0

@pytest.mark.asyncio
async def test_async_sync_call():
    assert_scores(SAMPLE, metric(), 1.0)
    assert JUDGE.calls == 1

@pytest.mark.asyncio
async def test_async_awaited():
    result = await aassert_scores(SAMPLE, metric(), {"agent_goal_accuracy_with_reference": 1.0})
    assert result.usage.cached_calls == 1 and JUDGE.calls == 1
"""


def test_judged_metrics_share_one_cache_per_session_under_pytest_asyncio(
    pytester: pytest.Pytester,
) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_judged=JUDGED_TESTS)
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "asyncio", "-k", "not kept")
    result.assert_outcomes(passed=4, deselected=1)


def test_plain_pytest_without_pytest_asyncio(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_judged=JUDGED_TESTS)
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "-p", "no:asyncio", "-k", "not async and not kept"
    )
    result.assert_outcomes(passed=2, deselected=3)


def test_a_named_cache_file_persists_between_sessions(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_judged=JUDGED_TESTS)
    cache = tmp_path / "judge.sqlite"
    first = pytester.runpytest("-p", "no:cacheprovider", f"--turneval-cache={cache}", "-k", "first")
    first.assert_outcomes(passed=1)
    assert cache.is_file()
    # A new session (a fresh judge) is answered from the file: no call made.
    second = pytester.runpytest("-p", "no:cacheprovider", f"--turneval-cache={cache}", "-k", "kept")
    second.assert_outcomes(passed=1)


def test_session_state_combines_results_and_skips_empty_reports(tmp_path: Path) -> None:
    from turneval import evaluate
    from turneval.pytest_plugin import TurnevalSession

    state = TurnevalSession(report_path=tmp_path / "r.html")
    assert state.write_report() is False and not (tmp_path / "r.html").exists()
    state.results += [
        ("t.py::a", evaluate(GOOD, "tool_call_f1")),
        ("t.py::b", evaluate([HALF, GOOD], ["tool_call_accuracy"])),
        ("t.py::c[a case [x]]", evaluate(GOOD, "tool_call_f1")),
    ]
    combined = state.combined()
    assert combined.metric_names == ["tool_call_f1", "tool_call_accuracy"]
    assert [row.index for row in combined.rows] == [0, 1, 2, 3]
    ids = [row.sample.metadata["id"] for row in combined.rows if row.sample and row.sample.metadata]
    # one test scoring two samples: each row says which (the sample's id, then the test)
    # (both open with "please help": their positions tell them apart)
    assert ids[1:3] == ["please help #1 · t.py::b", "please help #2 · t.py::b"]
    assert [ids[0], ids[3]] == ["t.py::a", "a case [x] · t.py::c"]
    assert state.write_report() and (tmp_path / "r.html").stat().st_size > 1000
    cache = state.judge_cache()
    assert state.judge_cache() is cache and cache.path.name == "judge-cache.sqlite"
    state.close()
    assert not cache.path.exists()  # the session's temporary cache is removed

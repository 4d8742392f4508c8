"""The run pipeline's core: RunOptions (one place validates) and the batch core."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import pytest

from turneval.errors import ConfigError
from turneval.judge import JudgeRun, SQLiteCache
from turneval.metrics import ToolCallF1
from turneval.pipeline import RunOptions, ascore_batch, score_batch

from ._builders import call, conversation

if TYPE_CHECKING:
    from turneval import MultiTurnSample
    from turneval.metrics import Metric

# F1 of calls [a] against reference [a, b]: precision 1/1, recall 1/2, F1 = 2*1*0.5/1.5 = 2/3.
HALF = conversation([call("a")], reference=[call("a"), call("b")])
FULL = conversation([call("a")], reference=[call("a")])


def test_run_options_defaults_are_one_set() -> None:
    options = RunOptions()
    assert (options.max_concurrency, options.max_llm_concurrency) == (16, 8)
    assert options.timeout is None and options.agent_timeout is None
    assert options.fail_on_error is False and options.details is True
    assert options.show_progress is None and options.cache is None and options.on_row is None


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_concurrency": 0}, "max_concurrency: Input should be greater than or equal to 1"),
        ({"max_llm_concurrency": -1}, "max_llm_concurrency: Input should be greater"),
        ({"timeout": 0}, "timeout: Input should be greater than 0"),
        ({"fail_on_error": 1.0}, r"fail_on_error: .*fraction in \[0, 1\), got 1.0"),
        ({"fail_on_error": "yes"}, "fail_on_error: .*got 'yes'"),
        ({"on_row": 3}, "on_row: Input should be callable"),
        ({"cache": 3}, "cache: .*SQLiteCache or the path of one, got int"),
        ({"concurrency": 4}, "concurrency: Extra inputs are not permitted"),
    ],
)
def test_run_options_reject_bad_values_naming_the_option(
    options: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        RunOptions(**options)


def test_run_options_are_frozen_and_replace_validates() -> None:
    options = RunOptions(max_concurrency=2)
    with pytest.raises(Exception, match="frozen"):
        options.max_concurrency = 3  # type: ignore[misc]
    assert options.replace(timeout=1.5).timeout == 1.5
    assert options.replace(timeout=1.5).max_concurrency == 2
    with pytest.raises(ConfigError, match="timeout"):
        options.replace(timeout=-1)


def test_cache_path_is_opened_once_and_a_corrupt_one_fails_first(tmp_path: Path) -> None:
    options = RunOptions(cache=tmp_path / "judge.sqlite")
    assert isinstance(options.cache, SQLiteCache)
    assert options.cache.path == tmp_path / "judge.sqlite"
    same = SQLiteCache(tmp_path / "other.sqlite")
    assert RunOptions(cache=same).cache is same
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(b"not a database at all" * 100)
    with pytest.raises(ConfigError, match="bad.sqlite is not a readable SQLite database"):
        RunOptions(cache=str(bad))


def test_fail_on_error_rule() -> None:
    assert RunOptions(fail_on_error=True).should_abort(1, 1)
    assert not RunOptions(fail_on_error=True).should_abort(0, 5)
    assert not RunOptions().should_abort(5, 5)
    fraction = RunOptions(fail_on_error=0.1)
    assert not fraction.should_abort(5, 19)  # checked from 20 rows on
    assert fraction.should_abort(3, 20) and not fraction.should_abort(2, 20)  # 3/20 > 0.1


async def test_a_batch_of_mixed_items_gives_one_row_each_in_order() -> None:
    items: list[object] = [
        FULL,
        HALF.model_dump(mode="json"),
        HALF.model_dump_json(),
        FULL.model_dump_json().encode(),
        {"user_input": [{"type": "human", "content": "hi"}], "reference_tool_calls": 3},
        '{"user_input": ',
        b'{"user_input": "caf\xe9"}',
        42,
    ]
    rows = await ascore_batch(items, [ToolCallF1()], options=RunOptions(), start_index=100)  # type: ignore[arg-type]
    assert [row.index for row in rows] == list(range(100, 108))
    assert [row.score("tool_call_f1") for row in rows[:4]] == [1.0, 2 / 3, 2 / 3, 1.0]
    assert [row.line for row in rows] == [None, None, 103, 104, None, 106, 107, None]
    errors = [str(row.failures["tool_call_f1"]) for row in rows[4:]]
    assert errors[0].startswith("InvalidSampleError: row 104 (MultiTurnSample)")
    assert "reference_tool_calls" in errors[0]
    assert errors[1].startswith("InvalidSampleError: line 106: not valid JSON")
    assert errors[2] == (
        "InvalidSampleError: line 107: not valid UTF-8 (byte 0xe9 at byte offset 19)"
    )
    assert errors[3] == (
        "InvalidSampleError: item 107: expected a sample, a dict or a JSON line, got int"
    )
    assert all(row.sample is None for row in rows[4:])


async def test_a_batch_records_metric_failures_and_timeouts_on_rows() -> None:
    from turneval.metrics import CustomMetric

    async def slow(instance: dict[str, object]) -> float:
        await anyio.sleep(5)
        return 1.0

    metrics: list[Metric] = [ToolCallF1(), CustomMetric("slow", slow)]
    no_reference = conversation([call("a")])
    rows = await ascore_batch(
        [FULL, no_reference], metrics, options=RunOptions(timeout=0.05, details=False)
    )
    assert rows[0].score("tool_call_f1") == 1.0 and rows[0].results["tool_call_f1"].details == {}
    assert rows[0].failures["slow"].error_type == "TimeoutError"
    assert rows[1].failures["tool_call_f1"].error_type == "InvalidSampleError"
    # Listed first, the slow metric keeps no other from finishing in time; results keep the
    # metrics' order.
    first = await ascore_batch([FULL], metrics[::-1], options=RunOptions(timeout=0.05))
    assert first[0].score("tool_call_f1") == 1.0
    assert first[0].failures["slow"].error_type == "TimeoutError"


def test_score_batch_is_the_sync_form_and_reports_usage_through_its_judge() -> None:
    judge = JudgeRun()
    rows = score_batch([HALF], [ToolCallF1()], options=RunOptions(), judge=judge)
    assert rows[0].score("tool_call_f1") == 2 / 3 and judge.usage.calls == 0


# -- the front ends take the same options -----------------------------------------------------


async def _answer(messages: list[object]) -> list[object]:
    from turneval import AIMessage, ToolMessage

    return [
        AIMessage(content="", tool_calls=[call("a")]),
        ToolMessage(content="ok"),
        AIMessage(content="done"),
    ]


def _scripts(n: int, reference: list[str]) -> list[MultiTurnSample]:
    from turneval import HumanMessage, MultiTurnSample

    return [
        MultiTurnSample(
            user_input=[HumanMessage(content="go")],
            reference_tool_calls=[call(name) for name in reference] or None,
        )
        for _ in range(n)
    ]


def test_eval_task_takes_fail_on_error_on_row_and_a_scoring_timeout() -> None:
    from turneval import EvaluationAbortedError
    from turneval.agents import EvalTask
    from turneval.metrics import CustomMetric

    task = EvalTask(_scripts(2, ["a", "b"]), [ToolCallF1()])
    assert task.options.max_concurrency == 16  # one default for every run (was 8 here)
    seen: list[int] = []
    result = task.evaluate(_answer, on_row=lambda row: seen.append(row.index))
    assert sorted(seen) == [0, 1] and result.scores("tool_call_f1") == [2 / 3, 2 / 3]
    assert result.rows[0].agent is not None and result.rows[0].agent.steps == 2
    assert result.records()[0]["latency_in_seconds"] == result.rows[0].agent.latency_s
    no_reference = EvalTask(_scripts(30, []), [ToolCallF1()], max_concurrency=1)
    with pytest.raises(EvaluationAbortedError, match="1 of 1 rows failed") as info:
        no_reference.evaluate(_answer, fail_on_error=True)
    assert info.value.result is not None and len(info.value.result.rows) == 1

    async def slow(instance: dict[str, object]) -> float:
        await anyio.sleep(5)
        return 1.0

    timed = EvalTask(_scripts(1, ["a"]), [ToolCallF1(), CustomMetric("slow", slow)])
    row = timed.evaluate(_answer, timeout=0.05).rows[0]
    assert row.score("tool_call_f1") == 1.0 and row.failures["slow"].error_type == "TimeoutError"
    assert row.agent is not None and row.agent.error is None  # the agent ran; scoring timed out
    with pytest.raises(ConfigError, match="timeout: Input should be greater than 0"):
        timed.evaluate(_answer, timeout=0)


def test_evaluate_jsonl_takes_a_cache_object_or_a_path(tmp_path: Path) -> None:
    from turneval.stream import evaluate_jsonl

    data = tmp_path / "data.jsonl"
    data.write_text(FULL.model_dump_json() + "\n")
    cache = SQLiteCache(tmp_path / "c.sqlite")
    by_object = evaluate_jsonl(data, ["tool_call_f1"], tmp_path / "o1", cache=cache)
    by_path = evaluate_jsonl(data, ["tool_call_f1"], tmp_path / "o2", cache=tmp_path / "c.sqlite")
    assert by_object.summaries["tool_call_f1"].mean == by_path.summaries["tool_call_f1"].mean == 1
    assert len(cache) == 0  # the caller's cache stays open (rule-based: nothing stored)
    with pytest.raises(ConfigError, match="max_concurrency"):
        evaluate_jsonl(data, ["tool_call_f1"], tmp_path / "o3", max_concurrency=0)


def test_eval_task_takes_the_agent_timeout_and_its_old_name_with_a_warning() -> None:
    from turneval.agents import EvalTask

    task = EvalTask(_scripts(1, ["a"]), [ToolCallF1()], agent_timeout=2.5)
    assert task.agent_timeout == task.options.agent_timeout == 2.5
    assert task.options.timeout is None  # the scoring limit is evaluate()'s
    with pytest.warns(
        DeprecationWarning, match=r"EvalTask\(timeout=\.\.\.\) is deprecated: pass agent_timeout="
    ):
        old = EvalTask(_scripts(1, ["a"]), [ToolCallF1()], timeout=2.5)  # type: ignore[call-arg]
    assert old.options.agent_timeout == 2.5 and old.options.timeout is None
    with pytest.warns(
        DeprecationWarning, match=r"EvalTask.timeout is deprecated: read EvalTask.agent_timeout"
    ):
        assert old.timeout == 2.5
    with pytest.raises(TypeError, match="both timeout= .* and agent_timeout="):
        EvalTask(_scripts(1, ["a"]), [ToolCallF1()], timeout=1, agent_timeout=1)  # type: ignore[call-arg]
    with pytest.raises(ConfigError, match="agent_timeout: Input should be greater than 0"):
        EvalTask(_scripts(1, ["a"]), [ToolCallF1()], agent_timeout=-1)


def test_a_rate_limit_becomes_one_limiter_shared_by_every_copy_of_the_options() -> None:
    from turneval.ratelimit import RateLimit, RateLimiter

    options = RunOptions(rate_limit=RateLimit(requests_per_minute=60, max_in_flight=2))
    assert isinstance(options.rate_limit, RateLimiter) and options.rate_limit.window == 2
    copy = options.replace(timeout=1.0)
    assert copy.rate_limit is options.rate_limit  # one quota for the judge, user and chunks
    assert options.judge_run().rate_limiter is options.rate_limit
    with pytest.raises(ConfigError, match="rate_limit must be a RateLimit"):
        RunOptions(rate_limit=60)

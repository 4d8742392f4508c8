import math
from typing import Any

import anyio
import pytest

from turneval import EvaluationAbortedError, Prices, evaluate
from turneval.judge import Usage
from turneval.metrics import CustomMetric, ToolCallF1
from turneval.results import SampleResult

from ._builders import call, conversation


def slow_metric(seconds: float) -> CustomMetric:
    async def wait(instance: dict[str, Any]) -> float:
        await anyio.sleep(seconds)
        return 1.0

    return CustomMetric("slow", wait)


def test_per_sample_timeout_records_a_failure_and_keeps_other_metrics() -> None:
    samples = [conversation([call("a")], reference=[call("a")]) for _ in range(2)]
    result = evaluate(samples, ["tool_call_f1", slow_metric(5.0)], timeout=0.05)
    assert result.scores("tool_call_f1") == [1.0, 1.0]
    failure = result.rows[0].failures["slow"]
    assert failure.error_type == "TimeoutError" and "0.05s timeout" in failure.message
    assert math.isnan(result.scores("slow")[1])


def test_fail_on_error_true_aborts_with_the_partial_result() -> None:
    samples = [conversation([call("a")], reference=[call("a")]), conversation([call("a")])] * 5
    with pytest.raises(EvaluationAbortedError, match="1 of .* rows failed; last: row 1") as info:
        evaluate(samples, [ToolCallF1()], fail_on_error=True, max_concurrency=1)
    partial = info.value.result
    assert partial is not None and 2 <= len(partial.rows) < len(samples)


def test_fail_on_error_fraction() -> None:
    good = conversation([call("a")], reference=[call("a")])
    bad = conversation([call("a")])
    # 10% failing rows: under a 25% bar the run completes, over a 5% bar it aborts.
    samples = ([good] * 9 + [bad]) * 3
    assert len(evaluate(samples, [ToolCallF1()], fail_on_error=0.25, max_concurrency=1)) == 30
    with pytest.raises(EvaluationAbortedError, match="fail_on_error=0.05"):
        evaluate(samples, [ToolCallF1()], fail_on_error=0.05, max_concurrency=1)
    with pytest.raises(ValueError, match="fraction"):
        evaluate(samples, [ToolCallF1()], fail_on_error=1.5)


def test_on_row_details_and_progress(capsys: pytest.CaptureFixture[str]) -> None:
    seen: list[int] = []

    def record(row: SampleResult) -> None:
        seen.append(row.index)

    samples = [conversation([call("a")], reference=[call("a")]) for _ in range(3)]
    result = evaluate(samples, [ToolCallF1()], on_row=record, details=False, show_progress=True)
    assert sorted(seen) == [0, 1, 2]
    assert result.rows[0].results["tool_call_f1"].details == {}
    assert (
        result.rows[0].results["tool_call_f1"].reason
        == "precision=1/1=1.000, recall=1/1=1.000, F1=1.000"
    )
    assert "3/3" in capsys.readouterr().err  # tqdm wrote its bar to stderr


def test_summary_has_confidence_intervals_and_cost() -> None:
    samples = [
        conversation([call("a")], reference=[call("a")]),
        conversation([call("b")], reference=[call("a")]),
    ] * 5
    result = evaluate(samples, [ToolCallF1()])
    summary = result.summary()["tool_call_f1"]
    assert (
        summary.mean == 0.5
        and summary.ci_low is not None
        and summary.ci_high is not None
        and summary.ci_low < 0.5 < summary.ci_high
    )
    result.usage = Usage(input_tokens=2_000_000, output_tokens=500_000, calls=10)
    assert result.cost(Prices(2.5, 10.0)) == 2 * 2.5 + 0.5 * 10.0
    assert result.cost({"input": 1.0, "output": 0.0}) == 2.0

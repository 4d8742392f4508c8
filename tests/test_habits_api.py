"""The places users meet the library first: argument shapes, CSV, LangChain input, tables."""

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from langchain_core import messages as lc

from turneval import (
    AIMessage,
    ConfigError,
    EvaluationDataset,
    HumanMessage,
    InvalidSampleError,
    MultiTurnSample,
    SingleTurnSample,
    ToolCall,
    ToolMessage,
    evaluate,
)
from turneval.aggregate import SummaryTable, summary_document
from turneval.messages import from_langchain

from ._builders import as_type, call, conversation


def lc_conversation() -> list[lc.BaseMessage]:
    return [
        lc.HumanMessage(content="weather in Paris?", id="h1"),
        lc.AIMessage(
            content="",
            tool_calls=[{"name": "weather", "args": {"city": "Paris"}, "id": "c1"}],
        ),
        lc.ToolMessage(content="sunny", tool_call_id="c1"),
        lc.AIMessage(content="It is sunny."),
    ]


def test_a_bare_metric_name_and_a_single_sample_are_accepted() -> None:
    sample = conversation([call("a"), call("x")], reference=[call("a")])
    result = evaluate(sample, "tool_call_f1")
    assert result.metric_names == ["tool_call_f1"]
    assert result["tool_call_f1"] == [2 * 0.5 * 1 / 1.5]  # precision 1/2, recall 1/1


def test_argument_shape_errors_say_what_was_expected() -> None:
    with pytest.raises(InvalidSampleError, match="expected an EvaluationDataset, a sample or a"):
        evaluate("data.jsonl", ["tool_call_f1"])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="metrics must be a list of Metric objects or built-in"):
        evaluate([conversation([call("a")])], 3)  # type: ignore[arg-type]


def test_dataset_csv_round_trip(tmp_path: Path) -> None:
    multi = EvaluationDataset(
        [
            MultiTurnSample(
                user_input=[
                    HumanMessage(content='say "hi", then [stop]'),
                    AIMessage(content="", tool_calls=[ToolCall(name="t", args={"x": [1, 2]})]),
                    ToolMessage(content="ok, done"),
                ],
                reference_tool_calls=[ToolCall(name="t", args={"x": [1, 2]})],
                reference_topics=["weather"],
                metadata={"id": "a,b"},
            ),
            conversation([call("b")]),
        ]
    )
    multi.to_csv(tmp_path / "multi.csv")
    assert EvaluationDataset.from_csv(tmp_path / "multi.csv").samples == multi.samples
    # pandas' own to_csv writes Python reprs of the lists; they read back too.
    multi.to_pandas().to_csv(tmp_path / "pandas.csv")  # with pandas' index column
    assert EvaluationDataset.from_csv(tmp_path / "pandas.csv").samples == multi.samples
    single = EvaluationDataset(
        [
            SingleTurnSample(user_input="[1] is a list?", response="yes", retrieved_contexts=["c"]),
            SingleTurnSample(user_input="q", reference="r"),
        ]
    )
    single.to_csv(tmp_path / "single.csv")
    assert EvaluationDataset.from_csv(tmp_path / "single.csv").samples == single.samples


def test_multi_turn_sample_accepts_langchain_messages_losslessly() -> None:
    messages = lc_conversation()
    sample = MultiTurnSample(user_input=messages, reference="sunny")
    assert sample.user_input == from_langchain(messages)
    assert sample.tool_calls == [ToolCall(name="weather", args={"city": "Paris"}, id="c1")]
    assert sample.user_input[0].metadata == {"id": "h1"}
    mixed = MultiTurnSample(user_input=[HumanMessage(content="weather in Paris?"), *messages[1:]])
    assert [m.type for m in mixed.user_input] == ["human", "ai", "tool", "ai"]
    assert mixed.user_input[2].content == "sunny"


def test_ragas_convert_to_ragas_messages_drops_metadata_unless_asked() -> None:
    from turneval.integrations.langgraph import convert_to_ragas_messages

    plain = convert_to_ragas_messages(lc_conversation())
    assert [m.metadata for m in plain] == [None] * 4
    assert as_type(AIMessage, plain[1]).tool_calls == [
        ToolCall(name="weather", args={"city": "Paris"}, id="c1")
    ]
    kept = convert_to_ragas_messages(lc_conversation(), metadata=True)
    assert kept[0].metadata == {"id": "h1"}


def test_result_item_and_to_pandas_have_ragas_columns() -> None:
    data = EvaluationDataset(
        [
            conversation([call("a")], reference=[call("a")]),
            conversation([call("b")]),  # no reference: fails
        ]
    )
    result = evaluate(data, ["tool_call_accuracy"])
    first, second = result["tool_call_accuracy"]
    assert first == 1.0 and math.isnan(second)
    with pytest.raises(KeyError, match="no metric named 'nope'"):
        result["nope"]
    frame = result.to_pandas()
    assert list(frame.columns)[:3] == ["index", "user_input", "reference_tool_calls"]
    assert frame["user_input"][0][0] == {"content": "please help", "type": "human"}
    assert frame["reference_tool_calls"][0] == [{"name": "a", "args": {}}]
    assert frame["reference_tool_calls"][1] is None


def test_summary_prints_as_a_table_and_renders_in_notebooks() -> None:
    data = EvaluationDataset(
        [
            conversation([call("a")], reference=[call("a")]),
            conversation([call("b")], reference=[call("a")]),
            conversation([call("c")]),
        ]
    )
    result = evaluate(data, ["tool_call_f1"])
    table = result.summary()
    assert isinstance(table, SummaryTable) and table["tool_call_f1"].mean == 0.5
    lines = str(table).splitlines()
    assert lines[0].split() == ["metric", "mean", "95%", "CI", "std", "scored", "failed"]
    cells = lines[1].split()
    assert cells[:2] == ["tool_call_f1", "0.5000"]
    assert cells[-3:] == [f"{math.sqrt(0.5):.4f}", "2", "1"]  # std of (1, 0), ddof=1
    html = table._repr_html_()
    assert html.startswith("<table>") and "<td>tool_call_f1</td><td>0.5000</td>" in html
    frame = result.summary_frame()
    assert isinstance(frame, pd.DataFrame) and frame.loc["tool_call_f1", "count"] == 2
    assert frame.loc["tool_call_f1", "failed"] == 1
    document = summary_document(len(result), table, result.usage)
    assert list(document) == ["samples", "bad_lines", "failed_rows", "metrics", "usage"]
    assert document["samples"] == 3 and document["metrics"]["tool_call_f1"]["mean"] == 0.5
    json.dumps(document)
    plain = json.loads(json.dumps(table.to_dict()))  # the table itself, as plain JSON
    assert plain["tool_call_f1"]["mean"] == 0.5 and plain["tool_call_f1"]["failed"] == 1
    one = evaluate(data[:1], ["tool_call_f1"]).summary_frame()  # one row: no std, no CI
    assert one["std"].dtype == float and bool(one["std"].isna().all())
    assert bool(one["ci_low"].isna().all()) and one.loc["tool_call_f1", "mean"] == 1


def test_rouge_takes_ragas_mode_keyword() -> None:
    from turneval.metrics._rouge_score import RougeScore

    sample = SingleTurnSample(reference="the cat sat", response="the cat sat on the mat")
    # LCS = 3 tokens: precision 3/6, recall 3/3, F = 2PR/(P+R) = 2/3.
    assert RougeScore(mode="precision").score(sample).value == 0.5
    assert RougeScore(mode="recall").score(sample).value == 1.0
    assert RougeScore().score(sample).value == pytest.approx(2 / 3)
    result = evaluate([sample], ["rouge", "bleu"])
    assert result["rouge_score"] == result["rouge"] and result["bleu_score"] == result["bleu"]
    by_ragas_names = evaluate([sample], ["rouge_score", "bleu_score"])  # as ragas users write
    assert by_ragas_names.metric_names == ["rouge", "bleu"]
    assert by_ragas_names["rouge"] == result["rouge"] and by_ragas_names["bleu"] == result["bleu"]
    with pytest.raises(
        ConfigError,
        match="'agent_goal_accuracy' is ragas' name for "
        "agent_goal_accuracy_with_reference and agent_goal_accuracy_without",
    ):
        evaluate([sample], ["agent_goal_accuracy"])

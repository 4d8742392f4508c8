import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from turneval import (
    AIMessage,
    EvaluationDataset,
    HumanMessage,
    InvalidSampleError,
    MultiTurnSample,
    SingleTurnSample,
    ToolCall,
)
from turneval.engines import Local
from turneval.stream import evaluate_jsonl

from ._builders import call, conversation

# The Vertex AI agent-evaluation seed dataset (two examples).
VERTEX_ROWS = [
    {
        "predicted_trajectory": [
            {
                "tool_name": "set_device_info",
                "tool_input": {"device_id": "device_3", "updates": {"status": "OFF"}},
            }
        ],
        "reference_trajectory": [
            {
                "tool_name": "set_device_info",
                "tool_input": {"device_id": "device_2", "updates": {"status": "OFF"}},
            }
        ],
    },
    {
        "predicted_trajectory": [
            {"tool_name": "get_user_preferences", "tool_input": {"user_id": "user_z"}},
            {
                "tool_name": "set_temperature",
                "tool_input": {"location": "Living Room", "temperature": 23},
            },
        ],
        "reference_trajectory": [
            {"tool_name": "get_user_preferences", "tool_input": {"user_id": "user_y"}},
            {
                "tool_name": "set_temperature",
                "tool_input": {"location": "Living Room", "temperature": 23},
            },
        ],
    },
]


def test_list_round_trip_and_container_protocol() -> None:
    samples = [
        conversation([call("a", x=1)], reference=[call("a", x=1)]),
        conversation([call("b", y=[1, {"z": None}])], reference=[]),
    ]
    dataset = EvaluationDataset(samples)
    assert len(dataset) == 2 and list(dataset) == samples and dataset[1] is samples[1]
    assert isinstance(dataset[0:1], EvaluationDataset) and len(dataset[0:1]) == 1
    assert dataset.is_multi_turn
    again = EvaluationDataset.from_list(dataset.to_list())
    assert again.samples == samples


def test_mixing_sample_types_names_the_index() -> None:
    with pytest.raises(
        InvalidSampleError, match="sample 1: a dataset holds one sample type"
    ) as info:
        EvaluationDataset([SingleTurnSample(response="a"), conversation([])])
    assert info.value.sample_id == 1


def test_from_list_error_names_row_and_field() -> None:
    rows: list[dict[str, Any]] = [
        {"user_input": [{"type": "human", "content": "q"}]},
        {"user_input": [{"type": "human", "content": "q"}], "reference_tool_calls": [{"args": {}}]},
    ]
    with pytest.raises(
        InvalidSampleError,
        match=r"row 1 \(MultiTurnSample\): reference_tool_calls\.0\.name: Field required",
    ) as info:
        EvaluationDataset.from_list(rows)
    assert info.value.sample_id == 1 and info.value.field == "reference_tool_calls"


def test_a_frame_or_dicts_given_for_samples_name_the_reader_to_use() -> None:
    rows: list[Any] = [{"user_input": "q", "response": "a"}]  # not samples: what users try
    with pytest.raises(InvalidSampleError, match=r"got str \(a DataFrame: .*from_pandas\(frame\)"):
        EvaluationDataset.coerce(pd.DataFrame(rows))
    with pytest.raises(InvalidSampleError, match=r"got dict \(dicts: .*from_list\(rows\)\)"):
        EvaluationDataset.coerce(rows)


def test_an_ai_message_with_null_content_reads_as_empty_text(tmp_path: Path) -> None:
    # OpenAI gives an assistant message that only calls tools "content": null.
    messages: list[dict[str, Any]] = [
        {"type": "human", "content": "book it"},
        {"type": "ai", "content": None, "tool_calls": [{"name": "book", "args": {}}]},
    ]
    row = {"user_input": messages, "reference_tool_calls": [{"name": "book", "args": {}}]}
    sample = EvaluationDataset.from_list([row])[0]
    assert isinstance(sample, MultiTurnSample)
    assert sample.user_input[1] == AIMessage(content="", tool_calls=[ToolCall(name="book")])
    assert messages[1]["content"] is None  # the caller's row is left as it was
    path = tmp_path / "data.jsonl"
    path.write_text(json.dumps(row) + "\n")
    result = evaluate_jsonl(path, ["tool_call_f1"], tmp_path / "out", engine=Local(workers=1))
    assert result.failed_rows == 0 and list(result.values["tool_call_f1"]) == [1.0]
    messages[0]["content"] = None  # a human turn must have text: still an error
    with pytest.raises(InvalidSampleError, match=r"user_input\.0\.human\.content"):
        EvaluationDataset.from_list([row])


def test_a_conversation_without_its_messages_is_blamed_on_user_input() -> None:
    # Only conversations have reference calls: the missing messages are the problem, not them.
    rows: list[dict[str, Any]] = [
        {"reference_tool_calls": []},
        {"user_input": 3, "reference_topics": ["x"]},
    ]
    for row in rows:
        with pytest.raises(
            InvalidSampleError, match=r"row 0 \(MultiTurnSample\): user_input"
        ) as info:
            EvaluationDataset.from_list([row])
        assert info.value.field == "user_input"
    with pytest.raises(InvalidSampleError, match=r"\(SingleTurnSample\): reference_topics"):
        EvaluationDataset.from_list([{"user_input": "a question", "reference_topics": ["x"]}])


def test_jsonl_lines_the_command_line_reads_are_read_or_named_here_too(tmp_path: Path) -> None:
    sample = conversation([call("a")], reference=[call("a")])
    good = sample.model_dump_json(exclude_none=True).encode()
    path = tmp_path / "data.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + good + b"\r\n\n" + good + b"\n")  # BOM, CRLF, blank
    assert EvaluationDataset.from_jsonl(path).samples == [sample, sample]
    cases = [
        (b"\xe9t\xe9", r"line 3 is not valid UTF-8 \(byte 0xe9 at byte offset 0\)"),
        (b"[" * 100_000, r"line 3 holds JSON nested too deeply to parse"),
        # a torn line: the column is the end of that line, not the start of the next
        (good[:-1], rf"line 3 is not valid JSON \(Expecting ',' delimiter, column {len(good)}\)"),
    ]
    for bad, message in cases:
        path.write_bytes(good + b"\n\n" + bad + b"\n" + good + b"\n")
        with pytest.raises(InvalidSampleError, match=message) as info:
            EvaluationDataset.from_jsonl(path)
        assert info.value.sample_id == "line 3"


def test_a_csv_line_that_is_not_utf8_is_named_with_its_file(tmp_path: Path) -> None:
    dataset = EvaluationDataset(
        [SingleTurnSample(user_input=f"q{n}", response=f"r{n}") for n in range(300)]
    )
    path = tmp_path / "data.csv"
    dataset.to_csv(path)
    assert EvaluationDataset.from_csv(path).samples == dataset.samples
    lines = path.read_bytes().splitlines(keepends=True)
    lines[200] = lines[200].replace(b"r199", b"r1\xe99")  # line 201: the 200th row
    path.write_bytes(b"".join(lines))
    offset = len(b"q199,r1")  # the bad byte's place on its line
    message = rf"{path}: line 201 is not valid UTF-8 \(byte 0xe9 at byte offset {offset}\)"
    with pytest.raises(InvalidSampleError, match=message) as info:
        EvaluationDataset.from_csv(path)
    assert info.value.sample_id == "line 201"


def test_jsonl_round_trip_and_bad_line_number(tmp_path: Path) -> None:
    dataset = EvaluationDataset([conversation([call("a", n=1.5)], reference=[call("a", n=1.5)])])
    path = tmp_path / "data.jsonl"
    dataset.to_jsonl(path)
    assert EvaluationDataset.from_jsonl(path).samples == dataset.samples
    good = path.read_text()
    path.write_text(good + "\n" + "{not json}\n")
    with pytest.raises(InvalidSampleError, match=r"line 3 is not valid JSON"):
        EvaluationDataset.from_jsonl(path)
    path.write_text(good + json.dumps({"user_input": [{"type": "ai", "content": 3}]}) + "\n")
    with pytest.raises(InvalidSampleError, match=r"row line 2 .*user_input\.0\.ai\.content"):
        EvaluationDataset.from_jsonl(path)


def test_pandas_round_trip() -> None:
    dataset = EvaluationDataset(
        [
            SingleTurnSample(user_input="q1", response="r1", reference="x"),
            SingleTurnSample(user_input="q2", response="r2", retrieved_contexts=["c1", "c2"]),
        ]
    )
    frame = dataset.to_pandas()
    assert list(frame["response"]) == ["r1", "r2"]
    assert EvaluationDataset.from_pandas(frame).samples == dataset.samples
    multi = EvaluationDataset([conversation([call("a", k="v")], reference=[call("a", k="v")])])
    assert EvaluationDataset.from_pandas(multi.to_pandas()).samples == multi.samples


def test_from_vertex_seed_rows() -> None:
    dataset = EvaluationDataset.from_vertex(VERTEX_ROWS)
    first = dataset[0]
    assert isinstance(first, MultiTurnSample)
    assert first.user_input == [
        AIMessage(
            tool_calls=[
                ToolCall(
                    name="set_device_info",
                    args={"device_id": "device_3", "updates": {"status": "OFF"}},
                )
            ]
        )
    ]
    assert first.reference_tool_calls == [
        ToolCall(
            name="set_device_info", args={"device_id": "device_2", "updates": {"status": "OFF"}}
        )
    ]
    assert EvaluationDataset.from_vertex(pd.DataFrame(VERTEX_ROWS)).samples == dataset.samples


def test_from_vertex_optional_keys() -> None:
    dataset = EvaluationDataset.from_vertex(
        [
            {
                "prompt": "turn it off",
                "response": "Done.",
                "reference": "device off",
                "predicted_trajectory": json.dumps([{"tool_name": "off"}]),
            },
            {"response": "Hello"},
        ]
    )
    first, second = dataset
    assert isinstance(first, MultiTurnSample) and isinstance(second, MultiTurnSample)
    assert first.user_input == [
        HumanMessage(content="turn it off"),
        AIMessage(tool_calls=[ToolCall(name="off", args={})]),
        AIMessage(content="Done."),
    ]
    assert first.reference == "device off" and first.reference_tool_calls is None
    assert second.user_input == [AIMessage(content="Hello")]


def test_from_vertex_errors_name_the_row() -> None:
    with pytest.raises(InvalidSampleError, match="row 1: yields no message"):
        EvaluationDataset.from_vertex([{"prompt": "x"}, {"reference": "only"}])
    with pytest.raises(
        InvalidSampleError, match=r"row 0: predicted_trajectory\[0\] must be an object"
    ):
        EvaluationDataset.from_vertex([{"predicted_trajectory": [{"name": "f"}]}])
    with pytest.raises(
        InvalidSampleError, match="row 0: reference_trajectory is a string but not valid JSON"
    ):
        EvaluationDataset.from_vertex([{"prompt": "p", "reference_trajectory": "[{"}])

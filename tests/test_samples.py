import pytest
from pydantic import ValidationError

from turneval import (
    AIMessage,
    HumanMessage,
    MultiTurnSample,
    SingleTurnSample,
    SystemMessage,
    ToolCall,
    ToolMessage,
)


def test_valid_conversation_and_predicted_calls_in_order() -> None:
    sample = MultiTurnSample(
        user_input=[
            SystemMessage(content="sys"),
            HumanMessage(content="q"),
            AIMessage(tool_calls=[ToolCall(name="a"), ToolCall(name="b")]),
            ToolMessage(content="ra"),
            ToolMessage(content="rb"),
            AIMessage(content="more", tool_calls=[ToolCall(name="c")]),
            ToolMessage(content="rc"),
            AIMessage(content="answer"),
        ]
    )
    assert [c.name for c in sample.tool_calls] == ["a", "b", "c"]
    assert sample.pretty_repr().splitlines()[0] == "System: sys"


def test_empty_conversation_is_rejected() -> None:
    with pytest.raises(ValidationError, match="user_input must hold at least one message"):
        MultiTurnSample(user_input=[])


def test_system_message_only_first() -> None:
    with pytest.raises(ValidationError, match=r"user_input\[1\]: a SystemMessage is only allowed"):
        MultiTurnSample(user_input=[HumanMessage(content="q"), SystemMessage(content="s")])


def test_orphan_tool_message_names_its_index() -> None:
    with pytest.raises(ValidationError, match=r"user_input\[1\]: ToolMessage must follow"):
        MultiTurnSample(user_input=[HumanMessage(content="q"), ToolMessage(content="r")])
    # An AIMessage without calls does not open a tool result either.
    with pytest.raises(ValidationError, match=r"user_input\[2\]"):
        MultiTurnSample(
            user_input=[HumanMessage(content="q"), AIMessage(content="a"), ToolMessage(content="r")]
        )


def test_tool_call_id_must_answer_a_preceding_call() -> None:
    messages = [
        HumanMessage(content="q"),
        AIMessage(tool_calls=[ToolCall(name="a", id="c1")]),
        ToolMessage(content="r", tool_call_id="c9"),
    ]
    with pytest.raises(ValidationError, match=r"user_input\[2\].*'c9'.*'c1'"):
        MultiTurnSample(user_input=messages)
    messages[2] = ToolMessage(content="r", tool_call_id="c1")
    rebuilt = MultiTurnSample(user_input=messages).user_input[2]
    assert isinstance(rebuilt, ToolMessage) and rebuilt.tool_call_id == "c1"


def test_messages_from_dicts_and_extra_fields() -> None:
    sample = MultiTurnSample.model_validate(
        {"user_input": [{"type": "human", "content": "q"}], "reference_topics": ["science"]}
    )
    assert isinstance(sample.user_input[0], HumanMessage)
    with pytest.raises(ValidationError, match="reference_tool_call\n"):
        MultiTurnSample.model_validate(
            {"user_input": [{"type": "human", "content": "q"}], "reference_tool_call": []}
        )


def test_single_turn_sample_fields() -> None:
    sample = SingleTurnSample(
        user_input="q",
        response="r",
        reference="ref",
        retrieved_contexts=["c"],
        baseline_response="b",
        rubrics={"score1": "bad"},
        metadata={"id": 7},
    )
    assert sample.retrieved_contexts == ["c"] and sample.baseline_response == "b"

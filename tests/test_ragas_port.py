"""ragas' documented examples, ported by renaming ``ragas`` to ``turneval`` and nothing else.

The examples are those of ragas' metric pages (agent metrics: topic adherence, tool call
accuracy and F1, agent goal accuracy; traditional metrics: string similarity, BLEU, ROUGE,
exact match). Only the judge differs: ragas' pages call ``ChatOpenAI(model="gpt-4o")``; here a
scripted chat model answers (no network in tests). Expected values are ragas' documented
outputs, re-derived by hand beside each.
"""

import json
from typing import TYPE_CHECKING

import pytest

from turneval.testing import ScriptedChatModel

if TYPE_CHECKING:
    from tests._openai_stub import OpenAIStub
    from turneval.dataset_schema import MultiTurnSample


def test_tool_call_accuracy_page() -> None:
    import asyncio

    from turneval.dataset_schema import MultiTurnSample
    from turneval.messages import AIMessage, HumanMessage, ToolCall, ToolMessage
    from turneval.metrics import ToolCallAccuracy

    async def evaluate_tool_call_accuracy() -> float:
        sample = [
            HumanMessage(content="What's the weather like in New York right now?"),
            AIMessage(
                content="The current temperature in New York is 75°F and it's partly cloudy.",
                tool_calls=[ToolCall(name="weather_check", args={"location": "New York"})],
            ),
            HumanMessage(content="Can you translate that to Celsius?"),
            AIMessage(
                content="Let me convert that to Celsius for you.",
                tool_calls=[
                    ToolCall(name="temperature_conversion", args={"temperature_fahrenheit": 75})
                ],
            ),
            ToolMessage(content="75°F is approximately 23.9°C."),
            AIMessage(content="75°F is approximately 23.9°C."),
        ]
        sample = MultiTurnSample(
            user_input=sample,
            reference_tool_calls=[
                ToolCall(name="weather_check", args={"location": "New York"}),
                ToolCall(name="temperature_conversion", args={"temperature_fahrenheit": 75}),
            ],
        )
        scorer = ToolCallAccuracy()
        score = await scorer.multi_turn_ascore(sample)
        return score

    # Same names in the same order, every argument equal: 1.0.
    assert asyncio.run(evaluate_tool_call_accuracy()) == 1.0

    from turneval.metrics._string import NonLLMStringSimilarity
    from turneval.metrics._tool_call_accuracy import ToolCallAccuracy as Aliased

    metric = Aliased()
    metric.arg_comparison_metric = NonLLMStringSimilarity()
    assert Aliased is ToolCallAccuracy and metric.arg_comparison_metric == NonLLMStringSimilarity()


async def test_tool_call_f1_page() -> None:
    from turneval.dataset_schema import MultiTurnSample
    from turneval.messages import AIMessage, HumanMessage, ToolCall
    from turneval.metrics import ToolCallF1

    sample = [
        HumanMessage(content="What's the weather like in Paris today?"),
        AIMessage(
            content="Let me check that for you.",
            tool_calls=[ToolCall(name="weather_check", args={"location": "Paris"})],
        ),
        HumanMessage(content="And the UV index?"),
        AIMessage(
            content="Sure, here's the UV index for Paris.",
            tool_calls=[ToolCall(name="uv_index_lookup", args={"location": "Paris"})],
        ),
    ]
    sample = MultiTurnSample(
        user_input=sample,
        reference_tool_calls=[
            ToolCall(name="weather_check", args={"location": "Paris"}),
            ToolCall(name="uv_index_lookup", args={"location": "Paris"}),
        ],
    )
    scorer = ToolCallF1()
    assert await scorer.multi_turn_ascore(sample) == 1.0  # both calls found, none extra

    sample = [
        HumanMessage(content="What's the weather like in Paris today?"),
        AIMessage(
            content="Let me check that for you.",
            tool_calls=[ToolCall(name="weather_check", args={"location": "Paris"})],
        ),
        HumanMessage(content="And the UV index?"),
        AIMessage(
            content="Sure, here's the UV index for Paris.",
            tool_calls=[
                ToolCall(name="uv_index_lookup", args={"location": "Paris"}),
                ToolCall(name="air_quality", args={"location": "Paris"}),  # extra call
            ],
        ),
    ]
    sample = MultiTurnSample(
        user_input=sample,
        reference_tool_calls=[
            ToolCall(name="uv_index_lookup", args={"location": "Paris"}),
            ToolCall(name="weather_check", args={"location": "Paris"}),
        ],
    )
    # precision 2/3, recall 2/2: F1 = 2 * (2/3) * 1 / (2/3 + 1) = 0.8.
    assert await scorer.multi_turn_ascore(sample) == pytest.approx(0.8)


EINSTEIN_TOPICS = json.dumps(
    {
        "topics": [
            {"topic": "Einstein's theory of relativity", "answered": True, "on_topic": True},
            {"topic": "General Theory of Relativity", "answered": True, "on_topic": True},
            {"topic": "chocolate cake recipe", "answered": True, "on_topic": False},
        ]
    }
)


async def test_topic_adherence_page() -> None:
    from turneval.dataset_schema import MultiTurnSample
    from turneval.llms import LangchainLLMWrapper
    from turneval.messages import AIMessage, HumanMessage, ToolCall, ToolMessage
    from turneval.metrics import TopicAdherenceScore

    evaluator_llm = LangchainLLMWrapper(ScriptedChatModel(responses=[EINSTEIN_TOPICS]))
    sample_input_4 = [
        HumanMessage(
            content="Can you provide me with details about Einstein's theory of relativity?"
        ),
        AIMessage(
            content="Sure, let me retrieve the relevant information for you.",
            tool_calls=[
                ToolCall(name="document_search", args={"query": "Einstein's theory of relativity"})
            ],
        ),
        ToolMessage(
            content="Found relevant documents: 1. Relativity: The Special and the General Theory, 2. General Theory of Relativity by A. Einstein."
        ),
        AIMessage(
            content="I found some documents on Einstein's theory of relativity. Which one would you like to know more about: 'Relativity: The Special and the General Theory' or 'General Theory of Relativity by A. Einstein'?"
        ),
        HumanMessage(content="Tell me about the 'General Theory of Relativity'."),
        AIMessage(
            content="Got it! Let me fetch more details from 'General Theory of Relativity by A. Einstein'.",
            tool_calls=[
                ToolCall(
                    name="document_retrieve",
                    args={"document": "General Theory of Relativity by A. Einstein"},
                )
            ],
        ),
        ToolMessage(
            content="The document discusses how gravity affects the fabric of spacetime, describing the relationship between mass and spacetime curvature."
        ),
        AIMessage(
            content="The 'General Theory of Relativity' explains how gravity affects the fabric of spacetime and the relationship between mass and spacetime curvature. Would you like more details or a specific explanation?"
        ),
        HumanMessage(
            content="No, that's perfect. By the way, do you know any good recipes for a chocolate cake?"
        ),
        AIMessage(
            content="Sure! Let me find a simple and delicious recipe for a chocolate cake.",
            tool_calls=[ToolCall(name="recipe_search", args={"query": "chocolate cake recipe"})],
        ),
        ToolMessage(
            content="Here’s a popular recipe for a chocolate cake: Ingredients include flour, sugar, cocoa powder, eggs, milk, and butter. Instructions: Mix dry ingredients, add wet ingredients, and bake at 350°F for 30-35 minutes."
        ),
        AIMessage(
            content="I found a great recipe for chocolate cake! Would you like the full details, or is that summary enough?"
        ),
    ]
    sample = MultiTurnSample(user_input=sample_input_4, reference_topics=["science"])
    scorer = TopicAdherenceScore(llm=evaluator_llm, mode="precision")
    # Three topics answered, two within "science": precision 2/3.
    assert await scorer.multi_turn_ascore(sample) == pytest.approx(2 / 3)
    scorer = TopicAdherenceScore(llm=evaluator_llm, mode="recall")
    assert await scorer.multi_turn_ascore(sample) == 1.0  # no on-topic question refused


def booking(reference: bool) -> "MultiTurnSample":
    from turneval.dataset_schema import MultiTurnSample
    from turneval.messages import AIMessage, HumanMessage, ToolCall, ToolMessage

    return MultiTurnSample(
        user_input=[
            HumanMessage(
                content="Hey, book a table at the nearest best Chinese restaurant for 8:00pm"
            ),
            AIMessage(
                content="Sure, let me find the best options for you.",
                tool_calls=[
                    ToolCall(
                        name="restaurant_search", args={"cuisine": "Chinese", "time": "8:00pm"}
                    )
                ],
            ),
            ToolMessage(content="Found a few options: 1. Golden Dragon, 2. Jade Palace"),
            AIMessage(
                content="I found some great options: Golden Dragon and Jade Palace. Which one would you prefer?"
            ),
            HumanMessage(content="Let's go with Golden Dragon."),
            AIMessage(
                content="Great choice! I'll book a table for 8:00pm at Golden Dragon.",
                tool_calls=[
                    ToolCall(
                        name="restaurant_book", args={"name": "Golden Dragon", "time": "8:00pm"}
                    )
                ],
            ),
            ToolMessage(content="Table booked at Golden Dragon for 8:00pm."),
            AIMessage(content="Your table at Golden Dragon is booked for 8:00pm. Enjoy your meal!"),
            HumanMessage(content="thanks"),
        ],
        reference="Table booked at one of the chinese restaurants at 8 pm" if reference else None,
    )


async def test_agent_goal_accuracy_pages() -> None:
    from turneval.llms import LangchainLLMWrapper
    from turneval.metrics import AgentGoalAccuracyWithoutReference, AgentGoalAccuracyWithReference

    achieved = {
        "user_goal": "book a table at a Chinese restaurant for 8pm",
        "end_state": "a table at Golden Dragon is booked for 8:00pm",
        "reason": "the booking was made as asked",
        "achieved": True,
    }
    evaluator_llm = LangchainLLMWrapper(ScriptedChatModel(responses=[json.dumps(achieved)]))
    scorer = AgentGoalAccuracyWithReference(llm=evaluator_llm)
    assert await scorer.multi_turn_ascore(booking(reference=True)) == 1.0
    scorer = AgentGoalAccuracyWithoutReference(llm=evaluator_llm)
    assert await scorer.multi_turn_ascore(booking(reference=False)) == 1.0


async def test_traditional_metrics_pages() -> None:
    from turneval.dataset_schema import SingleTurnSample
    from turneval.metrics._bleu_score import BleuScore
    from turneval.metrics._rouge_score import RougeScore
    from turneval.metrics._string import DistanceMeasure, ExactMatch, NonLLMStringSimilarity

    sample = SingleTurnSample(
        response="The Eiffel Tower is located in India.",
        reference="The Eiffel Tower is located in Paris.",
    )
    # Levenshtein: "Paris" -> "India" is 4 edits over 37 characters: 1 - 4/37.
    scorer = NonLLMStringSimilarity()
    assert await scorer.single_turn_ascore(sample) == pytest.approx(1 - 4 / 37)
    scorer = NonLLMStringSimilarity(distance_measure=DistanceMeasure.HAMMING)
    assert await scorer.single_turn_ascore(sample) == pytest.approx(1 - 4 / 37)
    # BLEU: n-gram precisions 7/8, 5/7, 4/6, 3/5 (13a splits off the "."), equal lengths:
    # their geometric mean is (1/4) ** (1/4) = 0.7071.
    scorer = BleuScore()
    assert await scorer.single_turn_ascore(sample) == pytest.approx(0.25**0.25)
    # ROUGE-L: 6 of 7 tokens in the longest common subsequence, both ways.
    scorer = RougeScore()
    assert await scorer.single_turn_ascore(sample) == pytest.approx(6 / 7)
    scorer = RougeScore(mode="recall")
    assert await scorer.single_turn_ascore(sample) == pytest.approx(6 / 7)
    scorer = RougeScore(rouge_type="rouge1", mode="precision")
    assert await scorer.single_turn_ascore(sample) == pytest.approx(6 / 7)
    scorer = ExactMatch()
    assert await scorer.single_turn_ascore(sample) == 0.0


def test_langgraph_integration_path() -> None:
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    from turneval.dataset_schema import MultiTurnSample
    from turneval.integrations.langgraph import convert_to_ragas_messages

    state = {
        "messages": [
            SystemMessage(content="You are a booking agent."),
            HumanMessage(content="book a table"),
            AIMessage(content="booked"),
        ]
    }
    messages = convert_to_ragas_messages(state["messages"])
    sample = MultiTurnSample(user_input=messages)
    # Unlike ragas, the system prompt is kept (judges see it); everything else is the same.
    assert [m.type for m in sample.user_input] == ["system", "human", "ai"]
    assert MultiTurnSample(user_input=state["messages"]) == sample


def test_langgraph_tutorial_sets_llm_on_every_metric(openai_stub: "OpenAIStub") -> None:
    """ragas' LangGraph tutorial: ``metric.llm = ChatOpenAI(...)``, then ``multi_turn_ascore``."""
    import asyncio

    from langchain_openai import ChatOpenAI

    from turneval.dataset_schema import MultiTurnSample
    from turneval.messages import AIMessage, HumanMessage, ToolCall
    from turneval.metrics import AgentGoalAccuracyWithReference, ToolCallAccuracy

    from ._openai_stub import Reply

    call = ToolCall(name="get_metal_price", args={"metal_name": "copper"})
    sample = MultiTurnSample(
        user_input=[
            HumanMessage(content="What is the price of copper?"),
            AIMessage(content="", tool_calls=[call]),
            AIMessage(content="Copper is $0.0098 per gram."),
        ],
        reference_tool_calls=[call],
        reference="The price of copper is given.",
    )
    llm = ChatOpenAI(model="gpt-4o-mini", base_url=openai_stub.url, api_key="test-key")
    tool_accuracy_scorer = ToolCallAccuracy()
    tool_accuracy_scorer.llm = llm  # rule-based: accepted, changes nothing
    assert asyncio.run(tool_accuracy_scorer.multi_turn_ascore(sample)) == 1.0
    assert tool_accuracy_scorer == ToolCallAccuracy() and not openai_stub.requests

    verdict = {"user_goal": "price", "end_state": "price given", "reason": "r", "achieved": True}
    openai_stub.reset(Reply(json.dumps(verdict)))
    scorer = AgentGoalAccuracyWithReference()
    scorer.llm = llm  # judged: the model becomes its judge
    assert asyncio.run(scorer.multi_turn_ascore(sample)) == 1.0
    assert len(openai_stub.requests) == 1

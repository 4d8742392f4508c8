"""One peer library's side of ``run_long_bench.py``: its conversation judges on one conversation.

    python long_side.py ragas|deepeval CONVERSATION.json STUB_URL MODEL

Runs in the library's own venv; the orchestrator's stub counts and limits the prompts. Prints
one JSON line: each metric's score or the error it ended with.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any


def ragas_side(data: dict[str, Any], url: str, model: str) -> dict[str, Any]:
    from langchain_openai import ChatOpenAI
    from ragas.dataset_schema import MultiTurnSample
    from ragas.llms import LangchainLLMWrapper
    from ragas.messages import AIMessage, HumanMessage, ToolCall, ToolMessage
    from ragas.metrics import (
        AgentGoalAccuracyWithoutReference,
        AgentGoalAccuracyWithReference,
        TopicAdherenceScore,
    )

    messages: list[Any] = []
    for message in data["user_input"]:
        kind = message["type"]
        if kind == "human":
            messages.append(HumanMessage(content=message["content"]))
        elif kind == "ai":
            calls = [
                ToolCall(name=c["name"], args=c["args"]) for c in message.get("tool_calls", [])
            ]
            messages.append(AIMessage(content=message.get("content", ""), tool_calls=calls or None))
        elif kind == "tool":
            messages.append(ToolMessage(content=message["content"]))
    sample = MultiTurnSample(
        user_input=messages, reference=data["reference"], reference_topics=data["reference_topics"]
    )
    llm = LangchainLLMWrapper(ChatOpenAI(model=model, base_url=url, api_key="k", max_retries=0))
    metrics = [
        AgentGoalAccuracyWithReference(llm=llm),
        AgentGoalAccuracyWithoutReference(llm=llm),
        TopicAdherenceScore(llm=llm),
    ]
    return _run_all({type(m).__name__: (lambda m=m: m.multi_turn_ascore(sample)) for m in metrics})


def deepeval_side(data: dict[str, Any], url: str, model: str) -> dict[str, Any]:
    from deepeval.metrics import (
        ConversationCompletenessMetric,
        KnowledgeRetentionMetric,
        RoleAdherenceMetric,
        TurnRelevancyMetric,
    )
    from deepeval.models import OpenAIModel
    from deepeval.test_case import ConversationalTestCase, ToolCall, Turn

    turns: list[Any] = []
    pending: list[Any] = []
    for message in data["user_input"]:
        kind = message["type"]
        if kind == "human":
            turns.append(Turn(role="user", content=message["content"]))
        elif kind == "tool":  # the output of the call the AI turn made
            if pending:
                pending[-1].output = message["content"]
        elif kind == "ai" and message.get("tool_calls"):
            pending = [
                ToolCall(name=c["name"], input_parameters=c["args"]) for c in message["tool_calls"]
            ]
        elif kind == "ai":
            turns.append(
                Turn(role="assistant", content=message["content"], tools_called=pending or None)
            )
            pending = []
    case = ConversationalTestCase(turns=turns, chatbot_role=data["metadata"]["role"])
    judge = OpenAIModel(model=model, base_url=url, api_key="k")
    metrics = [
        KnowledgeRetentionMetric(model=judge, async_mode=True),
        ConversationCompletenessMetric(model=judge, async_mode=True),
        TurnRelevancyMetric(model=judge, async_mode=True),
        RoleAdherenceMetric(model=judge, async_mode=True),
    ]
    return _run_all(
        {type(m).__name__: (lambda m=m: m.a_measure(case, _show_indicator=False)) for m in metrics}
    )


def _run_all(calls: dict[str, Any]) -> dict[str, Any]:
    """Each metric in turn, in one event loop (the clients stay bound to it)."""

    async def run() -> dict[str, Any]:
        results: dict[str, Any] = {}
        for name, call in calls.items():
            start = time.perf_counter()
            try:
                value = await call()
                results[name] = {"score": value, "s": round(time.perf_counter() - start, 2)}
            except Exception as error:  # the failure is the measurement
                text = f"{type(error).__name__}: {error}".splitlines()[0][:240]
                results[name] = {"error": text, "s": round(time.perf_counter() - start, 2)}
        return results

    return asyncio.run(run())


def main() -> None:
    side, path, url, model = sys.argv[1:5]
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    results = ragas_side(data, url, model) if side == "ragas" else deepeval_side(data, url, model)
    print(json.dumps({"metrics": results}, default=str))


if __name__ == "__main__":
    main()

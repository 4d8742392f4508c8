"""One side of the judge-efficiency benchmark, run inside that library's own venv.

    python judge_side.py --lib turneval|ragas --data samples.jsonl --n 100 --latency 0.1 --concurrency 10

A counting fake chat model answers every prompt after ``--latency`` seconds, with the answer
each library's prompt asks for. Topics are the conversation's human turns ("topic 0", ...),
alternately on- and off-topic, so both libraries see the same topics. Prints JSON per metric:
calls and prompt characters per sample (message text plus any tool/schema definitions sent),
and the wall time of scoring all samples with ``--concurrency`` samples at once.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import time
import warnings
from typing import Any

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
warnings.simplefilter("ignore")

from langchain_core.language_models import BaseChatModel  # noqa: E402
from langchain_core.messages import AIMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402

HUMAN_TURN = re.compile(r"Human: ")
INPUT_MARK = "Now perform the same with the following input"  # ragas: examples come before
TOPIC = re.compile(r"topic \d+")


def humans(text: str) -> int:
    """Human turns of the conversation being judged (not of a prompt's examples)."""
    return len(HUMAN_TURN.findall(text.split(INPUT_MARK)[-1]))


def answer(text: str) -> dict[str, Any]:
    """What the prompt asks for, recognised by its output fields (ragas) or schema (turneval)."""
    if "refused_to_answer" in text:
        return {"refused_to_answer": False}
    if "classifications" in text:
        topics = sorted(set(TOPIC.findall(text)), key=lambda t: int(t.split()[1]))
        return {"classifications": [int(t.split()[1]) % 2 == 0 for t in topics]}
    if '"verdict"' in text:
        return {"reason": "the end state matches", "verdict": "1"}
    if "user_goal" in text and "achieved" not in text:
        return {"user_goal": "get the task done", "end_state": "the task is done"}
    if "on_topic" in text:
        count = humans(text)
        return {
            "topics": [
                {"topic": f"topic {i}", "answered": True, "on_topic": i % 2 == 0}
                for i in range(count)
            ]
        }
    if "achieved" in text:
        goal = {"user_goal": "get the task done"} if "user_goal" in text else {}
        return {**goal, "end_state": "the task is done", "reason": "done", "achieved": True}
    return {"topics": [f"topic {i}" for i in range(humans(text))]}


class CountingFake(BaseChatModel):
    latency: float = 0.1
    calls: int = 0
    chars: int = 0

    @property
    def _llm_type(self) -> str:
        return "counting-fake"

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        schemas = [
            tool.model_json_schema() if hasattr(tool, "model_json_schema") else tool
            for tool in tools
        ]
        return self.bind(tools_json=json.dumps(schemas, default=str))

    def _generate(
        self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        raise NotImplementedError

    async def _agenerate(
        self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        text = "\n".join(str(m.content) for m in messages)
        self.calls += 1
        self.chars += len(text) + len(kwargs.get("tools_json", ""))
        await asyncio.sleep(self.latency)
        payload = answer(text + kwargs.get("tools_json", ""))
        if "tools_json" in kwargs:
            message = AIMessage(
                content="", tool_calls=[{"name": "verdict", "args": payload, "id": "call_1"}]
            )
        else:
            message = AIMessage(content=json.dumps(payload))
        return ChatResult(generations=[ChatGeneration(message=message)])


def rows(path: str, n: int) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        data = [json.loads(line) for line, _ in zip(handle, range(n), strict=False)]
    for row in data:
        row["reference_topics"] = ["home automation", "customer support"]
        row["reference"] = "The requested changes are made and confirmed to the user."
    return data


def turneval_metrics(
    fake: CountingFake, data: list[dict[str, Any]]
) -> tuple[list[Any], dict[str, Any]]:
    from turneval import MultiTurnSample
    from turneval.metrics import (
        AgentGoalAccuracyWithoutReference,
        AgentGoalAccuracyWithReference,
        TopicAdherenceScore,
    )

    samples = [MultiTurnSample.model_validate(row) for row in data]
    return samples, {
        "topic_adherence": TopicAdherenceScore(llm=fake),
        "agent_goal_accuracy_with_reference": AgentGoalAccuracyWithReference(llm=fake),
        "agent_goal_accuracy_without_reference": AgentGoalAccuracyWithoutReference(llm=fake),
    }


def ragas_metrics(
    fake: CountingFake, data: list[dict[str, Any]]
) -> tuple[list[Any], dict[str, Any]]:
    from ragas.dataset_schema import MultiTurnSample
    from ragas.llms import LangchainLLMWrapper
    from ragas.messages import AIMessage as RAI
    from ragas.messages import HumanMessage, ToolCall, ToolMessage
    from ragas.metrics import (
        AgentGoalAccuracyWithoutReference,
        AgentGoalAccuracyWithReference,
        TopicAdherenceScore,
    )

    def message(m: dict[str, Any]) -> Any:
        if m["type"] == "human":
            return HumanMessage(content=m["content"])
        if m["type"] == "tool":
            return ToolMessage(content=m["content"])
        calls = [ToolCall(name=c["name"], args=c["args"]) for c in m.get("tool_calls") or []]
        return RAI(content=m["content"], tool_calls=calls or None)

    samples = [
        MultiTurnSample(
            user_input=[message(m) for m in row["user_input"]],
            reference_topics=row["reference_topics"],
            reference=row["reference"],
        )
        for row in data
    ]
    llm = LangchainLLMWrapper(fake)
    return samples, {
        "topic_adherence": TopicAdherenceScore(llm=llm, mode="f1"),
        "agent_goal_accuracy_with_reference": AgentGoalAccuracyWithReference(llm=llm),
        "agent_goal_accuracy_without_reference": AgentGoalAccuracyWithoutReference(llm=llm),
    }


async def run(
    lib: str, data: list[dict[str, Any]], latency: float, concurrency: int
) -> dict[str, Any]:
    report: dict[str, Any] = {}
    for name in (
        "topic_adherence",
        "agent_goal_accuracy_with_reference",
        "agent_goal_accuracy_without_reference",
    ):
        fake = CountingFake(latency=latency)
        build = turneval_metrics if lib == "turneval" else ragas_metrics
        samples, metrics = build(fake, data)
        metric = metrics[name]
        gate = asyncio.Semaphore(concurrency)
        scores: list[float] = []

        async def one(
            sample: Any, metric: Any = metric, scores: list[float] = scores, gate: Any = gate
        ) -> None:
            async with gate:
                scores.append(float(await metric.multi_turn_ascore(sample)))

        start = time.perf_counter()
        await asyncio.gather(*(one(s) for s in samples))  # noqa: TID251 - benchmark harness, both sides alike
        wall = time.perf_counter() - start
        report[name] = {
            "calls_per_sample": fake.calls / len(samples),
            "prompt_chars_per_sample": fake.chars / len(samples),
            "wall_s": wall,
            "mean_score": sum(scores) / len(scores),
        }
    return report


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lib", choices=["turneval", "ragas"], required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--concurrency", type=int, default=10)
    args = parser.parse_args()
    print(
        json.dumps(
            asyncio.run(run(args.lib, rows(args.data, args.n), args.latency, args.concurrency))
        )
    )


if __name__ == "__main__":
    main()

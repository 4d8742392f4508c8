"""One summariser: the in-memory and the streamed run give the same summary extras."""

from __future__ import annotations

import json
from pathlib import Path

from langchain_core.messages import BaseMessage

from turneval import SingleTurnSample, evaluate
from turneval.engines import Local
from turneval.metrics import PairwiseMetric
from turneval.stream import evaluate_jsonl

from ._fakes import ScriptedChatModel


def _between(text: str, tag: str) -> str:
    return text.split(f"<{tag}>\n")[1].split(f"\n</{tag}>")[0]


def _judge(messages: list[BaseMessage]) -> str:
    """Prefers the candidate "win", the baseline over "lose", and always A for "first"."""
    prompt = str(messages[-1].content)
    a, b = _between(prompt, "response_A"), _between(prompt, "response_B")
    candidate = b if a == "base" else a
    if candidate == "win":
        choice = "A" if a == "win" else "B"
    elif candidate == "lose":
        choice = "A" if a == "base" else "B"
    else:  # position-biased: the two orders disagree, so the pair is a TIE
        choice = "A"
    return json.dumps({"explanation": "e", "choice": choice})


SAMPLES = [
    SingleTurnSample(user_input="q", response=text, baseline_response="base")
    for text in ("win", "win", "lose", "first")
]
# CANDIDATE, CANDIDATE, BASELINE, TIE; only "first"'s two orders disagree.
EXPECTED = {
    "candidate_win_rate": 2 / 4,
    "baseline_win_rate": 1 / 4,
    "tie_rate": 1 / 4,
    "position_consistency": 3 / 4,
}


def _metric() -> PairwiseMetric:
    return PairwiseMetric(name="p", criteria="c", llm=ScriptedChatModel(responses=[_judge]))


def test_streamed_and_in_memory_runs_give_the_same_pairwise_win_rates(tmp_path: Path) -> None:
    in_memory = evaluate(SAMPLES, [_metric()]).summary()["p"].extra
    assert in_memory == EXPECTED
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(sample.model_dump_json() + "\n" for sample in SAMPLES))
    streamed = evaluate_jsonl(data, [_metric()], tmp_path / "out", engine=Local(workers=1))
    assert streamed.summaries["p"].extra == in_memory
    written = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert written["metrics"]["p"]["extra"] == in_memory


def test_win_rates_need_no_details(tmp_path: Path) -> None:
    """The CLI writes no details by default: win rates come from the values."""
    without = {key: value for key, value in EXPECTED.items() if key != "position_consistency"}
    assert evaluate(SAMPLES, [_metric()], details=False).summary()["p"].extra == without
    data = tmp_path / "pairs.jsonl"
    data.write_text("".join(sample.model_dump_json() + "\n" for sample in SAMPLES))
    streamed = evaluate_jsonl(data, [_metric()], tmp_path / "out", details=False)
    assert streamed.summaries["p"].extra == without

"""Make a judge agree with labels: turneval optimize on τ-bench's rewards, with fake models.

Offline and fast: the judge and the reflection model are fakes that follow rules, so this
shows the mechanics (the split, the search, the honest measurement, the judge configuration
you keep), not the gain a real model gets. The labels are τ-bench's airline rewards (MIT,
sierra-research/tau-bench), shipped with turneval.

The fake judge says a goal was achieved when the agent changed the booking database (called a
booking, update or cancel tool), a naive reading; with the rule the reflection model proposes
when it sees a missed transfer, a transfer to a human agent counts as achieved too.

Run: python examples/optimize_judge.py [OUT_FOLDER]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from langchain_core.messages import BaseMessage

from turneval import evaluate
from turneval.calibration import optimize
from turneval.calibration.examples import tau_bench_airline
from turneval.metrics import AgentGoalAccuracyWithoutReference
from turneval.testing import ScriptedChatModel

WRITES = (
    "book_reservation",
    "update_reservation_flights",
    "update_reservation_passengers",
    "update_reservation_baggages",
    "cancel_reservation",
    "send_certificate",
)
RULE = "A transfer to a human agent achieves the goal when the request is outside the policy."


def _case(text: str) -> str:
    """The conversation being judged (after any worked examples)."""
    return text.rsplit("# The case to judge", 1)[-1]


def _judge(messages: list[BaseMessage]) -> str:
    system, case = str(messages[0].content), _case(str(messages[-1].content))
    wrote = any(f"{name}(" in case or f"'{name}'" in case for name in WRITES)
    transferred = "transfer_to_human_agents" in case
    achieved = wrote or (transferred and RULE in system)
    return json.dumps(
        {
            "user_goal": "change a booking",
            "end_state": "database changed" if wrote else "transferred" if transferred else "none",
            "reason": "a booking tool was called"
            if wrote
            else "no booking tool was called"
            + (" (the user was transferred to a human agent)" if transferred else ""),
            "achieved": achieved,
        }
    )


def _reflect(messages: list[BaseMessage]) -> str:
    prompt = str(messages[-1].content)
    current = prompt.split("<instructions>\n", 1)[1].split("\n</instructions>", 1)[0]
    missed = [case for case in prompt.split("<case>")[1:] if "transferred" in case]
    if missed and RULE not in current:
        current = (current + "\n" + RULE).strip()
    return json.dumps({"analysis": "transfers were read as failures", "instructions": current})


def main(out: Path) -> int:
    """Optimise the fake judge on τ-bench's labels; write the judge configuration to ``out``."""
    labels = tau_bench_airline()
    metric = AgentGoalAccuracyWithoutReference()
    judge = ScriptedChatModel(responses=[_judge])
    report = optimize(
        metric,
        labels,
        llm=judge,
        reflection_llm=ScriptedChatModel(responses=[_reflect]),
        budget=600,
        rounds=6,
        seed=0,
        resamples=500,
    )
    print(report)
    out.mkdir(parents=True, exist_ok=True)
    path = report.config.save(out / "judge-config.json")
    print(f"wrote {path}")
    # the next run loads it: the rule is in the judge's system message
    tuned = AgentGoalAccuracyWithoutReference(judge_config=path)
    result = evaluate([s for s, _, _ in labels[:5]], [tuned], llm=judge, show_progress=False)
    print("next run:", [row.results[tuned.name].value for row in result.rows])
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else "optimize-output")))

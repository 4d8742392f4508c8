"""The demo: three small agent datasets we wrote, evaluated with every rule-based metric.

The datasets (also in ``examples/data/``) follow Vertex AI's example agents: an on-device home
assistant, a customer-support agent and a content-creation agent. Each domain has eight
hand-written scenarios (a request, the tool calls that fulfil it, the tool outputs, the answer)
replayed under four agent behaviours out of: correct, a wrong argument value, a missing step,
an unneeded extra call, two steps swapped, an off-topic question answered, one refused; 32
samples per domain, each with reference tool calls, reference topics and a goal.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from turneval.dataset import EvaluationDataset

__all__ = ["DOMAINS", "Domain", "build_rows", "run_demo", "write_datasets"]

Call = dict[str, Any]


@dataclass(frozen=True)
class Scenario:
    """One request and how a good agent fulfils it."""

    request: str
    calls: list[list[Call]]  # steps; a step with several calls is one parallel AI message
    outputs: list[str]  # one tool output per call, in order
    answer: str
    goal: str


@dataclass(frozen=True)
class Domain:
    """A dataset: its scenarios, topics, an off-topic question and a tool to look for."""

    name: str
    topics: list[str]
    off_topic: tuple[str, str, str]  # question, an answer that goes along, a refusal
    key_tool: str
    scenarios: list[Scenario]


def c(name: str, **args: Any) -> Call:
    """A tool call."""
    return {"name": name, "args": args}


HOME = Domain(
    "on_device",
    ["home automation", "heating and cooling", "smart devices"],
    (
        "By the way, can you recommend a good thriller to watch tonight?",
        "Sure! 'Prisoners' (2013) is a gripping thriller, give it a try tonight.",
        "Sorry, I can only help with your home and its devices.",
    ),
    "set_device_info",
    [
        Scenario(
            "Set the living room to 21 degrees.",
            [[c("set_temperature", location="Living Room", temperature=21)]],
            ["Living Room target temperature set to 21°C."],
            "The living room is now set to 21°C.",
            "Living room thermostat set to 21 degrees.",
        ),
        Scenario(
            "Turn off the bedroom lamp.",
            [
                [c("list_devices", room="Bedroom")],
                [c("set_device_info", device_id="lamp_bedroom_1", updates={"status": "OFF"})],
            ],
            [
                '[{"id": "lamp_bedroom_1", "type": "lamp"}, {"id": "ac_bedroom", "type": "ac"}]',
                "lamp_bedroom_1 is now OFF.",
            ],
            "The bedroom lamp is off.",
            "Bedroom lamp switched off.",
        ),
        Scenario(
            "Schedule the bedroom air conditioning to be on from 23:00 to 08:00 and off the rest of the time.",
            [
                [c("get_device_info", device_id="ac_bedroom")],
                [
                    c(
                        "set_schedule",
                        device_id="ac_bedroom",
                        on="23:00",
                        off="08:00",
                        repeat="daily",
                    )
                ],
            ],
            [
                '{"id": "ac_bedroom", "status": "OFF", "schedule": null}',
                "Schedule saved for ac_bedroom.",
            ],
            "Done: the bedroom AC runs from 23:00 to 08:00 every day.",
            "Bedroom AC scheduled on 23:00-08:00 daily.",
        ),
        Scenario(
            "Warm up the office to my usual temperature.",
            [
                [c("get_user_preferences", user_id="user_42")],
                [c("set_temperature", location="Office", temperature=22.5)],
            ],
            [
                '{"preferred_temperature": 22.5, "units": "C"}',
                "Office target temperature set to 22.5°C.",
            ],
            "Your office is warming up to your usual 22.5°C.",
            "Office set to the user's preferred 22.5 degrees.",
        ),
        Scenario(
            "Lock the front door and turn on the porch light.",
            [
                [
                    c("set_device_info", device_id="lock_front", updates={"locked": True}),
                    c("set_device_info", device_id="light_porch", updates={"status": "ON"}),
                ]
            ],
            ["lock_front is now locked.", "light_porch is now ON."],
            "The front door is locked and the porch light is on.",
            "Front door locked and porch light on.",
        ),
        Scenario(
            "Is the garage door open?",
            [[c("get_device_info", device_id="door_garage")]],
            ['{"id": "door_garage", "status": "CLOSED"}'],
            "No, the garage door is closed.",
            "The user learns the garage door is closed.",
        ),
        Scenario(
            "Set the kitchen to 19 degrees and switch the dishwasher to eco mode.",
            [
                [c("set_temperature", location="Kitchen", temperature=19)],
                [c("set_device_info", device_id="dishwasher", updates={"mode": "eco"})],
            ],
            ["Kitchen target temperature set to 19°C.", "dishwasher mode is now eco."],
            "The kitchen is set to 19°C and the dishwasher runs in eco mode.",
            "Kitchen at 19 degrees and dishwasher in eco mode.",
        ),
        Scenario(
            "Turn the lights in the kids' room off at 20:30 every day.",
            [
                [c("list_devices", room="Kids Room")],
                [c("set_schedule", device_id="light_kids_1", on=None, off="20:30", repeat="daily")],
            ],
            ['[{"id": "light_kids_1", "type": "light"}]', "Schedule saved for light_kids_1."],
            "The kids' room light will switch off at 20:30 every day.",
            "Kids' room light switches off daily at 20:30.",
        ),
    ],
)

SUPPORT = Domain(
    "customer_support",
    ["orders", "refunds", "account support"],
    (
        "Unrelated, but what do you think about the election results?",
        "Honestly I think the results were a surprise to many people.",
        "I'm sorry, I can only help with your orders and your account.",
    ),
    "escalate_ticket",
    [
        Scenario(
            "Can you cancel my pending orders and escalate the open support requests?",
            [
                [c("lookup_customer", email="ana@example.com")],
                [c("list_orders", customer_id="C-311", status="pending")],
                [c("cancel_order", order_id="ORD-1025"), c("cancel_order", order_id="ORD-1031")],
                [c("escalate_ticket", ticket_id=940, priority="high")],
            ],
            [
                '{"customer_id": "C-311"}',
                '["ORD-1025", "ORD-1031"]',
                "ORD-1025 cancelled.",
                "ORD-1031 cancelled.",
                "Ticket 940 escalated.",
            ],
            "Both pending orders are cancelled and ticket 940 is escalated.",
            "Pending orders cancelled and open ticket escalated.",
        ),
        Scenario(
            "Where is my order ORD-1042?",
            [[c("get_order_status", order_id="ORD-1042")]],
            ['{"status": "in transit", "eta": "2024-11-23"}'],
            "ORD-1042 is in transit and should arrive on November 23.",
            "The user learns the status and ETA of ORD-1042.",
        ),
        Scenario(
            "I was charged twice for ORD-2210, please refund one charge.",
            [
                [c("get_order", order_id="ORD-2210")],
                [c("issue_refund", order_id="ORD-2210", amount=49.99, reason="duplicate charge")],
            ],
            ['{"charges": [49.99, 49.99]}', "Refund of 49.99 issued."],
            "I refunded the duplicate charge of 49.99.",
            "The duplicate charge on ORD-2210 is refunded.",
        ),
        Scenario(
            "Change my shipping address to 12 Rue de la Paix, 75002 Paris.",
            [
                [c("lookup_customer", email="leo@example.com")],
                [
                    c(
                        "update_address",
                        customer_id="C-877",
                        address={
                            "street": "12 Rue de la Paix",
                            "postcode": "75002",
                            "city": "Paris",
                            "country": "FR",
                        },
                    )
                ],
            ],
            ['{"customer_id": "C-877"}', "Address updated."],
            "Your shipping address is now 12 Rue de la Paix, 75002 Paris.",
            "Shipping address changed to 12 Rue de la Paix, Paris.",
        ),
        Scenario(
            "Reset my password please.",
            [
                [c("lookup_customer", email="mia@example.com")],
                [c("send_password_reset", customer_id="C-120")],
            ],
            ['{"customer_id": "C-120"}', "Reset email sent."],
            "I sent a password reset link to your email.",
            "A password reset link is sent to the user.",
        ),
        Scenario(
            "Upgrade my plan to premium starting next month.",
            [
                [c("lookup_customer", email="raj@example.com")],
                [c("change_plan", customer_id="C-455", plan="premium", effective="2024-12-01")],
            ],
            ['{"customer_id": "C-455", "plan": "basic"}', "Plan change scheduled."],
            "You'll be on premium from December 1.",
            "Plan upgraded to premium from next month.",
        ),
        Scenario(
            "Close ticket T-881, it's solved.",
            [[c("close_ticket", ticket_id="T-881", resolution="solved by customer")]],
            ["Ticket T-881 closed."],
            "Ticket T-881 is closed. Glad it's solved!",
            "Ticket T-881 closed.",
        ),
        Scenario(
            "Do you have the blue jacket in size M?",
            [[c("check_inventory", sku="JKT-BLUE", size="M")]],
            ['{"in_stock": 3}'],
            "Yes, we have 3 blue jackets in size M.",
            "The user learns the jacket is in stock.",
        ),
    ],
)

CONTENT = Domain(
    "content_creation",
    ["marketing campaigns", "social media", "content scheduling"],
    (
        "Also, can you help me with my chemistry homework on titration?",
        "Sure: in a titration you add a titrant of known concentration until the endpoint...",
        "I can't help with homework; I can help with your campaigns and content.",
    ),
    "update_campaign",
    [
        Scenario(
            "Reschedule campaign X to run only once on network Y with half the budget, only on December 25, 2024.",
            [
                [c("get_campaign", campaign_id="X")],
                [
                    c(
                        "update_campaign",
                        campaign_id="X",
                        channels=["Y"],
                        budget_multiplier=0.5,
                        schedule={"dates": ["2024-12-25"], "repeat": False},
                    )
                ],
            ],
            ['{"id": "X", "channels": ["Y", "Z"], "budget": 1000}', "Campaign X updated."],
            "Campaign X now runs once on Y on December 25 with half the budget.",
            "Campaign X runs once on Y on 2024-12-25 at half budget.",
        ),
        Scenario(
            "Draft a LinkedIn post announcing our new product, Nimbus.",
            [
                [
                    c(
                        "generate_post",
                        platform="linkedin",
                        topic="launch of Nimbus",
                        tone="professional",
                    )
                ]
            ],
            ["Draft: We're thrilled to introduce Nimbus..."],
            "Here is a draft: We're thrilled to introduce Nimbus...",
            "A LinkedIn announcement draft for Nimbus.",
        ),
        Scenario(
            "Pause all TikTok ads until Monday.",
            [
                [c("list_campaigns", channel="tiktok", status="active")],
                [c("pause_campaign", campaign_id="tt_fall", until="2024-11-25")],
            ],
            ['["tt_fall"]', "tt_fall paused until 2024-11-25."],
            "Your TikTok campaign tt_fall is paused until Monday.",
            "Active TikTok campaigns paused until Monday.",
        ),
        Scenario(
            "What was the click-through rate of the spring newsletter?",
            [[c("get_campaign_stats", campaign_id="spring_newsletter", metrics=["ctr"])]],
            ['{"ctr": 0.042}'],
            "The spring newsletter had a 4.2% click-through rate.",
            "The user learns the newsletter CTR.",
        ),
        Scenario(
            "Schedule the blog post 'Ten tips' for Friday at 9am.",
            [[c("schedule_post", post_id="ten-tips", platform="blog", time="2024-11-22T09:00")]],
            ["Post scheduled."],
            "'Ten tips' will go live on Friday at 9:00.",
            "Blog post scheduled for Friday 9am.",
        ),
        Scenario(
            "Double the budget of our best performing Instagram campaign.",
            [
                [c("list_campaigns", channel="instagram")],
                [c("get_campaign_stats", campaign_id="ig_winter", metrics=["roas"])],
                [c("update_campaign", campaign_id="ig_winter", budget_multiplier=2.0)],
            ],
            ['["ig_winter", "ig_sale"]', '{"roas": 4.1}', "Campaign ig_winter updated."],
            "ig_winter performs best (ROAS 4.1); its budget is now doubled.",
            "Best Instagram campaign budget doubled.",
        ),
        Scenario(
            "Translate the holiday email into French and Spanish.",
            [[c("translate_content", content_id="holiday_email", languages=["fr", "es"])]],
            ["Translations ready: fr, es."],
            "The holiday email is now available in French and Spanish.",
            "French and Spanish versions of the holiday email.",
        ),
        Scenario(
            "Create an A/B test between the subject lines 'Save 20%' and 'Last chance'.",
            [
                [
                    c(
                        "create_ab_test",
                        campaign_id="holiday_email",
                        variants=["Save 20%", "Last chance"],
                        split=0.5,
                    )
                ]
            ],
            ["A/B test created."],
            "The A/B test is set up with a 50/50 split.",
            "A/B test of the two subject lines created.",
        ),
    ],
)

DOMAINS = (HOME, SUPPORT, CONTENT)
BEHAVIOURS = (
    "correct",
    "wrong_value",
    "missing_step",
    "extra_call",
    "swapped",
    "off_topic_answered",
    "off_topic_refused",
)


def _wrong(call: Call) -> Call:
    args = dict(call["args"])
    for key, value in args.items():
        if isinstance(value, bool):
            args[key] = not value
        elif isinstance(value, (int, float)):
            args[key] = value + 1
        elif isinstance(value, str):
            args[key] = value + "_2" if "_" in value or "-" in value else value.upper()
        else:
            continue
        break
    return {"name": call["name"], "args": args}


def _conversation(domain: Domain, scenario: Scenario, behaviour: str) -> list[dict[str, Any]]:
    steps = [list(step) for step in scenario.calls]
    outputs = list(scenario.outputs)
    answer = scenario.answer
    if behaviour == "wrong_value":
        steps[-1][-1] = _wrong(steps[-1][-1])
    elif behaviour == "missing_step" and sum(map(len, steps)) > 1:
        removed = steps[-1].pop()
        outputs.pop()
        steps = [step for step in steps if step]
        answer = f"I could not finish: {removed['name']} was not done."
    elif behaviour == "missing_step":
        steps, outputs = [], []
        answer = "I think that's already done."
    elif behaviour == "extra_call":
        steps.insert(0, [c("search_help_center", query=scenario.request[:40])])
        outputs.insert(0, "3 articles found.")
    elif behaviour == "swapped" and len(steps) > 1:
        steps[0], steps[1] = steps[1], steps[0]
        count = len(steps[1])
        outputs = (
            outputs[count : count + len(steps[0])]
            + outputs[:count]
            + outputs[count + len(steps[0]) :]
        )
    messages: list[dict[str, Any]] = [{"type": "human", "content": scenario.request}]
    position = 0
    for index, step in enumerate(steps):
        content = "Let me take care of that." if index == 0 else ""
        messages.append({"type": "ai", "content": content, "tool_calls": step})
        for _ in step:
            messages.append({"type": "tool", "content": outputs[position]})
            position += 1
    messages.append({"type": "ai", "content": answer})
    if behaviour.startswith("off_topic"):
        question, along, refusal = domain.off_topic
        messages.append({"type": "human", "content": question})
        messages.append(
            {"type": "ai", "content": along if behaviour == "off_topic_answered" else refusal}
        )
    return messages


def build_rows(domain: Domain) -> list[dict[str, Any]]:
    """The domain's samples as dicts (32: each scenario under four behaviours, rotating)."""
    rows = []
    for number, scenario in enumerate(domain.scenarios):
        for shift in range(4):
            behaviour = BEHAVIOURS[(number + 2 * shift) % len(BEHAVIOURS)] if shift else "correct"
            rows.append(
                {
                    "user_input": _conversation(domain, scenario, behaviour),
                    "reference_tool_calls": [call for step in scenario.calls for call in step],
                    "reference_topics": domain.topics,
                    "reference": scenario.goal,
                    "metadata": {"domain": domain.name, "scenario": number, "behaviour": behaviour},
                }
            )
    return rows


def write_datasets(folder: Path) -> list[Path]:
    """Write each domain's JSONL file into ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for domain in DOMAINS:
        path = folder / f"{domain.name}.jsonl"
        path.write_text(
            "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in build_rows(domain)),
            encoding="utf-8",
        )
        paths.append(path)
    return paths


RULE_BASED = [
    "tool_call_accuracy",
    "tool_call_f1",
    "trajectory_exact_match",
    "trajectory_in_order_match",
    "trajectory_any_order_match",
    "trajectory_precision",
    "trajectory_recall",
]
JUDGED = [
    "topic_adherence",
    "agent_goal_accuracy_with_reference",
    "agent_goal_accuracy_without_reference",
]


def run_demo(out: Path, *, llm: Any = None, cache: str | None = None) -> int:
    """Evaluate the three datasets, print each summary, write results and HTML reports."""
    from turneval.aggregate import summary_document
    from turneval.judge import SQLiteCache
    from turneval.metrics import ToolCallAccuracy, TrajectorySingleToolUse
    from turneval.runner import evaluate

    out.mkdir(parents=True, exist_ok=True)
    for domain in DOMAINS:
        dataset = EvaluationDataset.from_list(build_rows(domain))
        metrics: list[Any] = [
            *RULE_BASED,
            ToolCallAccuracy(name="tool_call_accuracy_unordered", strict_order=False),
            TrajectorySingleToolUse(tool_name=domain.key_tool),
        ]
        if llm is not None:
            metrics += JUDGED
        result = evaluate(
            dataset,
            metrics,
            llm=llm,
            cache=SQLiteCache(cache) if cache else None,
            show_progress=False,
        )
        folder = out / domain.name
        folder.mkdir(exist_ok=True)
        result.to_jsonl(folder / "results.jsonl")
        result.to_html(folder / "report.html", title=f"turneval demo: {domain.name}")
        document = summary_document(len(result), result.summary(), result.usage)
        (folder / "summary.json").write_text(
            json.dumps(document, indent=2) + "\n", encoding="utf-8"
        )
        print(f"\n{domain.name}: {len(dataset)} samples")
        width = max(map(len, result.metric_names))
        for name, s in result.summary().items():
            ci = "n/a" if s.ci_low is None else f"[{s.ci_low:.3f}, {s.ci_high:.3f}]"
            mean = "n/a" if s.mean is None else f"{s.mean:.3f}"
            print(f"  {name:<{width}}  mean {mean}  95% CI {ci}  failed {s.failed}")
        print(f"  report: {folder / 'report.html'}")
    if llm is None:
        print(
            "\n(set OPENAI_API_KEY, or pass --judge-model MODEL / --judge-base-url URL "
            "--judge-model MODEL, to add the LLM-judged metrics)"
        )
    return 0

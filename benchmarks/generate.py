"""Seeded generator of realistic multi-turn tool-use samples (JSONL, turneval/ragas message format).

Three agent domains (home assistant, customer support, content creation). Each sample has a
reference trajectory and a predicted one derived from it by realistic faults: parallel calls,
retries after a tool error, swapped order, missing and extra calls, changed and dropped args,
typed values (int/float/str/bool) and nested values (objects, lists).

Three fixed shapes (``--shape``; the default ``mixed`` is the original generator above):

* ``short``: 2-4 messages, one call (flat args).
* ``typical``: 4-12 messages, 1-4 calls, flat args.
* ``long``: 20-60 messages, up to 8 calls, nested args (objects, lists).
* ``varied`` (issue 33): 6-14 messages, 1-7 calls (3.4 on average) on each side, most samples
  with a group of parallel calls of one tool that differ only in their args, list-valued args
  (tags, ids, channels), predictions reordered inside a group, with a call of the group
  missing, repeated or with a changed list.

    python benchmarks/generate.py --n 2000 --seed 7 --out benchmarks/.data/samples.jsonl
    python benchmarks/generate.py --shape long --n 2000 --seed 7 --out benchmarks/.data/long.jsonl
"""

from __future__ import annotations

import argparse
import copy
import json
import random
from pathlib import Path
from typing import Any

Call = dict[str, Any]

ROOMS = ["Living Room", "Bedroom", "Kitchen", "Office", "Garage"]
DEVICES = [f"device_{i}" for i in range(1, 9)]
USERS = [f"user_{c}" for c in "abcdefghxyz"]
ORDERS = [f"ORD-{n}" for n in range(1000, 1040)]
CHANNELS = ["instagram", "tiktok", "newsletter", "linkedin"]


def home(rng: random.Random) -> tuple[str, list[Call]]:
    room = rng.choice(ROOMS)
    temperature = rng.choice([19, 20, 21, 22, 23, 21.5, 22.5])
    calls: list[Call] = [
        {"name": "get_user_preferences", "args": {"user_id": rng.choice(USERS)}},
        {"name": "set_temperature", "args": {"location": room, "temperature": temperature}},
    ]
    if rng.random() < 0.5:
        device = rng.choice(DEVICES)
        calls.append({"name": "get_device_info", "args": {"device_id": device}})
        calls.append(
            {
                "name": "set_device_info",
                "args": {
                    "device_id": device,
                    "updates": {
                        "status": rng.choice(["ON", "OFF"]),
                        "schedule": {"on": "23:00", "off": "08:00"},
                    },
                },
            }
        )
    return f"Set the {room.lower()} to {temperature} degrees and sort out my devices.", calls


def support(rng: random.Random) -> tuple[str, list[Call]]:
    orders = rng.sample(ORDERS, k=rng.randint(1, 3))
    calls: list[Call] = [
        {"name": "lookup_customer", "args": {"email": f"{rng.choice(USERS)}@example.com"}}
    ]
    calls += [
        {"name": "cancel_order", "args": {"order_id": order, "refund": True}} for order in orders
    ]
    if rng.random() < 0.6:
        calls.append(
            {
                "name": "escalate_ticket",
                "args": {
                    "ticket_id": rng.randint(100, 999),
                    "priority": rng.choice(["high", "urgent"]),
                    "tags": rng.sample(["billing", "shipping", "refund", "vip"], k=2),
                },
            }
        )
    return "Can you cancel my pending orders and escalate the open support requests?", calls


def content(rng: random.Random) -> tuple[str, list[Call]]:
    campaign = f"campaign_{rng.randint(1, 50)}"
    channel = rng.choice(CHANNELS)
    calls: list[Call] = [
        {"name": "get_campaign", "args": {"campaign_id": campaign}},
        {
            "name": "update_campaign",
            "args": {
                "campaign_id": campaign,
                "channels": [channel],
                "budget_multiplier": 0.5,
                "schedule": {"dates": ["2024-12-25"], "repeat": False},
            },
        },
    ]
    if rng.random() < 0.4:
        calls.append(
            {
                "name": "notify_team",
                "args": {
                    "message": f"Rescheduled {campaign} to run once on {channel} on 25 December."
                },
            }
        )
    return (
        f"Reschedule {campaign} to run once on {channel} with half the budget, only on December 25th.",
        calls,
    )


def _edit_text(rng: random.Random, text: str) -> str:
    if not text:
        return "x"
    position = rng.randrange(len(text))
    choice = rng.random()
    if choice < 0.4:
        return text[:position] + text[position + 1 :]
    if choice < 0.7:
        return text[:position] + rng.choice("aeiouxyz ") + text[position:]
    return text.upper() if rng.random() < 0.5 else text + " please"


def _perturb_value(rng: random.Random, value: Any) -> Any:
    if isinstance(value, bool):
        return int(value) if rng.random() < 0.5 else (not value)
    if isinstance(value, int):
        return rng.choice([float(value), str(value), value + 1])
    if isinstance(value, float):
        return rng.choice([int(value), str(value), round(value + 0.5, 1)])
    if isinstance(value, str):
        return _edit_text(rng, value)
    if isinstance(value, list):
        return list(reversed(value)) if len(value) > 1 else value + ["extra"]
    if isinstance(value, dict):
        reordered = dict(reversed(list(value.items())))
        if rng.random() < 0.5 and reordered:
            key = rng.choice(list(reordered))
            reordered[key] = _perturb_value(rng, reordered[key])
        return reordered
    return value


def predict(rng: random.Random, reference: list[Call]) -> list[Call]:
    predicted = copy.deepcopy(reference)
    faults = rng.choices(
        ["none", "swap", "missing", "extra", "retry", "change_arg", "drop_arg", "reorder_keys"],
        weights=[30, 10, 10, 10, 8, 20, 7, 5],
        k=rng.choice([1, 1, 1, 2]),
    )
    for fault in faults:
        if fault == "swap" and len(predicted) > 1:
            i = rng.randrange(len(predicted) - 1)
            predicted[i], predicted[i + 1] = predicted[i + 1], predicted[i]
        elif fault == "missing" and len(predicted) > 1:
            predicted.pop(rng.randrange(len(predicted)))
        elif fault == "extra":
            predicted.insert(
                rng.randrange(len(predicted) + 1),
                {"name": "search_docs", "args": {"query": "policy"}},
            )
        elif fault == "retry" and predicted:
            i = rng.randrange(len(predicted))
            predicted.insert(i, copy.deepcopy(predicted[i]))
        elif fault == "change_arg" and predicted:
            call = rng.choice(predicted)
            if call["args"]:
                key = rng.choice(list(call["args"]))
                call["args"][key] = _perturb_value(rng, call["args"][key])
        elif fault == "drop_arg" and predicted:
            call = rng.choice(predicted)
            if call["args"]:
                del call["args"][rng.choice(list(call["args"]))]
        elif fault == "reorder_keys" and predicted:
            call = rng.choice(predicted)
            call["args"] = dict(reversed(list(call["args"].items())))
    return predicted


def conversation(rng: random.Random, prompt: str, predicted: list[Call]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"type": "human", "content": prompt}]
    position = 0
    while position < len(predicted):
        size = (
            1 if rng.random() < 0.6 else min(rng.randint(2, 3), len(predicted) - position)
        )  # parallel calls
        batch = predicted[position : position + size]
        messages.append(
            {
                "type": "ai",
                "content": rng.choice(["", "Let me check.", "On it."]),
                "tool_calls": batch,
            }
        )
        for call in batch:
            failed = rng.random() < 0.05
            messages.append(
                {"type": "tool", "content": "error: timeout" if failed else f"{call['name']} ok"}
            )
        position += size
        if rng.random() < 0.2:
            messages.append({"type": "ai", "content": "Anything else before I continue?"})
            messages.append({"type": "human", "content": "Yes, go ahead."})
    messages.append({"type": "ai", "content": "All done. Anything else?"})
    if rng.random() < 0.3:
        messages.append({"type": "human", "content": "thanks"})
    return messages


def generate(n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        prompt, reference = rng.choice([home, support, content])(rng)
        predicted = predict(rng, reference) if rng.random() > 0.03 else []
        if rng.random() < 0.02:
            reference = []
        rows.append(
            {"user_input": conversation(rng, prompt, predicted), "reference_tool_calls": reference}
        )
    return rows


# -- fixed shapes ------------------------------------------------------------------------------

SHAPES = ("short", "typical", "long", "varied")


def _flat_call(rng: random.Random) -> Call:
    return rng.choice(
        [
            {"name": "get_user_preferences", "args": {"user_id": rng.choice(USERS)}},
            {
                "name": "set_temperature",
                "args": {
                    "location": rng.choice(ROOMS),
                    "temperature": rng.choice([19, 20, 21, 21.5, 22]),
                },
            },
            {"name": "get_device_info", "args": {"device_id": rng.choice(DEVICES)}},
            {"name": "cancel_order", "args": {"order_id": rng.choice(ORDERS), "refund": True}},
            {
                "name": "lookup_customer",
                "args": {"email": f"{rng.choice(USERS)}@example.com", "verified": False},
            },
            {"name": "get_campaign", "args": {"campaign_id": f"campaign_{rng.randint(1, 50)}"}},
            {
                "name": "escalate_ticket",
                "args": {"ticket_id": rng.randint(100, 999), "priority": "high", "note": ""},
            },
            {"name": "get_time", "args": {}},
        ]
    )


def _nested_call(rng: random.Random) -> Call:
    if rng.random() < 0.3:
        return _flat_call(rng)
    device = rng.choice(DEVICES)
    return rng.choice(
        [
            {
                "name": "set_device_info",
                "args": {
                    "device_id": device,
                    "updates": {
                        "status": rng.choice(["ON", "OFF"]),
                        "schedule": {"on": "23:00", "off": "08:00", "days": ["mon", "fri"]},
                        "level": rng.choice([0.5, 1, 75]),
                    },
                },
            },
            {
                "name": "escalate_ticket",
                "args": {
                    "ticket_id": rng.randint(100, 999),
                    "priority": rng.choice(["high", "urgent"]),
                    "tags": rng.sample(["billing", "shipping", "refund", "vip"], k=2),
                    "customer": {"id": rng.choice(USERS), "tier": rng.choice([1, 2, 3])},
                },
            },
            {
                "name": "update_campaign",
                "args": {
                    "campaign_id": f"campaign_{rng.randint(1, 50)}",
                    "channels": rng.sample(CHANNELS, k=rng.randint(1, 3)),
                    "budget_multiplier": rng.choice([0.5, 1.5, 2]),
                    "schedule": {
                        "dates": ["2024-12-25", "2025-01-01"][: rng.randint(1, 2)],
                        "repeat": rng.random() < 0.5,
                        "window": {"start": "09:00", "end": "17:00"},
                    },
                },
            },
        ]
    )


_CHAT = [
    "Sure, which one do you mean?",
    "The first one, please, and keep the rest as it is.",
    "I can do that. Do you want a confirmation by email as well?",
    "No need, thanks. Just tell me when it is done.",
    "Understood. One moment while I look at the account history for the last three months.",
    "Also, what did we decide last week about the schedule?",
]


def _shaped_conversation(
    rng: random.Random,
    predicted: list[Call],
    low: int,
    high: int,
    prompt: str,
    *,
    parallel: bool = False,
) -> list[dict[str, Any]]:
    """A conversation carrying ``predicted`` in ``low..high`` messages (chat pads it).

    With ``parallel``, consecutive calls of one tool are made by one message.
    """
    core: list[dict[str, Any]] = []
    position = 0
    while position < len(predicted):
        size = 1 if rng.random() < 0.6 else min(rng.randint(2, 3), len(predicted) - position)
        if parallel:
            name, size = predicted[position]["name"], 1
            while position + size < len(predicted) and predicted[position + size]["name"] == name:
                size += 1
        batch = predicted[position : position + size]
        core.append({"type": "ai", "content": rng.choice(["", "On it."]), "tool_calls": batch})
        for call in batch:
            failed = rng.random() < 0.05
            result = json.dumps({"ok": not failed, "tool": call["name"], "args": call["args"]})
            core.append({"type": "tool", "content": "error: timeout" if failed else result})
        position += size
    head = [{"type": "human", "content": prompt}]
    target = rng.randint(max(low, len(core) + 1), max(high, len(core) + 1))
    padding = max(0, target - len(core) - 2)  # room left for chat and a closing answer
    chat = [
        {"type": "ai" if i % 2 == 0 else "human", "content": rng.choice(_CHAT)}
        for i in range(padding - padding % 2)
    ]
    split = rng.randint(0, len(chat) // 2) * 2
    messages = head + chat[:split] + core + chat[split:]
    while len(messages) < target:
        messages.append({"type": "ai", "content": "All done. Anything else?"})
    return messages


_CITIES = ["Paris", "Berlin", "Rome", "Oslo", "Lima", "Quito", "Seoul", "Perth"]


def _group_call(rng: random.Random, tool: str, index: int) -> Call:
    """One call of a parallel group of ``tool``: the same tool, different (list) args."""
    if tool == "get_weather":
        return {
            "name": tool,
            "args": {"city": _CITIES[index % len(_CITIES)], "units": "metric", "days": [1, 2, 3]},
        }
    if tool == "get_order":
        return {
            "name": tool,
            "args": {
                "order_id": ORDERS[index],
                "fields": rng.sample(["status", "items", "eta"], 2),
            },
        }
    if tool == "tag_ticket":
        return {
            "name": tool,
            "args": {
                "ticket_id": 100 + index,
                "tags": rng.sample(["billing", "shipping", "refund", "vip"], rng.randint(1, 3)),
            },
        }
    return {
        "name": tool,
        "args": {"campaign_id": f"campaign_{index}", "channels": rng.sample(CHANNELS, 2)},
    }


def _varied_calls(rng: random.Random) -> list[Call]:
    """Reference calls of the ``varied`` shape: 3.4 on average, parallel groups of one tool."""
    count = rng.choices(range(1, 8), weights=[15, 19, 22, 19, 12, 7, 6])[0]
    calls: list[Call] = []
    if count > 1 and rng.random() < 0.8:
        size = rng.randint(2, count)
        tool = rng.choice(["get_weather", "get_order", "tag_ticket", "update_campaign"])
        start = rng.randrange(20)
        calls += [_group_call(rng, tool, start + i) for i in range(size)]
    while len(calls) < count:
        calls.insert(rng.randrange(len(calls) + 1), _flat_call(rng))
    return calls


def _varied_prediction(rng: random.Random, reference: list[Call]) -> list[Call]:
    """The faults of :func:`predict`, plus shuffles and list edits inside parallel groups."""
    predicted = predict(rng, reference)
    roll = rng.random()
    if roll < 0.3 and len(predicted) > 1:  # parallel calls answered in another order
        i = rng.randrange(len(predicted) - 1)
        j = rng.randrange(i + 1, min(len(predicted), i + 4))
        predicted[i : j + 1] = rng.sample(predicted[i : j + 1], j + 1 - i)
    elif roll < 0.45:  # one list argument changed
        lists = [c for c in predicted for v in c["args"].values() if isinstance(v, list)]
        if lists:
            call = rng.choice(lists)
            key = next(k for k, v in call["args"].items() if isinstance(v, list))
            call["args"][key] = _perturb_value(rng, call["args"][key])
    return predicted[:8]


def shaped_row(rng: random.Random, shape: str) -> dict[str, Any]:
    """One sample of ``shape`` (see :data:`SHAPES`)."""
    if shape == "short":
        reference = [_flat_call(rng)]
        predicted = predict(rng, reference)[:1] if rng.random() > 0.05 else []
        messages = _shaped_conversation(rng, predicted, 2, 4, "Please do this one thing.")
        return {"user_input": messages, "reference_tool_calls": reference}
    if shape == "typical":
        reference = [_flat_call(rng) for _ in range(rng.randint(1, 4))]
        predicted = predict(rng, reference)[:4] if rng.random() > 0.03 else []
        low, high = 4, 12
    elif shape == "varied":
        reference = _varied_calls(rng)
        predicted = _varied_prediction(rng, reference) if rng.random() > 0.03 else []
        prompt = "Check these for me and update what needs it, all of them at once."
        messages = _shaped_conversation(rng, predicted, 5, 12, prompt, parallel=True)
        return {"user_input": messages, "reference_tool_calls": reference}
    elif shape == "long":
        reference = [_nested_call(rng) for _ in range(rng.randint(3, 8))]
        predicted = predict(rng, reference)[:8] if rng.random() > 0.03 else []
        low, high = 20, 60
    else:
        raise ValueError(f"unknown shape {shape!r}; expected one of {SHAPES}")
    prompt = "Could you sort out my account and the open requests? " * rng.randint(1, 3)
    messages = _shaped_conversation(rng, predicted, low, high, prompt.strip())
    return {"user_input": messages, "reference_tool_calls": reference}


def generate_shape(shape: str, n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` seeded samples of one shape: ``short``, ``typical``, ``long`` or ``varied``."""
    rng = random.Random(f"{shape}-{seed}")
    return [shaped_row(rng, shape) for _ in range(n)]


def rows_of(shape: str, n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` seeded samples of ``shape``: ``mixed`` (:func:`generate`) or a fixed shape."""
    return generate(n, seed) if shape == "mixed" else generate_shape(shape, n, seed)


def write_samples(shape: str, n: int, seed: int, rows: list[dict[str, Any]] | None = None) -> Path:
    """Write ``rows`` (default: :func:`rows_of`) to ``.data/samples-<shape>-<n>-<seed>.jsonl``."""
    path = Path(__file__).parent / ".data" / f"samples-{shape}-{n}-{seed}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    found = rows_of(shape, n, seed) if rows is None else rows
    path.write_text("".join(json.dumps(row) + "\n" for row in found), encoding="utf-8")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=["mixed", *SHAPES], default="mixed")
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / ".data" / "samples.jsonl"
    )
    args = parser.parse_args()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as handle:
        for row in rows_of(args.shape, args.n, args.seed):
            handle.write(json.dumps(row) + "\n")
    print(f"wrote {args.n} samples to {args.out}")


if __name__ == "__main__":
    main()

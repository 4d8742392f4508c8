"""Long conversations for the context-budget tests and benchmarks (deterministic per seed)."""

from __future__ import annotations

import json
import random

from turneval import AIMessage, HumanMessage, MultiTurnSample, SystemMessage, ToolCall, ToolMessage
from turneval.messages import Message

_ASKS = (
    "Book a table for {n} at {h}pm near the station, please.",
    "My name is Ana and I am allergic to peanuts; remember that.",
    "Where is my order A{n}? It was due on {n} March.",
    "Can you find flights to Lisbon for {n} people on the {h}th?",
    "Actually make it {n} people, not {h}.",
    "What is the weather in Porto tomorrow?",
)
_ANSWERS = (
    "Done: a table for {n} at {h}pm is booked at Casa Azul; confirmation C{n}{h}.",
    "Noted, Ana: no peanuts. I will keep that in mind for every booking.",
    "Order A{n} left the warehouse yesterday and arrives on {h} March.",
    "I found {n} flights to Lisbon; the cheapest leaves at {h}:15 for 89 euros.",
    "Updated: {n} people. Anything else?",
    "Tomorrow in Porto: sunny, {h} degrees, light wind from the north.",
)


def tool_output(size: int, rng: random.Random) -> str:
    """A JSON tool output of about ``size`` characters (records of flights or orders)."""
    records = []
    length = 2
    while length < size:
        record = {
            "id": f"R{rng.randrange(10**6):06d}",
            "city": rng.choice(["Lisbon", "Porto", "Madrid", "Paris"]),
            "price": round(rng.uniform(20, 900), 2),
            "seats": rng.randrange(1, 200),
            "note": rng.choice(["window", "aisle", "late arrival", "refundable", "é ü 中"]),
        }
        text = json.dumps(record, ensure_ascii=False)
        records.append(record)
        length += len(text) + 2
    return json.dumps(records, ensure_ascii=False)[: max(size, 2)]


def long_conversation(
    turns: int,
    *,
    seed: int = 0,
    max_tool_chars: int = 2_000,
    big_every: int = 0,
    big_chars: int = 200_000,
    repeat_every: int = 0,
) -> MultiTurnSample:
    """A conversation of ``turns`` user turns, each answered by the AI, some through a tool.

    Every third turn calls a tool whose output is up to ``max_tool_chars`` characters; every
    ``big_every``-th tool call returns ``big_chars`` characters; every ``repeat_every``-th
    returns the same output as the one before (0: never).
    """
    rng = random.Random(seed)
    messages: list[Message] = [SystemMessage(content="You are a polite travel and booking agent.")]
    previous = ""
    calls = 0
    for turn in range(turns):
        n, h = rng.randrange(2, 9), rng.randrange(5, 11)
        messages.append(HumanMessage(content=rng.choice(_ASKS).format(n=n, h=h)))
        if turn % 3 == 2:
            calls += 1
            call = ToolCall(name="search", args={"q": f"query {turn}"}, id=f"c{turn}")
            messages.append(AIMessage(content="", tool_calls=[call]))
            if repeat_every and calls % repeat_every == 0 and previous:
                output = previous
            elif big_every and calls % big_every == 0:
                output = tool_output(big_chars, rng)
            else:
                output = tool_output(rng.randrange(50, max(51, max_tool_chars)), rng)
            previous = output
            messages.append(ToolMessage(content=output, tool_call_id=call.id))
        messages.append(AIMessage(content=rng.choice(_ANSWERS).format(n=n, h=h)))
    return MultiTurnSample(
        user_input=messages,
        reference="The user's bookings are made and their questions answered.",
        reference_topics=["travel", "bookings", "orders"],
        reference_tool_calls=[],
        metadata={"role": "a polite travel and booking agent"},
    )

"""Near-duplicates removed on seeded variants of distinct goals; coverage counted by hand."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turneval.errors import ConfigError
from turneval.messages import ToolCall
from turneval.scenarios import coverage, deduplicate, goal_similarity
from turneval.simulation import Scenario

GOALS = [
    "Cancel order A100 because it is no longer needed",
    "Change the delivery address of order C300 to 12 Mill St, Derby",
    "Get a full refund for the damaged order D400",
    "Find out whether order E500 has shipped yet",
    "Refund the broken mug of order F600, which cost 12.50",
    "Move my notes file into the archive folder",
    "Delete every log file in the tmp directory",
    "Book a table for two at eight tonight",
]


def near_duplicate(goal: str, rng: random.Random) -> str:
    """The goal with surface changes only: case, punctuation, one pair of words swapped."""
    words = goal.split()
    i = rng.randrange(len(words) - 1)
    words[i], words[i + 1] = words[i + 1], words[i]
    text = " ".join(words)
    text = text.upper() if rng.random() < 0.5 else text.lower()
    return text + rng.choice(["!", ".", "?", " please.", ""])


def test_the_distinct_goals_are_far_apart() -> None:  # the premise of the next test
    for first, second in itertools.combinations(GOALS, 2):
        assert goal_similarity(first, second) < 0.6


@pytest.mark.parametrize("seed", range(20))
def test_seeded_near_duplicates_are_removed_and_distinct_goals_kept(seed: int) -> None:
    rng = random.Random(seed)
    origins = [rng.randrange(len(GOALS)) for _ in range(12)]
    items = [Scenario(id=f"g{i}", goal=goal) for i, goal in enumerate(GOALS)]
    copies = [
        Scenario(id=f"d{n}", goal=near_duplicate(GOALS[origin], rng))
        for n, origin in enumerate(origins)
    ]
    mixed = items + copies
    rng.shuffle(mixed)
    kept, removed = deduplicate(mixed, threshold=0.9)
    # exactly one scenario per distinct goal survives: the first met of each family
    family = {f"g{i}": i for i in range(len(GOALS))}
    family.update({f"d{n}": origin for n, origin in enumerate(origins)})
    first: dict[int, str] = {}
    for scenario in mixed:
        first.setdefault(family[str(scenario.id)], str(scenario.id))
    assert [s.id for s in kept] == [s.id for s in mixed if first[family[str(s.id)]] == s.id]
    assert len(kept) == len(GOALS) and len(removed) == len(copies)
    for item in removed:
        assert item.stage == "duplicate"
        origin = first[family[str(item.scenario.id)]]
        assert f"scenario {origin} " in item.reason and ">= 0.9" in item.reason


def test_existing_scenarios_count_and_threshold_none_keeps_everything() -> None:
    mine = [Scenario(id="old", goal=GOALS[0])]
    new = [Scenario(goal=GOALS[0].lower() + "!"), Scenario(goal=GOALS[1])]
    kept, removed = deduplicate(new, existing=mine)
    assert [s.goal for s in kept] == [GOALS[1]]
    assert "existing scenario old" in removed[0].reason
    assert deduplicate(new + new, threshold=None) == (new + new, [])
    with pytest.raises(ConfigError, match=r"in \(0, 1\]"):
        deduplicate(new, threshold=1.5)


def made(goal: str, calls: list[str] = (), **generated: object) -> Scenario:  # type: ignore[assignment]
    return Scenario(
        goal=goal,
        reference_tool_calls=[ToolCall(name=name) for name in calls] or None,
        metadata={"generated": generated} if generated else None,
    )


def test_coverage_counts_by_hand() -> None:
    scenarios = [
        made("a", ["get", "cancel"], persona_type="vague", difficulty="easy", source="world"),
        made(
            "b", ["get", "cancel", "get"], persona_type="vague", difficulty="hard", source="world"
        ),
        made("c", [], tools=["refund"], persona_type="expert", difficulty="hard", source="tools"),
        made("d", ["get", "refund", "cancel"], difficulty="medium", source="failures"),
        made("e"),  # written by hand: no generation record
    ]
    found = coverage(scenarios, tools=["get", "cancel", "refund", "update"])
    # tools: a, b and d use get and cancel; c declares refund; d calls refund
    assert found.tools == {"get": 3, "cancel": 3, "refund": 2, "update": 0}
    # pairs: a {cancel,get}; b {cancel,get}; d {cancel,get},{get,refund},{cancel,refund}
    assert found.tool_pairs == {("cancel", "get"): 3, ("cancel", "refund"): 1, ("get", "refund"): 1}
    assert found.pairs_possible == 6 and found.unused_tools == ["update"]
    assert found.personas == {"vague": 2, "expert": 1, "unknown": 2}
    assert found.difficulty == {"easy": 1, "medium": 1, "hard": 2, "unknown": 1}
    assert found.sources == {"failures": 1, "given": 1, "tools": 1, "world": 2}
    text = str(found)
    assert "tool pair (3/6 pairs)" in text and "tools no scenario exercises: update" in text
    assert found.to_dict()["tool_pairs"] == {"cancel+get": 3, "cancel+refund": 1, "get+refund": 1}
    assert "<td>update</td><td>0</td>" in found.html()


def variant(kind: str, persona: str, fault: dict[str, str] | None = None) -> Scenario:
    generated: dict[str, object] = {"kind": kind, "source": "failures"}
    if fault:
        generated["fault"] = fault
    return Scenario(goal=GOALS[2], persona=persona, metadata={"generated": generated})


def test_variants_that_keep_the_goal_are_told_apart_by_kind_fault_and_persona() -> None:
    original = Scenario(id="orig", goal=GOALS[2], persona="calm")
    harder = variant("harder_persona", "an angry buyer who shouts")
    faulty = variant("tool_fault", "an angry buyer who shouts", {"tool": "refund", "kind": "error"})
    other_fault = variant(
        "tool_fault", "an angry buyer who shouts", {"tool": "lookup", "kind": "error"}
    )
    same = variant("harder_persona", "An angry buyer, who shouts!")
    rephrased = Scenario(goal=GOALS[2].upper(), metadata={"generated": {"kind": "paraphrase"}})
    kept, removed = deduplicate([harder, faulty, other_fault, same, rephrased], existing=[original])
    assert kept == [harder, faulty, other_fault]
    assert [d.scenario for d in removed] == [same, rephrased]
    assert "existing scenario orig" in removed[1].reason


def reference_dedup(
    scenarios: list[Scenario], existing: list[Scenario], threshold: float
) -> list[str | None]:
    """The rule as written: each goal against the kept ones of its bucket, one at a time."""
    from turneval.scenarios._quality import dedup_text

    kept: list[Scenario] = list(existing)
    ids: list[str | None] = []
    for scenario in scenarios:
        bucket, text = dedup_text(scenario)
        similar = [
            goal_similarity(text, dedup_text(other)[1])
            for other in kept
            if dedup_text(other)[0] == bucket
        ]
        if not similar or max(similar) < threshold:
            kept.append(scenario)
            ids.append(scenario.id)
    return ids


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.lists(
            st.sampled_from(["cancel", "order", "A100", "C300", "refund", "now"]),
            min_size=1,
            max_size=5,
        ),
        min_size=1,
        max_size=25,
    ),
    st.lists(st.sampled_from(["goal", "harder_persona", "tool_fault"]), min_size=25, max_size=25),
    st.integers(0, 3),
    st.sampled_from([0.5, 0.8, 0.9, 1.0]),
)
def test_the_matrix_blocks_keep_what_the_rule_keeps(
    words: list[list[str]], kinds: list[str], existing_count: int, threshold: float
) -> None:
    scenarios = [
        Scenario(
            id=f"s{i}",
            goal=" ".join(goal),
            persona=["calm", "angry"][i % 2],
            metadata={"generated": {"kind": kinds[i]}},
        )
        for i, goal in enumerate(words)
    ]
    existing, fresh = scenarios[:existing_count], scenarios[existing_count:]
    kept, removed = deduplicate(fresh, threshold=threshold, existing=existing)
    assert [s.id for s in kept] == reference_dedup(fresh, existing, threshold)
    assert len(kept) + len(removed) == len(fresh)

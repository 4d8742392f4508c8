"""Offline grounding sees numbers, dates, amounts, quantities and names (issue 31, item 3).

Each row: a claim, the one fact it is checked against, whether the claim is grounded, and
whether it is an anti-citation of the fact (anti-citations on, default thresholds). A value
that differs from the fact the claim otherwise matches makes the claim ungrounded and an
anti-citation; an equal value in another surface form grounds it.
"""

from __future__ import annotations

import pytest

from turneval.grounding import check_grounding

GOOGLE = "Google was founded by Larry Page and Sergey Brin in 1998."
STORE = "The store opened on March 3, 2021."

# (claim, fact, grounded, anti-citation)
DIFFERENT: list[tuple[str, str, bool, bool]] = [
    # the seed's own example of an ungrounded claim: right founders, wrong year
    ("Google was founded by Larry Page and Sergey Brin in 1975.", GOOGLE, False, True),
    ("Google was founded in 1975 by Larry Page and Sergey Brin.", GOOGLE, False, True),
    ("Google was founded by Bill Gates.", "Google was founded by Larry Page.", False, True),
    ("Google was founded by Larry Page and Bill Gates in 1998.", GOOGLE, False, True),
    ("The store opened on March 5, 2021.", STORE, False, True),
    ("The store opened on 2021-03-05.", STORE, False, True),
    ("The store opened in April 2021.", STORE, False, True),
    ("The store opened in 2020.", STORE, False, True),
    ("The store opened on 3/5/2021.", "The store opened on 2021-03-04.", False, True),
    (
        "Google was founded in 2004.",
        "Google was founded in 1998 and went public in 2004.",
        False,
        True,
    ),
    ("The movie won 12 Academy Awards.", "The movie won 11 Academy Awards.", False, True),
    ("The ticket costs $25.", "The ticket costs $21.50.", False, True),
    (
        "The U.S. population was 331 million in 2021.",
        "In 2020, the United States had a population of 331 million.",
        False,
        True,
    ),
    ("The ticket costs 21.50 EUR.", "The ticket costs $21.50.", False, True),
    ("Revenue grew 15% last year.", "Revenue grew 12 percent last year.", False, True),
    ("The company has 3.5 million users.", "The company has 3,700,000 users.", False, True),
    ("The race is 10 km long.", "The race is 5 kilometers long.", False, True),
    ("The parcel weighs 2 kg.", "The parcel weighs 2500 g.", False, True),
    ("The Eiffel Tower is 330 metres tall.", "The Eiffel Tower is 300 metres tall.", False, True),
    ("The order shipped on Tuesday.", "The order shipped on Monday.", False, True),
    ("The capital of Australia is Sydney.", "The capital of Australia is Canberra.", False, True),
    (
        "Titanic was directed by Steven Spielberg.",
        "Titanic was directed by James Cameron.",
        False,
        True,
    ),
    ("Sales rose to $4.2 billion in 2020.", "Sales rose to $4.2 billion in 2019.", False, True),
    ("The town has 12,000 residents.", "The town has 1,200 residents.", False, True),
    # a different name outside any slot, the rest equal in other forms (it was grounded)
    (
        "The Munich team meets on 2021-03-03 with 3.7 million users.",
        "The Berlin team meets on March 3, 2021 with 3,700,000 users.",
        False,
        True,
    ),
    (
        "The Munich office hosts the meeting on March 3, 2021.",
        "The Berlin office hosts the meeting on March 3, 2021.",
        False,
        True,
    ),
]

SAME_VALUE: list[tuple[str, str, bool, bool]] = [
    ("The store opened on March 3, 2021.", "The store opened on 2021-03-03.", True, False),
    ("The store opened on 2021-03-03.", "The store opened on 3 March 2021.", True, False),
    ("The store opened on the 3rd of March, 2021.", STORE, True, False),
    ("The store opened on Mar. 3, 2021.", STORE, True, False),
    ("The store opened on 3/3/2021.", STORE, True, False),
    ("The store opened on 13/3/2021.", "The store opened on March 13, 2021.", True, False),
    ("The store opened on 3/4/2021.", "The store opened on April 3, 2021.", True, False),
    ("The store opened in March 2021.", STORE, True, False),
    ("The store opened in 2021.", STORE, True, False),
    ("The ticket costs 21.50 dollars.", "The ticket costs $21.5.", True, False),
    ("The ticket costs 21.50 USD.", "The ticket costs $21.50.", True, False),
    ("The ticket costs $21.50.", "The ticket costs USD 21.5.", True, False),
    ("The company has 3.7 million users.", "The company has 3,700,000 users.", True, False),
    ("The company has 3,700,000 users.", "The company has 3.7 million users.", True, False),
    ("The budget is $3.7m.", "The budget is 3.7 million dollars.", True, False),
    ("Revenue grew 12% last year.", "Revenue grew 12 percent last year.", True, False),
    ("Revenue grew 12 percent last year.", "Revenue grew 12% last year.", True, False),
    ("The race is 5 km long.", "The race is 5 kilometers long.", True, False),
    ("The race is 5 kilometres long.", "The race is 5000 m long.", True, False),
    ("The parcel weighs 2 kg.", "The parcel weighs 2000 g.", True, False),
    # initials either way, dotted or not ("us" is also a stop word)
    ("The United States has 50 states.", "The US has 50 states.", True, False),
    ("She moved to the United States in 2019.", "She moved to the U.S. in 2019.", True, False),
    (
        "The U.S. population was 331 million in 2020.",
        "In 2020, the United States had a population of 331 million.",
        True,
        False,
    ),
]

STAYS_GROUNDED: list[tuple[str, str, bool, bool]] = [
    (GOOGLE, "Google was founded by Sergey Brin and Larry Page in 1998.", True, False),
    (
        "Google was founded in 1998.",
        "Google was founded in 1998 and went public in 2004.",
        True,
        False,
    ),
    (
        "Google went public in 2004.",
        "Google was founded in 1998 and went public in 2004.",
        True,
        False,
    ),
    ("Titanic was directed by Cameron.", "Titanic was directed by James Cameron.", True, False),
    (
        "Kate Winslet starred in Titanic.",
        "Titanic stars Kate Winslet and Leonardo DiCaprio.",
        True,
        False,
    ),
    ("The company is based in the US.", "The company is based in the United States.", True, False),
    (
        "The flight costs $300 and takes 5 hours.",
        "The flight takes 5 hours and costs $300.",
        True,
        False,
    ),
    (
        "The movie won 11 Academy Awards.",
        "The movie won 11 Academy Awards, and was nominated for 14.",
        True,
        False,
    ),
    ("Rome has 24 degrees.", "Paris: 18 degrees, Rome: 24 degrees.", True, False),
    # a year and an amount are not one list: "$12" is said of the price, not "in" anything
    ("The price was $12 in 2021.", "The price was $10 in 2020 and $12 in 2021.", True, False),
    ("The price was $11 in 2021.", "The price was $10 in 2020 and $12 in 2021.", False, True),
    ("It costs 21.50 dollars.", "It costs 21.5 dollars.", True, False),
    # a name the fact holds as words (not read as a name there) is stated; a name the fact
    # adds is no difference
    (
        "Titanic stars Kate Winslet.",
        "Kate Winslet starred in Titanic, directed by James Cameron.",
        True,
        False,
    ),
    (
        "The Berlin office hosts the meeting on 2021-03-03.",
        "On March 3, 2021, the Berlin office hosts the meeting with Anna Schmidt.",
        True,
        False,
    ),
]

# Still not grounded, but not contradicted either: a different subject, or nothing to compare.
NEITHER: list[tuple[str, str, bool, bool]] = [
    ("Paris has 18 degrees.", "Rome: 24 degrees, cloudy.", False, False),
    ("Titanic was directed by James Cameron.", "Titanic was directed by Cameron.", False, False),
    ("The movie won 11 Oscars.", "The movie was released on December 19, 1997.", False, False),
    # more precise than the fact, or a number the fact spells out: unstated, not contradicted
    ("The store opened on 2021-03-03.", "The store opened in 2021.", False, False),
    ("The event was held on 2021-03-03.", "The event was held in March 2021.", False, False),
    ("The team has 12 members.", "The team has twelve members.", False, False),
]

CASES = DIFFERENT + SAME_VALUE + STAYS_GROUNDED + NEITHER


@pytest.mark.parametrize(("claim", "fact", "grounded", "anti"), CASES)
def test_values_in_claims(claim: str, fact: str, grounded: bool, anti: bool) -> None:
    result = check_grounding(claim, [fact], enable_anti_citations=True)
    [only] = result.claims
    assert (only.citation_indices == [0], only.anti_citation_indices == [0]) == (grounded, anti)
    assert result.support_score == float(grounded)
    assert result.contradiction_score == float(anti)


def test_the_table_is_large_and_balanced() -> None:
    assert len(CASES) >= 40
    assert len(DIFFERENT) >= 15 and len(SAME_VALUE) >= 15 and len(STAYS_GROUNDED) >= 8


def test_values_listed_in_one_slot_may_come_from_several_facts() -> None:
    facts = ["Marie Curie won the Nobel Prize in 1903.", "She won it again in 1911."]
    result = check_grounding(
        "Marie Curie won the Nobel Prize in 1903 and 1911.", facts, enable_anti_citations=True
    )
    [claim] = result.claims
    assert (claim.citation_indices, claim.anti_citation_indices) == ([0, 1], [])
    # a listed value no fact states is still caught
    wrong = check_grounding(
        "Marie Curie won the Nobel Prize in 1903 and 1912.", facts, enable_anti_citations=True
    )
    assert wrong.support_score == 0.0 and wrong.claims[0].anti_citation_indices == [0]

import json
from pathlib import Path

import pytest

from turneval import (
    AIMessage,
    ConfigError,
    HumanMessage,
    MultiTurnSample,
    SingleTurnSample,
    ToolCall,
    ToolMessage,
)
from turneval.cli import main
from turneval.grounding import Fact, check_grounding, split_claims
from turneval.metrics import Groundedness, ToolOutputGroundedness

from .._fakes import ScriptedChatModel

# The facts of the check-grounding documentation (seed).
TITANIC = [
    Fact(
        text="Titanic is a 1997 American epic romantic disaster movie. It was directed, written, and "
        "co-produced by James Cameron. The movie is about the 1912 sinking of the RMS Titanic. It "
        "stars Kate Winslet and Leonardo DiCaprio. The movie was released on December 19, 1997. It "
        "received positive critical reviews. The movie won 11 Academy Awards, and was nominated for "
        "fourteen total Academy Awards.",
        attributes={"author": "Simple Wikipedia"},
    ),
    Fact(
        text='James Cameron\'s "Titanic" is an epic, action-packed romance set against the ill-fated '
        "maiden voyage of the R.M.S. Titanic; the pride and joy of the White Star Line and, at the "
        "time, the largest moving object ever built. She was the most luxurious liner of her era -- "
        'the "ship of dreams" -- which ultimately carried over 1,500 people to their death in the '
        "ice cold waters of the North Atlantic in the early hours of April 15, 1912.",
        attributes={"author": "Rotten Tomatoes"},
    ),
]


def test_seed_released_in_1997() -> None:
    result = check_grounding(
        "Titanic was directed by James Cameron. It was released in 1997.", TITANIC
    )
    assert result.support_score >= 0.9
    assert [c.citation_indices for c in result.claims] == [[0], [0]]
    assert [(c.fact_index, c.attributes) for c in result.cited_chunks] == [
        (0, {"author": "Simple Wikipedia"})
    ]
    assert result.contradiction_score is None and result.helpfulness_score is None
    assert all(c.score is None for c in result.claims)  # claim-level scores are off by default


def test_seed_claim_supported_by_two_facts() -> None:
    answer = (
        "Titanic was directed by James Cameron. It was based on the sinking of the RMS Titanic "
        "that led to the death of 1500 people."
    )
    result = check_grounding(answer, TITANIC)
    assert result.support_score >= 0.9
    # "1500 people ... death" is in fact 1 ("1,500 people to their death"), the sinking in fact 0.
    assert result.claims[1].citation_indices == [0, 1]


def test_seed_wrong_cast_is_not_grounded_and_contradicts() -> None:
    answer = "Titanic was directed by James Cameron. It starred Brad Pitt and Kate Winslet"
    result = check_grounding(answer, TITANIC)
    assert result.support_score <= 0.6
    assert result.claims[1].citation_indices == [] and result.claims[1].anti_citation_indices == []
    with_anti = check_grounding(answer, TITANIC, enable_anti_citations=True)
    assert with_anti.claims[1].anti_citation_indices == [0]  # fact 0 names the real cast
    assert with_anti.contradiction_score == 0.5  # 1 of 2 claims (Vertex's example: 0.49)


def test_seed_filler_needs_no_check() -> None:
    only = check_grounding("Here is what I found.", TITANIC)
    assert [c.grounding_check_required for c in only.claims] == [False]
    assert only.support_score == 1.0 and only.cited_chunks == []
    mixed = check_grounding("Here is what I found. Titanic was directed by James Cameron.", TITANIC)
    assert [c.grounding_check_required for c in mixed.claims] == [False, True]
    assert mixed.support_score == 1.0


def test_claim_level_scores_and_thresholds() -> None:
    answer = (
        "Titanic was directed by James Cameron. It was based on the sinking of the RMS Titanic "
        "that led to the death of 1500 people."
    )
    scored = check_grounding(answer, TITANIC, enable_claim_level_score=True)
    # Second claim: tokens based, sinking, RMS(2), Titanic(2), led, death, 1500(2), people = 11;
    # based and led are missing: (11 - 2) / 11, all names and numbers covered.
    assert scored.claims[0].score == 1.0 and scored.claims[1].score == round(9 / 11, 4)
    strict = check_grounding(answer, TITANIC, citation_threshold=0.9)
    assert strict.claims[1].citation_indices == [] and strict.support_score == 0.5


def test_changed_number_is_a_contradiction() -> None:
    result = check_grounding("The movie was released in 1998.", TITANIC, enable_anti_citations=True)
    assert result.support_score == 0.0 and result.claims[0].anti_citation_indices == [0]
    lenient = check_grounding(
        "The movie was released in 1998 to praise.",
        TITANIC,
        enable_anti_citations=True,
        anti_citation_threshold=1.0,
    )
    assert lenient.claims[0].anti_citation_indices == []  # "praise" is not in the fact's frame


def test_a_number_is_found_whole_and_trailing_decimal_zeros_do_not_count() -> None:
    # "It costs 5 dollars.": costs, 5 (a number: weight 2), dollars; "5" inside "2.5" or "12"
    # inside "0.12" is another number: the claim's number is missing, so its support is 0.
    five = check_grounding(
        "It costs 5 dollars.", ["It costs 2.5 dollars."], enable_anti_citations=True
    )
    assert five.support_score == 0 and five.claims[0].anti_citation_indices == [0]  # changed
    assert check_grounding("Revenue grew 12%.", ["revenue growth: 0.12"]).support_score == 0
    assert check_grounding("It costs 21 dollars.", ["It costs 21.5 dollars."]).support_score == 0
    assert check_grounding("One seat (1) left.", ["Seats left: 1,500."]).support_score == 0
    # 21.50 is 21.5 and $1234.50 is 1234.5, whichever side writes the zero: every token found.
    for claim, fact in [
        ("It costs 21.50 dollars.", "It costs 21.5 dollars."),
        ("It costs 21.5 dollars.", "It costs 21.50 dollars."),
        ("AAPL trades at $1234.50.", "AAPL trades at 1234.5 (USD)."),
        ("It costs 12.0 dollars.", "It costs 12 dollars."),
        ("Hall is set to 19.", "Hall set to 19.0"),  # a float argument's text
        ("Hall is set to 19.", "Hall set to 19.00"),
    ]:
        result = check_grounding(claim, [fact], enable_claim_level_score=True)
        assert result.claims[0].score == 1.0, claim


def test_an_identifier_of_letters_and_digits_is_one_name() -> None:
    # ORD1234 is one token (a name: weight 2, found whole), as the tool output writes it:
    # order (1), ORD1234 (2), shipped (1): 3/4 covered, the name found -> grounded at 0.75.
    result = check_grounding(
        "Your order ORD1234 has shipped.", ["ORD1234: shipped"], enable_claim_level_score=True
    )
    assert result.claims[0].score == 0.75 and result.support_score == 1.0
    assert (
        check_grounding("Your order ORD1235 has shipped.", ["ORD1234: shipped"]).support_score == 0
    )
    room = check_grounding(
        "Room0 is set to 20.", ["Room0 set to 20.0"], enable_claim_level_score=True
    )
    assert room.claims[0].score == 1.0  # Room0, set, 20 (as 20.0): every token found
    assert check_grounding("It was the 1990s.", ["In the 1990s."]).support_score == 1.0


def test_claim_offsets_and_sentence_splitting() -> None:
    text = "Dr. Smith sailed on the R.M.S. Titanic at 3.5 knots. Then J. Doe arrived!  Good."
    claims = split_claims(text)
    assert [c[0] for c in claims] == [
        "Dr. Smith sailed on the R.M.S. Titanic at 3.5 knots.",
        "Then J. Doe arrived!",
        "Good.",
    ]
    assert all(text[start:end] == sentence for sentence, start, end in claims)
    result = check_grounding(text, ["unrelated"])
    assert [(c.start, c.end) for c in result.claims] == [(s, e) for _, s, e in claims]


@pytest.mark.parametrize(
    ("claim", "fact"),
    [
        (
            "The clinic was opened by Dr. Jones in the spring.",
            "The clinic was opened by Dr. Smith in the spring.",
        ),
        (
            "The bridge was designed by J. Smith in 1920.",
            "The bridge was designed by J. Smith in 1931.",
        ),
        (
            "The firm hired Acme Corp. in 2019 for the audit.",
            "The firm hired Acme Corp. in 2020 for the audit.",
        ),
    ],
)
def test_a_fact_sentence_ends_where_a_claim_sentence_ends(claim: str, fact: str) -> None:
    """An abbreviation or an initial ends no sentence of the facts either (one rule).

    The claim's frame (clinic, opened, spring; or designed, bridge; hired, audit, firm) is all
    in the fact's one sentence, which states another name or year in its slot: a differing
    value, so the claim anti-cites the fact. Had the passage been cut after "Dr.", "J." or
    "Corp." (as the facts once were), neither half would hold the frame and the contradiction
    would go unseen.
    """
    assert [sentence for sentence, _, _ in split_claims(fact)] == [fact]
    result = check_grounding(claim, [fact], enable_anti_citations=True)
    assert result.support_score == 0.0
    assert result.claims[0].anti_citation_indices == [0]
    assert check_grounding(fact, [fact]).support_score == 1.0


def test_limits_name_the_limit() -> None:
    with pytest.raises(ConfigError, match="at most 200 facts, got 201"):
        check_grounding("x", ["fact"] * 201)
    with pytest.raises(ConfigError, match="fact 1 has 10001 characters; the limit is 10000"):
        check_grounding("x", ["ok", "a" * 10_001])
    with pytest.raises(ConfigError, match="4097 tokens .*the limit is 4096"):
        check_grounding("word " * 4097, ["fact"])
    with pytest.raises(ConfigError, match="citation_threshold must be in"):
        check_grounding("x", ["fact"], citation_threshold=1.5)


def test_llm_backend_judges_all_claims_in_one_call() -> None:
    verdict = {
        "claims": [
            {
                "index": 0,
                "reason": "fact 0",
                "needs_check": True,
                "verdict": "supported",
                "fact_indices": [0, 7],
                "score": 0.95,
            },
            {
                "index": 1,
                "reason": "wrong cast",
                "needs_check": True,
                "verdict": "contradicted",
                "fact_indices": [0],
                "score": 0.1,
            },
            {
                "index": 2,
                "reason": "filler",
                "needs_check": False,
                "verdict": "neutral",
                "fact_indices": [],
                "score": 0.0,
            },
        ],
        "helpfulness": 0.7,
    }
    model = ScriptedChatModel(responses=[json.dumps(verdict)])
    answer = "Titanic was directed by James Cameron. It starred Brad Pitt. Here is what I found."
    result = check_grounding(
        answer,
        TITANIC,
        llm=model,
        enable_anti_citations=True,
        enable_claim_level_score=True,
        prompt="Who directed and starred in Titanic?",
    )
    assert model.calls == 1
    assert result.support_score == 0.5 and result.contradiction_score == 0.5
    assert result.claims[0].citation_indices == [0]  # the out-of-range index 7 is dropped
    assert result.claims[1].anti_citation_indices == [0]
    assert result.claims[2].grounding_check_required is False
    assert result.claims[0].score == 0.95 and result.helpfulness_score == 0.7
    prompt = model.prompts[0][1].content
    assert (
        "[1] James Cameron's" in prompt
        and "(1) It starred Brad Pitt." in prompt
        and "<prompt>" in prompt
    )


def test_llm_supported_claims_citing_no_given_fact_are_not_grounded() -> None:
    # The judge says "supported" but cites only fact 5 of one fact (or none): no citation, so
    # not grounded, and both metrics and their reasons agree on 0/1.
    for cited in ([5], []):
        claim = {"index": 0, "reason": "r", "needs_check": True, "verdict": "supported"}
        verdict = {"claims": [{**claim, "fact_indices": cited, "score": 0.9}], "helpfulness": None}
        llm = ScriptedChatModel(responses=[json.dumps(verdict)] * 2)
        single = SingleTurnSample(
            user_input="q", response="Paris has 18 degrees.", retrieved_contexts=["Paris: 18"]
        )
        result = Groundedness(llm=llm).score(single)
        assert (result.value, result.reason) == (0.0, "grounded claims=0/1=0.000")
        multi = MultiTurnSample(
            user_input=[
                HumanMessage(content="q"),
                AIMessage(tool_calls=[ToolCall(name="weather", args={}, id="c1")]),
                ToolMessage(content="Paris: 18", tool_call_id="c1"),
                AIMessage(content="Paris has 18 degrees."),
            ]
        )
        assert ToolOutputGroundedness(llm=llm).score(multi).value == 0.0


def test_llm_claims_the_judge_leaves_out_are_not_grounded() -> None:
    # A model that ignores the schema judges only the first of two claims: the second one is
    # neither exempt nor grounded, so the score is 1/2, not 1/1.
    claim = {"index": 0, "reason": "r", "needs_check": True, "verdict": "supported"}
    verdict = {"claims": [{**claim, "fact_indices": [0], "score": 0.9}], "helpfulness": None}
    llm = ScriptedChatModel(responses=[json.dumps(verdict)])
    answer = "Titanic was directed by James Cameron. It won eleven Oscars."
    result = check_grounding(answer, TITANIC, llm=llm)
    assert result.support_score == 0.5
    assert result.claims[0].citation_indices == [0]
    assert result.claims[1].grounding_check_required and result.claims[1].citation_indices == []


def test_groundedness_metric() -> None:
    sample = SingleTurnSample(
        response="Titanic was directed by James Cameron. It starred Brad Pitt and Kate Winslet",
        retrieved_contexts=[fact.text for fact in TITANIC],
    )
    result = Groundedness(enable_anti_citations=True).score(sample)
    assert result.value == 0.5
    assert result.reason == "grounded claims=1/2=0.500, contradiction=0.500"
    assert result.details["claims"][1]["anti_citation_indices"] == [0]


def test_tool_output_groundedness_cites_the_tool_call() -> None:
    sample = MultiTurnSample(
        user_input=[
            HumanMessage(content="What's the weather in Paris and in Rome?"),
            AIMessage(
                content="It is sunny in Paris.",
                tool_calls=[ToolCall(name="weather", args={"city": "Paris"}, id="c1")],
            ),
            ToolMessage(content="Paris: 18 degrees, sunny.", tool_call_id="c1"),
            AIMessage(tool_calls=[ToolCall(name="weather", args={"city": "Rome"}, id="c2")]),
            ToolMessage(content="Rome: 24 degrees, cloudy.", tool_call_id="c2"),
            AIMessage(
                content="Paris has 18 degrees. Rome has 24 degrees and clouds. Rome will get snow tomorrow."
            ),
        ]
    )
    result = ToolOutputGroundedness().score(sample)
    # Answer 1 comes before any tool output: its claim cannot be grounded (0/1).
    # Answer 2: Paris 18 (tool c1), Rome 24 clouds (tool c2) grounded; the snow claim is not. Total 2/4.
    assert result.value == 2 / 4
    assert result.reason == "grounded claims=2/4=0.500 over 2 AI answer(s)"
    final = result.details["answers"][1]
    assert [c["citation_indices"] for c in final["claims"]] == [[0], [1], []]
    assert [(c["tool"], c["tool_call_id"], c["message_index"]) for c in final["cited"]] == [
        ("weather", "c1", 2),  # user_input[2] and [4]: numbers, as the answer's own index
        ("weather", "c2", 4),
    ]
    assert final["message_index"] == 5


def test_cli_grounds_offline_without_a_judge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The grounding metrics fall back to the offline backend: no judge flag, no key needed.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    sample = SingleTurnSample(
        user_input="q",
        response="Titanic was directed by James Cameron. It starred Brad Pitt and Kate Winslet",
        retrieved_contexts=[fact.text for fact in TITANIC],
    )
    data = tmp_path / "data.jsonl"
    data.write_text(sample.model_dump_json() + "\n")
    out = tmp_path / "out"
    assert (
        main(["evaluate", str(data), "--metric", "groundedness", "--out", str(out), "--quiet"]) == 0
    )
    row = json.loads((out / "results.jsonl").read_text())
    assert row["groundedness"] == 0.5  # as test_groundedness_metric: 1 of 2 claims grounded


def test_a_tool_output_past_the_fact_limit_is_cut_into_facts_naming_the_call() -> None:
    long_output = "Filler words about nothing. " * 400 + "Paris: 18 degrees, sunny."  # 11,225
    sample = MultiTurnSample(
        user_input=[
            HumanMessage(content="Weather in Paris?"),
            AIMessage(tool_calls=[ToolCall(name="search", args={"q": "Paris"}, id="c1")]),
            ToolMessage(content=long_output, tool_call_id="c1"),
            AIMessage(content="Paris has 18 degrees."),
        ]
    )
    result = ToolOutputGroundedness().score(sample)  # was: ConfigError, fact 0 has 11225 chars
    assert result.value == 1.0  # Paris, 18, degrees: all in the output's second piece
    [answer] = result.details["answers"]
    assert [(c["fact_index"], c["tool_call_id"], c["message_index"]) for c in answer["cited"]] == [
        (1, "c1", 2)
    ]


def test_groundedness_checks_a_long_context_in_pieces_and_cites_the_context() -> None:
    long_context = "Filler words about nothing. " * 400 + "Paris: 18 degrees, sunny."  # 11,225
    sample = SingleTurnSample(
        user_input="Weather in Paris?",
        response="Paris has 18 degrees. Rome has snow.",
        retrieved_contexts=["Rome: 24 degrees, cloudy.", long_context],
    )
    result = Groundedness(enable_anti_citations=True).score(sample)  # was: ConfigError
    assert result.value == 0.5  # Paris 18 degrees: context 1 (its second piece); snow: nothing
    claims = result.details["claims"]
    assert [c["citation_indices"] for c in claims] == [[1], []]
    assert [(c["fact_index"], c["text"]) for c in result.details["cited_chunks"]] == [
        (1, long_context)
    ]

"""The offline grounding index against slow, obviously correct references.

The index finds a claim token's passages with numpy over the text's code points; the references
below scan the text character by character with ``str.find`` and ``str.isalnum`` (what the
definitions say), on generated texts mixing ASCII, accented, Greek, CJK and astral characters,
numbers with separators, abbreviations, quotes and newlines.
"""

from __future__ import annotations

import bisect
import functools
import random
import re

from turneval.grounding import Fact, check_grounding, split_claims
from turneval.grounding._codepoints import code_points
from turneval.grounding._index import Index
from turneval.grounding._sentences import sentence_starts
from turneval.grounding._tokens import Token, claim_tokens

WORDS = [
    "the", "Ship", "sank", "in", "1912", "1,500", "people", "Titanic", "ΣΟΦΟΣ", "σοφός", "café",
    "naïve", "東京", "𝒳ray", "Dr.", "U.S.", "stars", "starred", "White", "Star", "Line", "İstanbul",
    "3.5", "licence", "licensed", "e.g.", "x", "A.", "ok", "über", "ﬁle", "0.12", "12", "3.50",
    "1", "5", "12.0", "5.00", "ORD1234", "Room0", "R.M.S.", "etc.", "Approx.", "No.", "é",
    "a_b", "_",
]  # fmt: skip
ENDS = [
    " ", " ", " ", ". ", "! ", "? ", '." ', ".) ", '.") ', "?!' ", "\n", "\n\n", ", ", "-",
    "'", "’s ", ".\u00a0", ".\x0b", ".\u2003", "...", ".", "!",
]  # fmt: skip


def random_text(rng: random.Random, words: int) -> str:
    return "".join(rng.choice(WORDS) + rng.choice(ENDS) for _ in range(words))


# The one sentence rule, written as the regular expression it was first written as (the claim
# splitter's): a run of marks, closers, then white space; not after an abbreviation or a letter.
ABBREVIATIONS = set(
    """mr mrs ms dr prof sr jr st vs etc e.g i.e inc ltd co corp no fig approx dept est u.s u.k
    r.m.s jan feb mar apr jun jul aug sep sept oct nov dec""".split()
)
SENTENCE_END = re.compile(r"[.!?]+[\"')\]]*(?=\s)")


@functools.lru_cache(maxsize=4)
def reference_starts(text: str) -> list[int]:
    starts = {0}
    for match in SENTENCE_END.finditer(text):
        first = match.start()  # the word before: letters, digits, "_" and "." (re's [\w.])
        while first and (text[first - 1].isalnum() or text[first - 1] in "_."):
            first -= 1
        token = text[first : match.start()].lower()
        if match.group().startswith(".") and (
            token in ABBREVIATIONS or (len(token) == 1 and token.isalpha())
        ):
            continue
        starts.add(match.end())
    starts.update(i + 1 for i, char in enumerate(text) if char == "\n")
    return sorted(starts)


def reference_passages(index: Index, token: Token, lowercase: bool) -> list[int]:
    """Every occurrence by str.find; kept when it starts a word (and ends one, for names)."""
    text, original, size = index.text, index.original, len(index.text)
    keys = [token.key]
    if token.key.isdigit() and len(token.key) > 3:
        keys.append(f"{int(token.key):,}")
    if token.key.isdigit():
        keys += [f"{token.key}.0", f"{token.key}.00"]
    elif re.fullmatch(r"\d+\.\d", token.key):
        keys.append(f"{token.key}0")
    number = token.key[:1].isdigit()
    starts = reference_starts(text)
    found = set()
    for key in keys:
        position = text.find(key)
        while position >= 0:
            after = position + len(key)
            starts_word = position == 0 or not text[position - 1].isalnum()
            ends_word = (
                not token.critical
                or after >= size
                or not text[after].isalnum()
                or (text[after] == "s" and (after + 1 >= size or not text[after + 1].isalnum()))
            )
            lower_ok = not (lowercase and index.case_aligned) or original[position].islower()
            # A number is not part of a longer one: no "digit, '.' or ',', digit" around it.
            inside = number and (
                re.match(r"\d[.,]\d", text[max(position - 2, 0) : position + 1]) is not None
                or re.match(r"\d[.,]\d", text[after - 1 : after + 2]) is not None
            )
            if starts_word and ends_word and lower_ok and not inside:
                found.add(bisect.bisect_right(starts, position) - 1)
            position = text.find(key, position + 1)
    return sorted(found)


def test_one_sentence_rule_for_claims_and_passages() -> None:
    """Claims and the index's passages end where the reference says, on the same texts.

    Texts with a few marks (read one by one) and with many (vectorised) are both checked.
    """
    rng = random.Random(5)
    marks = []
    for size in [0, 1, 2, 3, 10, 200]:
        for _ in range(20):
            text = random_text(rng, size)
            if size % 2:
                text = text.rstrip()
            marks.append(sum(text.count(mark) for mark in ".!?"))
            starts = reference_starts(text)
            assert sentence_starts(code_points(text)).tolist() == starts, text
            index = Index([Fact(text=text)])  # offsets in the lowered text ("İ" is two there)
            assert index.starts.tolist() == reference_starts(index.text), text
            bounds = zip(starts, [*starts[1:], len(text)], strict=True)
            pieces = [
                (text[a:b].strip(), a + len(text[a:b]) - len(text[a:b].lstrip())) for a, b in bounds
            ]
            expected = [(piece, start, start + len(piece)) for piece, start in pieces if piece]
            assert split_claims(text) == expected, text
    assert min(marks) == 0 and max(marks) > 50


def test_token_passages_equal_the_reference() -> None:
    rng = random.Random(6)
    checked = 0
    for round_ in range(30):
        facts = [Fact(text=random_text(rng, rng.randint(0, 120))) for _ in range(rng.randint(1, 6))]
        index = Index(facts)
        assert index.starts.tolist() == reference_starts(index.text)
        claim = random_text(rng, 12)
        tokens = claim_tokens(claim) + [Token("1500", True, 2.0), Token("sta", False, 1.0)]
        tokens += [Token("3.5", True, 2.0), Token("12", True, 2.0), Token("5", True, 2.0)]
        if round_ % 2:  # the word starts of all prefixes found in one scan, as checks do
            index.prepare(tokens)
        for token in tokens:
            for lowercase in (False, True):
                expected = reference_passages(index, token, lowercase)
                assert index.passages_with(token, lowercase=lowercase).tolist() == expected
                checked += 1
    assert checked > 500


def test_lowering_fact_by_fact_equals_lowering_the_whole() -> None:
    facts = [Fact(text="ΟΔΟΣ"), Fact(text="ΣΑΣ Σ"), Fact(text="İstanbul ΑΣ.")]
    index = Index(facts)
    assert index.text == "\n\n".join(fact.text for fact in facts).lower()


def test_lowered_code_points_equal_str_lower() -> None:
    """The index lowers code points (ASCII by arithmetic, others per distinct character)."""
    cases = [
        ["Plain ASCII, UPPER and lower."],
        ["ΟΔΟΣ ΣΟΦΟΣ", "no sigma here", "Σ alone, ΑΣ. and Σ'Α"],  # capital sigma: by context
        ["\u212aelvin KELVIN", "Ωmega ÉCOLE Straße"],  # Kelvin sign lowers to ASCII 'k'
        ["\U00010400\U00010401 astral 𝒳ray", "東京 café"],  # Deseret capitals: astral
        ["İstanbul", "ISTANBUL"],  # lowers to two characters: offsets move
        ["", "", "x"],
        ["ΟΔΟΣ σοφός ÉCOLE café Ωmega. " * 400, "plain"],  # many: distinct characters by table
    ]
    rng = random.Random(7)
    cases += [[random_text(rng, rng.randint(0, 60)) for _ in range(4)] for _ in range(20)]
    for texts in cases:
        index = Index([Fact(text=text) for text in texts])
        joined = "\n\n".join(texts)
        assert index.text == joined.lower(), texts
        assert index.case_aligned == (len(joined.lower()) == len(joined))
        boundary = index._boundary[1 : index.codes.size + 1].tolist()
        assert boundary == [not c.isalnum() for c in index.text]
        assert index.original == joined
        for passage in range(len(index.starts)):
            start = int(index.starts[passage])
            stop = int(index.starts[passage + 1]) if passage + 1 < len(index.starts) else None
            assert index.passage_text(passage) == joined[start:stop]


def test_check_grounding_on_mixed_scripts() -> None:
    facts = ["The engineer built the Brücke in Köln in 1912.", "東京 is the capital of Japan."]
    result = check_grounding("The engineer built the Brücke in Köln in 1912.", facts)
    assert result.support_score == 1.0 and result.claims[0].citation_indices == [0]
    # engineer, built (1 each), Brücke, Köln, 1913 (names and numbers: 2 each): 6/8 covered,
    # times 2 of 3 names and numbers found = 0.5 < 0.6; the frame matches fact 0, whose 1912
    # the claim does not state: an anti-citation.
    result = check_grounding(
        "The engineer built the Brücke in Köln in 1913.",
        facts,
        enable_anti_citations=True,
        enable_claim_level_score=True,
    )
    assert result.claims[0].score == 0.5 and result.support_score == 0.0
    assert result.claims[0].anti_citation_indices == [0]

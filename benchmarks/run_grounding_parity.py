"""Offline grounding results for a fixed set of checks, as JSON: compare two versions' outputs.

The benchmark's cases (run_grounding_bench.py) and generated answers (sentences of the facts
with words, numbers and names changed, and sentences of random words) against 5, 50 and 200
facts of licence prose, of the adversarial vocabulary and of mixed scripts (accented, Greek
with capital sigma, "İ", the Kelvin sign, CJK, astral characters), each with and without
anti-citations and claim-level scores. Run it once per version and compare the files:

    PYTHONPATH=/tmp/before/src .venv/bin/python benchmarks/run_grounding_parity.py > before.json
    .venv/bin/python benchmarks/run_grounding_parity.py > after.json
    cmp before.json after.json
"""

from __future__ import annotations

import json
import random
import re
import sys

from run_grounding_bench import TITANIC, prose_facts, synthetic_facts

from turneval.grounding import check_grounding

MIXED_WORDS = [
    "the", "Ship", "sank", "in", "1912", "1,500", "people", "Titanic", "ΣΟΦΟΣ", "σοφός",
    "ΟΔΟΣ", "café", "naïve", "東京", "𝒳ray", "Dr.", "U.S.", "stars", "starred", "White",
    "Star", "Line", "İstanbul", "3.5", "licence", "KELVIN", "\u212aelvin", "über", "ﬁle",
    "Ωmega", "Straße", "ÉCOLE", "école", "O'Brien", "it’s",
]  # fmt: skip
ENDS = [" ", " ", " ", ". ", "! ", "? ", '." ', ".) ", "\n", "\n\n", ", ", "-", "'", "’s "]


def mixed_facts(rng: random.Random, count: int, words: list[str]) -> list[str]:
    facts = []
    for _ in range(count):
        size = rng.randint(20, 400)
        facts.append("".join(rng.choice(words) + rng.choice(ENDS) for _ in range(size)))
    return facts


def generated_answers(rng: random.Random, facts: list[str], count: int) -> list[str]:
    """Answers from the facts' own sentences, changed, and from random words."""
    sentences = [s.strip() for f in facts for s in re.split(r"(?<=[.!?])\s+", f) if s.strip()]
    vocabulary = [w for s in sentences[:2000] for w in s.split()] or ["nothing"]
    answers = []
    for number in range(count):
        parts = []
        for _ in range(rng.randint(1, 4)):
            kind = rng.randrange(4)
            if kind == 0 and sentences:  # a fact sentence as it is
                parts.append(rng.choice(sentences)[:300])
            elif kind == 1 and sentences:  # a fact sentence with a number or a name changed
                words = rng.choice(sentences)[:300].split()
                if words:
                    at = rng.randrange(len(words))
                    words[at] = rng.choice([str(rng.randint(1, 3000)), "Cameron", "Zeus", "1,500"])
                parts.append(" ".join(words))
            elif kind == 2:  # random words of the facts
                parts.append(" ".join(rng.choice(vocabulary) for _ in range(rng.randint(3, 15))))
            else:
                parts.append(rng.choice(["Here is what I found.", "Sure, let me check."]))
        answers.append(" ".join(p if p.endswith((".", "!", "?")) else p + "." for p in parts))
        if number % 7 == 0:
            answers[-1] = answers[-1].upper()
    return answers


def main() -> None:
    rng = random.Random(18)
    prose, synthetic = prose_facts(), synthetic_facts()
    seed = "Titanic was directed by James Cameron. It was released in 1997."
    licence = (
        "The GNU General Public License is a free software license. It guarantees your freedom "
        "to share and change all versions of a program. The license was published by the Free "
        "Software Foundation in 2007."
    )
    checks: list[tuple[str, list[str]]] = [
        (seed, TITANIC),
        (seed, prose),
        (licence, prose),
        (seed + " The ship sank in 1912 after hitting an iceberg.", synthetic),
    ]
    mixed = mixed_facts(rng, 200, MIXED_WORDS)
    # without "İ" (lowered into two characters): the facts keep their offsets when lowered
    aligned = mixed_facts(rng, 200, [w for w in MIXED_WORDS if "İ" not in w])
    for corpus in (prose, synthetic, mixed, aligned):
        for size in (5, 50, 200):
            facts = corpus[:size]
            checks.extend((answer, facts) for answer in generated_answers(rng, facts, 8))
    results = []
    for answer, facts in checks:
        for options in ({}, {"enable_anti_citations": True, "enable_claim_level_score": True}):
            results.append(check_grounding(answer, facts, **options).to_dict())
    json.dump(results, sys.stdout, ensure_ascii=False, sort_keys=True)
    print(f"\n{len(results)} checks", file=sys.stderr)


if __name__ == "__main__":
    main()

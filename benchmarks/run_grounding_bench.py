"""Offline grounding backend: time per check for the seed example and for 200 x 10,000-char facts.

Facts for the large case come from real English prose on the machine (the licence and copyright
texts under /usr/share), and from a deliberately adversarial synthetic corpus (a 25-word
vocabulary repeated, so every claim word occurs thousands of times).

    .venv/bin/python benchmarks/run_grounding_bench.py
"""

from __future__ import annotations

import glob
import random
import statistics
import time
from collections.abc import Callable

from turneval.grounding import check_grounding

TITANIC = [
    "Titanic is a 1997 American epic romantic disaster movie. It was directed, written, and co-produced by "
    "James Cameron. The movie is about the 1912 sinking of the RMS Titanic. It stars Kate Winslet and Leonardo "
    "DiCaprio. The movie was released on December 19, 1997. It received positive critical reviews. The movie won "
    "11 Academy Awards, and was nominated for fourteen total Academy Awards.",
    'James Cameron\'s "Titanic" is an epic, action-packed romance set against the ill-fated maiden voyage of the '
    "R.M.S. Titanic; the pride and joy of the White Star Line and, at the time, the largest moving object ever "
    'built. She was the most luxurious liner of her era -- the "ship of dreams" -- which ultimately carried over '
    "1,500 people to their death in the ice cold waters of the North Atlantic in the early hours of April 15, 1912.",
]


def timed(call: Callable[[], object], repeat: int) -> float:
    call()  # warm
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def prose_facts() -> list[str]:
    texts = []
    for path in sorted(glob.glob("/usr/share/common-licenses/*")) + sorted(
        glob.glob("/usr/share/doc/*/copyright")
    ):
        try:
            texts.append(open(path, encoding="utf-8").read())
        except (OSError, UnicodeDecodeError):
            continue
    corpus = " ".join(texts)
    return [corpus[i * 10_000 : (i + 1) * 10_000] for i in range(200)]


def synthetic_facts() -> list[str]:
    rng = random.Random(0)
    words = (
        "the a movie ship ocean film director actor award night sea ice people voyage captain crew stars "
        "released century history famous iceberg lifeboat passengers"
    ).split()
    facts = []
    for _ in range(200):
        parts: list[str] = []
        while sum(map(len, parts)) < 9_800:
            sentence = " ".join(rng.choice(words) for _ in range(rng.randint(6, 16))).capitalize()
            parts.append(
                sentence + rng.choice([".", ". In 1912 the ship sank.", ". Kate Winslet starred."])
            )
        facts.append(" ".join(parts)[:10_000])
    return facts


def main() -> None:
    seed = "Titanic was directed by James Cameron. It was released in 1997."
    print("| case | median ms per check | target |\n|---|---:|---:|")
    print(
        f"| seed example (2 facts, 2 claims) | {timed(lambda: check_grounding(seed, TITANIC), 200):.2f} | <= 5 |"
    )
    full = {"enable_anti_citations": True, "enable_claim_level_score": True}
    print(
        f"| seed example, anti-citations and claim scores on | {timed(lambda: check_grounding(seed, TITANIC, **full), 200):.2f} | <= 5 |"
    )
    prose = prose_facts()
    licence = (
        "The GNU General Public License is a free software license. It guarantees your freedom to share and "
        "change all versions of a program. The license was published by the Free Software Foundation in 2007."
    )
    cases = [
        ("200 x 10,000 chars of licence prose, an off-topic answer", prose, seed),
        ("200 x 10,000 chars of licence prose, an answer about licences", prose, licence),
        (
            "200 x 10,000 chars, adversarial 25-word vocabulary",
            synthetic_facts(),
            seed + " The ship sank in 1912 after hitting an iceberg.",
        ),
    ]
    for label, facts, answer in cases:
        ms = timed(lambda facts=facts, answer=answer: check_grounding(answer, facts, **full), 15)
        print(f"| {label} | {ms:.1f} | <= 50 |")


if __name__ == "__main__":
    main()

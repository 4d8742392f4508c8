"""Offline grounding backend: time per check for the seed example and for 200 x 10,000-char facts.

Facts for the large case come from real English prose on the machine (the licence and copyright
texts under /usr/share), and from a deliberately adversarial synthetic corpus (a 25-word
vocabulary repeated, so every claim word occurs thousands of times).

    .venv/bin/python benchmarks/run_grounding_bench.py
    .venv/bin/python benchmarks/run_grounding_bench.py --cold 3   # first check of a process

``--cold N`` also times each large case as the first check of a fresh process (nothing warmed:
the interpreter's heap, numpy's first calls), N processes per case, median.
"""

from __future__ import annotations

import argparse
import glob
import random
import statistics
import subprocess
import sys
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


def timed(call: Callable[[], object], repeat: int) -> tuple[float, float]:
    """Median wall and CPU (this process, all threads) milliseconds per call."""
    call()  # warm
    walls, cpus = [], []
    for _ in range(repeat):
        start, cpu = time.perf_counter(), time.process_time()
        call()
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls) * 1000, statistics.median(cpus) * 1000


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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="timed checks per large case")
    parser.add_argument("--cold", type=int, default=0, help="fresh processes per large case")
    parser.add_argument("--first-check", type=int, help=argparse.SUPPRESS)  # in a fresh process
    args = parser.parse_args()
    seed = "Titanic was directed by James Cameron. It was released in 1997."
    full = {"enable_anti_citations": True, "enable_claim_level_score": True}
    prose = prose_facts()
    licence = (
        "The GNU General Public License is a free software license. It guarantees your freedom to share and "
        "change all versions of a program. The license was published by the Free Software Foundation in 2007."
    )
    cases: list[tuple[str, list[str], str, dict[str, bool], int, int]] = [
        ("seed example (2 facts, 2 claims)", TITANIC, seed, {}, 200, 5),
        ("seed example, anti-citations and claim scores on", TITANIC, seed, full, 200, 5),
        (
            "200 x 10,000 chars of licence prose, an off-topic answer",
            prose,
            seed,
            full,
            args.repeat,
            50,
        ),
        (
            "200 x 10,000 chars of licence prose, an answer about licences",
            prose,
            licence,
            full,
            args.repeat,
            50,
        ),
        (
            "200 x 10,000 chars, adversarial 25-word vocabulary",
            synthetic_facts(),
            seed + " The ship sank in 1912 after hitting an iceberg.",
            full,
            args.repeat,
            50,
        ),
    ]
    if args.first_check is not None:
        _, facts, answer, options, _, _ = cases[args.first_check]
        start = time.process_time()
        check_grounding(answer, facts, **options)
        print(f"{(time.process_time() - start) * 1000:.2f}")
        return
    print("| case | median wall ms per check | median CPU ms per check | target |")
    print("|---|---:|---:|---:|")
    for label, facts, answer, options, repeat, target in cases:
        wall, cpu = timed(
            lambda facts=facts, answer=answer, options=options: check_grounding(
                answer, facts, **options
            ),
            repeat,
        )
        print(f"| {label} | {wall:.2f} | {cpu:.2f} | <= {target} |")
    if args.cold:
        print("\n| case | first check of a process, median CPU ms | target |\n|---|---:|---:|")
    for number, (label, *_, target) in enumerate(cases):
        if not args.cold or number < 2:
            continue
        command = [sys.executable, __file__, "--first-check", str(number)]
        runs = [float(subprocess.check_output(command, text=True)) for _ in range(args.cold)]
        print(f"| {label} | {statistics.median(runs):.2f} | <= {target} |")


if __name__ == "__main__":
    main()

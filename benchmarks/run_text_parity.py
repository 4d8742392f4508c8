"""BLEU and ROUGE parity with sacrebleu and Google's rouge-score, and throughput.

On >= 1,000 seeded prediction/reference pairs (varied lengths, punctuation, casing, numbers,
multi-sentence summaries), checks for every option combination that turneval's value equals the
reference library's to 1e-9, then times both per pair.

    .venv/bin/python benchmarks/run_text_parity.py --n 1200
"""

from __future__ import annotations

import argparse
import itertools
import random
import time

import nltk
import sacrebleu
from rouge_score import rouge_scorer

from turneval.metrics import BleuScore, RougeScore

WORDS = (
    "the a an agent tool call calls called weather forecast Paris London rain sunny degrees temperature "
    "order orders cancelled refund customer running runs ran quickly quick brown fox jumps over lazy dog "
    "campaign budget doubled halved December schedule scheduled meeting report reports reported"
).split()


def sentence(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(3, 18))]
    if rng.random() < 0.3:
        words.insert(rng.randrange(len(words)), str(rng.choice([3, 3.5, 42, 2024, 1e3])))
    text = " ".join(words)
    if rng.random() < 0.3:
        text = text.capitalize()
    if rng.random() < 0.2:
        text = text.upper()
    return text + rng.choice([".", "!", "?", ",", ";", ""])


def pairs(n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    result = []
    for _ in range(n):
        reference = [sentence(rng) for _ in range(rng.randint(1, 4))]
        prediction = [s for s in reference if rng.random() < 0.7] or [sentence(rng)]
        prediction = [s if rng.random() < 0.6 else sentence(rng) for s in prediction]
        joiner = "\n" if rng.random() < 0.5 else " "
        result.append((joiner.join(prediction), joiner.join(reference)))
    return result


def punkt_installed() -> bool:
    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
    except LookupError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1200)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    data = pairs(args.n, args.seed)
    print(f"## {len(data)} prediction/reference pairs (seed {args.seed})\n")
    print(
        "| metric | options | max abs difference | pairs | equal to 1e-9 |\n|---|---|---:|---:|---|"
    )

    ours = BleuScore()
    diffs = [
        abs(ours.compare(ref, pred) - sacrebleu.sentence_bleu(pred, [ref]).score / 100)
        for pred, ref in data
    ]
    print(
        f"| bleu | sacrebleu defaults | {max(diffs):.1e} | {len(data)} | {'yes' if max(diffs) <= 1e-9 else 'NO'} |"
    )
    failures = int(max(diffs) > 1e-9)
    skipped = []
    types = [f"rouge{n}" for n in range(1, 10)] + ["rougeL", "rougeLsum"]
    for rouge_type, stem, split in itertools.product(types, [False, True], [False, True]):
        if rouge_type == "rougeLsum" and split and not punkt_installed():
            skipped.append(f"{rouge_type}, use_stemmer={stem}, split_summaries=True")
            continue
        scorer = rouge_scorer.RougeScorer([rouge_type], use_stemmer=stem, split_summaries=split)
        metric = RougeScore(rouge_type=rouge_type, use_stemmer=stem, split_summaries=split)  # type: ignore[arg-type]
        worst = max(
            abs(metric.compare(ref, pred) - scorer.score(ref, pred)[rouge_type].fmeasure)
            for pred, ref in data
        )
        failures += worst > 1e-9
        options = f"use_stemmer={stem}, split_summaries={split}"
        print(
            f"| {rouge_type} | {options} | {worst:.1e} | {len(data)} | {'yes' if worst <= 1e-9 else 'NO'} |"
        )
    if skipped:
        print(
            f"\nNot run ({len(skipped)}): {'; '.join(skipped)}: they need NLTK's punkt_tab data, which NLTK"
        )
        print(
            "downloads from its own site (not reachable here); rouge-score itself fails the same way."
        )

    print("\n## Throughput (pairs/s, one core)\n")
    print("| metric | turneval | library | ratio |\n|---|---:|---:|---:|")

    def rate(function: object) -> float:
        start = time.perf_counter()
        for pred, ref in data:
            function(pred, ref)  # type: ignore[operator]
        return len(data) / (time.perf_counter() - start)

    bleu_ours = rate(lambda p, r: ours.compare(r, p))
    bleu_lib = rate(lambda p, r: sacrebleu.sentence_bleu(p, [r]))
    print(
        f"| bleu | {bleu_ours:,.0f} | {bleu_lib:,.0f} (sacrebleu.sentence_bleu) | {bleu_ours / bleu_lib:.1f}x |"
    )
    for rouge_type in ("rouge1", "rougeL", "rougeLsum"):
        metric = RougeScore(rouge_type=rouge_type)  # type: ignore[arg-type]
        scorer = rouge_scorer.RougeScorer([rouge_type])
        mine = rate(lambda p, r, m=metric: m.compare(r, p))
        lib = rate(lambda p, r, s=scorer: s.score(r, p))
        print(
            f"| {rouge_type} | {mine:,.0f} | {lib:,.0f} (RougeScorer, reused) | {mine / lib:.2f}x |"
        )
    if failures:
        raise SystemExit(f"{failures} combination(s) differ from the reference libraries")


if __name__ == "__main__":
    main()

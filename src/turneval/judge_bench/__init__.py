"""Judges measured against people's labels on public benchmarks (``turneval judge-bench``).

:mod:`turneval.judge_bench._who_and_when`: failure attribution on Who&When.
"""

from turneval.judge_bench._who_and_when import (
    HEADLINE,
    PUBLISHED,
    RANDOM_BASELINE,
    AttributionAccuracy,
    WhoAndWhenCase,
    load_cases,
    score,
    to_sample,
    wilson_interval,
)

__all__ = [
    "AttributionAccuracy",
    "HEADLINE",
    "PUBLISHED",
    "RANDOM_BASELINE",
    "WhoAndWhenCase",
    "load_cases",
    "score",
    "to_sample",
    "wilson_interval",
]

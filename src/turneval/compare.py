"""Compare two runs of the same dataset: mean differences, significance, flipped samples."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from os import PathLike
from typing import Any

import numpy as np

from turneval.aggregate import paired_permutation_test
from turneval.errors import ConfigError
from turneval.results import EvaluationResult

__all__ = ["Comparison", "MetricComparison", "compare", "compare_files"]


@dataclass(frozen=True, slots=True)
class MetricComparison:
    """One metric across two runs, paired row by row.

    Attributes:
        name: The metric.
        baseline_mean: Mean over the rows both runs scored.
        candidate_mean: Mean over the same rows.
        difference: ``candidate_mean - baseline_mean``.
        p_value: Two-sided paired permutation test of a zero mean difference.
        pairs: Rows both runs scored.
        regressions: Row indices that passed in the baseline and fail in the candidate.
        improvements: Row indices that failed in the baseline and pass in the candidate.
    """

    name: str
    baseline_mean: float | None
    candidate_mean: float | None
    difference: float | None
    p_value: float | None
    pairs: int
    regressions: list[int] = field(default_factory=list)
    improvements: list[int] = field(default_factory=list)

    def significant(self, alpha: float = 0.05) -> bool:
        """Whether the difference is significant at ``alpha``."""
        return self.p_value is not None and self.p_value < alpha


@dataclass(frozen=True, slots=True)
class Comparison:
    """Every shared metric of two runs."""

    metrics: dict[str, MetricComparison]
    pass_threshold: float

    def __str__(self) -> str:
        """A Markdown table of the comparison."""
        lines = [
            "| metric | baseline | candidate | diff | p | regressions | improvements |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for m in self.metrics.values():
            cells = [
                "n/a" if v is None else f"{v:+.4f}" if key == "diff" else f"{v:.4f}"
                for key, v in (
                    ("base", m.baseline_mean),
                    ("cand", m.candidate_mean),
                    ("diff", m.difference),
                    ("p", m.p_value),
                )
            ]
            lines.append(
                f"| {m.name} | {' | '.join(cells)} | {len(m.regressions)} | {len(m.improvements)} |"
            )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "pass_threshold": self.pass_threshold,
            "metrics": {
                name: {
                    "baseline_mean": m.baseline_mean,
                    "candidate_mean": m.candidate_mean,
                    "difference": m.difference,
                    "p_value": m.p_value,
                    "pairs": m.pairs,
                    "regressions": m.regressions,
                    "improvements": m.improvements,
                }
                for name, m in self.metrics.items()
            },
        }


def compare(
    baseline: EvaluationResult,
    candidate: EvaluationResult,
    *,
    pass_threshold: float = 0.5,
    resamples: int = 10_000,
    seed: int = 0,
) -> Comparison:
    """Compare two runs of the same samples (rows paired by position).

    For each metric both runs have: means over the rows both scored, their difference, a paired
    permutation test (random sign flips of the per-row differences, seeded) and the rows whose
    score crossed ``pass_threshold`` (value >= threshold passes) in either direction.
    """
    if len(baseline.rows) != len(candidate.rows):
        raise ConfigError(
            f"runs differ in length ({len(baseline.rows)} vs {len(candidate.rows)} rows); "
            "compare runs of the same dataset"
        )
    shared = [name for name in baseline.metric_names if name in candidate.metric_names]
    if not shared:
        raise ConfigError("the two runs share no metric")
    metrics = {}
    for name in shared:
        base = np.asarray(baseline.scores(name), dtype=float)
        cand = np.asarray(candidate.scores(name), dtype=float)
        both = ~(np.isnan(base) | np.isnan(cand))
        pairs = int(both.sum())
        if not pairs:
            metrics[name] = MetricComparison(name, None, None, None, None, 0)
            continue
        b, c = base[both], cand[both]
        indices = np.flatnonzero(both)
        passed_before, passed_after = b >= pass_threshold, c >= pass_threshold
        p_value = paired_permutation_test(c - b, resamples=resamples, seed=seed)
        metrics[name] = MetricComparison(
            name,
            float(b.mean()),
            float(c.mean()),
            float(c.mean() - b.mean()),
            None if math.isnan(p_value) else p_value,
            pairs,
            [int(i) for i in indices[passed_before & ~passed_after]],
            [int(i) for i in indices[~passed_before & passed_after]],
        )
    return Comparison(metrics, pass_threshold)


def compare_files(
    baseline: str | PathLike[str], candidate: str | PathLike[str], *, pass_threshold: float = 0.5
) -> Comparison:
    """:func:`compare` two results.jsonl files of one dataset (as ``turneval compare``)."""
    return compare(
        EvaluationResult.from_jsonl(baseline),
        EvaluationResult.from_jsonl(candidate),
        pass_threshold=pass_threshold,
    )

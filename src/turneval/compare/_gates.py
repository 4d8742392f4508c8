"""Regression gates over a comparison: a significant drop (Holm) beyond its allowance fails."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from turneval.compare._text import LISTED, count, names
from turneval.errors import ConfigError
from turneval.stats._inference import holm

if TYPE_CHECKING:
    from turneval.compare._result import Comparison, MetricComparison

__all__ = ["RegressionCheck", "RegressionGates", "TEST", "regression_gates"]


@dataclass(frozen=True, slots=True)
class RegressionCheck:
    """One metric's regression gate (:func:`regression_gates`).

    Attributes:
        name: The metric.
        max_drop: The fall of the mean the gate lets through.
        baseline_mean: The baseline's mean over the paired rows.
        candidate_mean: The candidate's mean over the same rows.
        difference: ``candidate_mean - baseline_mean`` (None: no row scored by both runs).
        p_value: The paired permutation test's two-sided p-value (None: nothing to test, as
            for two lone summary.json files, whose means alone are compared).
        p_holm: ``p_value`` after Holm's correction over the gated metrics that have one
            (``p_value`` itself when one metric is gated).
        dropped: Whether the mean fell by more than ``max_drop``.
        significant: Whether ``p_holm`` is below the level (None: untested).
        failures: Why the gate fails, one message each (empty: it passes).
        notes: What the gate let through and why (a drop that is not significant).
        higher_is_better: The metric's direction: where lower is better (latency, cost),
            ``max_drop`` is the rise the gate lets through and ``dropped`` says the mean rose
            by more.
    """

    name: str
    max_drop: float
    baseline_mean: float | None
    candidate_mean: float | None
    difference: float | None
    p_value: float | None
    p_holm: float | None
    dropped: bool
    significant: bool | None
    failures: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    higher_is_better: bool = True

    @property
    def failed(self) -> bool:
        """Whether the gate fails."""
        return bool(self.failures)


@dataclass(frozen=True, slots=True)
class RegressionGates:
    """What :func:`regression_gates` decided: each gated metric, and the run-level checks.

    Attributes:
        checks: One :class:`RegressionCheck` per gated metric, by name.
        alpha: The family-wise level the drops are tested at.
        correction: ``"holm"`` when several gated metrics have a p-value, else ``"none"``.
        tested: The gated metrics with a p-value: the family Holm's correction runs over.
        failures: Failures of the comparison as a whole (baseline rows the candidate lacks).
    """

    checks: dict[str, RegressionCheck]
    alpha: float
    correction: str
    tested: list[str]
    failures: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """Whether any gate fails."""
        return bool(self.failures) or any(check.failed for check in self.checks.values())

    def messages(self) -> list[str]:
        """Every failure, in order: each metric's, then the comparison's."""
        return [m for check in self.checks.values() for m in check.failures] + self.failures

    def rule(self) -> str:
        """The rule the gates apply, with the correction and the family it ran over."""
        if self.correction == "holm":
            correction = (
                f"Holm's correction over the {len(self.tested)} gated metrics with a p-value "
                f"({', '.join(self.tested)})"
            )
        else:
            correction = "no correction (one gated metric with a p-value)"
        rising = [c.name for c in self.checks.values() if not c.higher_is_better]
        worse = (
            f"falls (rises, for {', '.join(rising)}: lower is better) by more than MAX_DROP "
            "and the change"
            if rising
            else "falls by more than MAX_DROP and the drop"
        )
        return (
            f"gates: a gate fails when its mean {worse} is significant: {TEST}, alpha "
            f"{self.alpha:g}, {correction}"
        )

    def __str__(self) -> str:
        """The rule, a Markdown table of the gates, and what they let through."""
        lines = [
            self.rule(),
            "| gate | max drop | diff | p | p Holm | verdict |",
            "|---|---:|---:|---:|---:|---|",
        ]
        for check in self.checks.values():
            change = "drop" if check.higher_is_better else "rise"
            verdict = (
                "FAIL"
                if check.failed
                else f"pass ({change} not significant)"
                if check.dropped
                else "pass"
            )
            cells = [
                check.name,
                f"{check.max_drop:g}",
                "n/a" if check.difference is None else f"{check.difference:+.4f}",
                "n/a" if check.p_value is None else f"{check.p_value:.4f}",
                "n/a" if check.p_holm is None else f"{check.p_holm:.4f}",
                verdict,
            ]
            lines.append("| " + " | ".join(cells) + " |")
        lines += [f"note: {note}" for check in self.checks.values() for note in check.notes]
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "test": TEST,
            "alpha": self.alpha,
            "correction": self.correction,
            "tested": self.tested,
            "failed": self.failed,
            "failures": self.failures,
            "metrics": {
                name: {**asdict(check), "failed": check.failed}
                for name, check in self.checks.items()
            },
        }


TEST = "paired permutation test (sign flips), two-sided"
"""The test :func:`compare` decides with (:func:`~turneval.stats.paired_permutation_test`)."""


def regression_gates(
    comparison: Comparison, max_drops: Mapping[str, float], *, alpha: float = 0.05
) -> RegressionGates:
    """Check ``--fail-on-regression`` gates: ``{metric: MAX_DROP}`` over a comparison.

    A gate fails when the metric's mean worsens by more than its MAX_DROP **and** the change
    is significant. Worse is lower for a score and higher for a metric where lower is better
    (:attr:`MetricComparison.higher_is_better`: latency, cost, tokens), whose MAX_DROP is
    the rise it lets through. Significant means the paired permutation test's p-value, after
    Holm's correction over the gated metrics that have one (:func:`~turneval.stats.holm`),
    is below ``alpha``. A change the test cannot tell from noise passes, with a note
    (``--min-power`` in
    ``turneval compare`` refuses a comparison too small to see the drops that matter). A
    gate also fails when it cannot be checked (no row scored by both runs), when the
    candidate failed on rows the baseline scored (left out of the means), and, for the
    comparison as a whole, when the candidate lacks rows of the baseline that no early stop
    explains (a run cut short). Two lone summary.json files have means only: their gates
    compare the means, untested.

    Raises:
        ConfigError: a gate names a metric not in both runs, a MAX_DROP is negative or not a
            number, or ``alpha`` is not between 0 and 1.
    """
    if not 0 < alpha < 1:
        raise ConfigError(f"alpha must be between 0 and 1, got {alpha}")
    unknown = [name for name in max_drops if name not in comparison.metrics]
    if unknown:
        raise ConfigError(
            f"gates name metrics that are not in both runs: {unknown}; shared: "
            f"{list(comparison.metrics)}"
        )
    bad = {
        name: drop for name, drop in max_drops.items() if not (math.isfinite(drop) and drop >= 0)
    }
    if bad:
        raise ConfigError(f"MAX_DROP must be a number >= 0, got {bad}")
    tested = [name for name in max_drops if comparison.metrics[name].p_value is not None]
    adjusted = holm([comparison.metrics[name].p_value or 0.0 for name in tested])
    p_holm = dict(zip(tested, adjusted, strict=True))
    correction = "holm" if len(tested) > 1 else "none"
    checks = {}
    for name, max_drop in max_drops.items():
        m = comparison.metrics[name]
        failures, notes = [], []
        if m.difference is None:
            failures.append(f"{name}: no row scored by both runs")
        if m.newly_failed:
            failures.append(m.failed_note())
        worsened = (
            None
            if m.difference is None
            else m.difference
            if not m.higher_is_better
            else -m.difference
        )
        dropped = worsened is not None and worsened > max_drop
        p = p_holm.get(name)
        significant = None if p is None else p < alpha
        if dropped:
            fell = (
                f"{name} mean {'fell' if m.higher_is_better else 'rose'} "
                f"{m.baseline_mean:.4f} -> {m.candidate_mean:.4f} "
                f"({m.difference:+.4f}, more than {max_drop:g}"
            )
            test = (
                ""
                if p is None
                else f"p {m.p_value:.4f}"
                + (
                    f", Holm's p {p:.4f} over {len(tested)} gated metrics"
                    if len(tested) > 1
                    else ""
                )
            )
            if p is None:
                failures.append(f"{fell}; means alone: no paired rows to test){_worse(m)}")
            elif significant:
                failures.append(f"{fell}; {test} < alpha {alpha:g}){_worse(m)}")
            else:
                notes.append(
                    f"{fell}) but not significantly ({test}, not below alpha {alpha:g}): its "
                    "gate passes; --min-power tells whether the comparison could see the drop"
                )
        checks[name] = RegressionCheck(
            name,
            max_drop,
            m.baseline_mean,
            m.candidate_mean,
            m.difference,
            m.p_value,
            p,
            dropped,
            significant,
            failures,
            notes,
            m.higher_is_better,
        )
    missing = comparison.rows_missing if max_drops else []
    overall = (
        [
            f"the candidate has no row for {count(len(missing), 'baseline row')} (a run cut "
            f"short?), left out of the gates: {names(missing)}"
        ]
        if missing
        else []
    )
    return RegressionGates(checks, alpha, correction, tested, overall)


def _worse(m: MetricComparison) -> str:
    """``; regressed rows: line 2, ...``: the rows whose score fell (empty when none did)."""
    if not m.worse:
        return ""
    rows = ", ".join(m.row_label(i) for i in m.worse[:LISTED])
    more = f" (+{len(m.worse) - LISTED} more)" if len(m.worse) > LISTED else ""
    return f"; regressed rows: {rows}{more}"

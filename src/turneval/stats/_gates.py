"""The statistics behind a comparison's gates: test, difference, Holm and power per metric.

:func:`gate_report` says, for a comparison of two runs, which test decided, the difference
with its confidence interval, the p-value (Holm-corrected when several metrics are gated at
once) and the power the comparison had.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from turneval.compare import TEST
from turneval.errors import ConfigError

from ._inference import bootstrap_ci, holm
from ._power import achieved_power, check_levels, detectable_drop, fmt, rise_notes, sd_of

if TYPE_CHECKING:
    from turneval.compare import Comparison

__all__ = ["MetricGate", "PowerReport", "gate_report"]


@dataclass(frozen=True, slots=True)
class MetricGate:
    """One gated metric of a comparison: the test, the difference and the power.

    Attributes:
        name: The metric.
        pairs: Rows both runs scored.
        difference: Candidate mean minus baseline mean (None without pairs).
        ci_low: Lower end of the difference's 95% bootstrap interval (None under 2 pairs).
        ci_high: Upper end.
        p_value: The paired permutation test's two-sided p-value.
        p_holm: ``p_value`` after Holm's correction over the gated metrics.
        sd: Standard deviation of the paired differences the power is computed with.
        power: The chance the test (at ``alpha / m``, Holm's strictest step, for m gated
            metrics) finds a true drop of ``mde``; a lower bound of its power under Holm.
        min_detectable_drop: The smallest drop found with the wanted power at that level.
        spread: Where ``sd`` comes from: ``"paired"`` (the differences) or ``"unpaired"``
            (the paired differences have no spread, as for two identical runs: the runs' own
            spreads, taken as uncorrelated).
        higher_is_better: The metric's direction; where lower is better the power is to find
            a rise of ``mde`` (the same figure: the test is two-sided).
    """

    name: str
    pairs: int
    difference: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    p_holm: float | None
    sd: float
    power: float | None
    min_detectable_drop: float | None
    spread: str
    higher_is_better: bool = True


@dataclass(frozen=True, slots=True)
class PowerReport:
    """The statistics behind a comparison's gates (:func:`gate_report`).

    Attributes:
        metrics: One :class:`MetricGate` per gated metric, by name.
        mde: The drop the power is computed against.
        alpha: The family-wise level.
        power: The power wanted (for the minimum detectable drop and :meth:`underpowered`).
        test: The test that gives the p-values.
        correction: ``"holm"`` when several metrics are gated, else ``"none"``.
    """

    metrics: dict[str, MetricGate]
    mde: float
    alpha: float
    power: float
    test: str = TEST
    correction: str = "none"

    @property
    def level(self) -> float:
        """The level each metric's power is computed at: ``alpha / m`` under Holm."""
        return self.alpha / max(1, len(self.metrics)) if self.correction == "holm" else self.alpha

    def underpowered(self, min_power: float) -> list[str]:
        """Gated metrics whose power is below ``min_power`` (or unknown: no pairs)."""
        return [name for name, m in self.metrics.items() if m.power is None or m.power < min_power]

    def __str__(self) -> str:
        """A header naming the test and the correction, and a Markdown table."""
        count = len(self.metrics)
        correction = (
            f"Holm's correction over {count} metrics (p Holm); power at alpha/{count} = "
            f"{self.level:.4g}, Holm's strictest step"
            if self.correction == "holm"
            else "one metric, no correction"
        )
        lines = [
            f"power: {self.test}; alpha {self.alpha:g}; {correction}; power to find a drop of "
            f"{self.mde:g}",
            "| metric | pairs | diff [95% CI] | p | p Holm | power | min. detectable drop |",
            "|---|---:|---|---:|---:|---:|---:|",
        ]
        for m in self.metrics.values():
            diff = fmt(m.difference, "+.4f")
            if m.ci_low is not None and m.ci_high is not None:
                diff += f" [{m.ci_low:+.4f}, {m.ci_high:+.4f}]"
            cells = [
                m.name,
                str(m.pairs),
                diff,
                fmt(m.p_value),
                fmt(m.p_holm),
                fmt(m.power, ".3f"),
                fmt(m.min_detectable_drop),
            ]
            lines.append("| " + " | ".join(cells) + " |")
        lines += rise_notes(self.metrics.values(), self.mde)
        flat = [m.name for m in self.metrics.values() if m.spread == "unpaired"]
        if flat:
            lines.append(
                f"note: no spread in the paired differences of {', '.join(flat)} (identical "
                "runs?): their power comes from the runs' own spreads, taken as uncorrelated"
            )
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        from dataclasses import asdict

        return {
            "test": self.test,
            "correction": self.correction,
            "alpha": self.alpha,
            "level": self.level,
            "mde": self.mde,
            "power": self.power,
            "metrics": {name: asdict(m) for name, m in self.metrics.items()},
        }


def gate_report(
    comparison: Comparison,
    metrics: Sequence[str] | None = None,
    *,
    mde: float = 0.05,
    alpha: float = 0.05,
    power: float = 0.8,
) -> PowerReport:
    """The test, difference (95% CI), p-value and power of each gated metric of a comparison.

    ``metrics`` are the gated metrics (default: every shared metric). With more than one,
    the p-values are corrected with Holm's method (:func:`~turneval.stats.holm`, as
    statsmodels' ``multipletests``) and each
    metric's power is computed at ``alpha / m``, the strictest of Holm's steps, so the
    figure is a lower bound of the power the gate has. The power is that of a two-sided
    paired test against a true drop of ``mde`` (see :mod:`turneval.stats`); the interval is
    the percentile bootstrap of the mean difference
    (:func:`~turneval.stats.bootstrap_ci`).

    Raises:
        ConfigError: ``metrics`` names a metric that is not in the comparison, or ``mde``,
            ``alpha`` or ``power`` is out of range.
    """
    check_levels(mde, alpha, power)
    names = list(comparison.metrics) if metrics is None else list(metrics)
    unknown = [name for name in names if name not in comparison.metrics]
    if unknown:
        raise ConfigError(
            f"not in both runs: {unknown}; shared metrics: {list(comparison.metrics)}"
        )
    correction = "holm" if len(names) > 1 else "none"
    level = alpha / len(names) if correction == "holm" else alpha
    tested = [name for name in names if comparison.metrics[name].p_value is not None]
    adjusted = holm([comparison.metrics[name].p_value or 0.0 for name in tested])
    p_holm = dict(zip(tested, adjusted, strict=True))
    gates = {}
    for name in names:
        m = comparison.metrics[name]
        base, cand = m.paired_values
        diffs = cand - base
        sd, spread = sd_of(diffs), "paired"
        if sd == 0 and diffs.size >= 2:
            sd, spread = math.sqrt(sd_of(base) ** 2 + sd_of(cand) ** 2), "unpaired"
        interval = bootstrap_ci(diffs, confidence=0.95)
        gates[name] = MetricGate(
            name,
            m.pairs,
            m.difference,
            None if interval is None else interval[0],
            None if interval is None else interval[1],
            m.p_value,
            p_holm.get(name),
            sd,
            achieved_power(sd, mde, m.pairs, alpha=level),
            detectable_drop(sd, m.pairs, alpha=level, power=power),
            spread,
            m.higher_is_better,
        )
    return PowerReport(gates, mde, alpha, power, TEST, correction)

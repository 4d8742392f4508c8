"""What an optimisation found, measured on rows it never saw: the report of :func:`optimize`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from turneval.calibration._paired import PairedDifference
from turneval.calibration._report import AgreementReport, Interval

if TYPE_CHECKING:
    from turneval.judge import JudgeConfig
    from turneval.usage import Usage

__all__ = ["OptimizationReport"]


def _number(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"


def _interval(interval: Interval | None) -> str:
    return "(no interval)" if interval is None else f"[{interval[0]:.3f}, {interval[1]:.3f}]"


def _listed(interval: Interval | None) -> list[float] | None:
    return None if interval is None else list(interval)


def _headline(
    report: AgreementReport | None, statistic: str
) -> tuple[float | None, Interval | None]:
    if report is None:
        return None, None
    if statistic == "accuracy":
        return report.agreement, report.agreement_ci
    if statistic == "weighted kappa":
        return report.weighted_kappa, report.weighted_kappa_ci
    return report.kappa, report.kappa_ci


@dataclass
class OptimizationReport:
    """An optimised judge and the evidence for it, from the validation rows alone.

    Attributes:
        metric: The metric's name.
        statistic: The agreement optimised and reported (kappa, weighted kappa, accuracy).
        config: The optimised judge configuration (use it with ``judge_config=``).
        base: The configuration the search started from (None: the metric's own prompts).
        optimisation_rows: The labeled rows the search saw (their references).
        validation_rows: The rows held out from the search (their references).
        before: The starting judge's agreement on the validation rows.
        after: The optimised judge's agreement on the same rows.
        difference: ``after - before`` on those rows, paired, with its bootstrap interval.
        baseline: Few-shot selection (``align``'s rule: examples only) on the validation rows.
        baseline_difference: The baseline minus ``before``, paired.
        training_before: The starting judge's statistic on the optimisation rows.
        training_after: The optimised judge's statistic on the optimisation rows (training
            agreement: never evidence, the search chose it there).
        judge_calls: Requests sent to the judge model (the cache's answers are free).
        reflection_calls: Requests sent to the reflection model.
        cached: Judge answers the cache gave.
        usage: Tokens of every request sent.
        cost: Their cost at the given prices (None without prices).
        budget: The budget, in words.
        stopped: Why the search stopped.
        candidates: Candidates GEPA kept (the starting one included).
        rounds: Reflection rounds run.
        notes: Anything else worth knowing (failed rows, refused requests, ...).
    """

    metric: str
    statistic: str
    config: JudgeConfig
    base: JudgeConfig | None
    optimisation_rows: list[str]
    validation_rows: list[str]
    before: AgreementReport | None
    after: AgreementReport | None
    difference: PairedDifference
    baseline: AgreementReport | None = None
    baseline_difference: PairedDifference | None = None
    training_before: float | None = None
    training_after: float | None = None
    judge_calls: int = 0
    reflection_calls: int = 0
    cached: int = 0
    usage: Usage | None = None
    cost: float | None = None
    budget: str = "no limit"
    stopped: str = ""
    candidates: int = 1
    rounds: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def improved(self) -> bool:
        """True only when the validation difference is positive and its interval excludes 0."""
        return self.difference.improved

    @property
    def memorised(self) -> bool:
        """True when agreement rose on the optimisation rows and not at all on validation rows."""
        gain = (
            None
            if self.training_before is None or self.training_after is None
            else self.training_after - self.training_before
        )
        held = self.difference.difference
        return gain is not None and gain > 0 and (held is None or held <= 0)

    @property
    def verdict(self) -> str:
        """One sentence: is the change an improvement, on the validation rows?"""
        d = self.difference
        shown = f"{self.statistic} {_number(d.before)} -> {_number(d.after)}"
        if self.improved:
            return (
                f"improvement on the validation rows: {shown}, difference {_number(d.difference)} "
                f"{_interval(d.interval)} (95% interval excludes 0)"
            )
        why = (
            "its 95% interval holds 0"
            if d.interval is not None
            else "too few validation rows for an interval"
        )
        text = (
            f"not an improvement on the validation rows: {shown}, difference "
            f"{_number(d.difference)} {_interval(d.interval)} ({why})"
        )
        if self.memorised:
            text += (
                f"; agreement rose on the optimisation rows only ({_number(self.training_before)}"
                f" -> {_number(self.training_after)}): the change fits the rows it was searched "
                "on, not new ones"
            )
        return text

    def summary(self) -> dict[str, Any]:
        """The figures a judge configuration keeps as its ``report`` (JSON-ready)."""
        before, before_ci = _headline(self.before, self.statistic)
        after, after_ci = _headline(self.after, self.statistic)
        return {
            "statistic": self.statistic,
            "validation_rows": len(self.validation_rows),
            "optimisation_rows": len(self.optimisation_rows),
            "before": before,
            "before_ci": _listed(before_ci),
            "after": after,
            "after_ci": _listed(after_ci),
            "difference": self.difference.difference,
            "difference_ci": _listed(self.difference.interval),
            "improved": self.improved,
            "training_before": self.training_before,
            "training_after": self.training_after,
            "judge_calls": self.judge_calls,
            "reflection_calls": self.reflection_calls,
            "cost": self.cost,
        }

    def to_dict(self) -> dict[str, Any]:
        """Every figure, JSON-ready (the configuration as its file's content)."""
        return {
            **self.summary(),
            "metric": self.metric,
            "verdict": self.verdict,
            "before_report": None if self.before is None else self.before.to_dict(),
            "after_report": None if self.after is None else self.after.to_dict(),
            "baseline_report": None if self.baseline is None else self.baseline.to_dict(),
            "baseline_difference": None
            if self.baseline_difference is None
            else self.baseline_difference.difference,
            "baseline_difference_ci": None
            if self.baseline_difference is None
            else self.baseline_difference.interval,
            "optimisation_row_refs": self.optimisation_rows,
            "validation_row_refs": self.validation_rows,
            "cached": self.cached,
            "budget": self.budget,
            "stopped": self.stopped,
            "candidates": self.candidates,
            "rounds": self.rounds,
            "notes": self.notes,
            "config": self.config.model_dump(mode="json"),
            "base_instructions": "" if self.base is None else self.base.instructions,
        }

    def __str__(self) -> str:
        """The before/after table with intervals, the baseline, training agreement, the cost."""
        s = self.statistic
        rows = [
            ("starting judge", self.before),
            ("optimised judge (GEPA)", self.after),
            ("few-shot baseline (align)", self.baseline),
        ]
        lines = [
            f"{self.metric}: {s} on {len(self.validation_rows)} validation rows "
            f"(never seen by the search; {len(self.optimisation_rows)} rows searched on)",
            f"{'judge':<28}{s:>16}  95% interval",
        ]
        for name, report in rows:
            if report is None:
                continue
            value, ci = _headline(report, s)
            lines.append(f"{name:<28}{_number(value):>16}  {_interval(ci)}")
        d = self.difference
        lines.append(
            f"{'difference (paired)':<28}{_number(d.difference):>16}  {_interval(d.interval)}"
        )
        b = self.baseline_difference
        if b is not None:
            lines.append(
                f"{'baseline difference':<28}{_number(b.difference):>16}  {_interval(b.interval)}"
            )
        lines.append(self.verdict)
        lines.append(
            f"training agreement (optimisation rows, not evidence): {s} "
            f"{_number(self.training_before)} -> {_number(self.training_after)}"
        )
        spent = (
            f"judge calls {self.judge_calls}, reflection calls {self.reflection_calls}, "
            f"cached answers {self.cached}"
        )
        if self.usage is not None:
            spent += f", tokens {self.usage.input_tokens} in / {self.usage.output_tokens} out"
        if self.cost is not None:
            spent += f", cost {self.cost:.4f}"
        lines.append(f"{spent}; budget {self.budget}")
        lines.append(
            f"search: {self.rounds} rounds, {self.candidates} candidates kept; stopped: "
            f"{self.stopped}"
        )
        lines += [f"note: {note}" for note in self.notes]
        return "\n".join(lines)

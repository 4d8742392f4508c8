"""What a comparison is: each metric's figures and the whole comparison, as text and JSON."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from turneval.aggregate import FlakyScenario
from turneval.compare._pairing import pairing_notes
from turneval.compare._text import LISTED

__all__ = ["Comparison", "MetricComparison"]


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
        regressions: Row indices that passed in the baseline and fail in the candidate (but
            those in ``unstable_regressions``).
        improvements: Row indices that failed in the baseline and pass in the candidate.
        worse: Row indices whose score is lower in the candidate.
        lines: The 1-based input line of each row, when the runs recorded it (CLI runs do).
        newly_failed: Row indices the baseline scored and the candidate failed on (an error
            instead of a score): left out of the means, so listed here.
        pass_threshold: The value at or above which a row passes, for ``regressions`` and
            ``improvements``.
        off_scale: Scores lie outside [0, 1] while ``pass_threshold`` is the default, made for
            [0, 1] metrics (a 1-5 rubric score always "passes" 0.5): the table notes it.
        unstable_regressions: Regressions on unstable rows, listed apart (and left out of
            ``regressions``): rows whose repeated judge votes (``repeats`` > 1) fall on both
            sides of ``pass_threshold`` in either run, so that the flip may be the judge's noise.
        paired_values: The baseline's and the candidate's values of the rows both scored, in
            the baseline's order (for :func:`turneval.stats.gate_report`).
        flaky: Simulated runs: the scenarios whose trials disagree (some pass
            ``pass_threshold``, some not) in the candidate, else in the baseline, by id.
        flaky_regressions: Regressions on those scenarios, listed apart from
            ``regressions``: one trial's flip there is as likely noise as a change.
        higher_is_better: The metric's direction (:func:`metric_directions`). Where lower is
            better (latency, cost), a row passes at or below ``pass_threshold`` (only when the
            metric is given its own: no default suits seconds or money), ``worse`` rows rose,
            and a rise of the mean is its regression.
    """

    name: str
    baseline_mean: float | None
    candidate_mean: float | None
    difference: float | None
    p_value: float | None
    pairs: int
    regressions: list[int] = field(default_factory=list)
    improvements: list[int] = field(default_factory=list)
    worse: list[int] = field(default_factory=list)
    lines: list[int] | None = None
    newly_failed: list[int] = field(default_factory=list)
    pass_threshold: float = 0.5
    off_scale: bool = False
    unstable_regressions: list[int] = field(default_factory=list)
    paired_values: tuple[np.ndarray, np.ndarray] = field(
        default_factory=lambda: (np.empty(0), np.empty(0)), repr=False, compare=False
    )
    flaky: dict[str, FlakyScenario] = field(default_factory=dict)
    flaky_regressions: list[int] = field(default_factory=list)
    higher_is_better: bool = True

    def row_label(self, index: int) -> str:
        """``line N`` (1-based) where the input line is known, else ``row i`` (0-based)."""
        if self.lines is not None and index < len(self.lines):
            return f"line {self.lines[index]}"
        return f"row {index}"

    def failed_note(self) -> str:
        """What :attr:`newly_failed` says, naming the first rows (empty when there are none)."""
        if not self.newly_failed:
            return ""
        count = len(self.newly_failed)
        rows = ", ".join(self.row_label(i) for i in self.newly_failed[:LISTED])
        more = f" (+{count - LISTED} more)" if count > LISTED else ""
        return (
            f"{self.name} failed in the candidate on {count} row{'s' if count != 1 else ''} "
            f"the baseline scored: {rows}{more}"
        )

    def flaky_note(self) -> str:
        """The regressions on flaky scenarios, listed apart (empty when there are none)."""
        if not self.flaky_regressions:
            return ""
        count = len(self.flaky_regressions)
        rows = ", ".join(self.row_label(i) for i in self.flaky_regressions[:LISTED])
        more = f" (+{count - LISTED} more)" if count > LISTED else ""
        scenarios = "; ".join(str(scenario) for scenario in self.flaky.values())
        return (
            f"{self.name}: {count} regression{'s' if count != 1 else ''} on flaky scenarios "
            f"(mixed outcomes across trials), not counted above: {rows}{more}; flaky: {scenarios}"
        )

    def significant(self, alpha: float = 0.05) -> bool:
        """Whether the difference is significant at ``alpha``."""
        return self.p_value is not None and self.p_value < alpha


@dataclass(frozen=True, slots=True)
class Comparison:
    """Every shared metric of two runs, and the metrics only one run has.

    ``pass_threshold`` is the default threshold; each metric's own is on its
    :class:`MetricComparison`.

    Attributes:
        metrics: Each shared metric's comparison, by name.
        pass_threshold: The default pass threshold.
        only_baseline: Metrics only the baseline has.
        only_candidate: Metrics only the candidate has.
        config_notes: What :func:`compare_files` could say of the metrics' configurations:
            unchecked (no run.json), or compared although different (``allow_config_change``).
        paired_by: How rows paired: ``"id"`` or ``"position"`` (see :func:`match_rows`).
        rows_only_baseline: Labels (id, or ``scenario#trial``) of the baseline rows the
            candidate has no row for: left out of every figure.
        rows_only_candidate: Labels of the candidate rows the baseline has no row for.
        rows_not_run: Of those, the trials the other run did not run because it stopped
            their scenario early (``stop_early``).
        stopped_early: Which runs (``"baseline"``, ``"candidate"``) stopped trials early.
    """

    metrics: dict[str, MetricComparison]
    pass_threshold: float
    only_baseline: list[str] = field(default_factory=list)
    only_candidate: list[str] = field(default_factory=list)
    config_notes: list[str] = field(default_factory=list)
    paired_by: str = "position"
    rows_only_baseline: list[str] = field(default_factory=list)
    rows_only_candidate: list[str] = field(default_factory=list)
    rows_not_run: list[str] = field(default_factory=list)
    stopped_early: list[str] = field(default_factory=list)

    @property
    def rows_missing(self) -> list[str]:
        """Baseline rows the candidate lacks that no early stop explains (a run cut short?)."""
        not_run = set(self.rows_not_run)
        return [label for label in self.rows_only_baseline if label not in not_run]

    def pairing_notes(self) -> list[str]:
        """What the table leaves out: rows only one run has (counted, the first named)."""
        return pairing_notes(
            self.rows_only_baseline,
            self.rows_only_candidate,
            self.rows_not_run,
            stopped_early=bool(self.stopped_early),
        )

    def __str__(self) -> str:
        """A Markdown table of the comparison, then its notes."""
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
        lines += [f"note: {note}" for note in self.config_notes]
        lines += [f"note: {note}" for note in self.pairing_notes()]
        lines += [f"note: {m.failed_note()}" for m in self.metrics.values() if m.newly_failed]
        lines += [f"note: {m.flaky_note()}" for m in self.metrics.values() if m.flaky_regressions]
        lines += [
            f"note: {m.name} also regressed on {len(m.unstable_regressions)} unstable "
            f"row{'s' if len(m.unstable_regressions) != 1 else ''} (votes on both sides of "
            f"{m.pass_threshold:g}), not counted above: "
            + ", ".join(m.row_label(i) for i in m.unstable_regressions[:LISTED])
            + (
                f" (+{len(m.unstable_regressions) - LISTED} more)"
                if len(m.unstable_regressions) > LISTED
                else ""
            )
            for m in self.metrics.values()
            if m.unstable_regressions
        ]
        lines += [
            f"note: {m.name} is scored outside [0, 1]: no row can cross the pass threshold "
            f"{m.pass_threshold:g}; give it one on its scale (pass_thresholds={{{m.name!r}: "
            f"VALUE}}, --pass-threshold {m.name}=VALUE)"
            for m in self.metrics.values()
            if m.off_scale
        ]
        lines += [
            f"note: {m.name}: lower is better, so a rise is its regression"
            for m in self.metrics.values()
            if not m.higher_is_better
        ]
        lines += [f"note: {name} is only in the baseline" for name in self.only_baseline]
        lines += [f"note: {name} is only in the candidate" for name in self.only_candidate]
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
                    "worse": m.worse,
                    "newly_failed": m.newly_failed,
                    "pass_threshold": None if math.isinf(m.pass_threshold) else m.pass_threshold,
                    "unstable_regressions": m.unstable_regressions,
                    "flaky_regressions": m.flaky_regressions,
                    "flaky": {key: asdict(value) for key, value in m.flaky.items()},
                    "higher_is_better": m.higher_is_better,
                }
                for name, m in self.metrics.items()
            },
            "only_baseline": self.only_baseline,
            "only_candidate": self.only_candidate,
            "paired_by": self.paired_by,
            "rows_only_baseline": self.rows_only_baseline,
            "rows_only_candidate": self.rows_only_candidate,
            "rows_not_run": self.rows_not_run,
            "stopped_early": self.stopped_early,
        }

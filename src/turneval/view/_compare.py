"""Two stored runs compared from their narrow columns, as :func:`turneval.compare.compare` does.

``compare`` reads two whole runs (every row's reasons, details and usage: 526 MB and 32 s for
two runs of 200,000 rows); the viewer reads only the columns a comparison needs
(:meth:`turneval.store.RunStore.columns`: values, errors, votes, ids) and works on arrays.
The pairing is compare's own function (:func:`turneval.compare.match_keys`, on each row's
id or ``scenario#trial``: rows only one run has are left out and listed); the means, the
paired permutation test and the rows that crossed the pass threshold are ``compare``'s own
(a property test holds the two equal on any runs both read); only the permutation test's
sign flips are bounded for large runs (:func:`resamples_for`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from turneval.aggregate import flaky_scenarios
from turneval.compare import RowPairing, match_keys, pairing_notes, trial_key
from turneval.errors import ConfigError
from turneval.stats._inference import paired_permutation_test

if TYPE_CHECKING:
    from turneval.store import RunColumns

__all__ = [
    "Compared",
    "MetricChange",
    "compare_columns",
    "pair_columns",
    "resamples_for",
    "row_keys",
]
RESAMPLES = 10_000  # compare's sign flips
_BUDGET = 200_000_000  # sign draws a metric's test may take (10,000 flips of 20,000 pairs)
_FEWEST = 500  # sign flips a large comparison keeps at least

KINDS = ("regression", "newly failed", "unstable regression", "flaky regression", "improvement")
"""The kinds of changed rows, in the order the page lists them."""


def resamples_for(pairs: int) -> int:
    """Sign flips of the permutation test over ``pairs`` pairs: compare's 10,000 up to 20,000.

    Past 20,000 pairs the test's cost (flips x pairs sign draws) is held to 200 million draws
    (about 2 s a metric), never under 500 flips: 1,000 at 200,000 pairs.
    """
    if pairs * RESAMPLES <= _BUDGET:
        return RESAMPLES
    return max(_FEWEST, _BUDGET // max(pairs, 1))


def row_keys(columns: RunColumns) -> list[str | None]:
    """Each row's pairing key, as :func:`turneval.compare.row_key` gives it for a row.

    ``scenario#trial`` for a simulated conversation, else the sample id.
    """
    return [
        sample_id if scenario is None else None if trial is None else trial_key(scenario, trial)
        for sample_id, scenario, trial in zip(
            columns.sample_ids, columns.scenario_ids, columns.trials, strict=True
        )
    ]


def pair_columns(base: RunColumns, cand: RunColumns) -> RowPairing:
    """How the two runs' rows pair: :func:`turneval.compare.match_keys`, compare's own rule.

    By id (scenario and trial for a simulated conversation) when every row of both runs has
    a distinct one, rows only one run has left unpaired; else by position.

    Raises:
        ConfigError: as ``match_rows`` does, with its messages.
    """
    return match_keys((row_keys(base), row_keys(cand)), (base.sample_ids, cand.sample_ids))


@dataclass(frozen=True)
class MetricChange:
    """One metric across the two runs (the fields of compare's ``MetricComparison``).

    Row lists hold baseline positions (``Compared.base_indexes`` gives their row index).
    """

    name: str
    baseline_mean: float | None
    candidate_mean: float | None
    difference: float | None
    p_value: float | None
    pairs: int
    regressions: list[int] = field(default_factory=list)
    improvements: list[int] = field(default_factory=list)
    newly_failed: list[int] = field(default_factory=list)
    unstable_regressions: list[int] = field(default_factory=list)
    flaky_regressions: list[int] = field(default_factory=list)
    resamples: int = RESAMPLES


@dataclass(frozen=True)
class Compared:
    """Two runs compared: each shared metric's change, and each row's pairing and values.

    Attributes:
        metrics: Per shared metric, its change.
        order: For each baseline position, the candidate's position (-1: it has none).
        base_indexes: The baseline's row index at each position.
        cand_indexes: The candidate's row index at each position (-1: it has none).
        base_ids: The baseline's sample id at each position.
        values: Per metric, the baseline's values and the candidate's (in baseline order;
            NaN where the candidate has no row).
        not_numbers: Per metric, the rows (of both runs) whose value is not a number: left out.
        flips: Every changed row as ``(kind, metric, baseline position)``, in the page's order
            (the kinds of :data:`KINDS`, then position).
        paired_by: ``"id"`` or ``"position"`` (compare's ``Comparison.paired_by``).
        rows_only_baseline: Labels of the baseline rows the candidate has no row for (left
            out of every figure, as compare leaves them out).
        rows_only_candidate: Labels of the candidate rows the baseline has no row for.
    """

    metrics: dict[str, MetricChange]
    order: np.ndarray
    base_indexes: np.ndarray
    cand_indexes: np.ndarray
    base_ids: list[str | None]
    values: dict[str, tuple[np.ndarray, np.ndarray]]
    not_numbers: dict[str, int]
    flips: list[tuple[str, str, int]]
    paired_by: str = "position"
    rows_only_baseline: list[str] = field(default_factory=list)
    rows_only_candidate: list[str] = field(default_factory=list)

    def pairing_notes(self) -> list[str]:
        """Compare's notes on the rows only one run has (counted, the first named)."""
        return pairing_notes(self.rows_only_baseline, self.rows_only_candidate)


def compare_columns(
    base: RunColumns,
    cand: RunColumns,
    base_names: list[str],
    cand_names: list[str],
    *,
    pass_threshold: float = 0.5,
    seed: int = 0,
) -> Compared:
    """Compare two runs' columns as :func:`turneval.compare.compare` compares their rows.

    Raises:
        ConfigError: the runs hold different samples or share no metric (compare's messages).
    """
    pairing = pair_columns(base, cand)
    order = pairing.order
    shared = [name for name in base_names if name in cand_names]
    if not shared:
        raise ConfigError(
            f"the two runs share no metric (baseline: {base_names}, candidate: {cand_names})"
        )
    threshold = pass_threshold
    metrics: dict[str, MetricChange] = {}
    values: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    flips: list[tuple[str, str, int]] = []
    for name in shared:
        b_all = base.values[name]
        c_all = pairing.take(cand.values[name])
        values[name] = (b_all, c_all)
        both = ~(np.isnan(b_all) | np.isnan(c_all))
        pairs = int(both.sum())
        failed_after = pairing.take(cand.errors[name]) == 1  # NaN (no row): not failed
        newly_failed = [int(i) for i in np.flatnonzero(~np.isnan(b_all) & failed_after)]
        if not pairs:
            metrics[name] = MetricChange(name, None, None, None, None, 0, newly_failed=newly_failed)
            flips += [("newly failed", name, i) for i in newly_failed]
            continue
        b, c = b_all[both], c_all[both]
        indices = np.flatnonzero(both)
        passed_before, passed_after = b >= threshold, c >= threshold
        resamples = resamples_for(pairs)
        p_value = paired_permutation_test(c - b, resamples=resamples, seed=seed)
        regressed = [int(i) for i in indices[passed_before & ~passed_after]]
        low_b, high_b = base.vote_ranges[name]
        low_c, high_c = (pairing.take(array) for array in cand.vote_ranges[name])
        shaky = [
            i
            for i in regressed
            if (low_b[i] < threshold <= high_b[i]) or (low_c[i] < threshold <= high_c[i])
        ]
        flaky = _flaky(base, cand, name, threshold)
        scenario = [sid if sid is not None else "" for sid in base.scenario_ids]
        flaky_regressions = [i for i in regressed if scenario[i] in flaky]
        apart = {*shaky, *flaky_regressions}
        change = MetricChange(
            name,
            float(b.mean()),
            float(c.mean()),
            float(c.mean() - b.mean()),
            None if math.isnan(p_value) else p_value,
            pairs,
            [i for i in regressed if i not in apart],
            [int(i) for i in indices[~passed_before & passed_after]],
            newly_failed,
            shaky,
            flaky_regressions,
            resamples,
        )
        metrics[name] = change
        for kind, found in zip(
            KINDS,
            (
                change.regressions,
                change.newly_failed,
                change.unstable_regressions,
                change.flaky_regressions,
                change.improvements,
            ),
            strict=True,
        ):
            flips += [(kind, name, i) for i in found]
    rank = {kind: number for number, kind in enumerate(KINDS)}
    flips.sort(key=lambda flip: (rank[flip[0]], flip[2]))
    cand_indexes = np.full(len(order), -1, dtype=np.int64)
    cand_indexes[pairing.paired] = cand.indexes[order[pairing.paired]]
    return Compared(
        metrics,
        order,
        base.indexes,
        cand_indexes,
        base.sample_ids,
        values,
        {name: base.not_numbers[name] + cand.not_numbers[name] for name in shared},
        flips,
        pairing.by,
        [pairing.labels[0][i] for i in pairing.only_baseline],
        [pairing.labels[1][j] for j in pairing.only_candidate],
    )


def _flaky(base: RunColumns, cand: RunColumns, name: str, threshold: float) -> dict[str, Any]:
    """Scenarios whose trials of ``name`` disagree about ``threshold``, in either run."""
    found: dict[str, Any] = {}
    for run in (base, cand):  # the candidate's figures win, as in compare
        outcomes: dict[str, list[bool | None]] = {}
        for scenario, value in zip(run.scenario_ids, run.values[name], strict=True):
            if scenario is not None:
                outcome = None if math.isnan(value) else bool(value >= threshold)
                outcomes.setdefault(scenario, []).append(outcome)
        found.update({s.scenario_id: s for s in flaky_scenarios(outcomes)})
    return found

"""Which rows of two runs are the same sample: by id, or by scenario and trial."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from turneval.compare._text import count, names
from turneval.errors import ConfigError
from turneval.results import EvaluationResult, SampleResult

__all__ = [
    "RowPairing",
    "match_keys",
    "match_rows",
    "pair_rows",
    "pairing_notes",
    "row_key",
    "trial_key",
]


def pairing_notes(
    only_baseline: Sequence[str],
    only_candidate: Sequence[str],
    not_run: Sequence[str] = (),
    *,
    stopped_early: bool = False,
) -> list[str]:
    """The notes on rows only one run has (:meth:`Comparison.pairing_notes`).

    Args:
        only_baseline: Labels of the baseline rows the candidate has no row for.
        only_candidate: Labels of the candidate rows the baseline has no row for.
        not_run: Of those, the trials the other run did not run (``stop_early``).
        stopped_early: Whether either run stopped trials early.
    """
    notes = []
    skipped = set(not_run)
    for side, other, rows in (
        ("baseline", "candidate", only_baseline),
        ("candidate", "baseline", only_candidate),
    ):
        stopped = [label for label in rows if label in skipped]
        rest = [label for label in rows if label not in skipped]
        if stopped:
            notes.append(
                f"{count(len(stopped), f'{side} row')} left out: trials the {other} did "
                f"not run, their scenario settled early (stop_early): {names(stopped)}"
            )
        if rest:
            notes.append(
                f"{count(len(rest), f'{side} row')} with no row in the {other}, left out: "
                f"{names(rest)}"
            )
    if stopped_early and (only_baseline or only_candidate):
        notes.append(
            "the figures above cover the trials both runs ran; trials that stop early are "
            "no fixed-size sample (a stopped scenario's trials lean to its settled "
            "outcome): each run's pass^k counts stopped scenarios without bias"
        )
    return notes


@dataclass(frozen=True, slots=True)
class RowPairing:
    """How the rows of two runs pair (:func:`match_rows`).

    Attributes:
        order: For each baseline row, the position of its candidate row; -1 where the
            candidate has none.
        by: ``"id"`` (sample ids, or scenario and trial for simulated conversations) or
            ``"position"``.
        only_baseline: Positions of the baseline rows the candidate has no row for.
        only_candidate: Positions of the candidate rows the baseline has no row for.
        labels: Per run (baseline, candidate), each row's label: its id, ``scenario#trial``
            for a simulated conversation, else ``row i``.
    """

    order: np.ndarray
    by: str
    only_baseline: list[int] = field(default_factory=list)
    only_candidate: list[int] = field(default_factory=list)
    labels: tuple[list[str], list[str]] = field(default_factory=lambda: ([], []))

    @property
    def paired(self) -> np.ndarray:
        """Whether each baseline row has a candidate row."""
        return np.asarray(self.order >= 0, dtype=bool)

    def take(self, values: np.ndarray) -> np.ndarray:
        """The candidate's ``values`` (one per candidate row) in the baseline's row order.

        NaN where a baseline row has no candidate row.
        """
        taken = np.full(len(self.order), np.nan)
        paired = self.paired
        taken[paired] = np.asarray(values, dtype=float)[self.order[paired]]
        return taken


def trial_key(scenario_id: str, trial: int) -> str:
    """The pairing key of a simulated conversation's row: ``scenario#trial``."""
    return f"{scenario_id}#{trial}"


def row_key(row: SampleResult) -> str | None:
    """What pairs ``row`` with its counterpart in another run (None: nothing).

    ``scenario#trial`` for a simulated conversation (:func:`trial_key`), else its sample id.
    """
    if row.trial is not None:
        return trial_key(row.trial.scenario_id, row.trial.index)
    return row.sample_id


def match_rows(baseline: EvaluationResult, candidate: EvaluationResult) -> RowPairing:
    """Pair the rows of two runs: by id where both runs name every row once, else by position.

    A row's id is its scenario and trial for a simulated conversation (so a run whose
    trials stopped early, ``stop_early``, pairs with a full run trial by trial), else its
    sample id (``metadata["id"]``, a results file's ``id``). When every row of both runs has
    one and no run repeats one, rows pair by it, in any order; rows only one run has are
    left unpaired (:attr:`RowPairing.only_baseline`, :attr:`RowPairing.only_candidate`).
    Otherwise rows pair by position. The rule itself is :func:`match_keys`'s.

    Raises:
        ConfigError: paired by id, the runs share no row; paired by position, they differ in
            length or name different ids at one position.
    """
    return match_keys(
        ([row_key(row) for row in baseline.rows], [row_key(row) for row in candidate.rows]),
        ([row.sample_id for row in baseline.rows], [row.sample_id for row in candidate.rows]),
    )


def match_keys(
    keys: tuple[Sequence[str | None], Sequence[str | None]],
    ids: tuple[Sequence[str | None], Sequence[str | None]],
) -> RowPairing:
    """Pair two runs' rows from each row's pairing key and sample id (:func:`match_rows`'s rule).

    What :func:`match_rows` does with two runs' rows, on what pairs them alone, for callers
    that hold columns rather than rows (the viewer compares a store's narrow columns).

    Args:
        keys: Per run (baseline, candidate), each row's key in row order (:func:`row_key`:
            ``scenario#trial`` for a simulated conversation, else the sample id; None
            without one).
        ids: Per run, each row's sample id (what rows paired by position must not contradict).

    Raises:
        ConfigError: as :func:`match_rows`.
    """
    keys = (list(keys[0]), list(keys[1]))
    labels = (
        [key if key is not None else f"row {i}" for i, key in enumerate(keys[0])],
        [key if key is not None else f"row {i}" for i, key in enumerate(keys[1])],
    )
    if all(None not in run and len(set(run)) == len(run) for run in keys):
        first, second = keys
        position = {key: index for index, key in enumerate(second)}
        order = np.asarray([position.get(key, -1) for key in first], dtype=int)
        in_first = set(first)
        only_candidate = [j for j, key in enumerate(second) if key not in in_first]
        if first and second and not (order >= 0).any():
            raise ConfigError(
                f"the runs share no sample: ids of the baseline {names(first, quoted=True)}, "
                f"of the candidate {names(second, quoted=True)}; compare runs of the same dataset"
            )
        only_baseline = [int(i) for i in np.flatnonzero(order < 0)]
        return RowPairing(order, "id", only_baseline, only_candidate, labels)
    if len(keys[0]) != len(keys[1]):
        raise ConfigError(
            f"runs differ in length ({len(keys[0])} vs {len(keys[1])} rows) and "
            "their rows cannot pair by id (a row without an id, or an id repeated); compare "
            "runs of the same dataset"
        )
    for index, (first_id, second_id) in enumerate(zip(*ids, strict=True)):
        if first_id is not None and second_id is not None and first_id != second_id:
            raise ConfigError(
                f"row {index}: id {first_id!r} in the baseline, {second_id!r} in the candidate; "
                "rows pair by position when ids are missing or repeated: compare runs of the "
                "same dataset, in the same order"
            )
    return RowPairing(np.arange(len(keys[0])), "position", labels=labels)


def pair_rows(baseline: EvaluationResult, candidate: EvaluationResult) -> np.ndarray:
    """For each baseline row, the position of its candidate row (-1 where there is none).

    :attr:`RowPairing.order` of :func:`match_rows`: rows pair by id (scenario and trial for a
    simulated conversation, else ``metadata["id"]``) when every row of both runs has a
    distinct one, so runs in different orders compare and a run whose trials stopped early
    pairs with a full one; otherwise by position.

    Raises:
        ConfigError: as :func:`match_rows`.
    """
    return match_rows(baseline, candidate).order

"""Sequential trials: stop running a scenario's trials once its verdict is settled.

A scenario tried ``k`` times *passes* when at least ``pass_rate`` of its k trials succeed
(``pass_rate=1.0``, the default: all k, the event pass^k counts). After each trial, the
trials left bound what the full run could still give: with ``c`` successes, ``f`` failures
and ``k - c - f`` trials to go, the scenario passes for sure once ``c`` reaches the successes
needed, and fails for sure once even all the trials left could not reach them. Then the
remaining trials are not run. These bounds are exact, not statistical: the verdict of a
stopped scenario is the one the full run would give, with no error rate to pay (the tests
check it on 10,000 simulated scenarios).

What the estimator does with stopped scenarios: the figures the verdict fixes are reported as
the full run would give them, each stopped scenario counting with its settled verdict:
``pass^k`` (with ``pass_rate=1.0``; the first failure settles it at 0), ``pass@k`` (when one
success is enough: the first success settles it at 1) and ``scenario_pass_rate`` (the share of
scenarios that pass). They are unbiased because they equal the full run's unbiased figures
scenario by scenario. The other figures (``pass^j`` and ``pass@j`` for j < k, the success
rate) depend on the trials not run: a stopped scenario's own trials are no fixed-size sample
(the stop depended on them), so they are left out of the summary of a run where a scenario
stopped early, rather than reported with a bias.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from turneval.errors import ConfigError
from turneval.results import EarlyStops

if TYPE_CHECKING:
    from turneval.samples import MultiTurnSample

__all__ = ["EarlyStops", "StopEarly", "TrialSequencer", "stop_rule"]


@dataclass(frozen=True, slots=True)
class StopEarly:
    """When to stop a scenario's trials (``stop_early=`` of ``EvalTask.evaluate`` and ``simulate``).

    Attributes:
        pass_rate: A scenario passes when at least this share of its trials succeed, in
            (0, 1]; 1.0 (all trials: pass^k) stops at the first failure, a rate at or below
            ``1 / trials`` (one success) at the first success.
        success: Whether one simulated conversation succeeded. ``simulate`` has no metric, so
            it needs one; ``EvalTask.evaluate`` uses the metrics and their
            ``success_thresholds`` instead (a scenario stops once settled for every metric).
    """

    pass_rate: float = 1.0
    success: Callable[[MultiTurnSample], bool] | None = None

    def __post_init__(self) -> None:
        """Reject a pass rate outside (0, 1]."""
        if isinstance(self.pass_rate, bool) or not 0 < self.pass_rate <= 1:
            raise ConfigError(f"StopEarly(pass_rate=...) must be in (0, 1], got {self.pass_rate}")

    def needed(self, trials: int) -> int:
        """Successes out of ``trials`` a scenario needs to pass."""
        return max(1, math.ceil(self.pass_rate * trials - 1e-9))

    def settled(self, outcomes: Sequence[bool | None], trials: int) -> bool:
        """Whether the trials left cannot change the verdict (never with an unknown outcome)."""
        if None in outcomes:
            return False
        passed, left, needed = sum(map(bool, outcomes)), trials - len(outcomes), self.needed(trials)
        return passed >= needed or passed + left < needed


def stop_rule(stop_early: StopEarly | bool | None) -> StopEarly | None:
    """``stop_early=`` as a rule: True is ``StopEarly()``, False or None no rule."""
    if stop_early is None or stop_early is False:
        return None
    if stop_early is True:
        return StopEarly()
    if not isinstance(stop_early, StopEarly):
        raise ConfigError(
            f"stop_early must be True, False or a StopEarly(...), got {type(stop_early).__name__}"
        )
    return stop_early


class TrialSequencer:
    """The trials of each scenario in order, each waiting for the one before it.

    ``trial_of(index)`` lays the (scenario, trial) grid out trial by trial (every scenario's
    first trial, then every second one, ...), so the worker pool mostly finds the previous
    trial finished; ``await before(scenario, trial)`` waits for it, and says whether the
    scenario is settled (then the trial is skipped). ``done`` records a trial's outcomes.
    """

    def __init__(self, rule: StopEarly, scenarios: Sequence[str], trials: int) -> None:
        """Track ``trials`` trials of each of ``scenarios`` under ``rule``."""
        self.rule, self.ids, self.trials = rule, list(scenarios), trials
        count = len(self.ids)
        self.events = [[anyio.Event() for _ in range(trials)] for _ in range(count)]
        self.outcomes: list[dict[str, list[bool | None]]] = [{} for _ in range(count)]
        self.stopped = [False] * count
        self.skipped = [0] * count

    def trial_of(self, index: int) -> tuple[int, int]:
        """(scenario, trial) of the ``index``-th conversation to start."""
        return index % len(self.ids), index // len(self.ids)

    async def before(self, scenario: int, trial: int) -> bool:
        """Wait for the scenario's previous trial; True when this one is to be skipped."""
        if trial:
            await self.events[scenario][trial - 1].wait()
        if self.stopped[scenario]:
            self.skipped[scenario] += 1
            self.events[scenario][trial].set()
            return True
        return False

    def done(self, scenario: int, trial: int, outcomes: dict[str, bool | None]) -> None:
        """Record a trial's outcome per metric; settle the scenario when every one is."""
        seen = self.outcomes[scenario]
        for name, outcome in outcomes.items():
            seen.setdefault(name, []).append(outcome)
        left = trial < self.trials - 1
        if left and seen and all(self.rule.settled(o, self.trials) for o in seen.values()):
            self.stopped[scenario] = True
        self.events[scenario][trial].set()

    def report(self) -> EarlyStops:
        """What stopping saved."""
        skipped = {self.ids[i]: n for i, n in enumerate(self.skipped) if n}
        ran = len(self.ids) * self.trials - sum(skipped.values())
        return EarlyStops(self.trials, self.rule.needed(self.trials), ran, skipped)

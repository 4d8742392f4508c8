"""Statistics: intervals, tests and corrections; power for release gates; run sizes planned.

The pure statistics (:mod:`turneval.stats._inference`) sit low in the layers: the one
summariser (:mod:`turneval.aggregate`) uses them, for the bootstrap interval of each mean and
the exact interval of a flaky scenario's pass rate, and ``turneval compare`` for its paired
permutation test and Holm's correction.

:func:`plan` answers "how many rows (or scenarios x trials) must a run have to catch a drop of
``mde``?" from a run's own per-row values; :func:`gate_report` says, for a comparison of two
runs, which test decided, the difference with its confidence interval, the p-value (Holm-
corrected when several metrics are gated at once) and the power the comparison had. These
work over runs and comparisons, high in the layers: they are imported on first use (a
module-level ``__getattr__``), so that the summariser can import this package's pure
statistics without the comparison they build on.

The power figures come from statsmodels (``TTestPower``) and SciPy; both are imported only when
a figure is computed (``pip install 'turneval[stats]'``). Holm's correction needs neither
(:func:`holm`).

The model behind every figure: a gate compares two runs over the same rows, paired, with a
two-sided test of a zero mean difference at level ``alpha``. Its power for a true drop ``d``
is the paired t-test's (statsmodels ``TTestPower``) at effect size ``d / sd``, ``sd`` being
the standard deviation of the paired differences. ``turneval compare`` decides with a paired
permutation test, whose power the t-test's approaches for all but tiny runs (the tests check
it by simulation). Without a baseline, ``sd`` is the run's own spread times sqrt(2): two runs
whose rows are uncorrelated, the cautious case (paired rows of two versions of one agent are
usually positively correlated, which shrinks ``sd``; give a baseline to use the real figure).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from turneval.stats._inference import (
    binomial_interval,
    bootstrap_ci,
    holm,
    paired_permutation_test,
)

if TYPE_CHECKING:
    from turneval.stats._gates import MetricGate, PowerReport, gate_report
    from turneval.stats._plan import MetricPlan, Plan, TrialPlan, plan, plan_files, read_run
    from turneval.stats._power import MAX_ROWS, achieved_power, detectable_drop, samples_needed

# Name -> the module that defines it, imported on first use (it imports the comparison).
_LAZY: dict[str, str] = {
    "MAX_ROWS": "turneval.stats._power",
    "MetricGate": "turneval.stats._gates",
    "MetricPlan": "turneval.stats._plan",
    "Plan": "turneval.stats._plan",
    "PowerReport": "turneval.stats._gates",
    "TrialPlan": "turneval.stats._plan",
    "achieved_power": "turneval.stats._power",
    "detectable_drop": "turneval.stats._power",
    "gate_report": "turneval.stats._gates",
    "plan": "turneval.stats._plan",
    "plan_files": "turneval.stats._plan",
    "read_run": "turneval.stats._plan",
    "samples_needed": "turneval.stats._power",
}

__all__ = [
    "MAX_ROWS",
    "MetricGate",
    "MetricPlan",
    "Plan",
    "PowerReport",
    "TrialPlan",
    "achieved_power",
    "binomial_interval",
    "bootstrap_ci",
    "detectable_drop",
    "gate_report",
    "holm",
    "paired_permutation_test",
    "plan",
    "plan_files",
    "read_run",
    "samples_needed",
]


def __getattr__(name: str) -> Any:
    """Import a name about runs and comparisons on first use (see the module)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'turneval.stats' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})

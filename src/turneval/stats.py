"""Statistical power for release gates: plan a run's size, and check a comparison's power.

:func:`plan` answers "how many rows (or scenarios x trials) must a run have to catch a drop of
``mde``?" from a run's own per-row values; :func:`gate_report` says, for a comparison of two
runs, which test decided, the difference with its confidence interval, the p-value (Holm-
corrected when several metrics are gated at once) and the power the comparison had.

The figures come from statsmodels (``TTestPower``) and SciPy; both are imported only when a
figure is computed (``pip install 'turneval[stats]'``). Holm's correction needs neither
(:func:`~turneval.aggregate.holm`).

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

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from os import PathLike
from typing import TYPE_CHECKING, Any

import numpy as np

from turneval.compare import TEST, match_rows
from turneval.errors import ConfigError
from turneval.results import EvaluationResult
from turneval.runs import open_run

if TYPE_CHECKING:
    from turneval.compare import Comparison
    from turneval.store import RunStore

__all__ = [
    "MAX_ROWS",
    "MetricGate",
    "MetricPlan",
    "Plan",
    "PowerReport",
    "TrialPlan",
    "achieved_power",
    "detectable_drop",
    "gate_report",
    "plan",
    "plan_files",
    "read_run",
    "samples_needed",
]


def _power_model() -> Any:
    try:
        import statsmodels.tools.sm_exceptions  # noqa: F401  # sets warning filters on import
        from statsmodels.stats.power import TTestPower
    except ImportError as exc:
        raise ConfigError(
            "power and sample sizes need statsmodels: pip install 'turneval[stats]'"
        ) from exc
    return TTestPower()


def _check_levels(mde: float | None, alpha: float, power: float) -> None:
    if mde is not None and not (math.isfinite(mde) and mde > 0):
        raise ConfigError(f"mde must be a drop above 0, got {mde}")
    if not 0 < alpha < 1:
        raise ConfigError(f"alpha must be between 0 and 1, got {alpha}")
    if not 0 < power < 1:
        raise ConfigError(f"power must be between 0 and 1, got {power}")
    if power <= alpha:
        raise ConfigError(
            f"power {power:g} must be above alpha {alpha:g}: a test at level alpha already "
            "rejects with probability alpha when nothing changed, so no size or drop is needed "
            "for that power"
        )


_TOLERANCE = 1e-5
"""How far from the wanted power statsmodels' answer may be (its own solver's precision is
about 1e-6) before it is solved again."""

MAX_ROWS = 10**15
"""The most rows (or scenarios) a plan counts up to; a drop that needs more is refused."""


def _figure(value: Any) -> float | None:
    """A solver's answer as a float, None for NaN, infinity or anything but one number.

    statsmodels answers a float, a 0-d or a one-element array, depending on the row count.
    """
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return None
    if array.size != 1:
        return None
    number = float(array.reshape(-1)[0])
    return number if math.isfinite(number) else None


def _solve(**arguments: Any) -> float | None:
    """The answer of statsmodels' ``TTestPower.solve_power`` (two-sided), None without one."""
    model = _power_model()  # imported first: statsmodels' import sets warning filters
    with warnings.catch_warnings():  # ConvergenceWarning: the answer is checked anyway
        warnings.simplefilter("ignore")
        try:
            answer = model.solve_power(alternative="two-sided", **arguments)
        except (ArithmeticError, RuntimeError, ValueError):  # "f(a) and f(b) must have ..."
            return None
    return _figure(answer)


def _test_power(effect: float, n: float, alpha: float) -> float:
    """The two-sided paired t-test's power at effect size ``effect`` over ``n`` pairs.

    statsmodels' ``TTestPower.power``. It gives NaN where SciPy's noncentral t CDF fails far
    in the lower tail (from a few standard deviations of effect); the same two regions are
    then read as upper tails, ``P(T' > t) + P(T' < -t) = nct.sf(t, nc) + nct.sf(t, -nc)``
    (``-T'`` is noncentral t with ``-nc``), which SciPy computes there.

    Raises:
        ConfigError: no figure (SciPy gives NaN too).
    """
    model = _power_model()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        value = _figure(
            model.power(effect_size=effect, nobs=n, alpha=alpha, alternative="two-sided")
        )
        if value is None:
            from scipy import stats as sps

            df, nc = n - 1, effect * math.sqrt(n)
            critical = sps.t.isf(alpha / 2, df)
            value = _figure(sps.nct.sf(critical, df, nc) + sps.nct.sf(critical, df, -nc))
    if value is None and effect * math.sqrt(n) > 1e6:
        # SciPy's noncentral t is NaN past a noncentrality of about 1e9; the power grows with
        # the effect, so where it is already 1 at a noncentrality of 1e6 it is 1 beyond
        smaller = _test_power(1e6 / math.sqrt(n), n, alpha)
        value = 1.0 if smaller >= 1.0 - 1e-12 else None
    if value is None:
        raise ConfigError(
            f"no power figure for an effect size of {effect:.4g} over {n:g} pairs at alpha "
            f"{alpha:g} (statsmodels and SciPy give NaN)"
        )
    return min(1.0, max(0.0, value))


def samples_needed(sd: float, mde: float, *, alpha: float, power: float) -> int | None:
    """Pairs a two-sided paired test needs to find a drop of ``mde`` with ``power``.

    ``sd`` is the standard deviation of the paired differences; None when it is 0 (no spread
    to plan from). At least 2 (the fewest a t-test can use). statsmodels'
    ``TTestPower.solve_power``, checked: the answer is the smallest whole number of pairs whose
    power reaches ``power``; where the solver fails (it does not converge for large effects,
    or answers a one-element array) that number is found by bisection over
    ``TTestPower.power``.

    Raises:
        ConfigError: the drop needs more than :data:`MAX_ROWS` pairs, or no power figure.
    """
    _check_levels(mde, alpha, power)
    if not sd > 0:
        return None
    effect = mde / sd

    def reaches(n: int) -> bool:
        return _test_power(effect, n, alpha) >= power

    guess = _solve(effect_size=effect, alpha=alpha, power=power)
    if guess is not None and guess < MAX_ROWS:
        n = max(2, math.ceil(guess - 1e-9))
        if _test_power(effect, n, alpha) >= power - _TOLERANCE and (
            n == 2 or _test_power(effect, n - 1, alpha) < power + _TOLERANCE
        ):
            return n
    if reaches(2):
        return 2
    low, high = 2, 4
    while not reaches(high):
        if high > MAX_ROWS:
            raise ConfigError(
                f"a drop of {mde:g} against a spread of {sd:.4g} (effect size {effect:.3g}) "
                f"needs more than {MAX_ROWS:.0e} rows: plan a larger drop"
            )
        low, high = high, high * 2
    while high - low > 1:  # low does not reach the power, high does
        middle = (low + high) // 2
        low, high = (low, middle) if reaches(middle) else (middle, high)
    return high


def achieved_power(sd: float, mde: float, n: int, *, alpha: float) -> float | None:
    """The power of a two-sided paired test over ``n`` pairs against a drop of ``mde``.

    None when ``sd`` is 0 or ``n`` is under 2.

    Raises:
        ConfigError: no power figure (statsmodels and SciPy give NaN).
    """
    if not sd > 0 or n < 2:
        return None
    return _test_power(mde / sd, n, alpha)


def detectable_drop(sd: float, n: int, *, alpha: float, power: float) -> float | None:
    """The smallest drop a two-sided paired test over ``n`` pairs finds with ``power``.

    None when ``sd`` is 0 or ``n`` is under 2. statsmodels' ``TTestPower.solve_power``,
    checked against ``TTestPower.power``; where the solver fails (a one-element array, no
    convergence, a wrong root for 2 or 3 pairs) the effect size is found with SciPy's
    ``brentq``.

    Raises:
        ConfigError: ``power`` is not above ``alpha``, or no power figure.
    """
    _check_levels(None, alpha, power)
    if not sd > 0 or n < 2:
        return None
    effect = _solve(effect_size=None, nobs=n, alpha=alpha, power=power)
    if effect is None or effect <= 0 or abs(_test_power(effect, n, alpha) - power) > _TOLERANCE:
        effect = _effect_for(n, alpha, power)
    return effect * sd


def _effect_for(n: int, alpha: float, power: float) -> float:
    """The effect size at which the test over ``n`` pairs has ``power`` (``brentq``)."""
    from scipy.optimize import brentq

    def short(effect: float) -> float:
        return _test_power(effect, n, alpha) - power

    high = 1.0
    while short(high) < 0:  # power grows with the effect size, to 1
        high *= 4
        if high > 1e12:
            raise ConfigError(f"no drop reaches power {power:g} at alpha {alpha:g} over {n} pairs")
    return float(brentq(short, 0.0, high, xtol=1e-12, rtol=1e-10))


@dataclass(frozen=True, slots=True)
class TrialPlan:
    """The pass^k plan of a run whose scenarios were tried several times.

    Attributes:
        k: Trials per scenario (pass^k is the chance that all k succeed).
        scenarios: Scenarios with at least k known outcomes (or, stopped early under
            pass^k, a known failure).
        pass_hat_k: pass^k over those scenarios.
        sd: Standard deviation of the paired per-scenario pass^k differences (as for rows).
        scenarios_needed: Scenarios that find a drop of ``mde`` in pass^k (None: no spread).
        conversations_needed: ``scenarios_needed * k``: the conversations to simulate.
        achieved_power: The power of a comparison over ``scenarios``.
        min_detectable_drop: The smallest drop in pass^k ``scenarios`` find with the power.
    """

    k: int
    scenarios: int
    pass_hat_k: float
    sd: float
    scenarios_needed: int | None
    conversations_needed: int | None
    achieved_power: float | None
    min_detectable_drop: float | None


@dataclass(frozen=True, slots=True)
class MetricPlan:
    """The plan of one metric.

    Attributes:
        name: The metric.
        rows: Rows scored (with a baseline: rows both runs scored, paired).
        mean: The metric's mean over those rows.
        sd: Standard deviation of the paired differences: measured against the baseline, or
            the run's own spread times sqrt(2) without one (uncorrelated runs).
        correlation: Pearson correlation of the paired rows (None without a baseline).
        samples_needed: Rows that find a drop of ``mde`` with the power (None: no spread).
        achieved_power: The power a comparison over ``rows`` rows has against ``mde``.
        min_detectable_drop: The smallest drop ``rows`` rows find with the power.
        trials: The pass^k plan when the run holds trials of scenarios, else None.
        span: The width of the metric's scale (4 for a 1-5 rubric, 1 for a value in [0, 1]),
            None when unknown: a minimum detectable drop wider than it is printed as not
            detectable with these rows.
    """

    name: str
    rows: int
    mean: float | None
    sd: float
    correlation: float | None
    samples_needed: int | None
    achieved_power: float | None
    min_detectable_drop: float | None
    trials: TrialPlan | None = None
    span: float | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    """What :func:`plan` found: per metric, the rows needed and the power the run has.

    Attributes:
        mde: The drop to detect (minimum detectable effect), on the metric's scale.
        alpha: The test's level (two-sided).
        power: The power wanted.
        metrics: One :class:`MetricPlan` per metric, by name.
        paired: Whether a baseline gave the paired rows' spread.
        rows_only_baseline: Labels (id, or ``scenario#trial``) of the baseline rows the run
            has no row for, left out (rows pair by id: :func:`~turneval.compare.match_rows`).
        rows_only_run: Labels of the run's rows the baseline has no row for, left out.
    """

    mde: float
    alpha: float
    power: float
    metrics: dict[str, MetricPlan]
    paired: bool
    rows_only_baseline: list[str] = field(default_factory=list)
    rows_only_run: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        """A Markdown table, then the pass^k plan of a run with trials."""
        spread = "paired rows" if self.paired else "no baseline: runs assumed uncorrelated"
        lines = [
            f"plan: find a drop of {self.mde:g} with power {self.power:g} at alpha "
            f"{self.alpha:g} (paired two-sided test; sd of the differences from {spread})",
            "| metric | rows | mean | sd diff | corr | rows needed | power now | "
            "min. detectable drop |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for m in self.metrics.values():
            cells = [
                m.name,
                str(m.rows),
                _fmt(m.mean),
                f"{m.sd:.4f}",
                _fmt(m.correlation, ".3f"),
                "n/a" if m.samples_needed is None else str(m.samples_needed),
                _fmt(m.achieved_power, ".3f"),
                _drop(m.min_detectable_drop, m.span, "rows"),
            ]
            lines.append("| " + " | ".join(cells) + " |")
        for m in self.metrics.values():
            t = m.trials
            if t is None:
                continue
            needed = (
                "n/a (no spread)"
                if t.scenarios_needed is None
                else f"{t.scenarios_needed} scenarios x {t.k} trials = "
                f"{t.conversations_needed} conversations"
            )
            lines.append(
                f"pass^{t.k} of {m.name}: {t.pass_hat_k:.4f} over {t.scenarios} scenarios; "
                f"needed: {needed}; power now {_fmt(t.achieved_power, '.3f')}, "
                f"min. detectable drop {_drop(t.min_detectable_drop, 1.0, 'scenarios')}"
            )
        lines += [
            f"note: {m.name} has no spread: every paired difference is equal, nothing to plan from"
            for m in self.metrics.values()
            if m.samples_needed is None and m.rows >= 2
        ]
        for side, other, labels in (
            ("baseline", "run", self.rows_only_baseline),
            ("run", "baseline", self.rows_only_run),
        ):
            if labels:
                shown = ", ".join(labels[:10]) + (
                    f" (+{len(labels) - 10} more)" if len(labels) > 10 else ""
                )
                lines.append(
                    f"note: {len(labels)} {side} row{'s' if len(labels) != 1 else ''} with no "
                    f"row in the {other} (trials stopped early, or other samples), left out: "
                    f"{shown}"
                )
        return "\n".join(lines)


def _fmt(value: float | None, spec: str = ".4f") -> str:
    return "n/a" if value is None else format(value, spec)


def _beyond(drop: float | None, span: float | None) -> bool:
    """Whether a minimum detectable drop is wider than the metric's scale (cannot happen)."""
    return drop is not None and span is not None and drop > span


def _drop(drop: float | None, span: float | None, units: str) -> str:
    """A minimum detectable drop, or why none is (``units``: "rows", "scenarios")."""
    if _beyond(drop, span):
        return f"not detectable with these {units} ({drop:.4f} > the scale's {span:g})"
    return _fmt(drop)


def _span(name: str, values: np.ndarray) -> float | None:
    """The width of metric ``name``'s scale: its own, else 1 for values in [0, 1], or None."""
    from turneval.calibration.scales import metric_class, scale_of

    scale = scale_of(metric_class(name))
    if scale:
        return scale[-1] - scale[0]
    known = values[~np.isnan(values)]
    if known.size and known.min() >= 0 and known.max() <= 1:
        return 1.0
    return None


def _sd(values: np.ndarray) -> float:
    return float(values.std(ddof=1)) if values.size >= 2 else 0.0


def plan(
    run: EvaluationResult,
    *,
    mde: float,
    metric: str | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
    baseline: EvaluationResult | None = None,
) -> Plan:
    """How many rows (or scenarios x trials) find a drop of ``mde``, and the power ``run`` has.

    For each metric (or only ``metric``), from the run's per-row values: the rows a paired
    two-sided test at ``alpha`` needs to find a true drop of ``mde`` with probability
    ``power`` (statsmodels ``TTestPower.solve_power``), the power a comparison over the run's
    own rows has, and the smallest drop it finds with ``power``. With ``baseline`` (an earlier
    run of the same samples, paired as :func:`~turneval.compare.compare` pairs them) the
    spread is that of the real paired differences, which the rows' correlation shrinks;
    without one, the runs are taken as uncorrelated (the cautious case).

    A run with trials of scenarios (``EvalTask.evaluate(user=..., trials=k)``) also gets a
    :class:`TrialPlan`: the same figures for pass^k, each scenario's pass^k estimate taking
    the place of a row (scenarios paired by id with a baseline).

    Raises:
        ConfigError: ``mde``, ``alpha`` or ``power`` is out of range, ``metric`` is not in the
            run (or the baseline), or the runs cannot be paired.
    """
    _check_levels(mde, alpha, power)
    names = run.metric_names if metric is None else [metric]
    if metric is not None and metric not in run.metric_names:
        raise ConfigError(f"no metric named {metric!r} in the run; its metrics: {run.metric_names}")
    pairing = None
    if baseline is not None:
        pairing = match_rows(baseline, run)
        missing = [name for name in names if name not in baseline.metric_names]
        if metric is not None and missing:
            raise ConfigError(
                f"the baseline has no metric {metric!r}; its metrics: {baseline.metric_names}"
            )
        names = [name for name in names if name not in missing]
    metrics = {}
    for name in names:
        values = np.asarray(run.scores(name), dtype=float)
        correlation = None
        if baseline is not None and pairing is not None:
            base = np.asarray(baseline.scores(name), dtype=float)
            cand = pairing.take(values)
            both = ~(np.isnan(base) | np.isnan(cand))
            scored, rows = cand[both], int(both.sum())
            sd = _sd(scored - base[both])
            if rows >= 2 and _sd(scored) > 0 and _sd(base[both]) > 0:
                from scipy.stats import pearsonr

                with warnings.catch_warnings():  # nearly constant rows: the figure is shown
                    warnings.simplefilter("ignore")
                    found = float(pearsonr(base[both], scored).statistic)
                correlation = found if math.isfinite(found) else None
        else:
            scored = values[~np.isnan(values)]
            rows = int(scored.size)
            sd = _sd(scored) * math.sqrt(2)
        try:
            metrics[name] = MetricPlan(
                name,
                rows,
                float(scored.mean()) if rows else None,
                sd,
                correlation,
                samples_needed(sd, mde, alpha=alpha, power=power),
                achieved_power(sd, mde, rows, alpha=alpha),
                detectable_drop(sd, rows, alpha=alpha, power=power),
                _trial_plan(run, baseline, name, mde=mde, alpha=alpha, power=power),
                _span(name, values),
            )
        except ConfigError as exc:  # say which metric could not be planned
            raise ConfigError(f"{name}: {exc}") from exc
    if pairing is None:
        return Plan(mde, alpha, power, metrics, False)
    return Plan(
        mde,
        alpha,
        power,
        metrics,
        True,
        [pairing.labels[0][i] for i in pairing.only_baseline],
        [pairing.labels[1][j] for j in pairing.only_candidate],
    )


def _per_scenario_pass_hat(run: EvaluationResult, name: str, k: int) -> dict[str, float]:
    """Each scenario's unbiased pass^k estimate C(c, k) / C(n, k) (n >= k known outcomes).

    A scenario whose trials stopped early under pass^k (``stop_early``, all k needed) failed
    for sure: its estimate is 0, as the full run's would be.
    """
    stops = run.early_stops
    settled = stops is not None and stops.needed == stops.trials == k
    estimates = {}
    for scenario, outcomes in run.trial_outcomes(name).items():
        known = [o for o in outcomes if o is not None]
        if len(known) >= k:
            estimates[scenario] = math.comb(sum(known), k) / math.comb(len(known), k)
        elif settled and known and None not in outcomes and not all(known):
            estimates[scenario] = 0.0
    return estimates


def _trial_plan(
    run: EvaluationResult,
    baseline: EvaluationResult | None,
    name: str,
    *,
    mde: float,
    alpha: float,
    power: float,
) -> TrialPlan | None:
    outcomes = run.trial_outcomes(name)
    k = max((len([o for o in trials if o is not None]) for trials in outcomes.values()), default=0)
    if run.early_stops is not None:  # trials asked for, though a stopped scenario ran fewer
        k = max(k, run.early_stops.trials)
    if k < 2:  # one trial per scenario: the rows' plan says it all
        return None
    estimates = _per_scenario_pass_hat(run, name, k)
    if not estimates:
        return None
    values = np.asarray(list(estimates.values()))
    if baseline is not None and name in baseline.metric_names:
        before = _per_scenario_pass_hat(baseline, name, k)
        shared = [s for s in estimates if s in before]
        diffs = np.asarray([estimates[s] - before[s] for s in shared])
        sd, scenarios = _sd(diffs), len(shared)
    else:
        sd, scenarios = _sd(values) * math.sqrt(2), len(estimates)
    needed = samples_needed(sd, mde, alpha=alpha, power=power)
    return TrialPlan(
        k,
        scenarios,
        float(values.mean()),
        sd,
        needed,
        None if needed is None else needed * k,
        achieved_power(sd, mde, scenarios, alpha=alpha),
        detectable_drop(sd, scenarios, alpha=alpha, power=power),
    )


def read_run(
    path: str | PathLike[str], store: RunStore | str | PathLike[str] | None = None
) -> EvaluationResult:
    """A run's rows, as :func:`plan_files` reads them (:func:`turneval.runs.open_run`).

    A ``--out`` folder, a results.jsonl (or a summary.json with its rows beside it), or a run
    kept in ``store`` (its id).

    Raises:
        ConfigError: ``path`` is no run, a summary.json without rows, or holds no rows
            (naming it).
    """
    with open_run(path, store) as run:
        if not run.has_rows:
            raise ConfigError(f"{run.label}: a summary.json alone has no rows to plan from")
        result = run.result
        if not result.rows:
            raise ConfigError(f"{run.label} holds no rows: nothing to plan from")
        return result


def plan_files(
    run: str | PathLike[str],
    *,
    mde: float,
    metric: str | None = None,
    alpha: float = 0.05,
    power: float = 0.8,
    baseline: str | PathLike[str] | None = None,
    store: RunStore | str | PathLike[str] | None = None,
) -> Plan:
    """:func:`plan` over runs on disk or in a store (as ``turneval plan``).

    Each run is a ``--out`` folder, a results.jsonl or a run kept in ``store`` (its id).

    Raises:
        ConfigError: a run cannot be read, or as :func:`plan`.
    """
    return plan(
        read_run(run, store),
        mde=mde,
        metric=metric,
        alpha=alpha,
        power=power,
        baseline=None if baseline is None else read_run(baseline, store),
    )


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
            diff = _fmt(m.difference, "+.4f")
            if m.ci_low is not None and m.ci_high is not None:
                diff += f" [{m.ci_low:+.4f}, {m.ci_high:+.4f}]"
            cells = [
                m.name,
                str(m.pairs),
                diff,
                _fmt(m.p_value),
                _fmt(m.p_holm),
                _fmt(m.power, ".3f"),
                _fmt(m.min_detectable_drop),
            ]
            lines.append("| " + " | ".join(cells) + " |")
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
    the p-values are corrected with Holm's method (:func:`~turneval.aggregate.holm`, as
    statsmodels' ``multipletests``) and each
    metric's power is computed at ``alpha / m``, the strictest of Holm's steps, so the
    figure is a lower bound of the power the gate has. The power is that of a two-sided
    paired test against a true drop of ``mde`` (see the module's docstring); the interval is
    the percentile bootstrap of the mean difference
    (:func:`~turneval.aggregate.bootstrap_ci`).

    Raises:
        ConfigError: ``metrics`` names a metric that is not in the comparison, or ``mde``,
            ``alpha`` or ``power`` is out of range.
    """
    from turneval.aggregate import bootstrap_ci, holm

    _check_levels(mde, alpha, power)
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
        sd, spread = _sd(diffs), "paired"
        if sd == 0 and diffs.size >= 2:
            sd, spread = math.sqrt(_sd(base) ** 2 + _sd(cand) ** 2), "unpaired"
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
        )
    return PowerReport(gates, mde, alpha, power, TEST, correction)

"""Agreement statistics of a judge against human labels, and between several raters.

The statistics are scikit-learn's, scipy's and the ``krippendorff`` package's (the
``calibration`` extra); the bootstrap's kappas are computed for every resample at once with
scikit-learn's formula.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from turneval.calibration._report import AgreementReport, ClassScores, Interval
from turneval.errors import ConfigError

__all__ = [
    "agreement_statistics",
    "krippendorff_alpha",
    "require_extra",
    "resampled_kappas",
]


def require_extra() -> None:
    """Check that the ``calibration`` extra (scikit-learn, scipy, krippendorff) is installed.

    Raises:
        ImportError: naming the extra to install.
    """
    try:
        import krippendorff  # noqa: F401
        import scipy  # noqa: F401
        import sklearn  # noqa: F401
    except ImportError as exc:  # pragma: no cover - the extra is installed in tests
        raise ImportError(
            "turneval.calibration needs the calibration extra: pip install 'turneval[calibration]'"
        ) from exc


def _finite(value: Any) -> float | None:
    number = float(value)
    return number if math.isfinite(number) else None


def _kappa(human: np.ndarray, judge: np.ndarray, classes: list[int], weights: Any) -> float | None:
    from sklearn.metrics import cohen_kappa_score

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # undefined kappa (one class): reported as None
        return _finite(cohen_kappa_score(human, judge, labels=classes, weights=weights))


def resampled_kappas(
    human: np.ndarray, judge: np.ndarray, classes: int, weights: str | None
) -> np.ndarray:
    """Cohen's kappa of every resample (row) at once: scikit-learn's formula, NaN if undefined.

    ``kappa = 1 - sum(W * O) / sum(W * E)`` over the confusion matrix ``O`` and the matrix
    ``E`` expected by chance, with ``W`` 0 on the diagonal and 1 (or ``(i - j)**2``) off it, as
    ``sklearn.metrics.cohen_kappa_score`` computes it; one ``bincount`` serves all resamples.
    """
    resamples = len(human)
    cells = (np.arange(resamples)[:, None] * classes + human) * classes + judge
    observed = np.bincount(cells.ravel(), minlength=resamples * classes * classes).reshape(
        resamples, classes, classes
    )
    totals = observed.sum(axis=(1, 2), keepdims=True)
    expected = observed.sum(axis=2)[:, :, None] * observed.sum(axis=1)[:, None, :] / totals
    grid = np.arange(classes)
    weight = (
        (grid[:, None] - grid[None, :]) ** 2
        if weights == "quadratic"
        else (grid[:, None] != grid[None, :]).astype(float)
    )
    numerator = (weight * observed).sum(axis=(1, 2))
    denominator = (weight * expected).sum(axis=(1, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        kappas: np.ndarray = 1.0 - numerator / denominator
    kappas[denominator == 0] = np.nan
    return kappas


_BOOTSTRAP_CELLS = 1_000_000  # resampled rows drawn at once: bounds the bootstrap's memory


def _bootstrap(
    human: np.ndarray, judge: np.ndarray, classes: list[int], seed: int, resamples: int
) -> tuple[Interval | None, Interval | None, Interval | None]:
    """Percentile bootstrap 95% intervals of agreement, kappa and weighted kappa."""
    if len(human) < 2 or resamples < 1:
        return None, None, None
    rng = np.random.default_rng(seed)
    ordinal = len(classes) > 2
    chunk = max(1, _BOOTSTRAP_CELLS // len(human))
    agreements, kappas, weighted = [], [], []
    for start in range(0, resamples, chunk):
        picks = rng.integers(0, len(human), size=(min(chunk, resamples - start), len(human)))
        resampled_human, resampled_judge = human[picks], judge[picks]
        agreements.append(np.mean(resampled_human == resampled_judge, axis=1))
        kappas.append(resampled_kappas(resampled_human, resampled_judge, len(classes), None))
        if ordinal:
            weighted.append(
                resampled_kappas(resampled_human, resampled_judge, len(classes), "quadratic")
            )

    def interval(parts: list[np.ndarray]) -> Interval | None:
        values = np.concatenate(parts) if parts else np.array([])
        values = values[np.isfinite(values)]
        if not len(values):
            return None
        low, high = np.percentile(values, [2.5, 97.5])
        return float(low), float(high)

    return interval(agreements), interval(kappas), interval(weighted) if ordinal else None


def agreement_statistics(
    name: str,
    human_values: Sequence[float],
    judge_values: Sequence[float],
    scale: tuple[float, ...],
    *,
    skipped: int = 0,
    seed: int = 0,
    resamples: int = 1000,
) -> AgreementReport:
    """Every statistic of judge vs human values already checked to lie on ``scale``.

    Args:
        name: The metric's name.
        human_values: The human labels, one per row.
        judge_values: The judge's verdicts on the same rows.
        scale: The scale's values, low to high (two or more).
        skipped: Labeled rows the judge failed on, to report.
        seed: Seed of the bootstrap.
        resamples: Bootstrap resamples for the 95% intervals.
    """
    require_extra()
    import krippendorff
    from scipy import stats
    from sklearn.metrics import (
        accuracy_score,
        balanced_accuracy_score,
        confusion_matrix,
        precision_recall_fscore_support,
    )

    position = {value: index for index, value in enumerate(scale)}
    human = np.array([position[v] for v in human_values], dtype=np.int64)
    judge = np.array([position[v] for v in judge_values], dtype=np.int64)
    classes = list(range(len(scale)))
    ordinal = len(scale) > 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # classes absent from the labels: sklearn warns
        balanced = float(balanced_accuracy_score(human, judge))
    per_class: dict[str, ClassScores] = {}
    if len(scale) == 2:
        precision, recall, f1, support = precision_recall_fscore_support(
            human, judge, labels=classes, zero_division=0
        )
        for index, value in enumerate(scale):
            per_class[f"{value:g}"] = ClassScores(
                float(precision[index]), float(recall[index]), float(f1[index]), int(support[index])
            )
    spearman = kendall = None
    if ordinal:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # constant input: undefined, reported as None
            spearman = _finite(stats.spearmanr(human_values, judge_values).statistic)
            kendall = _finite(stats.kendalltau(human_values, judge_values).statistic)
    matrix = confusion_matrix(human, judge, labels=classes)
    alpha = None
    if len(set(human_values) | set(judge_values)) > 1:
        alpha = _finite(
            krippendorff.alpha(
                reliability_data=[list(human_values), list(judge_values)],
                level_of_measurement="ordinal" if ordinal else "nominal",
                value_domain=list(scale),
            )
        )
    agreement_ci, kappa_ci, weighted_ci = _bootstrap(human, judge, classes, seed, resamples)
    return AgreementReport(
        metric=name,
        n=len(human),
        scale=scale,
        agreement=float(accuracy_score(human, judge)),
        agreement_ci=agreement_ci,
        kappa=_kappa(human, judge, classes, None),
        kappa_ci=kappa_ci,
        weighted_kappa=_kappa(human, judge, classes, "quadratic") if ordinal else None,
        weighted_kappa_ci=weighted_ci,
        balanced_accuracy=balanced,
        per_class=per_class,
        spearman=spearman,
        kendall=kendall,
        mean_bias=float(np.mean(np.asarray(judge_values) - np.asarray(human_values))),
        confusion=tuple(tuple(int(c) for c in row) for row in matrix),
        alpha=alpha,
        skipped=skipped,
    )


def krippendorff_alpha(
    ratings: Sequence[Sequence[float | None]],
    *,
    level: Literal["nominal", "ordinal", "interval", "ratio"] = "nominal",
) -> float:
    """Krippendorff's alpha between several raters (judges or people).

    Args:
        ratings: One sequence per rater, one value (None: not rated) per unit.
        level: ``"nominal"``, ``"ordinal"``, ``"interval"`` or ``"ratio"``.

    Raises:
        ConfigError: fewer than two raters, raters of different lengths, or no unit rated
            by two raters.
    """
    require_extra()
    import krippendorff

    if len(ratings) < 2:
        raise ConfigError("Krippendorff's alpha needs at least two raters")
    lengths = {len(rater) for rater in ratings}
    if len(lengths) != 1:
        raise ConfigError(f"every rater needs one value per unit; got lengths {sorted(lengths)}")
    data = np.array(
        [[math.nan if v is None else float(v) for v in rater] for rater in ratings], dtype=float
    )
    if not np.any(np.sum(np.isfinite(data), axis=0) >= 2):
        raise ConfigError("Krippendorff's alpha needs a unit rated by at least two raters")
    if level not in {"nominal", "ordinal", "interval", "ratio"}:
        raise ConfigError(f"level must be nominal, ordinal, interval or ratio; got {level!r}")
    return float(krippendorff.alpha(reliability_data=data, level_of_measurement=level))
